/*
 * resources/vmm/pages/vmm_pages_trim.c (internal): trim of vmm_pages
 * (vmm_pages.h): free pages and zombies go back to the device, each after
 * the events that cover their last use.
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"

/* Unmap the pages of the free or zombie region r (releasing them for a free
 * region: a zombie's pages live on at their new address) and make it a hole.
 * On a refused call, what was unmapped becomes a hole and the rest stays (a
 * page whose release is refused is unreleased: not counted as released). */
static gmr_status give_back(vmm_pages *p, vmm_region *r, size_t *released_bytes,
                            gmr_failure *failure) {
  vmm_region *spare = gmr__vmm_region_new();
  if (spare == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  bool release = r->state == VMM_FREE;
  size_t done = 0;
  gmr_status st = gmr__vmm_unmap_pages(p, r->root, r->addr, r->bytes, release, &done,
                                       released_bytes, failure);
  if (done > 0 && done < r->bytes) {
    gmr__vmm_region_split(p, r, done, spare);
    spare = NULL;
  }
  gmr__vmm_region_delete(spare);
  if (done > 0) (void)gmr__vmm_make_hole(p, r);
  return st;
}

gmr_status gmr__vmm_trim_locked(vmm_pages *p, size_t *released_bytes,
                                gmr_failure *failure) {
  /* What the driver refused before, first; while it still refuses, nothing
   * more is unmapped (it would only be kept as well). */
  gmr_status st = gmr__vmm_retry_unreleased(p, released_bytes, failure);
  if (st != GMR_OK) return st;
  /* Zombies next: their old addresses must go before their pages can. */
  while (p->zombie_list.head != NULL) {
    vmm_region *z = p->zombie_list.head;
    cudaError_t err = gmr__vmm_event_wait_host(p, z->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    st = give_back(p, z, released_bytes, failure);
    if (st != GMR_OK) return st;
  }
  /* Free regions held back by record_stream: wait for their streams too. */
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    for (uint32_t i = 0; i < r->blocker_count; ++i) {
      cudaError_t err = gmr__vmm_event_wait_host(p, r->blockers[i]);
      if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    }
  }
  gmr__vmm_collect(p, true, NULL); /* unblocks and merges them */
  /* Every free region that has an event (those freed during a capture have
   * none to wait for and stay). */
  vmm_region *next = NULL;
  for (vmm_region *r = p->free_list.head; r != NULL; r = next) {
    next = r->list_next;
    if (r->unordered || gmr__vmm_region_held(r)) continue;
    cudaError_t err = gmr__vmm_event_wait_host(p, r->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    st = give_back(p, r, released_bytes, failure);
    if (st != GMR_OK) return st;
    next = p->free_list.head; /* holes merged; the list head is the next candidate */
    while (next != NULL && (next->unordered || gmr__vmm_region_held(next))) next = next->list_next;
  }
  return GMR_OK;
}
