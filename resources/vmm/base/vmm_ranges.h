/*
 * resources/vmm/base/vmm_ranges.h (internal): the reserved ranges of a VMM
 * pool (gmr/vmm_pool_range.h), kept by the VMM base for either resource:
 * each range is its own VA reservation with a page table of physical
 * allocations, one per committed page.
 *
 *   vmm_ranges.c        reserve, commit, decommit, free, info, the books
 *   vmm_ranges_sleep.c  the ranges as one participant of sleep and wake
 *                       (vmm_sleep_run.h): committed runs are its items
 *
 * Page states: not committed (handle 0, not committed); committed and
 * mapped (handle set); committed and asleep (the range asleep: handle 0,
 * committed set, contents in the range's runs' backups if saved).
 *
 * Thread-safe: no; everything here belongs to the pool's mutex.
 */
#ifndef GMR_RESOURCES_VMM_BASE_VMM_RANGES_H_
#define GMR_RESOURCES_VMM_BASE_VMM_RANGES_H_

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/vmm_pool_resource.h"
#include "resources/vmm/base/vmm_unreleased.h"

struct gmr__vmm_sleeper; /* vmm_sleep_run.h */

/* A run of committed pages that sleeps, and its backup (or NULL). */
typedef struct gmr__vmm_range_run {
  size_t first; /* page index */
  size_t count;
  void *host;
} gmr__vmm_range_run;

typedef struct gmr__vmm_range {
  uintptr_t base;
  size_t bytes;      /* reserved, a page multiple */
  size_t page_bytes;
  size_t page_count;
  CUmemGenericAllocationHandle *handles; /* per page: mapped there, or 0 */
  uint8_t *committed;                    /* per page: 1 when committed */
  size_t committed_pages;
  uint32_t tag;
  bool asleep;
  gmr__vmm_range_run *runs; /* asleep: the runs put to sleep */
  size_t run_count;
  size_t runs_made;         /* sleep: runs recorded so far (release) */
  struct gmr__vmm_range *next;
} gmr__vmm_range;

typedef struct gmr__vmm_ranges {
  gmr_vmm_pool_resource *pool;
  gmr__vmm_range *first;
  size_t count;
  /* Promises of every page's handle and pinned backup, and what the driver
   * refused of them. */
  gmr__vmm_unreleased unreleased;
  gmr_vmm_pool_host_kind saved_host; /* the kind of the asleep ranges' backups */
  /* Addresses of freed ranges whose cuMemAddressFree the driver refused:
   * kept (still reserved) and freed again by gmr__vmm_ranges_retry. */
  gmr__vmm_kept_item *kept_va;
  size_t kept_va_count, kept_va_capacity, kept_va_bytes;
  /* Sleep and wake, between their steps: the pages one call unmapped or
   * mapped so far, to undo. */
  size_t undo_items, undo_pages;
} gmr__vmm_ranges;

void gmr__vmm_ranges_init(gmr__vmm_ranges *g, gmr_vmm_pool_resource *pool);
/* Free the books (no range left, nothing kept). */
void gmr__vmm_ranges_deinit(gmr__vmm_ranges *g);
/* The range holding addr, or NULL. */
gmr__vmm_range *gmr__vmm_range_at(const gmr__vmm_ranges *g, uintptr_t addr);
/* Whether any range sleeps. */
bool gmr__vmm_ranges_asleep(const gmr__vmm_ranges *g);
/* Ask the driver again for what it refused (handles, pinned backups, the
 * addresses of freed ranges; best effort); GMR_OK when nothing is kept any
 * more. Device current. */
gmr_status gmr__vmm_ranges_retry(gmr__vmm_ranges *g, gmr_failure *failure);
/* Add the ranges' figures to the pool's statistics (the range_* fields),
 * and their backups and unfreed copies to *saved_bytes and *unfreed_bytes. */
void gmr__vmm_ranges_stats(const gmr__vmm_ranges *g, gmr_vmm_pool_resource_stats *s,
                           size_t *saved_bytes, size_t *unfreed_bytes);
/* Add the ranges of tag_mask to *s (gmr/vmm_pool_sleep.h's tag stats). */
void gmr__vmm_ranges_tag_stats(const gmr__vmm_ranges *g, uint64_t tag_mask,
                               gmr_vmm_pool_tag_stats *s);
/* Tag the range starting at ptr: false when none starts there. */
bool gmr__vmm_ranges_set_tag(gmr__vmm_ranges *g, uintptr_t ptr, uint32_t tag);
/* The books: pages, counts and the device's mappings agree. */
gmr_status gmr__vmm_ranges_check(const gmr__vmm_ranges *g, char *err, size_t err_bytes);

/* The public calls' bodies (pool's mutex held, arguments checked but the
 * range's). */
gmr_status gmr__vmm_ranges_reserve(gmr__vmm_ranges *g, size_t bytes, size_t page_bytes,
                                   uint32_t tag, void **out, gmr_failure *failure);
gmr_status gmr__vmm_ranges_commit(gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                  gmr_failure *failure);
gmr_status gmr__vmm_ranges_decommit(gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                    gmr_failure *failure);
gmr_status gmr__vmm_ranges_free(gmr__vmm_ranges *g, uintptr_t base, gmr_failure *failure);
gmr_status gmr__vmm_ranges_info(const gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                gmr_vmm_pool_range_info *out);

/* Map fresh pages [first, first + count) of r (not mapped), giving access
 * once; on failure unmap and release what it made. Device current. */
CUresult gmr__vmm_range_map_fresh(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first,
                                  size_t count, const char **call);
/* Unmap pages [first, first + count) of r (mapped); on a refusal map back
 * what it unmapped and return the refusal. */
CUresult gmr__vmm_range_unmap(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first, size_t count);
/* Map back pages [first, first + count) of r, unmapped with their handles
 * kept (best effort, as any rollback). */
void gmr__vmm_range_map_back(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first, size_t count);
/* Release the handles of pages [first, first + count) of r (unmapped); a
 * refused one is kept. Returns the first refusal, or CUDA_SUCCESS. */
CUresult gmr__vmm_range_release(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first,
                                size_t count);

/* ---- vmm_ranges_sleep.c ------------------------------------------------------ */

/* The ranges as a participant of sleep and wake: false when there is no
 * range. */
bool gmr__vmm_ranges_sleeper(gmr__vmm_ranges *g, struct gmr__vmm_sleeper *out);

#endif /* GMR_RESOURCES_VMM_BASE_VMM_RANGES_H_ */
