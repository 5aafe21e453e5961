/*
 * resources/vmm_pool/vmm_pool_internal.h (internal): the data structures of
 * gmr_vmm_pool_resource (gmr/vmm_pool_resource.h) and the functions its
 * files share.
 *
 *   vmm_pool_create.c    create: device properties, sizes, peers, eager pages
 *   vmm_pool_resource.c  destroy, the vtable, request routing (to the fine
 *                        engine, the small path or whole pages), frees,
 *                        record_stream
 *   vmm_pool_small.c     PAGES placement's small path: a fine engine in
 *                        chunk mode whose chunks are this pool's pages
 *   vmm_pool_shards.c    FINE placement's shards (one fine engine each):
 *                        which serves a stream, frees to the owner, and
 *                        trim, sleep, statistics over all of them
 *   vmm_pool_regions.c   regions, lists, VA chunks, events
 *   vmm_pool_pages.c     driver calls on runs of pages, each with its undo
 *   vmm_pool_alloc.c     phases 0-2 of an allocation, and extend
 *   vmm_pool_sleep.c     trim; PAGES placement's steps of sleep and wake;
 *                        the public sleep, wake and tag functions
 *   vmm_sleep_common.c   sleep and wake written once: the sequence, host
 *                        copies, rollbacks (each placement gives its steps)
 *   vmm_unreleased.c     what the driver refused to give back (cuMemRelease,
 *                        cudaFreeHost), kept and asked for again (both
 *                        placements)
 *   vmm_pool_debug.c     statistics, region lists, dump, invariants
 *   vmm_fine*.c          FINE placement (vmm_fine.h), also the small path
 *
 * Every region is page-aligned and a whole number of pages; all regions of a
 * VA chunk ("root") tile it, linked in address order. Each state except LIVE
 * and ASLEEP also sits on a list of its state. A root's page table says
 * which physical page (handle) is mapped at each page address: the same
 * handle appears twice while a zombie double-maps it.
 *
 * Thread-safe: the pool's mutex guards everything below except the fields
 * marked otherwise; functions here expect it held unless they say not.
 */
#ifndef GMR_RESOURCES_VMM_POOL_INTERNAL_H_
#define GMR_RESOURCES_VMM_POOL_INTERNAL_H_

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "stream_ordered/event_cache.h"
#include "core/cuda_vmm.h"
#include "stream_ordered/stream_home.h"
#include "util/u64_map.h"
#include "gmr/vmm_pool_resource.h"
#include "resources/vmm_pool/vmm_fine.h"
#include "resources/vmm_pool/vmm_unreleased.h"

typedef enum vmm_state {
  VMM_HOLE = GMR_VMM_POOL_REGION_HOLE,
  VMM_FREE = GMR_VMM_POOL_REGION_FREE,
  VMM_LIVE = GMR_VMM_POOL_REGION_LIVE,
  VMM_ZOMBIE = GMR_VMM_POOL_REGION_ZOMBIE,
  VMM_ASLEEP = GMR_VMM_POOL_REGION_ASLEEP
} vmm_state;

/* A CUDA event shared by the regions whose reuse it orders (reference
 * counted: a harvested free region hands its event to its zombie). */
typedef struct vmm_event {
  cudaEvent_t event;
  uint64_t serial; /* record order in the pool: the later of two events of one stream covers both */
  uint32_t refs;
  bool complete;   /* known to have completed */
} vmm_event;

typedef struct vmm_root vmm_root;
typedef struct vmm_region vmm_region;

struct vmm_region {
  uintptr_t addr;
  size_t bytes;
  vmm_state state;
  vmm_root *root;
  vmm_region *prev, *next;           /* address order within the root */
  vmm_region *list_prev, *list_next; /* the list of its state (FREE, HOLE, ZOMBIE) */
  /* FREE and ZOMBIE: what orders reuse / unmapping; NULL: nothing pending. */
  vmm_event *event;
  /* FREE */
  gmr_stream stream;     /* filed under (LIVE: allocated on) */
  uint64_t id;           /* creation order of free regions: ties and harvest order */
  bool unordered;        /* freed during a capture: no event, reusable by `stream` only */
  uint64_t query_gen;    /* phase 1b: found pending in search number query_gen */
  vmm_event **blockers;  /* record_stream events: not reusable until all complete */
  uint32_t blocker_count;
  /* A record_stream stream captured at the free: held back until the
   * freeing stream comes after the free markers inside the capture
   * (stream_ordered/capture_reuse.h), or until the device is synchronised. */
  bool capture_wait;
  gmr__capture_markers capture_markers;
  /* LIVE and ASLEEP */
  size_t requested_bytes; /* as asked (a free must name it exactly) */
  size_t alignment;       /* as asked (the dispatch made 0 into 256) */
  uint32_t tag;
  bool internal;          /* a chunk of the internal small pool */
  gmr_stream *used_streams; /* record_stream */
  uint32_t used_count;
  void *saved;            /* ASLEEP: host copy (of the pool's saved_host kind), or NULL */
};

struct vmm_root {
  uintptr_t base;
  size_t bytes;
  size_t index;                          /* reservation order */
  size_t page_bytes;
  CUmemGenericAllocationHandle *pages;   /* per page address: mapped handle, or 0 */
  vmm_region *first;
  vmm_root *next;
};

typedef struct vmm_list {
  vmm_region *head;
  size_t count;
  size_t bytes;
} vmm_list;

/* Counters for gmr_vmm_pool_resource_stats. */
typedef struct vmm_counts {
  uint64_t page_create;
  uint64_t page_release;
  uint64_t map;
  uint64_t unmap;
  uint64_t defrag;
  uint64_t remapped_pages;
  uint64_t extend;
  uint64_t event_record;
  uint64_t event_query;
  uint64_t stream_wait;
  uint64_t event_synchronize;
  uint64_t sleep;
  uint64_t wake;
} vmm_counts;

#define VMM_MAX_ACCESS (1 + GMR_VMM_POOL_MAX_PEERS)

typedef struct gmr_vmm_pool_resource {
  gmr_resource base; /* first: the pool is a gmr_resource */
  const gmr__cuda_ops *cuda;
  const gmr__cuda_vmm_ops *vmm;
  pthread_mutex_t lock;

  int device;
  int access_devices[VMM_MAX_ACCESS]; /* [0] = device, then peers */
  size_t access_count;
  gmr__vmm_prop prop; /* what cuMemCreate is asked for */
  size_t page_bytes;
  size_t granularity_bytes;
  size_t va_chunk_bytes;

  vmm_root *roots; /* in reservation order */
  vmm_root *last_root;
  size_t root_count;
  vmm_list free_list;
  vmm_list hole_list;
  vmm_list zombie_list;
  gmr__u64_map live;  /* address -> region, LIVE and ASLEEP */
  gmr__u64_map freed; /* addresses of allocations freed and not handed out since */

  uint64_t next_id;
  uint64_t next_serial;
  uint64_t query_gen;
  gmr__event_cache event_cache; /* spare events (at most 256) */
  gmr__capture_walks capture_walks; /* record_stream reuse inside captures */

  size_t mapped_pages;    /* pages in the page tables (each physical page once) */
  size_t peak_held_pages; /* high-water mark of mapped pages plus unreleased ones */
  /* Pages cuMemRelease refused (unmapped, still held) and pinned copies
   * cudaFreeHost refused: asked for again by trim, sleep, wake, destroy. */
  gmr__vmm_unreleased unreleased;
  size_t live_bytes; /* LIVE regions, internal chunks included */
  size_t live_count;
  size_t asleep_bytes;
  size_t asleep_count;
  size_t saved_bytes;
  gmr_vmm_pool_host_kind saved_host; /* the kind of the host copies of the last sleep */
  uint32_t default_tag;
  vmm_counts counts;

  size_t internal_count; /* LIVE or ASLEEP chunks of the small path */
  bool small_pool_enabled;
  gmr_vmm_pool_resource_config config; /* as created (the engines' parameters) */
  /* PAGES: the small path, created at the first small request (under the
   * lock), read without it. */
  _Atomic(vmf_engine *) small;
  /* FINE: shard 0, made at create (the fields above, but the device's, are
   * unused then). */
  vmf_engine *fine;
  /* FINE: every shard ([0] == fine); the others made at first use (under
   * the lock), read without it (vmm_pool_shards.c). */
  _Atomic(vmf_engine *) shards[GMR_VMM_POOL_MAX_SHARDS];
  uint32_t shard_count;
  atomic_uint shards_made; /* shards made so far (written under the lock) */
  gmr__stream_home home;  /* stream -> shard */
  vmf_total total;        /* held by every shard together */
  /* Both placements: from a sleep past its point of return (GMR_OK, or a
   * release refused at its end) until a wake leaves nothing asleep (written
   * under the lock; read without it on FINE's fast path). */
  atomic_bool sleeping;
} gmr_vmm_pool_resource;

/* ---- vmm_pool_resource.c ----------------------------------------------- */

extern const gmr_resource_vtbl gmr__vmm_pool_vtbl;

/* Free the pool's host memory (its VA chunks are already given back). */
void gmr__vmm_free_host_side(gmr_vmm_pool_resource *p);

/* Allocate whole pages (PAGES placement) for a request of `bytes` with
 * `alignment` (both kept: a free must name them exactly); `force_capturing`
 * takes the capture-safe path; `internal` marks a chunk of the small path.
 * Takes the lock. */
gmr_status gmr__vmm_allocate_pages_locking(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                           gmr_stream stream, bool force_capturing, bool internal,
                                           void **out_ptr, gmr_failure *failure);
/* Free whole pages; the bad-free statuses (the small path asked when the
 * pointer is one of its blocks). Takes the lock. */
gmr_status gmr__vmm_free_pages_locking(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream, bool internal);
/* The LIVE region at ptr, or NULL (lock held). */
vmm_region *gmr__vmm_live_region(gmr_vmm_pool_resource *p, const void *ptr);
/* DOUBLE_FREE or UNKNOWN_POINTER for a pointer that is no live region. */
gmr_status gmr__vmm_bad_free(gmr_vmm_pool_resource *p, const void *ptr);

/* ---- vmm_pool_small.c ----------------------------------------------------- */

/* The small path, created on first use; NULL when host memory ran out. */
vmf_engine *gmr__vmm_small(gmr_vmm_pool_resource *p, bool create);
gmr_status gmr__vmm_small_allocate(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                   gmr_stream stream, bool capturing_api, void **out_ptr,
                                   gmr_failure *failure);
gmr_status gmr__vmm_small_deallocate(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream);
/* Why a free of `ptr` that the page path does not know is bad, as the small
 * path sees it: GMR_ERR_FREE_MISMATCH (a live small block: the size said it
 * was not small), GMR_ERR_DOUBLE_FREE or GMR_ERR_UNKNOWN_POINTER. Takes the
 * engine's lock; call it without the pool's. */
gmr_status gmr__vmm_small_verdict(gmr_vmm_pool_resource *p, const void *ptr);
/* The small path's memory info over its chunks that are mapped (LIVE: a
 * sleep gave the others' pages back, so neither their live nor their free
 * blocks lie on memory): held = those chunks, live and free = their blocks;
 * *chunk_bytes: the page pool's bytes of those chunks. Takes the engine's
 * lock, then the pool's mutex: call it with neither. */
void gmr__vmm_small_mapped_info(gmr_vmm_pool_resource *p, gmr_memory_info *out,
                                size_t *chunk_bytes);
/* Destroy the small path (GMR_ERR_BUSY while a small block is live). */
gmr_status gmr__vmm_small_destroy(gmr_vmm_pool_resource *p);

/* ---- create (vmm_pool_create.c) ------------------------------------------- */

/* A new engine (calloc'd) with the pool's device fields, streams rule and
 * least growth (a page); the caller sets its mode's fields and calls
 * gmr__vmf_init(). NULL when host memory ran out. */
vmf_engine *gmr__vmm_engine_new(gmr_vmm_pool_resource *p);
/* Set up the FINE engine of a pool whose device fields are known. */
gmr_status gmr__vmm_fine_create(gmr_vmm_pool_resource *p, gmr_failure *failure);

/* ---- vmm_pool_shards.c (FINE placement) ----------------------------------- */

/* A new shard engine, set up and with its first VA chunk (initial_pages
 * mapped when `prefill`). On failure *out is NULL and nothing is held. */
gmr_status gmr__vmm_shard_new(gmr_vmm_pool_resource *p, bool prefill, vmf_engine **out,
                              gmr_failure *failure);
gmr_status gmr__vmm_shards_allocate(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                    gmr_stream stream, bool capturing_api, void **out_ptr,
                                    gmr_failure *failure);
gmr_status gmr__vmm_shards_deallocate(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                      size_t alignment, gmr_stream stream);
gmr_status gmr__vmm_shards_record_stream(gmr_vmm_pool_resource *p, void *ptr, gmr_stream stream);
gmr_status gmr__vmm_shards_extend(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                  size_t new_bytes, size_t alignment, gmr_stream stream,
                                  gmr_failure *failure);
gmr_status gmr__vmm_shards_set_tag(gmr_vmm_pool_resource *p, void *ptr, uint32_t tag);
void gmr__vmm_shards_set_default_tag(gmr_vmm_pool_resource *p, uint32_t tag);
void gmr__vmm_shards_memory_info(gmr_vmm_pool_resource *p, gmr_memory_info *info);
void gmr__vmm_shards_footprint(gmr_vmm_pool_resource *p, gmr_footprint *out);
void gmr__vmm_shards_stats(gmr_vmm_pool_resource *p, gmr_vmm_pool_resource_stats *s);
gmr_status gmr__vmm_shards_trim(gmr_vmm_pool_resource *p, size_t *released_bytes);
/* Sleep and wake every shard at once (vmm_sleep_common.h: a failure in one
 * rolls all back; *asleep and *woken as gmr__vmm_sleep_run and
 * gmr__vmm_wake_run say); the pool's mutex held. *still_asleep: whether a
 * shard still has something asleep (or free memory to tidy) after the
 * wake. */
gmr_status gmr__vmm_shards_sleep(gmr_vmm_pool_resource *p, const gmr_vmm_pool_sleep_options *o,
                                 gmr_failure *failure, bool *asleep);
gmr_status gmr__vmm_shards_wake(gmr_vmm_pool_resource *p, const gmr_vmm_pool_wake_options *o,
                                gmr_failure *failure, bool *woken, bool *still_asleep);
/* Add the shards' figures for the tags of tag_mask to *s. */
void gmr__vmm_shards_tag_stats(gmr_vmm_pool_resource *p, uint64_t tag_mask,
                               gmr_vmm_pool_tag_stats *s);
size_t gmr__vmm_shards_regions(gmr_vmm_pool_resource *p, gmr_vmm_pool_region *out,
                               size_t capacity);
gmr_status gmr__vmm_shards_check(gmr_vmm_pool_resource *p, char *err, size_t err_bytes);
/* Every invariant of the pool `self` (vmm_pool_debug.c): GMR_OK, or
 * GMR_ERR_INTERNAL with the reason in err. The vmm pool type's check of its
 * books (core/resource_type.h). */
gmr_status gmr__vmm_pool_check_books(gmr_resource *self, char *err, size_t err_bytes);
/* Whether any shard has something live or asleep. */
bool gmr__vmm_shards_busy(gmr_vmm_pool_resource *p);
/* Ask every shard's driver again for what it refused before (each under
 * its lock): GMR_OK when nothing is unreleased any more. */
gmr_status gmr__vmm_shards_retry_unreleased(gmr_vmm_pool_resource *p);
/* GMR_ERR_BUSY while any shard has something live or asleep; else destroy
 * every shard (the device synchronised by the caller). */
gmr_status gmr__vmm_shards_destroy(gmr_vmm_pool_resource *p);
/* Free the shards' host memory. */
void gmr__vmm_shards_free_host(gmr_vmm_pool_resource *p);
/* The shard made so far at index i, or NULL. */
static inline vmf_engine *gmr__vmm_shard(gmr_vmm_pool_resource *p, uint32_t i) {
  return atomic_load_explicit(&p->shards[i], memory_order_acquire);
}

/* ---- vmm_pool_regions.c ------------------------------------------------ */

vmm_region *gmr__vmm_region_new(void);
void gmr__vmm_region_delete(vmm_region *r);

void gmr__vmm_list_push(vmm_list *l, vmm_region *r);
void gmr__vmm_list_remove(vmm_list *l, vmm_region *r);
/* The list a region of state `state` belongs on, or NULL (LIVE, ASLEEP). */
vmm_list *gmr__vmm_list_of(gmr_vmm_pool_resource *p, vmm_state state);

/* Change r's state, moving it between lists (bytes/addr already final). */
void gmr__vmm_set_state(gmr_vmm_pool_resource *p, vmm_region *r, vmm_state state);

/* Split r at `bytes` (a page multiple below r->bytes) using the spare `tail`
 * for [r->addr + bytes, end): the tail copies r's state, stream, id, event
 * (one more reference) and joins r's list. */
void gmr__vmm_region_split(gmr_vmm_pool_resource *p, vmm_region *r, size_t bytes,
                           vmm_region *tail);

/* Remove r->next from the root and add its bytes to r (same state). The
 * caller has settled what the absorbed region held (events, lists). */
void gmr__vmm_region_absorb_next(gmr_vmm_pool_resource *p, vmm_region *r);

/* Make r a hole (its pages are already unmapped) and merge it with the holes
 * around it. Returns the merged hole. */
vmm_region *gmr__vmm_make_hole(gmr_vmm_pool_resource *p, vmm_region *r);

/* Merge the free region r with its free neighbours of the same stream (both
 * without blockers, neither unordered unless both are); the merged region
 * keeps the later event and gets a new id. Returns the merged region. */
vmm_region *gmr__vmm_merge_free(gmr_vmm_pool_resource *p, vmm_region *r);

/* Reserve a VA chunk of `bytes` (a page multiple) as one hole. Returns the
 * driver's result; on failure nothing changed. */
CUresult gmr__vmm_root_add(gmr_vmm_pool_resource *p, size_t bytes, vmm_root **out);
/* Give back the last root (all one hole); false if the driver refused. */
bool gmr__vmm_root_remove_last(gmr_vmm_pool_resource *p);

/* The page table entry of the page at `addr` (inside `root`). */
CUmemGenericAllocationHandle *gmr__vmm_page_slot(const vmm_root *root, uintptr_t addr);

/* Events. new: a reference-counted event with a CUDA event from the cache
 * (created when empty); NULL on failure with *err set. */
vmm_event *gmr__vmm_event_new(gmr_vmm_pool_resource *p, cudaError_t *err);
vmm_event *gmr__vmm_event_ref(vmm_event *e);
void gmr__vmm_event_unref(gmr_vmm_pool_resource *p, vmm_event *e);
/* Record e on `stream` (a new serial). */
cudaError_t gmr__vmm_event_record(gmr_vmm_pool_resource *p, vmm_event *e, gmr_stream stream);
/* True when e is NULL or has completed (cudaEventQuery when not yet known). */
bool gmr__vmm_event_done(gmr_vmm_pool_resource *p, vmm_event *e);
/* Block until e completed (cudaEventSynchronize). */
cudaError_t gmr__vmm_event_wait_host(gmr_vmm_pool_resource *p, vmm_event *e);
/* The later-recorded of two events of one stream (either may be NULL). */
vmm_event *gmr__vmm_event_later(vmm_event *a, vmm_event *b);
void gmr__vmm_event_cache_clear(gmr_vmm_pool_resource *p);

/* Free r's blockers / record_stream list. */
void gmr__vmm_region_clear_blockers(gmr_vmm_pool_resource *p, vmm_region *r);

/* ---- vmm_pool_pages.c -------------------------------------------------- */

/* Create and map `count` new pages at addr (page table of `root`), then give
 * the device(s) access. On failure everything this call did is undone and
 * the failure described (call, CUresult); returns the status. */
gmr_status gmr__vmm_map_new_pages(gmr_vmm_pool_resource *p, vmm_root *root, uintptr_t addr,
                                  size_t count, gmr_failure *failure);

/* Map the pages of [src, src + bytes) (already mapped there) a second time at
 * dst, in order, and give access. Undone on failure. */
gmr_status gmr__vmm_map_again(gmr_vmm_pool_resource *p, const vmm_region *src_region,
                              uintptr_t src, size_t bytes, vmm_root *dst_root, uintptr_t dst,
                              gmr_failure *failure);

/* Give access over [addr, addr + bytes) (already mapped). */
gmr_status gmr__vmm_set_access(gmr_vmm_pool_resource *p, uintptr_t addr, size_t bytes,
                               gmr_failure *failure);

/* Unmap the pages of [addr, addr + bytes) one by one, clearing the page
 * table; with `release` (released_bytes then not NULL), also release each
 * page's physical memory (it is mapped nowhere else), adding what went to
 * *released_bytes: a page the driver refuses to release is unreleased
 * (kept, still held) and stops the run as a failure does. Stops at the first
 * failure: *done_bytes says how much is unmapped (a prefix). Returns the
 * status. */
gmr_status gmr__vmm_unmap_pages(gmr_vmm_pool_resource *p, vmm_root *root, uintptr_t addr,
                                size_t bytes, bool release, size_t *done_bytes,
                                size_t *released_bytes, gmr_failure *failure);

/* Undo a map made by this pool in this call: unmap [addr, addr + bytes) and,
 * with `release`, release those pages. Failures are ignored (best effort, as
 * in any rollback), but a page whose release is refused is unreleased. */
void gmr__vmm_undo_map(gmr_vmm_pool_resource *p, vmm_root *root, uintptr_t addr, size_t bytes,
                       bool release);

/* Physical memory held: mapped pages and unreleased ones. */
static inline size_t gmr__vmm_held_bytes(const gmr_vmm_pool_resource *p) {
  return p->mapped_pages * p->page_bytes + p->unreleased.handles.bytes;
}

/* Release and free again what the driver refused before (counted as
 * released pages); *released_bytes adds what went. GMR_OK when nothing is
 * unreleased any more, else GMR_ERR_CUDA described in `failure`. */
gmr_status gmr__vmm_retry_unreleased(gmr_vmm_pool_resource *p, size_t *released_bytes,
                                     gmr_failure *failure);

/* ---- vmm_pool_alloc.c -------------------------------------------------- */

/* Phase 0: unmap completed zombies, unblock free regions whose record_stream
 * events completed. */
void gmr__vmm_collect(gmr_vmm_pool_resource *p, bool may_query, gmr_stream stream);
/* Whether free region r waits for record_stream uses (events or a capture). */
static inline bool gmr__vmm_region_held(const vmm_region *r) {
  return r->blocker_count != 0 || r->capture_wait;
}
/* The device was synchronised (sleep, destroy): regions freed during a
 * capture have nothing pending and are ordered for anyone. */
void gmr__vmm_device_synchronized(gmr_vmm_pool_resource *p);

/* Allocate `bytes` (a page multiple) on `stream`; `capturing`: no
 * stream-ordered call (see the banner). On success *out is the new LIVE
 * region. `fast_only`: try phase 1a alone, which makes no CUDA call, and
 * return GMR_OK with *out NULL when it finds nothing (or zombies wait). */
gmr_status gmr__vmm_allocate_pages(gmr_vmm_pool_resource *p, size_t bytes, gmr_stream stream,
                                   bool capturing, bool fast_only, vmm_region **out,
                                   gmr_failure *failure);

/* Grow the LIVE region r by `grow_bytes` (a page multiple) in place. */
gmr_status gmr__vmm_extend_region(gmr_vmm_pool_resource *p, vmm_region *r, size_t grow_bytes,
                                  gmr_stream stream, bool capturing, gmr_failure *failure);

/* Fill the failure record's free information from the pool. */
void gmr__vmm_fill_free_info(gmr_vmm_pool_resource *p, gmr_failure *failure);

/* ---- vmm_pool_sleep.c -------------------------------------------------- */

/* Give back the pages of every free region and zombie (waiting for their
 * events with the host); *released_bytes adds what went back. */
gmr_status gmr__vmm_trim_locked(gmr_vmm_pool_resource *p, size_t *released_bytes,
                                gmr_failure *failure);

#endif /* GMR_RESOURCES_VMM_POOL_INTERNAL_H_ */
