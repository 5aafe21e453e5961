/*
 * resources/vmm/fine/vmm_fine.h (internal): `vmm` (gmr/vmm_resource.h),
 * the VMM resource that places at 256-byte granularity: shards of the
 * placement engine (resources/vmm/placement/vmf.h) whose source maps
 * handles of physical memory into VA chunks each shard reserves.
 *
 *   vmm_fine_handles.c   the physical side: VA chunks, handles (create,
 *                        map, unmap, release, access), holes, trim, destroy,
 *                        fresh mappings for wake and initial_pages, the
 *                        check of their books
 *   vmm_fine_native.c    growth: windows of free and unmapped VA, moving
 *                        free handles (harvest), extend; the source table
 *   vmm_fine_growth.c    the handles a growth creates: how many, how large,
 *                        and which thread creates them
 *   vmm_fine_creator.c   the threads that create handles beside the
 *                        allocating thread (creator_thread_count)
 *   vmm_fine_sleep.c     one engine's steps of sleep and wake
 *   vmm_fine_shard.c     making a shard: an engine over that source
 *   vmm_fine_shards.c    which shard serves a stream, frees to the owner,
 *                        and what the handle's functions do over every
 *                        shard (the operations table of the VMM base)
 *   vmm_fine_resource.c  the vtable, destroy, create
 *
 * Thread-safe: each shard's spin lock guards it; the pool's mutex guards
 * the making of shards and default_tag, and is held around sleep and wake
 * (then every shard's lock too, in shard order).
 */
#ifndef GMR_RESOURCES_VMM_FINE_VMM_FINE_H_
#define GMR_RESOURCES_VMM_FINE_VMM_FINE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/vmm_resource.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_sleep_run.h"
#include "resources/vmm/fine/vmm_fine_creator.h"
#include "resources/vmm/placement/vmf.h"
#include "stream_ordered/stream_home.h"

/* Moves made with no new live peak before the steady-state slack doubles
 * (vmm_fine_native.c): 8 keeps llm_multigraph's few cold-pass moves from
 * raising its footprint, and lets multistream settle within three passes. */
#define VMF_STEADY_MOVES 8u
/* The most the steady-state slack doubles to, percent of the live peak:
 * four streams trading random-sized buffers settle below it (1.34x) and
 * below cudaMallocAsync's 1.536. Moving instead costs the driver's
 * synchronising cuMemUnmap, tens of microseconds per handle. */
#define VMF_MAX_STEADY_PERCENT 32u

typedef struct vmm_fine {
  gmr_vmm_pool_resource pool; /* first: a VMM resource */
  /* Every shard ([0] made at create, the others at first use under the
   * pool's mutex), read without it (vmm_fine_shards.c). */
  _Atomic(vmf_engine *) shards[GMR_VMM_POOL_MAX_SHARDS];
  uint32_t shard_count;
  atomic_uint shards_made; /* shards made so far (written under the mutex) */
  gmr__stream_home home;   /* stream -> shard */
  vmf_total total;         /* held by every shard together */
  uint32_t default_tag;    /* what a shard made later starts with (under the mutex) */
  size_t handle_floor_bytes; /* the config's, rounded up to the page (0: none) */
  gmr__vmf_creator creator; /* creator_thread_count threads (vmm_fine_creator.h) */
  bool creator_ready;        /* creator set up (its mutex made) */
} vmm_fine;

/* The vmm behind the handle of one (its vtable is vmm's). */
static inline vmm_fine *gmr__vmm_fine_of(gmr_vmm_pool_resource *p) {
  return (vmm_fine *)(void *)p;
}

/* The shard made so far at index i, or NULL. */
static inline vmf_engine *gmr__vmm_fine_shard(vmm_fine *f, uint32_t i) {
  return atomic_load_explicit(&f->shards[i], memory_order_acquire);
}

/* ---- vmm_fine_handles.c --------------------------------------------------- */

/* Reserve a VA chunk of `bytes` as one hole (returns the driver's result;
 * nothing changes on failure). */
CUresult gmr__vmf_arena_add(vmf_engine *e, size_t bytes, vmf_arena **out);
/* Give back an arena that is one hole; false if the driver refused. */
bool gmr__vmf_arena_remove(vmf_engine *e, vmf_arena *a);
/* Reserve the engine's first VA chunk. On failure nothing is held. */
gmr_status gmr__vmf_native_create(vmf_engine *e, gmr_failure *failure);
/* cuMemCreate of `bytes` (dropping fabric handles if the driver refuses
 * them), its unreleased slot promised first; counted as held. */
CUresult gmr__vmf_create_handle(vmf_engine *e, size_t bytes, vmf_handle **out);
/* The books of a handle another thread created (cuMemCreate succeeded) for
 * this engine: `h` is zeroed storage whose unreleased slot was promised;
 * counted, held and listed as gmr__vmf_create_handle's. */
void gmr__vmf_adopt_handle(vmf_engine *e, vmf_handle *h, CUmemGenericAllocationHandle handle,
                           size_t bytes);
/* cuMemRelease of an unmapped handle, which leaves the engine's handles
 * whatever the driver says: a refused one is unreleased (kept, still in the
 * pool's total). */
CUresult gmr__vmf_release_handle(vmf_engine *e, vmf_handle *h);
/* Release and free again what the driver refused before; *released_bytes
 * adds what went. GMR_OK when nothing is unreleased any more, else
 * GMR_ERR_CUDA described in `failure` (may be NULL). */
gmr_status gmr__vmf_retry_unreleased(vmf_engine *e, size_t *released_bytes, gmr_failure *failure);
/* cuMemMap of the whole handle at va (in arena a), page table updated. */
CUresult gmr__vmf_map_handle(vmf_engine *e, vmf_arena *a, vmf_handle *h, uintptr_t va);
/* cuMemUnmap of the handle's mapping, page table cleared. */
CUresult gmr__vmf_unmap_handle(vmf_engine *e, vmf_handle *h);
/* Unmap and release the handle h. Returns the driver's result. */
CUresult gmr__vmf_drop_handle(vmf_engine *e, vmf_handle *h);
/* cuMemSetAccess for the pool's devices over a mapped range. */
CUresult gmr__vmf_set_access(vmf_engine *e, uintptr_t va, size_t bytes);
/* Unmap handle h, wholly inside the FREE region r, and make its addresses a
 * hole (needs two spare headers). Nothing changes on failure. */
CUresult gmr__vmf_carve(vmf_engine *e, vmf_region *r, vmf_handle *h);
/* May h move (mapped wholly inside a shared free region, not touching
 * [avoid, avoid + avoid_bytes))? *region: the region holding it. */
bool gmr__vmf_movable(vmf_engine *e, const vmf_handle *h, uintptr_t avoid, size_t avoid_bytes,
                      vmf_region **region);
/* Give back every handle that lies wholly in shared free memory, after
 * what the driver refused before (while it still refuses, nothing more):
 * the source's trim. */
gmr_status gmr__vmf_native_trim(vmf_engine *e, size_t *released_bytes, gmr_failure *failure);
/* Unmap and release everything, give the VA back: the source's destroy;
 * GMR_ERR_CUDA (a later call goes on) while the driver refuses a call. */
gmr_status gmr__vmf_native_destroy(vmf_engine *e);
/* Map fresh handles of at most handle_bytes over [addr, addr + bytes)
 * (page-aligned, unmapped), giving access. Undone on failure. */
gmr_status gmr__vmf_map_fresh(vmf_engine *e, vmf_arena *a, uintptr_t addr, size_t bytes,
                              size_t handle_bytes, gmr_failure *failure);
/* Map `bytes` (page multiple) at the start of the first VA chunk as one
 * shared free region (initial_pages). */
gmr_status gmr__vmf_native_prefill(vmf_engine *e, size_t bytes, gmr_failure *failure);
/* The books of the handles, page tables and unreleased slots: the
 * source's check. */
gmr_status gmr__vmf_native_check(const vmf_engine *e, char *err, size_t err_bytes);

/* ---- vmm_fine_growth.c ---------------------------------------------------- */

/* One hole (part) a growth fills: [addr, addr + mapped_bytes) mapped, of a
 * hole with room for room_bytes from addr. */
typedef struct vmf_fill {
  vmf_region *hole;
  uintptr_t addr;
  size_t need_bytes; /* must be mapped (page multiple) */
  size_t room_bytes; /* may be mapped */
  size_t mapped_bytes;
} vmf_fill;

/* What one growth maps: its fills, and the handles it moved and made. */
typedef struct vmf_plan {
  vmf_fill *fills;
  size_t fill_count;
  vmf_handle **moved; /* handles unmapped elsewhere for this request */
  size_t moved_count;
  vmf_handle **made; /* handles created for it */
  size_t made_count;
  size_t capacity;
} vmf_plan;

/* Room for `more` moved or made handles; false when host memory ran out. */
bool gmr__vmf_plan_room(vmf_plan *p, size_t more);
void gmr__vmf_plan_free(vmf_plan *p);
/* Give back everything the growth moved or made and did not commit. */
void gmr__vmf_plan_undo(vmf_engine *e, vmf_plan *p);
/* Create handles for what the fills still need, plus the growth tail in the
 * last fill (never past `cap`): handles of at most held / handle_divisor
 * and at least handle_floor_bytes (and a page), several at once when the
 * pool has creator threads. Each made handle is in p->made with its target
 * set. Returns the driver's result (what was made stays in p->made). */
CUresult gmr__vmf_create_rest(vmf_engine *e, vmf_plan *p, size_t cap);

/* ---- vmm_fine_native.c ---------------------------------------------------- */

/* Where a shard's memory comes from: handles mapped into its own VA
 * chunks (grow, extend: this file; trim, destroy, check: the handles'). */
extern const vmf_source gmr__vmm_fine_source;

/* ---- vmm_fine_sleep.c ----------------------------------------------------- */

/* One engine as a participant of sleep or wake (vmm_sleep_run.h); its lock
 * held for the whole call. */
typedef struct vmf_sleep_ctx {
  vmf_engine *e;
  uint64_t keep_tag_mask;   /* sleep: a handle under a LIVE allocation of these tags stays */
  vmf_handle **unmapped;    /* sleep: handles unmapped, still in the page table */
  size_t unmapped_count;
  vmf_handle *first_before; /* wake: the newest handle before the call (handles made since
                             * precede it in e->handles) */
} vmf_sleep_ctx;

extern const gmr__vmm_sleep_ops gmr__vmf_sleep_ops;

/* Free the sleep context's own memory. */
void gmr__vmf_sleep_ctx_free(vmf_sleep_ctx *c);
/* Add the figures of the allocations of tag_mask to *s. Takes the lock. */
void gmr__vmf_tag_stats(vmf_engine *e, uint64_t tag_mask, gmr_vmm_pool_tag_stats *s);

/* ---- vmm_fine_shard.c ----------------------------------------------------- */

/* A new shard of f, set up with its first VA chunk (initial_pages mapped
 * there when `prefill`). On failure *out is NULL and nothing is held. */
gmr_status gmr__vmm_fine_shard_new(vmm_fine *f, bool prefill, vmf_engine **out,
                                   gmr_failure *failure);

/* ---- vmm_fine_shards.c ---------------------------------------------------- */

/* What the handle's functions do over every shard (vmm_base.h). */
extern const gmr__vmm_engine_ops gmr__vmm_fine_ops;

gmr_status gmr__vmm_shards_allocate(vmm_fine *f, size_t bytes, size_t alignment,
                                    gmr_stream stream, bool capturing_api, void **out_ptr,
                                    gmr_failure *failure);
gmr_status gmr__vmm_shards_deallocate(vmm_fine *f, void *ptr, size_t bytes, size_t alignment,
                                      gmr_stream stream);
gmr_status gmr__vmm_shards_record_stream(vmm_fine *f, void *ptr, gmr_stream stream);
gmr_status gmr__vmm_shards_extend(vmm_fine *f, void *ptr, size_t bytes, size_t new_bytes,
                                  size_t alignment, gmr_stream stream, gmr_failure *failure);
void gmr__vmm_shards_memory_info(vmm_fine *f, gmr_memory_info *info);
void gmr__vmm_shards_footprint(vmm_fine *f, gmr_footprint *out);
gmr_status gmr__vmm_shards_trim(vmm_fine *f, size_t *released_bytes);
/* Every invariant of every shard, and their sum against the pool's total
 * (the type's check of its books, core/resource_type.h). */
gmr_status gmr__vmm_fine_check_books(gmr_resource *self, char *err, size_t err_bytes);
/* Whether any shard has something live or asleep. */
bool gmr__vmm_shards_busy(vmm_fine *f);
/* Ask every shard's driver again for what it refused before (each under
 * its lock): GMR_OK when nothing is unreleased any more. */
gmr_status gmr__vmm_shards_retry_unreleased(vmm_fine *f);
/* GMR_ERR_BUSY while any shard has something live or asleep; else destroy
 * every shard (the device synchronised by the caller). */
gmr_status gmr__vmm_shards_destroy(vmm_fine *f);
/* Free the shards' host memory. */
void gmr__vmm_shards_free_host(vmm_fine *f);

#endif /* GMR_RESOURCES_VMM_FINE_VMM_FINE_H_ */
