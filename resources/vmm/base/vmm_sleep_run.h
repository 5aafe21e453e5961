/*
 * resources/vmm/base/vmm_sleep_run.h (internal): sleep and wake of a
 * gmr_vmm_pool_resource (gmr/vmm_pool_sleep.h), written once for every VMM
 * resource.
 *
 * The sequence and its rollbacks live here (vmm_sleep_run.c); each
 * resource supplies the steps that touch its own books, as a table of
 * gmr__vmm_sleep_ops over a context of its own (vmm_pages one, vmm one for
 * each of its shards); the pool's reserved ranges (vmm_ranges.h) are one
 * more participant, added here. One call acts on several participants at
 * once, so that a failure in any of them rolls every one of them back. The
 * host side (backups, the staging ring, the copies) is the pool's
 * (vmm_host.h).
 *
 * Sleep:
 *   1. make the device current; cudaDeviceSynchronize (work still running on
 *      the memory finishes first; refused during a capture);
 *   2. each participant gives back its free memory (trim);
 *   3. each lists its LIVE allocations (select); the driver marks those of
 *      a kept tag, and the others of a saved tag get backups (kept ones of
 *      the same kind and size first, vmm_host.h) and are copied (save);
 *   4. each unmaps the physical memory of what is not kept (unmap): all or
 *      nothing; a later participant's refusal maps the earlier ones back
 *      (remap) and the copies go;
 *   5. past the point of return, each releases that memory and records its
 *      allocations ASLEEP with their copies (release); memory whose release
 *      the driver refuses is kept (vmm_unreleased.h) and the sleep, done
 *      all the same, says so (GMR_ERR_CUDA); kept backups it did not reuse
 *      are freed, a ring it replaced too.
 * Wake:
 *   1. each lists its ASLEEP allocations of the selected tags (select);
 *   2. make the device current; each asks the driver again for what
 *      earlier calls could not give back (retry: the room may be needed),
 *      whatever it answers; each maps fresh memory under the allocations
 *      (map): all or nothing; a later refusal unmaps the earlier ones
 *      (unmap_fresh);
 *   3. the saved contents are copied back; a refused copy unmaps every
 *      participant's fresh memory (unmap_fresh): nothing stays mapped;
 *   4. each records its allocations LIVE (woken); the driver frees the host
 *      copies (or keeps them for the next sleep, keep_backup): a pinned
 *      copy cudaFreeHost refuses is kept, and the wake, done all the same,
 *      says so (GMR_ERR_CUDA).
 * Every copy runs on the pool's copy stream and is waited for before the
 * step ends (vmm_host.h).
 *
 * Thread-safe: the caller holds every participant's locks for the whole
 * call; the functions here touch only the caller's arrays and host copies.
 */
#ifndef GMR_RESOURCES_VMM_BASE_VMM_SLEEP_RUN_H_
#define GMR_RESOURCES_VMM_BASE_VMM_SLEEP_RUN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/vmm_pool_resource.h"
#include "resources/vmm/base/vmm_host.h"
#include "resources/vmm/base/vmm_unreleased.h"

/* One allocation that sleeps or wakes. */
typedef struct gmr__vmm_sleep_item {
  void *region;   /* the resource's region */
  uintptr_t addr; /* device address */
  size_t bytes;   /* as placed */
  uint32_t tag;
  bool keep;      /* sleep: of a kept tag (stays LIVE and mapped) */
  void *host;     /* the host copy: made by sleep, the region's at wake; or NULL */
  bool from_kept; /* sleep: host was a kept backup (a failed sleep keeps it again) */
} gmr__vmm_sleep_item;

/* A resource's steps (see the banner); `ctx` is the participant's. */
typedef struct gmr__vmm_sleep_ops {
  /* Sleep, device synchronised: give back free memory (as trim). */
  gmr_status (*trim)(void *ctx, gmr_failure *failure);
  /* A new array (malloc; the driver frees it) of the LIVE allocations
   * (`asleep` false) or of the ASLEEP ones whose tag is in `tag_mask`
   * (`asleep` true), with region, addr, bytes, tag and (ASLEEP) host set.
   * GMR_ERR_OUT_OF_MEMORY when host memory ran out. */
  gmr_status (*select)(void *ctx, bool asleep, uint64_t tag_mask, gmr__vmm_sleep_item **items,
                       size_t *count);
  /* Sleep: unmap the physical memory of the items not kept (vmm: all of
   * it but what a kept item touches), keeping what is needed to map it
   * back; on a refusal map back what was unmapped and describe it. */
  gmr_status (*unmap)(void *ctx, gmr__vmm_sleep_item *items, size_t count, gmr_failure *failure);
  /* Sleep, undo a successful unmap (best effort, as any rollback). */
  void (*remap)(void *ctx, gmr__vmm_sleep_item *items, size_t count);
  /* Sleep, past the point of return: release the unmapped memory; items
   * not kept become ASLEEP holding item.host; `host` is the copies' kind.
   * Memory the driver refuses to release is kept (vmm_unreleased.h) and
   * everything else done all the same. Returns the first refusal's
   * CUresult, or CUDA_SUCCESS. */
  CUresult (*release)(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                      gmr_vmm_pool_host_kind host);
  /* Wake, first: release (and free) again what earlier calls could not,
   * counted in the resource's books; best effort. */
  void (*retry)(void *ctx);
  /* Wake: map fresh memory under the items (and what the resource needs
   * mapped once nothing sleeps); on a refusal unmap what this call mapped
   * and describe it. */
  gmr_status (*map)(void *ctx, gmr__vmm_sleep_item *items, size_t count, gmr_failure *failure);
  /* Wake, undo a successful map: unmap and release what it made. */
  void (*unmap_fresh)(void *ctx, gmr__vmm_sleep_item *items, size_t count);
  /* Wake, contents restored: the items become LIVE and drop their host
   * copies (the driver frees them) from the books. */
  void (*woken)(void *ctx, gmr__vmm_sleep_item *items, size_t count);
} gmr__vmm_sleep_ops;

/* One participant: a resource's steps, its context, and where it keeps
 * the pinned copies the driver refuses to free. */
struct gmr__vmm_sleeper {
  const gmr__vmm_sleep_ops *ops;
  void *ctx;
  gmr__vmm_unreleased *unreleased;
};
typedef struct gmr__vmm_sleeper gmr__vmm_sleeper;

/* Options of sleep (or wake) as the caller gave them, checked and widened
 * to this version (NULL: the defaults). GMR_ERR_INVALID_ARGUMENT with the
 * message: a bad header, or (sleep) an unknown host kind or too many copy
 * threads. */
gmr_status gmr__vmm_sleep_options_read(const gmr_vmm_pool_sleep_options *in,
                                       gmr_vmm_pool_sleep_options *out, gmr_failure *failure);
gmr_status gmr__vmm_wake_options_read(const gmr_vmm_pool_wake_options *in,
                                      gmr_vmm_pool_wake_options *out, gmr_failure *failure);

/* Put the resource's participants and the pool's ranges to sleep (see the
 * banner); `o` is checked. The pool's mutex and the participants' locks are
 * held by the caller. *asleep: whether they sleep now (past the point of
 * return: also with GMR_ERR_CUDA when the driver refused to release memory,
 * which is kept). Otherwise, on failure, every participant is as before
 * (but for trimmed free memory), no host copy is kept but one cudaFreeHost
 * refused (kept too), and the pool's host side is as before. */
gmr_status gmr__vmm_sleep_run(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                              size_t part_count, const gmr_vmm_pool_sleep_options *o,
                              gmr_failure *failure, bool *asleep);

/* Wake the participants' (and ranges') asleep allocations of the tags `o`
 * selects, whose backups are of the kind the last sleep chose. *woken:
 * whether they are LIVE now (also with GMR_ERR_CUDA when cudaFreeHost
 * refused a copy, which is kept). Otherwise, on failure, every participant
 * is as before: nothing of this call stays mapped, every copy stays. */
gmr_status gmr__vmm_wake_run(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                             size_t part_count, const gmr_vmm_pool_wake_options *o,
                             gmr_failure *failure, bool *woken);

/* The message of a second sleep: how much sleeps, and what to do. */
gmr_status gmr__vmm_sleep_busy(gmr_failure *failure, size_t asleep_count, size_t asleep_bytes,
                               size_t saved_bytes);
/* The message of a wake of a pool that is not asleep. */
gmr_status gmr__vmm_wake_not_asleep(gmr_failure *failure);
/* The message of a NULL pool given to gmr_vmm_pool_resource_<verb>. */
gmr_status gmr__vmm_null_pool(gmr_failure *failure, const char *verb);

#endif /* GMR_RESOURCES_VMM_BASE_VMM_SLEEP_RUN_H_ */
