/*
 * resources/vmm/placement/vmf.h (internal): the 256-byte placement engine
 * ("vmf") both VMM resources place with: `vmm` (resources/vmm/fine) is
 * shards of it over handles it maps into VA chunks of its own, and
 * vmm_pages' small path (resources/vmm/pages) is one of it over chunks of
 * whole pages. What differs, where memory comes from, is the engine's
 * source (vmf_source): a table, so that nothing here knows which resource
 * it serves.
 *
 * Allocations are placed at 256-byte granularity; pages are shared by
 * whatever is live on them, so no request is rounded up to a page. Every
 * arena (a VA chunk of `vmm`, or a chunk of vmm_pages' pages) is tiled by
 * regions in address order:
 *   LIVE    an allocation handed out;
 *   FREE    free bytes whose pages are all mapped, filed under a stream slot
 *           (reusable at once by that stream) or the shared slot (its
 *           stream's work is known done: reusable by any stream), in that
 *           slot's two-level segregated-fit (TLSF) indexes (stream_ordered/free_index.h):
 *           a stream slot keeps its "fresh" regions (freed after its
 *           stream's last record, and memory it took by waiting) apart
 *           from its covered ones, which another stream may take once that
 *           record is done or waited for (a split table, stream_slots.h);
 *           a region merged with a fresh one is fresh, and a slot in
 *           batched mode merges fresh regions only with fresh ones (so
 *           that a new free does not make covered memory fresh again);
 *   HOLE    reserved VA with no page mapped; page-aligned (an arena with a
 *           page table only);
 *   ASLEEP  a live allocation whose pages sleep gave back (`vmm` only).
 * A FREE region waiting for record_stream events is "blocked": in no index.
 *
 * Files:
 *   vmf_index.c   regions, filing them in the slots' indexes, what stream
 *                 slots hold beyond the table of stream_ordered/stream_slots.h,
 *                 merging
 *   vmf_arena.c   arenas: joining and leaving the engine, lookups, holes
 *   vmf_free.c    the live map, free, bad frees, record_stream (and the
 *                 regions it holds back), tags, extend
 *   vmf_alloc.c   allocate: the fast path, other streams' memory (the
 *                 reclaim steps), growth through the source
 *   vmf_debug.c   statistics, regions, invariants
 *   vmf_engine.c  the engine's life: new, trim, destroy, host memory
 *
 * Physical memory of `vmm` comes in handles (one cuMemCreate each, mapped
 * whole at one place: cuMemMap takes no offset into a handle in CUDA 13.0,
 * and cuMemUnmap only unmaps whole mappings); the fields for them (handles,
 * page tables, growth tuning, sleep) are the engine's books, kept by its
 * source's code (resources/vmm/fine).
 *
 * Thread-safe: one spin lock per engine guards everything below; functions
 * here expect it held unless they say not. vmm_pages' source calls the page
 * pool (which takes its mutex) with the engine lock held: the order is
 * engine lock, then pool mutex, never the reverse.
 */
#ifndef GMR_RESOURCES_VMM_PLACEMENT_VMF_H_
#define GMR_RESOURCES_VMM_PLACEMENT_VMF_H_

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "stream_ordered/capture_reuse.h"
#include "stream_ordered/free_index.h"
#include "stream_ordered/reclaim.h"
#include "util/spin_lock.h"
#include "stream_ordered/stream_event.h"
#include "stream_ordered/stream_slots.h"
#include "util/u64_map.h"
#include "gmr/vmm_pool_resource.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_unreleased.h"

/* Placement granularity: every region starts and ends on it. */
#define VMF_UNIT GMR__FREE_INDEX_UNIT
/* The shared slot: free regions any stream may take. */
#define VMF_SHARED GMR__STREAM_SLOT_SHARED

typedef enum vmf_state {
  VMF_HOLE = GMR_VMM_POOL_REGION_HOLE,
  VMF_FREE = GMR_VMM_POOL_REGION_FREE,
  VMF_LIVE = GMR_VMM_POOL_REGION_LIVE,
  VMF_ASLEEP = GMR_VMM_POOL_REGION_ASLEEP
} vmf_state;

typedef struct vmf_arena vmf_arena;
typedef struct vmf_region vmf_region;
typedef struct vmf_handle vmf_handle;

/* What a region needs only now and then (record_stream, sleep). */
typedef struct vmf_extra {
  gmr_stream *used_streams; /* LIVE: record_stream */
  uint32_t used_count;
  cudaEvent_t *blockers; /* FREE, blocked: events recorded on used streams at the free */
  uint32_t blocker_count;
  /* FREE, blocked: a used stream captured at the free (no event can tell
   * when its use ends): back to the freeing stream inside the capture once
   * it comes after the markers (stream_ordered/capture_reuse.h), or to
   * anyone after a device synchronisation later than sync_epoch. */
  bool capture_wait;
  uint64_t sync_epoch;
  gmr__capture_markers markers;
  void *saved; /* ASLEEP: host copy (of the engine's saved_host kind), or NULL */
} vmf_extra;

struct vmf_region {
  /* First: addr and bytes (unit multiples) and, while FREE, the links of its
   * slot's index (stream_ordered/free_index.h) or of the blocked list. */
  gmr__free_node node;
  vmf_region *prev, *next; /* address order within the arena */
  vmf_arena *arena;
  gmr_stream stream;      /* LIVE/ASLEEP: the allocating stream */
  size_t requested_bytes; /* LIVE/ASLEEP: as asked; a free must name it exactly */
  size_t alignment;       /* LIVE/ASLEEP: as asked (the dispatch made 0 into 256) */
  vmf_extra *extra;       /* NULL unless needed */
  uint32_t slot;          /* FREE: the slot it is filed under */
  uint32_t tag;           /* LIVE/ASLEEP */
  uint8_t state;          /* a vmf_state */
  bool binned;            /* FREE: in its slot's index */
  bool fresh;             /* FREE in a stream slot: in its fresh index (see the banner) */
  uint64_t filed_seq;     /* FREE: the engine's filing count when it was filed */
  bool blocked;           /* FREE: waiting for record_stream events */
};

struct vmf_handle {
  CUmemGenericAllocationHandle handle;
  uintptr_t va;     /* where it is mapped (0: nowhere, during a move or asleep) */
  uintptr_t target; /* during a growth: where it is to be mapped */
  size_t bytes;
  vmf_handle *prev, *next; /* every handle of the engine */
};

struct vmf_arena {
  uintptr_t base;
  size_t bytes;
  size_t index; /* the order it joined the engine in */
  vmf_region *first;
  vmf_arena *prev, *next;
  vmf_handle **pages; /* vmm: the handle mapped at each page; NULL: no page table */
  size_t free_bytes;  /* FREE bytes in the arena (a chunk is wholly free when == bytes) */
};

/* The free regions filed under one stream (or the shared slot). */
typedef struct vmf_slot {
  /* First: its stream's key and event (unused for the shared slot), and
   * retired: its handle went to another stream (a call learned another id),
   * stream_ordered/stream_slots.h. */
  gmr__stream_slot base;
  gmr__free_index index; /* its FREE regions, not blocked, that its last record covers */
  gmr__free_index fresh; /* those freed since (always empty in the shared slot) */
} vmf_slot;

/* The region whose node `n` is (NULL for NULL), and back. */
static inline vmf_region *gmr__vmf_region_of(gmr__free_node *n) { return (vmf_region *)(void *)n; }
static inline gmr__free_node *gmr__vmf_node(vmf_region *r) { return r != NULL ? &r->node : NULL; }

/* Counters for gmr_vmm_pool_resource_stats. */
typedef struct vmf_counts {
  uint64_t create;  /* cuMemCreate that succeeded */
  uint64_t release; /* handles released */
  uint64_t map;     /* cuMemMap that succeeded */
  uint64_t unmap;   /* cuMemUnmap that succeeded */
  uint64_t harvest; /* slow paths that moved free handles */
  uint64_t harvested_pages;
  uint64_t extend;
  uint64_t sleep;
  uint64_t wake;
} vmf_counts;

typedef struct vmf_engine vmf_engine;

/* What every shard of a `vmm` holds together (its footprint), updated when
 * a handle is created or released (rare: growth, trim, sleep). */
typedef struct vmf_total {
  atomic_size_t held_bytes;
  atomic_size_t peak_held_bytes;
} vmf_total;

static inline void gmr__vmf_total_add(vmf_total *t, size_t bytes) {
  size_t held = atomic_fetch_add_explicit(&t->held_bytes, bytes, memory_order_relaxed) + bytes;
  size_t peak = atomic_load_explicit(&t->peak_held_bytes, memory_order_relaxed);
  while (held > peak && !atomic_compare_exchange_weak_explicit(
                            &t->peak_held_bytes, &peak, held, memory_order_relaxed,
                            memory_order_relaxed)) {
  }
}

/* Where an engine's memory comes from: the steps that hold, map and give
 * back memory, each called with the engine's lock held (the device current
 * where it says so). `vmm`'s maps handles into VA chunks the engine
 * reserves; vmm_pages' takes chunks of whole pages from its page pool. */
typedef struct vmf_source {
  /* Step 4 of allocate: place `bytes` (with `alignment`) on `stream`, filed
   * under `slot`, with memory the engine does not hold free yet; on
   * success *out is a FREE region (unfiled) of at least `bytes` for it.
   * Device current, relaxed capture mode; `capturing`: no stream-ordered
   * call. */
  gmr_status (*grow)(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                     uint32_t slot, bool capturing, vmf_region **out, gmr_failure *failure);
  /* Extend LIVE r in place by `grow_bytes` beyond the free memory after it
   * (mapping the holes after it), as grow does; NULL: the source cannot,
   * and extend grows over free memory only. */
  gmr_status (*extend)(vmf_engine *e, vmf_region *r, size_t grow_bytes, gmr_stream stream,
                       uint32_t slot, bool capturing, gmr_failure *failure);
  /* Give back what lies wholly in shared free memory (every slot settled);
   * *released_bytes adds what went. Device current. */
  gmr_status (*trim)(vmf_engine *e, size_t *released_bytes, gmr_failure *failure);
  /* Give back everything (nothing live or asleep; every free region
   * shared): the engine holds no memory and no arena after GMR_OK, and
   * stays whole after a refusal (a later destroy goes on). Device current. */
  gmr_status (*destroy)(vmf_engine *e);
  /* The books of the source's memory (handles, page tables): GMR_OK or
   * GMR_ERR_INTERNAL with the first violation in err. May be NULL. */
  gmr_status (*check)(const vmf_engine *e, char *err, size_t err_bytes);
} vmf_source;

struct vmf_engine {
  _Alignas(64) gmr__spin_lock lock; /* engines are allocated on cache lines of their own */
  const vmf_source *source; /* where memory comes from */
  void *source_ctx;         /* the source's own (vmm_pages: its page pool) */
  const gmr__cuda_ops *cuda;
  const gmr__cuda_vmm_ops *vmm;
  int device;
  const int *access_devices; /* the pool's: device, then peers */
  size_t access_count;
  gmr_vmm_pool_resource *pool; /* its cuMemCreate properties (gmr__vmm_create_handle) */
  size_t page_bytes;
  size_t va_chunk_bytes;
  bool streams_outlive;
  uint32_t growth_percent; /* growth: this share of what is held */
  uint32_t handle_divisor; /* vmm: handles of at most held / divisor (0: no limit) */
  uint32_t remap_permille; /* vmm: remap free handles before holding this much above peak live */
  uint32_t steady_percent; /* vmm: what repeated moves may add instead, above peak live */
  size_t min_growth_bytes;
  size_t max_growth_bytes;
  vmf_total *total;            /* vmm: the pool's, shared by its shards; else NULL */
  size_t steady_extra_bytes;   /* held allowed above the remap threshold (steady state) */
  size_t peak_live_at_harvest; /* the live peak when memory last moved */
  uint32_t steady_harvest_count; /* moves since the live peak last grew (since the last doubling) */

  vmf_arena *arenas, *last_arena;
  size_t arena_count;
  size_t next_arena_index;
  /* Of vmf_slot, keyed by handle; [0] is the shared slot; slots.active:
   * those serving a stream (the second one turns recording in batches on). */
  gmr__stream_slots slots;
  /* address -> region (LIVE, ASLEEP), or VMF_FREED (an address freed and
   * not handed out since: the other live.count - live_count - asleep_count) */
  gmr__u64_map live;
  vmf_region *spare_regions; /* headers kept for reuse */
  vmf_region *blocked;       /* FREE regions waiting for record_stream events */
  uint64_t filed_count;      /* regions filed in an index so far (vmf_region.filed_seq) */
  uint64_t sync_epoch;       /* device synchronisations completed (capture_wait) */
  gmr__capture_walks capture_walks; /* record_stream reuse inside captures */
  vmf_handle *handles;
  size_t handle_count;

  size_t held_bytes; /* what the source holds: vmm's handles (unreleased ones apart), or chunks */
  size_t peak_held_bytes;
  size_t live_bytes; /* LIVE regions (256-byte rounded) */
  size_t live_count;
  size_t peak_live_bytes;
  size_t hole_bytes;
  size_t hole_count;
  size_t asleep_bytes;
  size_t asleep_count;
  size_t saved_bytes;
  gmr_vmm_pool_host_kind saved_host; /* the kind of the host copies of the last sleep */
  /* vmm: handles cuMemRelease refused (unmapped; still in the pool's
   * total) and pinned copies cudaFreeHost refused, asked for again by trim,
   * sleep, wake and destroy. */
  gmr__vmm_unreleased unreleased;
  /* From a sleep until a wake leaves nothing asleep here: FREE regions may
   * lie on unmapped pages (the statistics count only their mapped bytes). */
  bool slept;
  uint32_t default_tag;
  vmf_counts counts;
  gmr__stream_event_counts events;
};

/* Slot `i` of engine `e`. */
static inline vmf_slot *gmr__vmf_slot(const vmf_engine *e, uint32_t i) {
  return (vmf_slot *)(void *)e->slots.items[i];
}

/* The live map's value for an address freed and not handed out since. */
#define VMF_FREED ((uint64_t)1)

/* ---- vmf_index.c ---------------------------------------------------------- */

void gmr__vmf_lock(vmf_engine *e);
void gmr__vmf_unlock(vmf_engine *e);

/* Region headers (from the spare list when it has one). NULL when host
 * memory ran out. */
vmf_region *gmr__vmf_region_new(vmf_engine *e);
void gmr__vmf_region_put(vmf_engine *e, vmf_region *r);
/* Make sure `count` headers are on the spare list (so a path that must not
 * fail half-way can take them). */
bool gmr__vmf_reserve_regions(vmf_engine *e, size_t count);
void gmr__vmf_free_extra(vmf_engine *e, vmf_region *r);
vmf_extra *gmr__vmf_extra(vmf_region *r);

/* Change r's state, keeping the arena's and engine's byte counts. */
void gmr__vmf_set_state(vmf_engine *e, vmf_region *r, vmf_state state);
/* Split r at `bytes` (a unit multiple below r->bytes) with header `tail` for
 * the rest, which copies r's state and slot. Pre: r is not filed (neither
 * part is filed afterwards). */
void gmr__vmf_split(vmf_engine *e, vmf_region *r, size_t bytes, vmf_region *tail);
/* Cut `bytes` at the first `alignment` boundary out of free region r (taken
 * out of its bin, big enough): the bytes before and after go back to r's
 * bin, free; returns the cut, unfiled. Two region headers reserved first. */
vmf_region *gmr__vmf_cut(vmf_engine *e, vmf_region *r, size_t bytes, size_t alignment);
/* Remove r->next and add its bytes to r; the caller has unfiled both. */
void gmr__vmf_absorb_next(vmf_engine *e, vmf_region *r);

/* The engine's table of stream slots with its shared slot (gmr__vmf_init);
 * false when host memory ran out (nothing to free then). */
bool gmr__vmf_slots_init(vmf_engine *e);
/* The slot serving `stream`; creates it. VMF_SHARED never. Returns false
 * when host memory ran out. */
bool gmr__vmf_slot_of(vmf_engine *e, gmr_stream stream, uint32_t *slot);
/* The slot of `stream` if it exists. */
bool gmr__vmf_find_slot(vmf_engine *e, gmr_stream stream, uint32_t *slot);
/* Before a record on the stream of *slot, inside a call naming `stream`:
 * learn the stream's id (never breaking a capture) and compare it with the
 * slot's. Another id means the slot's stream died and the handle was
 * reused: the slot is retired and *slot becomes a new slot for `stream`.
 * false: the id could not be learned or no slot made (record nothing).
 * *not_capturing (may be NULL): true when the stream was found not
 * capturing. */
bool gmr__vmf_slot_check(vmf_engine *e, gmr_stream stream, uint32_t *slot, bool *not_capturing);

/* Filing of FREE regions in their slot's index (stream_ordered/free_index.h):
 * the fresh one for a fresh region (never in the shared slot). */
static inline gmr__free_index *gmr__vmf_bin_of(vmf_engine *e, const vmf_region *r) {
  vmf_slot *s = gmr__vmf_slot(e, r->slot);
  return r->fresh ? &s->fresh : &s->index;
}
static inline void gmr__vmf_bin_insert(vmf_engine *e, vmf_region *r) {
  if (r->slot == VMF_SHARED) r->fresh = false;
  r->filed_seq = ++e->filed_count;
  gmr__free_index_insert(gmr__vmf_bin_of(e, r), &r->node);
  r->binned = true;
}
static inline void gmr__vmf_bin_remove(vmf_engine *e, vmf_region *r) {
  gmr__free_index_remove(gmr__vmf_bin_of(e, r), &r->node);
  r->binned = false;
}
/* The best fitting covered region of `slot` for `bytes` (with
 * `alignment`), or NULL: what another stream could take. */
static inline vmf_region *gmr__vmf_bin_find_covered(vmf_engine *e, uint32_t slot, size_t bytes,
                                                    size_t alignment) {
  return gmr__vmf_region_of(gmr__free_index_find(&gmr__vmf_slot(e, slot)->index, bytes, alignment));
}
/* The best fitting region of `slot` for `bytes` (with `alignment`), fresh
 * or covered (its own stream's), or NULL: of the two indexes' choices the
 * smaller, then the one filed last, as one index's lists (newest first)
 * gave it before batches split a slot (record_stream's reuse of the same
 * address, and the bundled traces' footprints, depend on it). */
static inline vmf_region *gmr__vmf_bin_find(vmf_engine *e, uint32_t slot, size_t bytes,
                                            size_t alignment) {
  vmf_region *covered = gmr__vmf_bin_find_covered(e, slot, bytes, alignment);
  const gmr__free_index *fresh = &gmr__vmf_slot(e, slot)->fresh;
  if (fresh->block_count == 0) return covered;
  vmf_region *f = gmr__vmf_region_of(gmr__free_index_find(fresh, bytes, alignment));
  if (f == NULL) return covered;
  if (covered == NULL) return f;
  bool better = covered->node.bytes < f->node.bytes ||
                (covered->node.bytes == f->node.bytes && covered->filed_seq > f->filed_seq);
  return better ? covered : f;
}
/* Any region of `slot`, or NULL (for draining a slot). */
static inline vmf_region *gmr__vmf_bin_any(vmf_engine *e, uint32_t slot) {
  vmf_slot *s = gmr__vmf_slot(e, slot);
  gmr__free_node *n = gmr__free_index_any(&s->fresh);
  return gmr__vmf_region_of(n != NULL ? n : gmr__free_index_any(&s->index));
}
/* Free bytes filed under `slot`, fresh and covered. */
static inline size_t gmr__vmf_slot_free_bytes(const vmf_engine *e, uint32_t slot) {
  const vmf_slot *s = gmr__vmf_slot(e, slot);
  return s->index.bytes + s->fresh.bytes;
}

/* r (FREE, unfiled, not blocked) joins slot `slot`: merged with its filed
 * FREE neighbours of that slot, fresh or not, or the shared one, then
 * filed; fresh if r or a neighbour of the slot was (never in the shared
 * slot). A growth's window becomes one region so. Returns the merged
 * region. */
vmf_region *gmr__vmf_file_free(vmf_engine *e, vmf_region *r, uint32_t slot);
/* gmr__vmf_file_free of memory freed on the stream of `slot` whose free was
 * counted (gmr__stream_event_freed): covered if the slot's last record
 * covers every free counted so far, else fresh. */
vmf_region *gmr__vmf_file_freed(vmf_engine *e, vmf_region *r, uint32_t slot);
/* Whether stream slot `slot` records in batches: it keeps its fresh
 * regions in its fresh index (any other slot keeps all its memory in its
 * one index, fresh or covered as a whole as its event says). */
bool gmr__vmf_slot_batched(const vmf_engine *e, uint32_t slot);
/* Whether stream slot `slot` holds free memory no record covers. */
bool gmr__vmf_slot_holds_fresh(const vmf_engine *e, uint32_t slot);
/* Move every free region of `slot` to `to` (VMF_SHARED once its work is
 * done, or the waiting stream's slot, where it is fresh), merging. */
void gmr__vmf_move_slot(vmf_engine *e, uint32_t slot, uint32_t to);
/* The event of stream slot `slot` covers every free filed under it now
 * (a record, or a device synchronisation): its fresh regions become
 * covered. O(fresh regions). */
void gmr__vmf_cover_fresh(vmf_engine *e, uint32_t slot);
/* After a call that may have recorded slot `slot`'s event (its covered_seq
 * was `before`): a record covers every free counted so far, so its fresh
 * regions are covered now. */
static inline void gmr__vmf_note_covered(vmf_engine *e, uint32_t slot, uint64_t before) {
  if (gmr__vmf_slot(e, slot)->base.ev.covered_seq != before) gmr__vmf_cover_fresh(e, slot);
}
/* Every slot's memory that is free for anyone (its covered memory once its
 * record is known done; all of it once settled) moves to the shared slot. */
void gmr__vmf_share_settled(vmf_engine *e);

/* ---- vmf_arena.c ---------------------------------------------------------- */

/* Make `a` the arena [base, base + bytes), tiled by the one region `hole`
 * (a counted hole), and append it to the engine's arenas. */
void gmr__vmf_arena_start(vmf_engine *e, vmf_arena *a, uintptr_t base, size_t bytes,
                          vmf_region *hole);
/* Take `a` out of the engine's arenas (its regions are the caller's). */
void gmr__vmf_arena_unlink(vmf_engine *e, vmf_arena *a);
/* The arena holding addr, or NULL. */
vmf_arena *gmr__vmf_arena_of(const vmf_engine *e, uintptr_t addr);
/* The region holding addr (walks the arena: slow paths only). */
vmf_region *gmr__vmf_region_at(const vmf_engine *e, uintptr_t addr);
/* Make r a hole (its pages already unmapped; unfiled first if filed) and
 * merge it with the holes around it. Returns the merged hole. */
vmf_region *gmr__vmf_make_hole(vmf_engine *e, vmf_region *r);

/* ---- vmf_free.c ----------------------------------------------------------- */

/* True when `ptr` is the start of a LIVE (or ASLEEP) allocation here. */
bool gmr__vmf_owns(vmf_engine *e, const void *ptr);
/* GMR_OK when `ptr` is the start of a LIVE (or ASLEEP) allocation here,
 * else GMR_ERR_DOUBLE_FREE (freed, not handed out since) or
 * GMR_ERR_UNKNOWN_POINTER. Takes the lock. */
gmr_status gmr__vmf_verdict(vmf_engine *e, const void *ptr);
/* Free. The bad-free statuses of gmr/resource.h; nothing changes on failure. */
gmr_status gmr__vmf_deallocate(vmf_engine *e, void *ptr, size_t bytes, size_t alignment,
                               gmr_stream stream);
gmr_status gmr__vmf_record_stream(vmf_engine *e, void *ptr, gmr_stream stream);
gmr_status gmr__vmf_set_tag(vmf_engine *e, void *ptr, uint32_t tag);
gmr_status gmr__vmf_extend(vmf_engine *e, void *ptr, size_t bytes, size_t new_bytes,
                           size_t alignment, gmr_stream stream, gmr_failure *failure);
/* Grow LIVE r by the first grow_bytes of r->next (FREE, unfiled, at least
 * that large); the rest of it stays free in its slot. Needs a spare header. */
void gmr__vmf_grow_into_next(vmf_engine *e, vmf_region *r, size_t grow_bytes);

/* How gmr__vmf_unblock may learn that a blocked region's uses are over. */
typedef enum vmf_unblock_mode {
  VMF_UNBLOCK_QUERY = 0,    /* event queries; captured uses: the allocating stream's markers */
  VMF_UNBLOCK_HOST_WAIT,    /* event synchronisations (trim); captured uses: a device sync since */
  VMF_UNBLOCK_DEVICE_SYNCED /* the caller synchronised the device (sleep, destroy): all */
} vmf_unblock_mode;

/* Free regions waiting for record_stream uses: those whose uses are over
 * (see vmf_unblock_mode; `stream` is the allocating stream in QUERY mode,
 * else NULL) are filed again. Lock held. */
void gmr__vmf_unblock(vmf_engine *e, vmf_unblock_mode mode, gmr_stream stream);

/* ---- vmf_alloc.c ---------------------------------------------------------- */

/* Allocate (`vmm`'s shards, or vmm_pages' small requests). `capturing`:
 * forced capture-safe path (allocate_capturing). */
gmr_status gmr__vmf_allocate(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                             bool capturing_api, void **out_ptr, gmr_failure *failure);
/* As gmr__vmf_allocate, but where the request needs new or moved physical
 * memory (step 4) and `may_grow` is false, nothing changes: it returns
 * GMR_ERR_OUT_OF_MEMORY with *would_grow true (failure untouched). */
gmr_status gmr__vmf_allocate_ex(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                                bool capturing_api, bool may_grow, bool *would_grow,
                                void **out_ptr, gmr_failure *failure);
/* Step 1 alone, for a request another shard serves: free memory filed
 * under `stream` (if this engine has a slot for it) or shared; no CUDA
 * call, no slot created. false: nothing fits (nothing changed). */
bool gmr__vmf_take_cached(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                          void **out_ptr);
/* Take `bytes` at the start of FREE region r (unfiled by the caller) as a
 * LIVE allocation on `stream`, splitting off the rest (which stays free in
 * r's slot) and, for an alignment above the unit, the bytes before it. The
 * headers were reserved. Returns the LIVE region. */
vmf_region *gmr__vmf_take(vmf_engine *e, vmf_region *r, size_t bytes, size_t alignment,
                          gmr_stream stream);

/* ---- vmf_debug.c ---------------------------------------------------------- */

void gmr__vmf_fill_stats(vmf_engine *e, gmr_vmm_pool_resource_stats *s);
void gmr__vmf_memory_info(vmf_engine *e, gmr_memory_info *info);
size_t gmr__vmf_regions(vmf_engine *e, gmr_vmm_pool_region *out, size_t capacity);
gmr_status gmr__vmf_check(vmf_engine *e, char *err, size_t err_bytes);
void gmr__vmf_fill_free_info(vmf_engine *e, gmr_failure *failure);

/* ---- vmf_engine.c --------------------------------------------------------- */

/* A new engine (cache-line aligned, zeroed) of the pool `p` (its device
 * fields, streams rule, least growth: a page) whose memory comes from
 * `source` (with `source_ctx`), set up but holding no memory: the caller
 * sets its source's fields. NULL when host memory ran out. */
vmf_engine *gmr__vmf_new(gmr_vmm_pool_resource *p, const vmf_source *source,
                         void *source_ctx);
/* Tear down host memory (everything given back already) and free e. */
void gmr__vmf_delete(vmf_engine *e);
/* Settle and give back what trim can (through the source). Takes the lock. */
gmr_status gmr__vmf_trim(vmf_engine *e, size_t *released_bytes, gmr_failure *failure);
/* Destroy: GMR_ERR_BUSY while anything is live or asleep; else settle every
 * slot and give everything back (through the source). Takes the lock. */
gmr_status gmr__vmf_destroy(vmf_engine *e);

#endif /* GMR_RESOURCES_VMM_PLACEMENT_VMF_H_ */
