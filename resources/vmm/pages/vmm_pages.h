/*
 * resources/vmm/pages/vmm_pages.h (internal): `vmm_pages`
 * (gmr/vmm_pages_resource.h), VPMM's page placement: its data structures
 * and the functions its files share.
 *
 *   vmm_pages_regions.c   regions, lists, VA chunks, events
 *   vmm_pages_map.c       driver calls on runs of pages, each with its undo
 *   vmm_pages_alloc.c     phases 0-2 of an allocation, and extend
 *   vmm_pages_trim.c      trim: free pages and zombies back to the device
 *   vmm_pages_whole.c     requests of whole pages: allocate, free (with what
 *                         orders reuse), the live map's verdicts
 *   vmm_pages_chunks.c    the small path's source: chunks of whole pages for
 *                         the placement engine (resources/vmm/placement)
 *   vmm_pages_small.c     the small path: requests below one page, placed at
 *                         256-byte granularity by that engine
 *   vmm_pages_sleep.c     the steps of sleep and wake, and the tags
 *   vmm_pages_debug.c     statistics, region lists, dump, invariants
 *   vmm_pages_resource.c  the vtable (routing by size to whole pages or the
 *                         small path), destroy, create
 *
 * Every region is page-aligned and a whole number of pages; all regions of a
 * VA chunk ("root") tile it, linked in address order. Each state except LIVE
 * and ASLEEP also sits on a list of its state. A root's page table says
 * which physical page (handle) is mapped at each page address: the same
 * handle appears twice while a zombie double-maps it.
 *
 * Thread-safe: the pool's mutex guards everything below except the fields
 * marked otherwise; functions here expect it held unless they say not. The
 * small path's engine has its own spin lock, taken before the mutex when
 * both are.
 */
#ifndef GMR_RESOURCES_VMM_PAGES_VMM_PAGES_H_
#define GMR_RESOURCES_VMM_PAGES_VMM_PAGES_H_

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/vmm_pages_resource.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_unreleased.h"
#include "resources/vmm/placement/vmf.h"
#include "stream_ordered/capture_reuse.h"
#include "stream_ordered/event_cache.h"
#include "util/u64_map.h"

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

typedef struct vmm_pages {
  gmr_vmm_pool_resource pool; /* first: a VMM resource */

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
  /* The small path, created at the first small request (under the mutex),
   * read without it; NULL while small_pool is off or before. */
  _Atomic(vmf_engine *) small;
} vmm_pages;

/* The vmm_pages behind the handle of one (its vtable is vmm_pages'). */
static inline vmm_pages *gmr__vmm_pages_of(gmr_vmm_pool_resource *p) {
  return (vmm_pages *)(void *)p;
}

/* ---- vmm_pages_regions.c ------------------------------------------------- */

vmm_region *gmr__vmm_region_new(void);
void gmr__vmm_region_delete(vmm_region *r);

void gmr__vmm_list_push(vmm_list *l, vmm_region *r);
void gmr__vmm_list_remove(vmm_list *l, vmm_region *r);
/* The list a region of state `state` belongs on, or NULL (LIVE, ASLEEP). */
vmm_list *gmr__vmm_list_of(vmm_pages *p, vmm_state state);

/* Change r's state, moving it between lists (bytes/addr already final). */
void gmr__vmm_set_state(vmm_pages *p, vmm_region *r, vmm_state state);

/* Split r at `bytes` (a page multiple below r->bytes) using the spare `tail`
 * for [r->addr + bytes, end): the tail copies r's state, stream, id, event
 * (one more reference) and joins r's list. */
void gmr__vmm_region_split(vmm_pages *p, vmm_region *r, size_t bytes,
                           vmm_region *tail);

/* Remove r->next from the root and add its bytes to r (same state). The
 * caller has settled what the absorbed region held (events, lists). */
void gmr__vmm_region_absorb_next(vmm_pages *p, vmm_region *r);

/* Make r a hole (its pages are already unmapped) and merge it with the holes
 * around it. Returns the merged hole. */
vmm_region *gmr__vmm_make_hole(vmm_pages *p, vmm_region *r);

/* Merge the free region r with its free neighbours of the same stream (both
 * without blockers, neither unordered unless both are); the merged region
 * keeps the later event and gets a new id. Returns the merged region. */
vmm_region *gmr__vmm_merge_free(vmm_pages *p, vmm_region *r);

/* Reserve a VA chunk of `bytes` (a page multiple) as one hole. Returns the
 * driver's result; on failure nothing changed. */
CUresult gmr__vmm_root_add(vmm_pages *p, size_t bytes, vmm_root **out);
/* Give back the last root (all one hole); false if the driver refused. */
bool gmr__vmm_root_remove_last(vmm_pages *p);

/* The page table entry of the page at `addr` (inside `root`). */
CUmemGenericAllocationHandle *gmr__vmm_page_slot(const vmm_root *root, uintptr_t addr);

/* Events. new: a reference-counted event with a CUDA event from the cache
 * (created when empty); NULL on failure with *err set. */
vmm_event *gmr__vmm_event_new(vmm_pages *p, cudaError_t *err);
vmm_event *gmr__vmm_event_ref(vmm_event *e);
void gmr__vmm_event_unref(vmm_pages *p, vmm_event *e);
/* Record e on `stream` (a new serial). */
cudaError_t gmr__vmm_event_record(vmm_pages *p, vmm_event *e, gmr_stream stream);
/* True when e is NULL or has completed (cudaEventQuery when not yet known). */
bool gmr__vmm_event_done(vmm_pages *p, vmm_event *e);
/* Block until e completed (cudaEventSynchronize). */
cudaError_t gmr__vmm_event_wait_host(vmm_pages *p, vmm_event *e);
/* The later-recorded of two events of one stream (either may be NULL). */
vmm_event *gmr__vmm_event_later(vmm_event *a, vmm_event *b);
void gmr__vmm_event_cache_clear(vmm_pages *p);

/* Free r's blockers / record_stream list. */
void gmr__vmm_region_clear_blockers(vmm_pages *p, vmm_region *r);

/* ---- vmm_pages_map.c ----------------------------------------------------- */

/* Create and map `count` new pages at addr (page table of `root`), then give
 * the device(s) access. On failure everything this call did is undone and
 * the failure described (call, CUresult); returns the status. */
gmr_status gmr__vmm_map_new_pages(vmm_pages *p, vmm_root *root, uintptr_t addr,
                                  size_t count, gmr_failure *failure);

/* Map the pages of [src, src + bytes) (already mapped there) a second time at
 * dst, in order, and give access. Undone on failure. */
gmr_status gmr__vmm_map_again(vmm_pages *p, const vmm_region *src_region,
                              uintptr_t src, size_t bytes, vmm_root *dst_root, uintptr_t dst,
                              gmr_failure *failure);

/* Give access over [addr, addr + bytes) (already mapped). */
gmr_status gmr__vmm_set_access(vmm_pages *p, uintptr_t addr, size_t bytes,
                               gmr_failure *failure);

/* Unmap the pages of [addr, addr + bytes) one by one, clearing the page
 * table; with `release` (released_bytes then not NULL), also release each
 * page's physical memory (it is mapped nowhere else), adding what went to
 * *released_bytes: a page the driver refuses to release is unreleased
 * (kept, still held) and stops the run as a failure does. Stops at the first
 * failure: *done_bytes says how much is unmapped (a prefix). Returns the
 * status. */
gmr_status gmr__vmm_unmap_pages(vmm_pages *p, vmm_root *root, uintptr_t addr,
                                size_t bytes, bool release, size_t *done_bytes,
                                size_t *released_bytes, gmr_failure *failure);

/* Undo a map made by this pool in this call: unmap [addr, addr + bytes) and,
 * with `release`, release those pages. Failures are ignored (best effort, as
 * in any rollback), but a page whose release is refused is unreleased. */
void gmr__vmm_undo_map(vmm_pages *p, vmm_root *root, uintptr_t addr, size_t bytes,
                       bool release);

/* Physical memory held: mapped pages and unreleased ones. */
static inline size_t gmr__vmm_held_bytes(const vmm_pages *p) {
  return p->mapped_pages * p->pool.page_bytes + p->unreleased.handles.bytes;
}

/* Release and free again what the driver refused before (counted as
 * released pages); *released_bytes adds what went. GMR_OK when nothing is
 * unreleased any more, else GMR_ERR_CUDA described in `failure`. */
gmr_status gmr__vmm_retry_unreleased(vmm_pages *p, size_t *released_bytes,
                                     gmr_failure *failure);

/* ---- vmm_pages_alloc.c --------------------------------------------------- */

/* Phase 0: unmap completed zombies, unblock free regions whose record_stream
 * events completed. */
void gmr__vmm_collect(vmm_pages *p, bool may_query, gmr_stream stream);
/* Whether free region r waits for record_stream uses (events or a capture). */
static inline bool gmr__vmm_region_held(const vmm_region *r) {
  return r->blocker_count != 0 || r->capture_wait;
}
/* The device was synchronised (sleep, destroy): regions freed during a
 * capture have nothing pending and are ordered for anyone. */
void gmr__vmm_device_synchronized(vmm_pages *p);

/* Allocate `bytes` (a page multiple) on `stream`; `capturing`: no
 * stream-ordered call (see the banner). On success *out is the new LIVE
 * region. `fast_only`: try phase 1a alone, which makes no CUDA call, and
 * return GMR_OK with *out NULL when it finds nothing (or zombies wait). */
gmr_status gmr__vmm_allocate_pages(vmm_pages *p, size_t bytes, gmr_stream stream,
                                   bool capturing, bool fast_only, vmm_region **out,
                                   gmr_failure *failure);

/* Grow the LIVE region r by `grow_bytes` (a page multiple) in place. */
gmr_status gmr__vmm_extend_region(vmm_pages *p, vmm_region *r, size_t grow_bytes,
                                  gmr_stream stream, bool capturing, gmr_failure *failure);

/* Fill the failure record's free information from the pool. */
void gmr__vmm_fill_free_info(vmm_pages *p, gmr_failure *failure);

/* ---- vmm_pages_trim.c ---------------------------------------------------- */

/* Give back the pages of every free region and zombie (waiting for their
 * events with the host); *released_bytes adds what went back. */
gmr_status gmr__vmm_trim_locked(vmm_pages *p, size_t *released_bytes,
                                gmr_failure *failure);

/* ---- vmm_pages_whole.c --------------------------------------------------- */

/* Allocate whole pages for a request of `bytes` with `alignment` (both
 * kept: a free must name them exactly); `force_capturing` takes the
 * capture-safe path; `internal` marks a chunk of the small path. Takes the
 * mutex. */
gmr_status gmr__vmm_allocate_pages_locking(vmm_pages *p, size_t bytes, size_t alignment,
                                           gmr_stream stream, bool force_capturing, bool internal,
                                           void **out_ptr, gmr_failure *failure);
/* Free whole pages; the bad-free statuses (a chunk of the small path is
 * not the caller's unless `internal`). Takes the mutex. */
gmr_status gmr__vmm_free_pages_locking(vmm_pages *p, void *ptr, size_t bytes, size_t alignment,
                                       gmr_stream stream, bool internal);
/* record_stream on an allocation of whole pages. Takes the mutex. */
gmr_status gmr__vmm_record_stream_pages(vmm_pages *p, void *ptr, gmr_stream stream);
/* The LIVE (or ASLEEP) region at ptr, or NULL (mutex held). */
vmm_region *gmr__vmm_live_region(vmm_pages *p, const void *ptr);
/* DOUBLE_FREE or UNKNOWN_POINTER for a pointer that is no live region. */
gmr_status gmr__vmm_bad_free(vmm_pages *p, const void *ptr);

/* ---- vmm_pages_chunks.c --------------------------------------------------- */

/* The small path's source (resources/vmm/placement/vmf.h): chunks of whole
 * pages of the pool (its context), marked internal. */
extern const vmf_source gmr__vmm_chunk_source;

/* ---- vmm_pages_small.c ---------------------------------------------------- */

/* The small path, created on first use; NULL when host memory ran out. */
vmf_engine *gmr__vmm_small(vmm_pages *p, bool create);
gmr_status gmr__vmm_small_allocate(vmm_pages *p, size_t bytes, size_t alignment,
                                   gmr_stream stream, bool capturing_api, void **out_ptr,
                                   gmr_failure *failure);
gmr_status gmr__vmm_small_deallocate(vmm_pages *p, void *ptr, size_t bytes, size_t alignment,
                                     gmr_stream stream);
/* Why a free of `ptr` that the page path does not know is bad, as the small
 * path sees it: GMR_ERR_FREE_MISMATCH (a live small block: the size said it
 * was not small), GMR_ERR_DOUBLE_FREE or GMR_ERR_UNKNOWN_POINTER. Takes the
 * engine's lock; call it without the pool's. */
gmr_status gmr__vmm_small_verdict(vmm_pages *p, const void *ptr);
/* record_stream on a small block: GMR_ERR_UNKNOWN_POINTER when `ptr` is
 * none (nothing changed). Takes the engine's lock. */
gmr_status gmr__vmm_small_record_stream(vmm_pages *p, void *ptr, gmr_stream stream);
/* The small path's memory info over its chunks that are mapped (LIVE: a
 * sleep gave the others' pages back, so neither their live nor their free
 * blocks lie on memory): held = those chunks, live and free = their blocks;
 * *chunk_bytes: the page pool's bytes of those chunks. Takes the engine's
 * lock, then the pool's mutex: call it with neither. */
void gmr__vmm_small_mapped_info(vmm_pages *p, gmr_memory_info *out, size_t *chunk_bytes);
/* Whether a small block is live. */
bool gmr__vmm_small_busy(vmm_pages *p);
/* Destroy the small path (GMR_ERR_BUSY while a small block is live). */
gmr_status gmr__vmm_small_destroy(vmm_pages *p);

/* ---- vmm_pages_sleep.c ---------------------------------------------------- */

/* The steps of sleep and wake, and the tags (the VMM base's operations). */
void gmr__vmm_pages_set_default_tag(gmr_vmm_pool_resource *pool, uint32_t tag);
gmr_status gmr__vmm_pages_set_tag(gmr_vmm_pool_resource *pool, void *ptr, uint32_t tag);
void gmr__vmm_pages_tag_stats(gmr_vmm_pool_resource *pool, uint64_t tag_mask,
                              gmr_vmm_pool_tag_stats *s);
gmr_status gmr__vmm_pages_sleep(gmr_vmm_pool_resource *pool, const gmr_vmm_pool_sleep_options *o,
                                gmr_failure *failure, bool *asleep);
gmr_status gmr__vmm_pages_wake(gmr_vmm_pool_resource *pool, const gmr_vmm_pool_wake_options *o,
                               gmr_failure *failure, bool *woken, bool *still_asleep);

/* ---- vmm_pages_debug.c ---------------------------------------------------- */

/* What the pool tells about itself (the VMM base's operations). */
void gmr__vmm_pages_stats(gmr_vmm_pool_resource *pool, gmr_vmm_pool_resource_stats *s);
size_t gmr__vmm_pages_regions(gmr_vmm_pool_resource *pool, gmr_vmm_pool_region *out,
                              size_t capacity);
void gmr__vmm_pages_dump_regions(gmr_vmm_pool_resource *pool, gmr__vmm_text *t);
/* Every invariant of the pool `self` (and of its small path): GMR_OK, or
 * GMR_ERR_INTERNAL with the reason in err. The type's check of its books
 * (core/resource_type.h). */
gmr_status gmr__vmm_pages_check_books(gmr_resource *self, char *err, size_t err_bytes);

#endif /* GMR_RESOURCES_VMM_PAGES_VMM_PAGES_H_ */
