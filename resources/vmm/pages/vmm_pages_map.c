/*
 * resources/vmm/pages/vmm_pages_map.c (internal): the driver calls on runs
 * of pages, each undone completely when one of its calls fails, so that a
 * failed allocation, defragmentation or wake leaves the pool's maps exactly
 * as they were (vmm_pages.h). Every page gets its slot among the
 * unreleased before cuMemCreate, and every release goes through
 * gmr__vmm_release_or_keep: a page the driver refuses to release is kept
 * and still counted as held, never forgotten (vmm/base/vmm_unreleased.h).
 */
#include <stdio.h>

#include "resources/vmm/pages/vmm_pages.h"

/* The high-water mark of what is held (mapped and unreleased pages). */
static void note_held(vmm_pages *p) {
  size_t held = p->mapped_pages + p->unreleased.handles.bytes / p->pool.page_bytes;
  if (held > p->peak_held_pages) p->peak_held_pages = held;
}

static void note_mapped(vmm_pages *p, size_t pages) {
  p->mapped_pages += pages;
  note_held(p);
}

/* Release one page mapped nowhere; a refusal keeps it (unreleased). */
static CUresult release_page(vmm_pages *p, CUmemGenericAllocationHandle h) {
  CUresult cu = gmr__vmm_release_or_keep(&p->unreleased, h, p->pool.page_bytes);
  if (cu == CUDA_SUCCESS) p->counts.page_release++;
  return cu;
}

/* Unmap (and release) the first `count` pages at addr; best effort. Does not
 * touch the mapped-page count: the pages were never counted (one whose
 * release is refused is counted as unreleased). */
static void unmap_run(vmm_pages *p, vmm_root *root, uintptr_t addr, size_t count,
                      bool release) {
  for (size_t i = count; i-- > 0;) {
    uintptr_t a = addr + i * p->pool.page_bytes;
    CUmemGenericAllocationHandle *slot = gmr__vmm_page_slot(root, a);
    if (p->pool.vmm->unmap((CUdeviceptr)a, p->pool.page_bytes) == CUDA_SUCCESS) p->counts.unmap++;
    if (release) (void)release_page(p, *slot);
    *slot = 0;
  }
  note_held(p);
}

gmr_status gmr__vmm_set_access(vmm_pages *p, uintptr_t addr, size_t bytes,
                               gmr_failure *failure) {
  CUresult st = p->pool.vmm->set_access((CUdeviceptr)addr, bytes, p->pool.access_devices,
                                        p->pool.access_count);
  if (st == CUDA_SUCCESS) return GMR_OK;
  char detail[96];
  snprintf(detail, sizeof detail, "giving %zu device(s) access to %zu bytes", p->pool.access_count,
           bytes);
  return gmr__cu_fail(p->pool.vmm, failure, "cuMemSetAccess", st, detail);
}

/* cuMemCreate of one page, its unreleased slot promised first (host memory
 * that runs out reads as the driver's out of memory). A driver that refuses
 * fabric handles (NCCL sees CUDA_ERROR_NOT_PERMITTED or NOT_SUPPORTED
 * without an IMEX channel) gets the request again without them, and the
 * pool stops asking. */
static CUresult create_page(vmm_pages *p, CUmemGenericAllocationHandle *h) {
  if (!gmr__vmm_kept_promise(&p->unreleased.handles)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult cu = gmr__vmm_create_handle(&p->pool, h, p->pool.page_bytes);
  if (cu != CUDA_SUCCESS) gmr__vmm_kept_unpromise(&p->unreleased.handles);
  return cu;
}

gmr_status gmr__vmm_map_new_pages(vmm_pages *p, vmm_root *root, uintptr_t addr,
                                  size_t count, gmr_failure *failure) {
  if (count == 0) return GMR_OK;
  for (size_t i = 0; i < count; ++i) {
    uintptr_t a = addr + i * p->pool.page_bytes;
    CUmemGenericAllocationHandle h = 0;
    CUresult st = create_page(p, &h);
    if (st != CUDA_SUCCESS) {
      unmap_run(p, root, addr, i, true);
      char detail[128];
      snprintf(detail, sizeof detail, "page %zu of %zu new pages of %zu bytes", i + 1, count,
               p->pool.page_bytes);
      return gmr__cu_fail(p->pool.vmm, failure, "cuMemCreate", st, detail);
    }
    p->counts.page_create++;
    st = p->pool.vmm->map((CUdeviceptr)a, p->pool.page_bytes, h);
    if (st != CUDA_SUCCESS) {
      (void)release_page(p, h);
      unmap_run(p, root, addr, i, true);
      return gmr__cu_fail(p->pool.vmm, failure, "cuMemMap", st, NULL);
    }
    p->counts.map++;
    *gmr__vmm_page_slot(root, a) = h;
  }
  gmr_status s = gmr__vmm_set_access(p, addr, count * p->pool.page_bytes, failure);
  if (s != GMR_OK) {
    unmap_run(p, root, addr, count, true);
    return s;
  }
  note_mapped(p, count);
  return GMR_OK;
}

gmr_status gmr__vmm_map_again(vmm_pages *p, const vmm_region *src_region,
                              uintptr_t src, size_t bytes, vmm_root *dst_root, uintptr_t dst,
                              gmr_failure *failure) {
  size_t count = bytes / p->pool.page_bytes;
  for (size_t i = 0; i < count; ++i) {
    CUmemGenericAllocationHandle h =
        *gmr__vmm_page_slot(src_region->root, src + i * p->pool.page_bytes);
    uintptr_t a = dst + i * p->pool.page_bytes;
    CUresult st = p->pool.vmm->map((CUdeviceptr)a, p->pool.page_bytes, h);
    if (st != CUDA_SUCCESS) {
      unmap_run(p, dst_root, dst, i, false);
      return gmr__cu_fail(p->pool.vmm, failure, "cuMemMap", st,
                          "mapping a free page a second time");
    }
    p->counts.map++;
    *gmr__vmm_page_slot(dst_root, a) = h;
  }
  gmr_status s = gmr__vmm_set_access(p, dst, bytes, failure);
  if (s != GMR_OK) unmap_run(p, dst_root, dst, count, false);
  return s;
}

gmr_status gmr__vmm_unmap_pages(vmm_pages *p, vmm_root *root, uintptr_t addr,
                                size_t bytes, bool release, size_t *done_bytes,
                                size_t *released_bytes, gmr_failure *failure) {
  *done_bytes = 0;
  for (uintptr_t a = addr; a < addr + bytes; a += p->pool.page_bytes) {
    CUmemGenericAllocationHandle *slot = gmr__vmm_page_slot(root, a);
    CUresult st = p->pool.vmm->unmap((CUdeviceptr)a, p->pool.page_bytes);
    if (st != CUDA_SUCCESS) return gmr__cu_fail(p->pool.vmm, failure, "cuMemUnmap", st, NULL);
    p->counts.unmap++;
    CUmemGenericAllocationHandle h = *slot;
    *slot = 0;
    *done_bytes += p->pool.page_bytes;
    if (release) {
      /* The page is unmapped here whatever cuMemRelease says: a refused
       * one is unreleased (still held, asked for again later). */
      p->mapped_pages--;
      st = release_page(p, h);
      if (st != CUDA_SUCCESS) {
        return gmr__vmm_unreleased_fail(failure, "cuMemRelease", p->pool.vmm->error_name(st),
                                        (int)st, NULL, p->unreleased.handles.bytes,
                                        p->unreleased.hosts.bytes);
      }
      *released_bytes += p->pool.page_bytes;
    }
  }
  return GMR_OK;
}

void gmr__vmm_undo_map(vmm_pages *p, vmm_root *root, uintptr_t addr, size_t bytes,
                       bool release) {
  size_t count = bytes / p->pool.page_bytes;
  if (release) p->mapped_pages -= count; /* first: unmap_run notes what stays held */
  unmap_run(p, root, addr, count, release);
}

gmr_status gmr__vmm_retry_unreleased(vmm_pages *p, size_t *released_bytes,
                                     gmr_failure *failure) {
  size_t count = 0;
  gmr_status st = gmr__vmm_unreleased_retry(&p->unreleased, released_bytes, &count, failure);
  p->counts.page_release += count;
  return st;
}
