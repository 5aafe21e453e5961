/*
 * resources/vmm/base/vmm_ranges.c (internal): reserved ranges of a VMM
 * pool (vmm_ranges.h, gmr/vmm_pool_range.h): reserve, commit, decommit,
 * free, what they hold, and the page operations sleep and wake share.
 */
#include "resources/vmm/base/vmm_ranges.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_host.h"

void gmr__vmm_ranges_init(gmr__vmm_ranges *g, gmr_vmm_pool_resource *pool) {
  memset(g, 0, sizeof *g);
  g->pool = pool;
  g->saved_host = GMR_VMM_POOL_HOST_PAGEABLE;
  gmr__vmm_unreleased_init(&g->unreleased, pool->cuda, pool->vmm);
}

void gmr__vmm_ranges_deinit(gmr__vmm_ranges *g) {
  gmr__vmm_unreleased_deinit(&g->unreleased);
  free(g->kept_va);
  g->kept_va = NULL;
}

gmr__vmm_range *gmr__vmm_range_at(const gmr__vmm_ranges *g, uintptr_t addr) {
  for (gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    if (addr >= r->base && addr - r->base < r->bytes) return r;
  }
  return NULL;
}

bool gmr__vmm_ranges_asleep(const gmr__vmm_ranges *g) {
  for (const gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    if (r->asleep) return true;
  }
  return false;
}

gmr_status gmr__vmm_ranges_retry(gmr__vmm_ranges *g, gmr_failure *failure) {
  size_t bytes = 0, count = 0;
  gmr_status st = gmr__vmm_unreleased_retry(&g->unreleased, &bytes, &count, failure);
  for (size_t i = g->kept_va_count; i-- > 0;) {
    gmr__vmm_kept_item va = g->kept_va[i];
    CUresult cu = g->pool->vmm->address_free((CUdeviceptr)va.id, va.bytes);
    if (cu != CUDA_SUCCESS) {
      if (st == GMR_OK) {
        st = gmr__cu_fail(g->pool->vmm, failure, "cuMemAddressFree", cu,
                          "the addresses of a freed range are kept, asked again later");
      }
      continue;
    }
    g->kept_va_bytes -= va.bytes;
    g->kept_va[i] = g->kept_va[--g->kept_va_count];
  }
  return st;
}

/* ---- pages -------------------------------------------------------------------------- */

CUresult gmr__vmm_range_unmap(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first, size_t count) {
  const gmr__cuda_vmm_ops *vmm = g->pool->vmm;
  for (size_t i = first; i < first + count; ++i) {
    CUresult cu = vmm->unmap((CUdeviceptr)(r->base + i * r->page_bytes), r->page_bytes);
    if (cu != CUDA_SUCCESS) {
      gmr__vmm_range_map_back(g, r, first, i - first);
      return cu;
    }
  }
  return CUDA_SUCCESS;
}

void gmr__vmm_range_map_back(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first, size_t count) {
  gmr_vmm_pool_resource *p = g->pool;
  for (size_t i = first; i < first + count; ++i) {
    (void)p->vmm->map((CUdeviceptr)(r->base + i * r->page_bytes), r->page_bytes, r->handles[i]);
  }
  if (count > 0) {
    (void)p->vmm->set_access((CUdeviceptr)(r->base + first * r->page_bytes),
                             count * r->page_bytes, p->access_devices, p->access_count);
  }
}

CUresult gmr__vmm_range_release(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first,
                                size_t count) {
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = first; i < first + count; ++i) {
    CUresult cu = gmr__vmm_release_or_keep(&g->unreleased, r->handles[i], r->page_bytes);
    if (refused == CUDA_SUCCESS) refused = cu;
    r->handles[i] = 0;
  }
  return refused;
}

CUresult gmr__vmm_range_map_fresh(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first,
                                  size_t count, const char **call) {
  gmr_vmm_pool_resource *p = g->pool;
  CUresult cu = CUDA_SUCCESS;
  size_t done = 0;
  for (; done < count; ++done) {
    size_t i = first + done;
    CUmemGenericAllocationHandle h = 0;
    *call = "cuMemCreate";
    if (!gmr__vmm_kept_promise(&g->unreleased.handles)) {
      cu = CUDA_ERROR_OUT_OF_MEMORY;
      break;
    }
    cu = gmr__vmm_create_handle(p, &h, r->page_bytes);
    if (cu != CUDA_SUCCESS) {
      gmr__vmm_kept_unpromise(&g->unreleased.handles);
      break;
    }
    *call = "cuMemMap";
    cu = p->vmm->map((CUdeviceptr)(r->base + i * r->page_bytes), r->page_bytes, h);
    if (cu != CUDA_SUCCESS) {
      r->handles[i] = h;
      (void)gmr__vmm_range_release(g, r, i, 1);
      break;
    }
    r->handles[i] = h;
  }
  if (cu == CUDA_SUCCESS && count > 0) {
    *call = "cuMemSetAccess";
    cu = p->vmm->set_access((CUdeviceptr)(r->base + first * r->page_bytes),
                            count * r->page_bytes, p->access_devices, p->access_count);
  }
  if (cu != CUDA_SUCCESS) {
    for (size_t i = first; i < first + done; ++i) {
      (void)p->vmm->unmap((CUdeviceptr)(r->base + i * r->page_bytes), r->page_bytes);
    }
    (void)gmr__vmm_range_release(g, r, first, done);
  }
  return cu;
}

/* ---- the calls ----------------------------------------------------------------------- */

gmr_status gmr__vmm_ranges_reserve(gmr__vmm_ranges *g, size_t bytes, size_t page_bytes,
                                   uint32_t tag, void **out, gmr_failure *failure) {
  gmr_vmm_pool_resource *p = g->pool;
  size_t page = page_bytes == 0 ? p->page_bytes : page_bytes;
  if (!gmr__is_power_of_two(page) || page % p->granularity_bytes != 0) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "reserve_range: page_bytes %zu is not a power of two and a multiple "
                            "of device %d's VMM granularity, %zu bytes (0: the pool's page, %zu)",
                            page_bytes, p->device, p->granularity_bytes, p->page_bytes);
  }
  if (bytes > SIZE_MAX - page) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "reserve_range: %zu bytes is more than any device has", bytes);
  }
  bytes = gmr__align_up(bytes, page);
  size_t pages = bytes / page;
  gmr__vmm_range *r = calloc(1, sizeof *r);
  CUmemGenericAllocationHandle *handles = r != NULL ? calloc(pages, sizeof *handles) : NULL;
  uint8_t *committed = handles != NULL ? calloc(pages, 1) : NULL;
  if (committed == NULL) {
    free(handles);
    free(r);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "reserve_range: host memory for the page table of %zu pages ran out",
                            pages);
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  CUdeviceptr base = 0;
  CUresult cu = CUDA_SUCCESS;
  if (err == cudaSuccess) {
    cu = p->vmm->address_reserve(&base, bytes, page);
    gmr__cuda_device_leave(p->cuda, saved);
  }
  if (err != cudaSuccess || cu != CUDA_SUCCESS) {
    free(committed);
    free(handles);
    free(r);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
    return gmr__cu_fail(p->vmm, failure, "cuMemAddressReserve", cu, "reserving a range");
  }
  *r = (gmr__vmm_range){(uintptr_t)base, bytes, page, pages, handles, committed, 0, tag,
                        false, NULL, 0, 0, g->first};
  g->first = r;
  g->count++;
  *out = (void *)(uintptr_t)base;
  return GMR_OK;
}

/* The range of a span, checked: addr inside a range, page-aligned, the
 * span inside it. */
static gmr_status span_check(const gmr__vmm_ranges *g, const char *verb, uintptr_t addr,
                             size_t bytes, gmr__vmm_range **out, gmr_failure *failure) {
  gmr__vmm_range *r = gmr__vmm_range_at(g, addr);
  if (r == NULL) {
    return gmr__failure_set(failure, GMR_ERR_UNKNOWN_POINTER,
                            "%s: %#zx is in no range reserved in this pool "
                            "(gmr_vmm_pool_resource_reserve_range)",
                            verb, (size_t)addr);
  }
  if ((addr - r->base) % r->page_bytes != 0 || bytes % r->page_bytes != 0) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "%s: [%#zx, +%zu bytes) is not made of whole pages of the range "
                            "(pages of %zu bytes from %#zx)",
                            verb, (size_t)addr, bytes, r->page_bytes, (size_t)r->base);
  }
  if (bytes > r->base + r->bytes - addr) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "%s: [%#zx, %#zx) ends past the range [%#zx, %#zx) reserved (%zu "
                            "bytes)",
                            verb, (size_t)addr, (size_t)addr + bytes, (size_t)r->base,
                            (size_t)(r->base + r->bytes), r->bytes);
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr__vmm_ranges_commit(gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                  gmr_failure *failure) {
  gmr__vmm_range *r = NULL;
  gmr_status st = span_check(g, "commit", addr, bytes, &r, failure);
  if (st != GMR_OK) return st;
  if (gmr__vmm_asleep(g->pool)) return gmr__vmm_busy_asleep(failure, "committing");
  gmr_vmm_pool_resource *p = g->pool;
  size_t first = (addr - r->base) / r->page_bytes, end = first + bytes / r->page_bytes;
  size_t want = 0;
  for (size_t i = first; i < end; ++i) want += r->committed[i] ? 0 : 1;
  if (want == 0) return GMR_OK;
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  err = gmr__cuda_capture_relaxed_enter(p->cuda, &mode);
  if (err != cudaSuccess) {
    gmr__cuda_device_leave(p->cuda, saved);
    return gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  }
  (void)gmr__vmm_ranges_retry(g, NULL); /* the room may be needed */
  CUresult cu = CUDA_SUCCESS;
  const char *call = "cuMemCreate";
  size_t i = first, made_first = 0, made_count = 0;
  /* Run by run of pages not committed; a failure undoes the earlier runs. */
  size_t *undo = malloc(2 * (end - first) * sizeof *undo);
  size_t undo_count = 0;
  if (undo == NULL) cu = CUDA_ERROR_OUT_OF_MEMORY;
  while (cu == CUDA_SUCCESS && i < end) {
    if (r->committed[i]) {
      i++;
      continue;
    }
    made_first = i;
    while (i < end && !r->committed[i]) i++;
    made_count = i - made_first;
    cu = gmr__vmm_range_map_fresh(g, r, made_first, made_count, &call);
    if (cu == CUDA_SUCCESS) {
      undo[undo_count++] = made_first;
      undo[undo_count++] = made_count;
    }
  }
  if (cu != CUDA_SUCCESS) {
    for (size_t k = 0; k < undo_count; k += 2) {
      for (size_t j = undo[k]; j < undo[k] + undo[k + 1]; ++j) {
        (void)p->vmm->unmap((CUdeviceptr)(r->base + j * r->page_bytes), r->page_bytes);
      }
      (void)gmr__vmm_range_release(g, r, undo[k], undo[k + 1]);
    }
    if (undo == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "commit: host memory ran out");
    } else {
      st = gmr__cu_fail(p->vmm, failure, call, cu, NULL);
    }
    if (st == GMR_ERR_OUT_OF_MEMORY && undo != NULL && failure != NULL) {
      (void)gmr__failure_set(failure, st,
                             "commit: the device has no room for %zu more bytes (%s: %s); the "
                             "range holds %zu of its %zu bytes; nothing was committed",
                             want * r->page_bytes, call, p->vmm->error_name(cu),
                             r->committed_pages * r->page_bytes, r->bytes);
      failure->cuda_error = (int)cu;
    }
  } else {
    for (size_t j = first; j < end; ++j) {
      if (!r->committed[j]) {
        r->committed[j] = 1;
        r->committed_pages++;
      }
    }
  }
  free(undo);
  gmr__cuda_capture_relaxed_leave(p->cuda, mode);
  gmr__cuda_device_leave(p->cuda, saved);
  return st;
}

/* Synchronise the device (pool's device current): nothing may still run on
 * memory about to be unmapped. */
static gmr_status sync_device(gmr_vmm_pool_resource *p, const char *verb, gmr_failure *failure) {
  cudaError_t err = p->cuda->device_synchronize();
  if (err == cudaSuccess) return GMR_OK;
  gmr_status st = gmr__cuda_fail(failure, "cudaDeviceSynchronize", err);
  if (st == GMR_ERR_CAPTURE_UNSAFE && failure != NULL) {
    (void)gmr__failure_set(failure, st,
                           "%s during a CUDA graph capture: cudaDeviceSynchronize refused (%s); "
                           "end the capture first (nothing was unmapped)",
                           verb, gmr_cuda_error_name((int)err));
    failure->cuda_error = (int)err;
  }
  return st;
}

/* Unmap and release pages [first, end) of r, every one committed and
 * mapped, the device synchronised. GMR_OK; the unmap's refusal (nothing
 * changed); or GMR_ERR_CUDA "<done> all the same" for a refused release. */
static gmr_status drop_pages(gmr__vmm_ranges *g, gmr__vmm_range *r, size_t first, size_t end,
                             const char *done, gmr_failure *failure) {
  gmr_vmm_pool_resource *p = g->pool;
  /* Mapped runs: a page of an asleep range is not mapped. */
  for (size_t i = first; i < end; ++i) {
    if (r->handles[i] == 0) continue;
    size_t j = i;
    while (j < end && r->handles[j] != 0) j++;
    CUresult cu = gmr__vmm_range_unmap(g, r, i, j - i);
    if (cu != CUDA_SUCCESS) {
      for (size_t k = i; k-- > first;) { /* map back the earlier runs */
        if (r->handles[k] != 0) gmr__vmm_range_map_back(g, r, k, 1);
      }
      return gmr__cu_fail(p->vmm, failure, "cuMemUnmap", cu, NULL);
    }
    i = j;
  }
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = first; i < end; ++i) {
    if (r->handles[i] != 0) {
      CUresult cu = gmr__vmm_range_release(g, r, i, 1);
      if (refused == CUDA_SUCCESS) refused = cu;
    }
    if (r->committed[i]) {
      r->committed[i] = 0;
      r->committed_pages--;
    }
  }
  if (refused == CUDA_SUCCESS) return GMR_OK;
  return gmr__vmm_unreleased_fail(failure, "cuMemRelease", p->vmm->error_name(refused),
                                  (int)refused, done, g->unreleased.handles.bytes,
                                  g->unreleased.hosts.bytes);
}

gmr_status gmr__vmm_ranges_decommit(gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                    gmr_failure *failure) {
  gmr__vmm_range *r = NULL;
  gmr_status st = span_check(g, "decommit", addr, bytes, &r, failure);
  if (st != GMR_OK) return st;
  if (gmr__vmm_asleep(g->pool)) return gmr__vmm_busy_asleep(failure, "decommitting");
  size_t first = (addr - r->base) / r->page_bytes, end = first + bytes / r->page_bytes;
  for (size_t i = first; i < end; ++i) {
    if (!r->committed[i]) {
      return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                              "decommit: the page at %#zx (%zu bytes) is not committed; nothing "
                              "was decommitted",
                              (size_t)(r->base + i * r->page_bytes), r->page_bytes);
    }
  }
  if (first == end) return GMR_OK;
  gmr_vmm_pool_resource *p = g->pool;
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  st = sync_device(p, "decommit", failure);
  if (st == GMR_OK) {
    (void)gmr__vmm_ranges_retry(g, NULL);
    st = drop_pages(g, r, first, end, "decommitted all the same", failure);
  }
  gmr__cuda_device_leave(p->cuda, saved);
  return st;
}

gmr_status gmr__vmm_ranges_free(gmr__vmm_ranges *g, uintptr_t base, gmr_failure *failure) {
  gmr__vmm_range **link = &g->first;
  while (*link != NULL && (*link)->base != base) link = &(*link)->next;
  gmr__vmm_range *r = *link;
  if (r == NULL) {
    return gmr__failure_set(failure, GMR_ERR_UNKNOWN_POINTER,
                            "free_range: %#zx is not the first address of a range of this pool "
                            "(freed already?)",
                            (size_t)base);
  }
  /* Room to keep the addresses if the driver refuses them, first. */
  if (g->kept_va_count == g->kept_va_capacity) {
    size_t n = g->kept_va_capacity < 4 ? 4 : g->kept_va_capacity * 2;
    gmr__vmm_kept_item *grown = realloc(g->kept_va, n * sizeof *grown);
    if (grown == NULL) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "free_range: host memory ran out");
    }
    g->kept_va = grown;
    g->kept_va_capacity = n;
  }
  gmr_vmm_pool_resource *p = g->pool;
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  bool mapped = false;
  for (size_t i = 0; i < r->page_count && !mapped; ++i) mapped = r->handles[i] != 0;
  gmr_status st = mapped ? sync_device(p, "free_range", failure) : GMR_OK;
  gmr_failure refusal = GMR_FAILURE_INIT;
  gmr_status kept = GMR_OK;
  if (st == GMR_OK) {
    (void)gmr__vmm_ranges_retry(g, NULL);
    /* A refused unmap changes nothing; a refused release keeps the memory
     * and the free goes on. */
    kept = drop_pages(g, r, 0, r->page_count, "freed all the same", &refusal);
    if (kept != GMR_OK && r->committed_pages > 0) {
      st = kept;
      if (failure != NULL) *failure = refusal;
    }
  }
  if (st == GMR_OK) {
    /* Past the point of return. An asleep range's backups go with it. */
    for (size_t k = 0; k < r->run_count; ++k) {
      (void)gmr__vmm_host_free(&g->unreleased, g->saved_host, r->runs[k].host,
                               r->runs[k].count * r->page_bytes);
    }
    CUresult cu = p->vmm->address_free((CUdeviceptr)r->base, r->bytes);
    if (cu != CUDA_SUCCESS) {
      g->kept_va[g->kept_va_count++] = (gmr__vmm_kept_item){(uint64_t)r->base, r->bytes};
      g->kept_va_bytes += r->bytes;
      if (kept == GMR_OK) {
        kept = gmr__vmm_unreleased_fail(&refusal, "cuMemAddressFree", p->vmm->error_name(cu),
                                        (int)cu, "freed all the same (its addresses are kept)",
                                        g->unreleased.handles.bytes, g->unreleased.hosts.bytes);
      }
    }
    *link = r->next;
    g->count--;
    free(r->runs);
    free(r->handles);
    free(r->committed);
    free(r);
    if (kept != GMR_OK) {
      st = kept;
      if (failure != NULL) *failure = refusal;
    }
  }
  gmr__cuda_device_leave(p->cuda, saved);
  return st;
}

gmr_status gmr__vmm_ranges_info(const gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                                gmr_vmm_pool_range_info *out) {
  const gmr__vmm_range *r = gmr__vmm_range_at(g, addr);
  if (r == NULL) return GMR_ERR_UNKNOWN_POINTER;
  out->base = (void *)r->base;
  out->reserved_bytes = r->bytes;
  out->page_bytes = r->page_bytes;
  out->committed_bytes = r->committed_pages * r->page_bytes;
  out->tag = r->tag;
  out->asleep = r->asleep;
  out->saved = false;
  for (size_t k = 0; k < r->run_count; ++k) out->saved = out->saved || r->runs[k].host != NULL;
  size_t end = bytes > r->base + r->bytes - addr ? r->base + r->bytes : addr + bytes;
  size_t span = 0;
  for (size_t i = (addr - r->base) / r->page_bytes; i < r->page_count; ++i) {
    uintptr_t lo = r->base + i * r->page_bytes, hi = lo + r->page_bytes;
    if (lo >= end) break;
    if (!r->committed[i]) continue;
    uintptr_t a = lo > addr ? lo : addr, b = hi < end ? hi : end;
    if (b > a) span += b - a;
  }
  out->span_committed_bytes = span;
  return GMR_OK;
}

/* ---- figures ------------------------------------------------------------------------- */

void gmr__vmm_ranges_stats(const gmr__vmm_ranges *g, gmr_vmm_pool_resource_stats *s,
                           size_t *saved_bytes, size_t *unfreed_bytes) {
  for (const gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    s->range_count++;
    s->range_reserved_bytes += r->bytes;
    s->range_committed_bytes += r->committed_pages * r->page_bytes;
    if (!r->asleep) s->range_mapped_bytes += r->committed_pages * r->page_bytes;
    for (size_t k = 0; k < r->run_count; ++k) {
      if (r->runs[k].host != NULL) *saved_bytes += r->runs[k].count * r->page_bytes;
    }
  }
  s->range_mapped_bytes += g->unreleased.handles.bytes;
  s->range_unreleased_bytes += g->unreleased.handles.bytes;
  s->range_reserved_bytes += g->kept_va_bytes;
  *unfreed_bytes += g->unreleased.hosts.bytes;
}

void gmr__vmm_ranges_tag_stats(const gmr__vmm_ranges *g, uint64_t tag_mask,
                               gmr_vmm_pool_tag_stats *s) {
  for (const gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    if (((tag_mask >> r->tag) & 1u) == 0 || r->committed_pages == 0) continue;
    size_t bytes = r->committed_pages * r->page_bytes;
    if (!r->asleep) {
      s->live_bytes += bytes;
      s->live_count++;
      continue;
    }
    s->asleep_bytes += bytes;
    s->asleep_count++;
    size_t saved = 0;
    for (size_t k = 0; k < r->run_count; ++k) {
      if (r->runs[k].host != NULL) saved += r->runs[k].count * r->page_bytes;
    }
    if (saved > 0) {
      s->saved_bytes += saved;
      s->saved_count++;
      s->saved_pinned = g->saved_host == GMR_VMM_POOL_HOST_PINNED;
    }
  }
}

bool gmr__vmm_ranges_set_tag(gmr__vmm_ranges *g, uintptr_t ptr, uint32_t tag) {
  for (gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    if (r->base == ptr) {
      r->tag = tag;
      return true;
    }
  }
  return false;
}

gmr_status gmr__vmm_ranges_check(const gmr__vmm_ranges *g, char *err, size_t err_bytes) {
  size_t n = 0;
  for (const gmr__vmm_range *r = g->first; r != NULL; r = r->next, ++n) {
    size_t committed = 0, mapped = 0;
    for (size_t i = 0; i < r->page_count; ++i) {
      committed += r->committed[i];
      mapped += r->handles[i] != 0;
      if (r->handles[i] != 0 && !r->committed[i]) {
        return gmr__vmm_violation(err, err_bytes, "range %#zx: page %zu mapped, not committed",
                                  (size_t)r->base, i);
      }
    }
    if (committed != r->committed_pages || mapped != (r->asleep ? 0 : committed)) {
      return gmr__vmm_violation(err, err_bytes,
                                "range %#zx: %zu pages committed (counted %zu), %zu mapped%s",
                                (size_t)r->base, committed, r->committed_pages, mapped,
                                r->asleep ? " while asleep" : "");
    }
  }
  if (n != g->count) {
    return gmr__vmm_violation(err, err_bytes, "%zu ranges, counted %zu", n, g->count);
  }
  return GMR_OK;
}
