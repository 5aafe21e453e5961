/*
 * resources/vmm_pool/vmm_fine_sleep.c (internal): sleep and wake of the
 * fine placement engine in native mode (vmm_fine.h).
 *
 * Sleep: every stream's work is done (the device is synchronised), every
 * handle goes back to the device, live allocations keep their addresses
 * (ASLEEP), free memory becomes holes where it is whole pages. A page that
 * an asleep allocation shares with free bytes stays unmapped until wake.
 * Wake: fresh handles over every unmapped page the woken allocations touch,
 * saved contents copied back; once nothing sleeps, free bytes on unmapped
 * pages become holes again (or get a page when they share it).
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_fine.h"
#include "resources/vmm_pool/vmm_sleep_common.h"

/* The regions of `state` (and selected tags), in a new array. */
static vmf_region **select_regions(vmf_engine *e, vmf_state state, bool all, uint64_t tag_mask,
                                   size_t *count) {
  *count = 0;
  vmf_region **list = malloc((e->live.count + 1) * sizeof *list);
  if (list == NULL) return NULL;
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state == state && (all || ((tag_mask >> r->tag) & 1u) != 0)) list[(*count)++] = r;
    }
  }
  return list;
}

/* Turn the first run of whole, unmapped pages of the free region r into a
 * hole; what is left of r stays free, shared. Needs two spare headers.
 * Returns whether it found one. */
static bool free_pages_to_hole(vmf_engine *e, vmf_region *r) {
  vmf_arena *a = r->arena;
  uintptr_t lo = gmr__align_up(r->node.addr, e->page_bytes);
  uintptr_t end = (r->node.addr + r->node.bytes) / e->page_bytes * e->page_bytes;
  while (lo < end && a->pages[(lo - a->base) / e->page_bytes] != NULL) lo += e->page_bytes;
  uintptr_t hi = lo;
  while (hi < end && a->pages[(hi - a->base) / e->page_bytes] == NULL) hi += e->page_bytes;
  if (hi <= lo) return false;
  if (r->binned) gmr__vmf_bin_remove(e, r);
  r->slot = VMF_SHARED;
  if (lo > r->node.addr) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, lo - r->node.addr, t);
    gmr__vmf_bin_insert(e, r);
    r = t;
  }
  if (r->node.addr + r->node.bytes > hi) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, hi - r->node.addr, t);
    gmr__vmf_bin_insert(e, t);
  }
  (void)gmr__vmf_make_hole(e, r);
  return true;
}

/* Free regions over unmapped pages (after sleep or wake): holes where the
 * pages are whole; `map_partial`: a partial page still unmapped gets one. */
static gmr_status tidy_free(vmf_engine *e, bool map_partial, gmr_failure *failure) {
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (vmf_region *r = a->first; r != NULL && !changed; r = r->next) {
        if (r->state != VMF_FREE) continue;
        if (!gmr__vmf_reserve_regions(e, 4)) {
          return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
        }
        changed = free_pages_to_hole(e, r); /* regions changed: walk again */
      }
    }
    if (!map_partial) continue;
    for (vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state != VMF_FREE) continue;
      uintptr_t first = r->node.addr / e->page_bytes * e->page_bytes;
      for (uintptr_t p = first; p < r->node.addr + r->node.bytes; p += e->page_bytes) {
        if (a->pages[(p - a->base) / e->page_bytes] != NULL) continue;
        gmr_status st = gmr__vmf_map_fresh(e, a, p, e->page_bytes, e->page_bytes, failure);
        if (st != GMR_OK) return st;
      }
    }
  }
  return GMR_OK;
}

/* Unmap every handle; on a refusal map back what was unmapped. */
static gmr_status unmap_all(vmf_engine *e, gmr_failure *failure) {
  for (vmf_handle *h = e->handles; h != NULL; h = h->next) {
    CUresult cu = e->vmm->unmap((CUdeviceptr)h->va, h->bytes);
    if (cu == CUDA_SUCCESS) {
      e->counts.unmap++;
      continue;
    }
    gmr_status st = gmr__cu_fail(e->vmm, failure, "cuMemUnmap", cu, "while going to sleep");
    for (vmf_handle *g = e->handles; g != h; g = g->next) {
      if (e->vmm->map((CUdeviceptr)g->va, g->bytes, g->handle) == CUDA_SUCCESS) {
        e->counts.map++;
        (void)e->vmm->set_access((CUdeviceptr)g->va, g->bytes, e->access_devices, e->access_count);
      }
    }
    return st;
  }
  return GMR_OK;
}

gmr_status gmr__vmf_sleep(vmf_engine *e, const gmr_vmm_pool_sleep_options *o,
                          gmr_failure *failure) {
  gmr__vmf_lock(e);
  int saved_device = -1;
  bool entered = false;
  gmr_status st = gmr__vmm_sleep_synchronize(e->cuda, e->device, &saved_device, &entered, failure);
  if (st == GMR_OK) {
    /* Everything ran: every stream's free memory is free for anyone. */
    gmr__vmf_unblock(e, true);
    for (size_t i = 1; i < e->slots.count; ++i) gmr__vmf_move_slot(e, (uint32_t)i, VMF_SHARED);
    size_t released = 0;
    st = gmr__vmf_native_trim(e, &released, failure);
  }
  size_t count = 0;
  vmf_region **regions = NULL;
  gmr__vmm_copy *copies = NULL;
  if (st == GMR_OK) {
    regions = select_regions(e, VMF_LIVE, true, 0, &count);
    copies = calloc(count + 1, sizeof *copies);
    if (regions == NULL || copies == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
  }
  for (size_t i = 0; st == GMR_OK && i < count; ++i) {
    bool save = gmr__vmm_sleep_saves(o, regions[i]->tag);
    copies[i] = (gmr__vmm_copy){regions[i]->node.addr, save ? regions[i]->node.bytes : 0, NULL};
  }
  if (st == GMR_OK) st = gmr__vmm_copies_save(e->cuda, copies, count, failure);
  if (st == GMR_OK) {
    st = unmap_all(e, failure);
    if (st != GMR_OK) gmr__vmm_copies_drop(e->cuda, copies, count);
  }
  if (st == GMR_OK) {
    /* Past the point of return: release the handles. */
    while (e->handles != NULL) {
      vmf_handle *h = e->handles;
      vmf_arena *a = gmr__vmf_arena_of(e, h->va);
      for (uintptr_t p = h->va; a != NULL && p < h->va + h->bytes; p += e->page_bytes) {
        a->pages[(p - a->base) / e->page_bytes] = NULL;
      }
      h->va = 0;
      (void)gmr__vmf_drop_handle(e, h);
    }
    for (size_t i = 0; i < count; ++i) {
      vmf_region *r = regions[i];
      if (copies[i].host != NULL) {
        vmf_extra *x = gmr__vmf_extra(r);
        if (x == NULL) {
          (void)e->cuda->free_host(copies[i].host); /* no room to keep it: wakes undefined */
        } else {
          x->saved = copies[i].host;
          e->saved_bytes += r->node.bytes;
        }
      }
      gmr__vmf_set_state(e, r, VMF_ASLEEP);
      e->live_bytes -= r->node.bytes;
      e->live_count--;
      e->asleep_bytes += r->node.bytes;
      e->asleep_count++;
    }
    st = tidy_free(e, false, failure);
    e->counts.sleep++;
  }
  free(regions);
  free(copies);
  if (entered) gmr__cuda_device_leave(e->cuda, saved_device);
  gmr__vmf_unlock(e);
  return st;
}

/* Map fresh handles over every unmapped page the regions touch. On failure
 * everything this call mapped goes again. */
static gmr_status map_regions(vmf_engine *e, vmf_region **regions, size_t count,
                              gmr_failure *failure) {
  size_t limit = (e->live_bytes + e->asleep_bytes) / 64;
  limit = limit < e->page_bytes ? e->page_bytes : gmr__align_up(limit, e->page_bytes);
  gmr_status st = GMR_OK;
  size_t i = 0;
  for (; i < count && st == GMR_OK; ++i) {
    vmf_region *r = regions[i];
    vmf_arena *a = r->arena;
    uintptr_t p = r->node.addr / e->page_bytes * e->page_bytes;
    uintptr_t end = gmr__align_up(r->node.addr + r->node.bytes, e->page_bytes);
    while (p < end && st == GMR_OK) {
      if (a->pages[(p - a->base) / e->page_bytes] != NULL) {
        p += e->page_bytes;
        continue;
      }
      uintptr_t q = p;
      while (q < end && a->pages[(q - a->base) / e->page_bytes] == NULL) q += e->page_bytes;
      st = gmr__vmf_map_fresh(e, a, p, q - p, limit, failure);
      p = q;
    }
  }
  if (st == GMR_OK) return GMR_OK;
  /* Roll back: the handles over the regions' pages that this call made are
   * all those over asleep regions selected here (nothing else maps there). */
  for (size_t j = 0; j < i; ++j) {
    vmf_region *r = regions[j];
    vmf_arena *a = r->arena;
    for (uintptr_t p = r->node.addr / e->page_bytes * e->page_bytes;
         p < r->node.addr + r->node.bytes;) {
      vmf_handle *h = a->pages[(p - a->base) / e->page_bytes];
      if (h == NULL) {
        p += e->page_bytes;
        continue;
      }
      p = h->va + h->bytes;
      bool shared_with_live = false;
      for (vmf_region *q = r->prev; q != NULL && q->node.addr + q->node.bytes > h->va;
           q = q->prev) {
        shared_with_live = shared_with_live || q->state == VMF_LIVE;
      }
      for (vmf_region *q = r->next; q != NULL && q->node.addr < h->va + h->bytes; q = q->next) {
        shared_with_live = shared_with_live || q->state == VMF_LIVE;
      }
      if (!shared_with_live) (void)gmr__vmf_drop_handle(e, h);
    }
  }
  return st;
}

gmr_status gmr__vmf_wake(vmf_engine *e, const gmr_vmm_pool_wake_options *o, gmr_failure *failure) {
  gmr__vmf_lock(e);
  size_t count = 0;
  vmf_region **regions = select_regions(e, VMF_ASLEEP, o->wake_all, o->wake_tag_mask, &count);
  gmr_status st = GMR_OK;
  if (regions == NULL) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  int saved_device = -1;
  bool entered = false;
  if (st == GMR_OK) {
    cudaError_t err = gmr__cuda_device_enter(e->cuda, e->device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else {
      entered = true;
    }
  }
  if (st == GMR_OK) st = map_regions(e, regions, count, failure);
  if (st == GMR_OK) {
    gmr__vmm_copy *copies = calloc(count + 1, sizeof *copies);
    if (copies == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
    for (size_t i = 0; st == GMR_OK && i < count; ++i) {
      vmf_region *r = regions[i];
      copies[i] =
          (gmr__vmm_copy){r->node.addr, r->node.bytes, r->extra != NULL ? r->extra->saved : NULL};
    }
    if (st == GMR_OK) st = gmr__vmm_copies_restore(e->cuda, copies, count, failure);
    free(copies);
  }
  if (st == GMR_OK) {
    for (size_t i = 0; i < count; ++i) {
      vmf_region *r = regions[i];
      if (r->extra != NULL && r->extra->saved != NULL) {
        (void)e->cuda->free_host(r->extra->saved);
        r->extra->saved = NULL;
        e->saved_bytes -= r->node.bytes;
      }
      gmr__vmf_set_state(e, r, VMF_LIVE);
      e->asleep_bytes -= r->node.bytes;
      e->asleep_count--;
      e->live_bytes += r->node.bytes;
      e->live_count++;
    }
    if (e->asleep_count == 0) st = tidy_free(e, true, failure);
    e->counts.wake++;
  } else if (st == GMR_ERR_OUT_OF_MEMORY) {
    gmr__vmf_fill_free_info(e, failure);
  }
  if (entered) gmr__cuda_device_leave(e->cuda, saved_device);
  free(regions);
  gmr__vmf_unlock(e);
  return st;
}
