/*
 * resources/vmm_pool/vmm_pool_sleep.c: trim (give free pages back to the
 * device), and sleep and wake (give every page back while keeping the
 * addresses of live allocations; map fresh pages there again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_pool_internal.h"
#include "resources/vmm_pool/vmm_sleep_common.h"

/* ---- trim --------------------------------------------------------------- */

/* Unmap the pages of the free or zombie region r (releasing them for a free
 * region: a zombie's pages live on at their new address) and make it a hole.
 * On a refused call, what was unmapped becomes a hole and the rest stays. */
static gmr_status give_back(gmr_vmm_pool_resource *p, vmm_region *r, size_t *released_bytes,
                            gmr_failure *failure) {
  vmm_region *spare = gmr__vmm_region_new();
  if (spare == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  bool release = r->state == VMM_FREE;
  size_t done = 0;
  gmr_status st = gmr__vmm_unmap_pages(p, r->root, r->addr, r->bytes, release, &done, failure);
  if (release) *released_bytes += done;
  if (done > 0 && done < r->bytes) {
    gmr__vmm_region_split(p, r, done, spare);
    spare = NULL;
  }
  gmr__vmm_region_delete(spare);
  if (done > 0) (void)gmr__vmm_make_hole(p, r);
  return st;
}

gmr_status gmr__vmm_trim_locked(gmr_vmm_pool_resource *p, size_t *released_bytes,
                                gmr_failure *failure) {
  /* Zombies first: their old addresses must go before their pages can. */
  while (p->zombie_list.head != NULL) {
    vmm_region *z = p->zombie_list.head;
    cudaError_t err = gmr__vmm_event_wait_host(p, z->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    gmr_status st = give_back(p, z, released_bytes, failure);
    if (st != GMR_OK) return st;
  }
  /* Free regions held back by record_stream: wait for their streams too. */
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    for (uint32_t i = 0; i < r->blocker_count; ++i) {
      cudaError_t err = gmr__vmm_event_wait_host(p, r->blockers[i]);
      if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    }
  }
  gmr__vmm_collect(p, true); /* unblocks and merges them */
  /* Every free region that has an event (those freed during a capture have
   * none to wait for and stay). */
  vmm_region *next = NULL;
  for (vmm_region *r = p->free_list.head; r != NULL; r = next) {
    next = r->list_next;
    if (r->unordered || r->blocker_count > 0) continue;
    cudaError_t err = gmr__vmm_event_wait_host(p, r->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    gmr_status st = give_back(p, r, released_bytes, failure);
    if (st != GMR_OK) return st;
    next = p->free_list.head; /* holes merged; the list head is the next candidate */
    while (next != NULL && (next->unordered || next->blocker_count > 0)) next = next->list_next;
  }
  return GMR_OK;
}

/* ---- sleep -------------------------------------------------------------- */

static bool options_ok(size_t size, uint32_t version, size_t v1_bytes) {
  return size >= v1_bytes && version >= 1;
}

/* The messages of the argument checks say what was given, what is needed
 * and how to get it (an empty message left callers guessing). */
static gmr_status null_pool(gmr_failure *failure, const char *verb) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "gmr_vmm_pool_resource_%s: pool is NULL; pass the pool that "
                          "gmr_vmm_pool_resource_create made",
                          verb);
}

static gmr_status bad_header(gmr_failure *failure, const char *verb, size_t size,
                             uint32_t version, size_t v1_bytes) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "gmr_vmm_pool_resource_%s: options have size %zu and version %u; "
                          "needed: size >= %zu, version >= 1 (start from "
                          "GMR_VMM_POOL_%s_OPTIONS_INIT)",
                          verb, size, (unsigned)version, v1_bytes,
                          verb[0] == 's' ? "SLEEP" : "WAKE");
}

/* The LIVE regions (sleep) or the ASLEEP regions of the selected tags
 * (wake), in a new array. */
static vmm_region **select_regions(gmr_vmm_pool_resource *p, vmm_state state, bool all,
                                   uint64_t tag_mask, size_t *count) {
  *count = 0;
  vmm_region **list = malloc((p->live.count + 1) * sizeof *list);
  if (list == NULL) return NULL;
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&p->live, &cursor, &key, &value)) {
    vmm_region *r = (vmm_region *)(uintptr_t)value;
    if (r->state == state && (all || (tag_mask >> r->tag & 1u) != 0)) list[(*count)++] = r;
  }
  return list;
}

/* Unmap every page of the regions, keeping the handles in the page table; on
 * a refusal map back what was unmapped. */
static gmr_status unmap_keeping_pages(gmr_vmm_pool_resource *p, vmm_region **regions,
                                      size_t count, gmr_failure *failure) {
  for (size_t i = 0; i < count; ++i) {
    vmm_region *r = regions[i];
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->page_bytes) {
      CUresult cu = p->vmm->unmap((CUdeviceptr)a, p->page_bytes);
      if (cu == CUDA_SUCCESS) {
        p->counts.unmap++;
        continue;
      }
      gmr_status st = gmr__cu_fail(p->vmm, failure, "cuMemUnmap", cu, "while going to sleep");
      /* Roll back: region i up to `a`, then regions 0..i-1 whole. */
      for (size_t j = i + 1; j-- > 0;) {
        vmm_region *q = regions[j];
        uintptr_t end = j == i ? a : q->addr + q->bytes;
        for (uintptr_t b = q->addr; b < end; b += p->page_bytes) {
          if (p->vmm->map((CUdeviceptr)b, p->page_bytes, *gmr__vmm_page_slot(q->root, b)) ==
              CUDA_SUCCESS) {
            p->counts.map++;
          }
        }
        if (end > q->addr) (void)gmr__vmm_set_access(p, q->addr, end - q->addr, NULL);
      }
      return st;
    }
  }
  return GMR_OK;
}

static gmr_status vmm_pool_resource_sleep_impl(gmr_vmm_pool_resource *pool,
                                               const gmr_vmm_pool_sleep_options *options,
                                               gmr_failure *failure) {
  gmr__failure_reset(failure);
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  if (pool == NULL) return null_pool(failure, "sleep");
  if (options != NULL) {
    if (!options_ok(options->size, options->version, sizeof o)) {
      return bad_header(failure, "sleep", options->size, options->version, sizeof o);
    }
    o = *options;
  }
  gmr_vmm_pool_resource *p = pool;
  if (p->fine != NULL) return gmr__vmm_shards_sleep(p, &o, failure);
  pthread_mutex_lock(&p->lock);
  int saved_device = -1;
  bool entered = false;
  gmr_status st = gmr__vmm_sleep_synchronize(p->cuda, p->device, &saved_device, &entered, failure);
  if (st == GMR_OK) {
    /* Everything ran: regions freed during a capture have nothing pending. */
    for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) r->unordered = false;
    size_t released = 0;
    st = gmr__vmm_trim_locked(p, &released, failure);
  }
  size_t count = 0;
  vmm_region **regions = NULL;
  gmr__vmm_copy *copies = NULL;
  if (st == GMR_OK) {
    regions = select_regions(p, VMM_LIVE, true, 0, &count);
    copies = calloc(count + 1, sizeof *copies);
    if (regions == NULL || copies == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
  }
  for (size_t i = 0; st == GMR_OK && i < count; ++i) {
    bool save = gmr__vmm_sleep_saves(&o, regions[i]->tag);
    copies[i] = (gmr__vmm_copy){regions[i]->addr, save ? regions[i]->bytes : 0, NULL};
  }
  if (st == GMR_OK) st = gmr__vmm_copies_save(p->cuda, copies, count, failure);
  if (st == GMR_OK) {
    st = unmap_keeping_pages(p, regions, count, failure);
    if (st != GMR_OK) gmr__vmm_copies_drop(p->cuda, copies, count);
  }
  if (st == GMR_OK) {
    /* Past the point of return: release the pages; a refused release leaves
     * the driver holding the page, which nothing here can undo. */
    for (size_t i = 0; i < count; ++i) {
      vmm_region *r = regions[i];
      for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->page_bytes) {
        CUmemGenericAllocationHandle *slot = gmr__vmm_page_slot(r->root, a);
        if (p->vmm->release(*slot) == CUDA_SUCCESS) p->counts.page_release++;
        *slot = 0;
        p->mapped_pages--;
      }
      r->saved = copies[i].host;
      if (r->saved != NULL) p->saved_bytes += r->bytes;
      r->state = VMM_ASLEEP;
      p->live_bytes -= r->bytes;
      p->live_count--;
      p->asleep_bytes += r->bytes;
      p->asleep_count++;
    }
    p->counts.sleep++;
  }
  free(regions);
  free(copies);
  if (entered) gmr__cuda_device_leave(p->cuda, saved_device);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_sleep(gmr_vmm_pool_resource *pool,
                                       const gmr_vmm_pool_sleep_options *options,
                                       gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_sleep_impl(pool, options, f));
}

/* ---- wake --------------------------------------------------------------- */

static gmr_status vmm_pool_resource_wake_impl(gmr_vmm_pool_resource *pool,
                                              const gmr_vmm_pool_wake_options *options,
                                              gmr_failure *failure) {
  gmr__failure_reset(failure);
  gmr_vmm_pool_wake_options o = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  if (pool == NULL) return null_pool(failure, "wake");
  if (options != NULL) {
    if (!options_ok(options->size, options->version, sizeof o)) {
      return bad_header(failure, "wake", options->size, options->version, sizeof o);
    }
    o = *options;
  }
  gmr_vmm_pool_resource *p = pool;
  if (p->fine != NULL) return gmr__vmm_shards_wake(p, &o, failure);
  pthread_mutex_lock(&p->lock);
  size_t count = 0;
  vmm_region **regions = select_regions(p, VMM_ASLEEP, o.wake_all, o.wake_tag_mask, &count);
  gmr_status st = GMR_OK;
  if (regions == NULL) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  int saved_device = -1;
  bool entered = false;
  if (st == GMR_OK) {
    cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else {
      entered = true;
    }
  }
  size_t mapped = 0; /* regions[0..mapped) have pages */
  while (st == GMR_OK && mapped < count) {
    vmm_region *r = regions[mapped];
    st = gmr__vmm_map_new_pages(p, r->root, r->addr, r->bytes / p->page_bytes, failure);
    if (st == GMR_OK) mapped++;
  }
  if (st == GMR_OK) {
    gmr__vmm_copy *copies = calloc(count + 1, sizeof *copies);
    if (copies == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
    for (size_t i = 0; st == GMR_OK && i < count; ++i) {
      copies[i] = (gmr__vmm_copy){regions[i]->addr, regions[i]->bytes, regions[i]->saved};
    }
    if (st == GMR_OK) st = gmr__vmm_copies_restore(p->cuda, copies, count, failure);
    free(copies);
  }
  if (st != GMR_OK) {
    if (st == GMR_ERR_OUT_OF_MEMORY) gmr__vmm_fill_free_info(p, failure);
    /* Roll back: every page this call mapped goes again; copies are kept. */
    for (size_t i = mapped; i-- > 0;) {
      gmr__vmm_undo_map(p, regions[i]->root, regions[i]->addr, regions[i]->bytes, true);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      vmm_region *r = regions[i];
      if (r->saved != NULL) {
        (void)p->cuda->free_host(r->saved);
        p->saved_bytes -= r->bytes;
        r->saved = NULL;
      }
      r->state = VMM_LIVE;
      p->asleep_bytes -= r->bytes;
      p->asleep_count--;
      p->live_bytes += r->bytes;
      p->live_count++;
    }
    p->counts.wake++;
  }
  if (entered) gmr__cuda_device_leave(p->cuda, saved_device);
  free(regions);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_wake(gmr_vmm_pool_resource *pool,
                                      const gmr_vmm_pool_wake_options *options,
                                      gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_wake_impl(pool, options, f));
}
