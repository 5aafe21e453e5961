/*
 * resources/vmm/fine/vmm_fine_handles.c (internal): the physical side of a
 * `vmm` shard (vmm_fine.h): VA chunks, handles (create, map, unmap, release,
 * access), giving a free handle's place back as a hole (carve), trim,
 * destroy, fresh mappings for wake and initial_pages, and the check of
 * their books.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

/* ---- VA chunks ------------------------------------------------------------------ */

CUresult gmr__vmf_arena_add(vmf_engine *e, size_t bytes, vmf_arena **out) {
  *out = NULL;
  vmf_arena *a = calloc(1, sizeof *a);
  vmf_region *hole = gmr__vmf_region_new(e);
  vmf_handle **pages = calloc(bytes / e->page_bytes, sizeof *pages);
  if (a == NULL || hole == NULL || pages == NULL) {
    free(a);
    free(pages);
    gmr__vmf_region_put(e, hole);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr base = 0;
  CUresult cu = e->vmm->address_reserve(&base, bytes, e->page_bytes);
  if (cu != CUDA_SUCCESS) {
    free(a);
    free(pages);
    gmr__vmf_region_put(e, hole);
    return cu;
  }
  a->pages = pages;
  gmr__vmf_arena_start(e, a, (uintptr_t)base, bytes, hole);
  *out = a;
  return CUDA_SUCCESS;
}



/* Give back an arena that is one hole. false if the driver refused. */
bool gmr__vmf_arena_remove(vmf_engine *e, vmf_arena *a) {
  if (e->vmm->address_free((CUdeviceptr)a->base, a->bytes) != CUDA_SUCCESS) return false;
  gmr__vmf_set_state(e, a->first, VMF_FREE); /* uncount the hole */
  a->free_bytes = 0;
  gmr__vmf_region_put(e, a->first);
  gmr__vmf_arena_unlink(e, a);
  free(a->pages);
  free(a);
  return true;
}


gmr_status gmr__vmf_native_create(vmf_engine *e, gmr_failure *failure) {
  vmf_arena *a = NULL;
  CUresult cu = gmr__vmf_arena_add(e, e->va_chunk_bytes, &a);
  if (cu != CUDA_SUCCESS) return gmr__cu_fail(e->vmm, failure, "cuMemAddressReserve", cu, NULL);
  return GMR_OK;
}

/* ---- handles ----------------------------------------------------------------------- */

static void page_table_set(vmf_engine *e, vmf_arena *a, uintptr_t va, size_t bytes, vmf_handle *h) {
  size_t first = (va - a->base) / e->page_bytes;
  for (size_t i = 0; i < bytes / e->page_bytes; ++i) a->pages[first + i] = h;
}

/* cuMemCreate; a driver that refuses fabric handles (no IMEX channel) gets
 * the request again without them, and the pool stops asking. */
CUresult gmr__vmf_create_handle(vmf_engine *e, size_t bytes, vmf_handle **out) {
  *out = NULL;
  vmf_handle *h = calloc(1, sizeof *h);
  if (h == NULL || !gmr__vmm_kept_promise(&e->unreleased.handles)) {
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult cu = gmr__vmm_create_handle(e->pool, &h->handle, bytes);
  if (cu != CUDA_SUCCESS) {
    gmr__vmm_kept_unpromise(&e->unreleased.handles);
    free(h);
    return cu;
  }
  gmr__vmf_adopt_handle(e, h, h->handle, bytes);
  *out = h;
  return CUDA_SUCCESS;
}

void gmr__vmf_adopt_handle(vmf_engine *e, vmf_handle *h, CUmemGenericAllocationHandle handle,
                           size_t bytes) {
  e->counts.create++;
  h->handle = handle;
  h->bytes = bytes;
  h->next = e->handles;
  if (e->handles != NULL) e->handles->prev = h;
  e->handles = h;
  e->handle_count++;
  e->held_bytes += bytes;
  if (e->held_bytes > e->peak_held_bytes) e->peak_held_bytes = e->held_bytes;
  if (e->total != NULL) gmr__vmf_total_add(e->total, bytes);
}

/* Release an unmapped handle (its memory goes back to the device). */
CUresult gmr__vmf_release_handle(vmf_engine *e, vmf_handle *h) {
  /* Whatever the driver says, the engine no longer uses the handle; a
   * refused one stays in the pool's total as unreleased. */
  CUresult cu = gmr__vmm_release_or_keep(&e->unreleased, h->handle, h->bytes);
  if (cu == CUDA_SUCCESS) {
    e->counts.release++;
    if (e->total != NULL) {
      atomic_fetch_sub_explicit(&e->total->held_bytes, h->bytes, memory_order_relaxed);
    }
  }
  if (h->prev != NULL) h->prev->next = h->next;
  if (h->next != NULL) h->next->prev = h->prev;
  if (e->handles == h) e->handles = h->next;
  e->handle_count--;
  e->held_bytes -= h->bytes;
  free(h);
  return cu;
}

gmr_status gmr__vmf_retry_unreleased(vmf_engine *e, size_t *released_bytes, gmr_failure *failure) {
  size_t bytes = 0, count = 0;
  gmr_status st = gmr__vmm_unreleased_retry(&e->unreleased, &bytes, &count, failure);
  e->counts.release += count;
  if (e->total != NULL) {
    atomic_fetch_sub_explicit(&e->total->held_bytes, bytes, memory_order_relaxed);
  }
  *released_bytes += bytes;
  return st;
}

CUresult gmr__vmf_map_handle(vmf_engine *e, vmf_arena *a, vmf_handle *h, uintptr_t va) {
  CUresult cu = e->vmm->map((CUdeviceptr)va, h->bytes, h->handle);
  if (cu != CUDA_SUCCESS) return cu;
  e->counts.map++;
  h->va = va;
  page_table_set(e, a, va, h->bytes, h);
  return CUDA_SUCCESS;
}

CUresult gmr__vmf_unmap_handle(vmf_engine *e, vmf_handle *h) {
  CUresult cu = e->vmm->unmap((CUdeviceptr)h->va, h->bytes);
  if (cu != CUDA_SUCCESS) return cu;
  e->counts.unmap++;
  vmf_arena *a = gmr__vmf_arena_of(e, h->va);
  if (a != NULL) page_table_set(e, a, h->va, h->bytes, NULL);
  h->va = 0;
  return CUDA_SUCCESS;
}

CUresult gmr__vmf_drop_handle(vmf_engine *e, vmf_handle *h) {
  if (h->va != 0) {
    CUresult cu = gmr__vmf_unmap_handle(e, h);
    if (cu != CUDA_SUCCESS) return cu;
  }
  return gmr__vmf_release_handle(e, h);
}

CUresult gmr__vmf_set_access(vmf_engine *e, uintptr_t va, size_t bytes) {
  return e->vmm->set_access((CUdeviceptr)va, bytes, e->access_devices, e->access_count);
}

/* ---- moving a handle out --------------------------------------------------------- */

/* Unmap handle h, which lies wholly inside the FREE region r, and make its
 * addresses a hole. Needs two spare headers. Returns the driver's result;
 * nothing changes on failure. */
CUresult gmr__vmf_carve(vmf_engine *e, vmf_region *r, vmf_handle *h) {
  uintptr_t va = h->va;
  CUresult cu = gmr__vmf_unmap_handle(e, h);
  if (cu != CUDA_SUCCESS) return cu;
  uint32_t slot = r->slot;
  if (r->binned) gmr__vmf_bin_remove(e, r);
  if (va > r->node.addr) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, va - r->node.addr, t);
    gmr__vmf_bin_insert(e, r);
    r = t;
  }
  if (r->node.bytes > h->bytes) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, h->bytes, t);
    t->slot = slot;
    gmr__vmf_bin_insert(e, t);
  }
  (void)gmr__vmf_make_hole(e, r);
  return CUDA_SUCCESS;
}


/* May h move: mapped wholly inside a shared free region (its stream's work
 * done, so nothing runs on it), and neither inside nor touching
 * [avoid, avoid + avoid_bytes)? *region: the region holding it. */
bool gmr__vmf_movable(vmf_engine *e, const vmf_handle *h, uintptr_t avoid, size_t avoid_bytes,
                      vmf_region **region) {
  if (h->va == 0 || (h->va <= avoid + avoid_bytes && avoid <= h->va + h->bytes)) return false;
  vmf_region *r = gmr__vmf_region_at(e, h->va);
  *region = r;
  return r != NULL && r->state == VMF_FREE && r->slot == VMF_SHARED && !r->blocked &&
         h->va >= r->node.addr && h->va + h->bytes <= r->node.addr + r->node.bytes;
}

/* ---- trim and destroy ---------------------------------------------------------------- */

gmr_status gmr__vmf_native_trim(vmf_engine *e, size_t *released_bytes, gmr_failure *failure) {
  /* While the driver still refuses what it refused before, unmapping more
   * would only keep more. */
  gmr_status st = gmr__vmf_retry_unreleased(e, released_bytes, failure);
  if (st != GMR_OK) return st;
  vmf_handle *next = NULL;
  for (vmf_handle *h = e->handles; h != NULL && st == GMR_OK; h = next) {
    next = h->next;
    vmf_region *r = NULL;
    if (!gmr__vmf_movable(e, h, 0, 0, &r)) continue;
    if (!gmr__vmf_reserve_regions(e, 4)) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
    size_t bytes = h->bytes;
    CUresult cu = gmr__vmf_carve(e, r, h);
    if (cu == CUDA_SUCCESS) {
      cu = gmr__vmf_release_handle(e, h);
      if (cu == CUDA_SUCCESS) {
        *released_bytes += bytes;
      } else {
        st = gmr__vmm_unreleased_fail(failure, "cuMemRelease", e->vmm->error_name(cu), (int)cu,
                                      NULL, e->unreleased.handles.bytes,
                                      e->unreleased.hosts.bytes);
      }
    } else {
      st = gmr__cu_fail(e->vmm, failure, "cuMemUnmap", cu, NULL);
    }
  }
  return st;
}

gmr_status gmr__vmf_native_destroy(vmf_engine *e) {
  /* Every handle goes back as trim gives it back (what was refused before
   * first; each handle's place a hole at once), so that a refusal leaves an
   * engine whose regions and books agree, and a later destroy goes on. */
  gmr_failure scratch = GMR_FAILURE_INIT;
  size_t released = 0;
  gmr_status st = gmr__vmf_native_trim(e, &released, &scratch);
  if (st != GMR_OK) return st;
  while (e->handles != NULL) { /* none that trim could not reach: the caller settled every slot */
    if (gmr__vmf_drop_handle(e, e->handles) != CUDA_SUCCESS) return GMR_ERR_CUDA;
  }
  /* Every region is free or a hole now: one hole per arena. */
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    while (a->first->next != NULL) {
      vmf_region *r = a->first;
      if (r->binned) gmr__vmf_bin_remove(e, r);
      if (r->next->binned) gmr__vmf_bin_remove(e, r->next);
      gmr__vmf_set_state(e, r, VMF_HOLE);
      gmr__vmf_set_state(e, r->next, VMF_HOLE);
      gmr__vmf_absorb_next(e, r);
    }
    if (a->first->binned) gmr__vmf_bin_remove(e, a->first);
    if (a->first->state != VMF_HOLE) gmr__vmf_set_state(e, a->first, VMF_HOLE);
  }
  while (e->last_arena != NULL) {
    if (!gmr__vmf_arena_remove(e, e->last_arena)) return GMR_ERR_CUDA;
  }
  return GMR_OK;
}

gmr_status gmr__vmf_map_fresh(vmf_engine *e, vmf_arena *a, uintptr_t addr, size_t bytes,
                              size_t handle_bytes, gmr_failure *failure) {
  size_t done = 0;
  CUresult cu = CUDA_SUCCESS;
  const char *call = "cuMemCreate";
  while (done < bytes) {
    size_t n = bytes - done < handle_bytes ? bytes - done : handle_bytes;
    vmf_handle *h = NULL;
    cu = gmr__vmf_create_handle(e, n, &h);
    if (cu != CUDA_SUCCESS) break;
    cu = gmr__vmf_map_handle(e, a, h, addr + done);
    if (cu != CUDA_SUCCESS) {
      call = "cuMemMap";
      (void)gmr__vmf_release_handle(e, h);
      break;
    }
    done += n;
  }
  if (cu == CUDA_SUCCESS) {
    call = "cuMemSetAccess";
    cu = gmr__vmf_set_access(e, addr, bytes);
  }
  if (cu == CUDA_SUCCESS) return GMR_OK;
  /* Undo: every handle mapped in [addr, addr + done). */
  for (uintptr_t at = addr; at < addr + done;) {
    vmf_handle *h = a->pages[(at - a->base) / e->page_bytes];
    at += h->bytes;
    (void)gmr__vmf_drop_handle(e, h);
  }
  return gmr__cu_fail(e->vmm, failure, call, cu, NULL);
}

gmr_status gmr__vmf_native_prefill(vmf_engine *e, size_t bytes, gmr_failure *failure) {
  if (bytes == 0) return GMR_OK;
  vmf_arena *a = e->arenas;
  if (a == NULL || a->first->state != VMF_HOLE || a->first->node.bytes < bytes) {
    CUresult cu = gmr__vmf_arena_add(e, bytes > e->va_chunk_bytes ? bytes : e->va_chunk_bytes, &a);
    if (cu != CUDA_SUCCESS) return gmr__cu_fail(e->vmm, failure, "cuMemAddressReserve", cu, NULL);
  }
  if (!gmr__vmf_reserve_regions(e, 2)) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  vmf_region *r = a->first;
  gmr_status st = gmr__vmf_map_fresh(e, a, r->node.addr, bytes, bytes, failure);
  if (st != GMR_OK) return st;
  if (bytes < r->node.bytes) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, bytes, t);
  }
  gmr__vmf_set_state(e, r, VMF_FREE);
  gmr__vmf_bin_insert(e, r);
  return GMR_OK;
}

/* ---- the books -------------------------------------------------------------------- */

static gmr_status check_handles(const vmf_engine *e, char *err, size_t err_bytes) {
  size_t held = 0, n = 0;
  for (const vmf_handle *h = e->handles; h != NULL; h = h->next, ++n) {
    held += h->bytes;
    if (h->va == 0) return gmr__vmm_violation(err, err_bytes, "a handle is mapped nowhere");
    const vmf_arena *a = gmr__vmf_arena_of(e, h->va);
    if (a == NULL || h->va + h->bytes > a->base + a->bytes) {
      return gmr__vmm_violation(err, err_bytes, "handle at %#zx is outside every arena",
                                (size_t)h->va);
    }
    for (uintptr_t p = h->va; p < h->va + h->bytes; p += e->page_bytes) {
      if (a->pages[(p - a->base) / e->page_bytes] != h) {
        return gmr__vmm_violation(err, err_bytes, "page table at %#zx disagrees with its handle",
                                  (size_t)p);
      }
    }
  }
  if (n != e->handle_count || held != e->held_bytes) {
    return gmr__vmm_violation(err, err_bytes, "%zu handles hold %zu bytes, counted %zu and %zu", n,
                              held, e->handle_count, e->held_bytes);
  }
  return GMR_OK;
}

/* Every handle and pinned copy alive has its slot among the unreleased, so
 * that a refused release or free can keep it (vmm/base/vmm_unreleased.h). */
static gmr_status check_unreleased(const vmf_engine *e, char *err, size_t err_bytes) {
  const gmr__vmm_unreleased *u = &e->unreleased;
  size_t pinned = 0;
  for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (const vmf_region *r = a->first; r != NULL; r = r->next) {
      pinned += r->extra != NULL && r->extra->saved != NULL &&
                e->saved_host == GMR_VMM_POOL_HOST_PINNED;
    }
  }
  if (u->handles.promised != e->handle_count + u->handles.count ||
      u->hosts.promised != pinned + u->hosts.count) {
    return gmr__vmm_violation(err, err_bytes,
                              "unreleased slots: %zu for handles (%zu alive, %zu kept), %zu for "
                              "pinned copies (%zu held, %zu kept)",
                              u->handles.promised, e->handle_count, u->handles.count,
                              u->hosts.promised, pinned, u->hosts.count);
  }
  return GMR_OK;
}

gmr_status gmr__vmf_native_check(const vmf_engine *e, char *err, size_t err_bytes) {
  gmr_status st = check_handles(e, err, err_bytes);
  return st == GMR_OK ? check_unreleased(e, err, err_bytes) : st;
}
