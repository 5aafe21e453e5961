/*
 * core/cuda_sim/sim_vmm_va.c (internal): simulated device virtual addresses
 * of the driver's VMM calls: reservations, mappings and access
 * (sim_vmm_internal.h).
 */
/* memfd_create, fallocate and MAP_ANONYMOUS are GNU/Linux, not C11. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cuda_sim/sim_vmm_internal.h"

/* ---- reservations and mappings -------------------------------------------- */

/* The reservation holding [addr, addr + bytes), or NULL. */
sim_reservation *gmr__sim_vmm_reservation_holding(uintptr_t addr, size_t bytes) {
  for (size_t i = 0; i < gmr__sim_vmm.reservation_count; ++i) {
    sim_reservation *r = &gmr__sim_vmm.reservations[i];
    if (addr >= r->base && addr - r->base <= r->bytes && bytes <= r->bytes - (addr - r->base)) {
      return r;
    }
  }
  return NULL;
}

/* Index of the first mapping that ends after `addr`. */
size_t gmr__sim_vmm_mapping_lower_bound(uintptr_t addr) {
  size_t lo = 0, hi = gmr__sim_vmm.mapping_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (gmr__sim_vmm.mappings[mid].addr + gmr__sim_vmm.mappings[mid].bytes <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

sim_mapping *gmr__sim_vmm_mapping_containing(uintptr_t addr) {
  size_t i = gmr__sim_vmm_mapping_lower_bound(addr);
  if (i < gmr__sim_vmm.mapping_count && gmr__sim_vmm.mappings[i].addr <= addr)
    return &gmr__sim_vmm.mappings[i];
  return NULL;
}

bool gmr__sim_vmm_range_has_mapping(uintptr_t addr, size_t bytes) {
  size_t i = gmr__sim_vmm_mapping_lower_bound(addr);
  return i < gmr__sim_vmm.mapping_count && gmr__sim_vmm.mappings[i].addr < addr + bytes;
}

/* Turn [addr, addr + bytes) back into reserved, inaccessible addresses. */
bool gmr__sim_vmm_remap_reserved(uintptr_t addr, size_t bytes) {
  void *p = mmap((void *)addr, bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p != MAP_FAILED;
}

CUresult gmr__sim_vmm_address_reserve(CUdeviceptr *ptr, size_t bytes, size_t alignment_bytes) {
  gmr__sim_lock();
  *ptr = 0;
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, true);
  size_t gran = gmr__sim_vmm_config().granularity_bytes;
  if (st == CUDA_SUCCESS &&
      (bytes == 0 || !gmr__sim_vmm_multiple_of(bytes, gmr__sim_vmm_host_page_bytes()) ||
       (alignment_bytes & (alignment_bytes - 1)) != 0)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS &&
      !gmr__sim_vmm_reserve_one((void **)&gmr__sim_vmm.reservations,
                                &gmr__sim_vmm.reservation_capacity, gmr__sim_vmm.reservation_count,
                                sizeof(sim_reservation))) {
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS) {
    /* Device reservations start on a granularity boundary at least. */
    size_t align = alignment_bytes > gran ? alignment_bytes : gran;
    if (bytes > SIZE_MAX - align) {
      st = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      size_t span = bytes + align;
      void *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (raw == MAP_FAILED) {
        st = CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
        size_t head = start - (uintptr_t)raw;
        if (head > 0) munmap(raw, head);
        if (span - head - bytes > 0) munmap((void *)(start + bytes), span - head - bytes);
        size_t i = 0;
        while (i < gmr__sim_vmm.reservation_count && gmr__sim_vmm.reservations[i].base < start) i++;
        memmove(&gmr__sim_vmm.reservations[i + 1], &gmr__sim_vmm.reservations[i],
                (gmr__sim_vmm.reservation_count - i) * sizeof(sim_reservation));
        gmr__sim_vmm.reservations[i] = (sim_reservation){start, bytes};
        gmr__sim_vmm.reservation_count++;
        *ptr = (CUdeviceptr)start;
      }
    }
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_address_free(CUdeviceptr ptr, size_t bytes) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_ADDRESS_FREE, true);
  size_t i = 0;
  while (i < gmr__sim_vmm.reservation_count && gmr__sim_vmm.reservations[i].base != (uintptr_t)ptr)
    i++;
  if (st == CUDA_SUCCESS &&
      (i == gmr__sim_vmm.reservation_count || gmr__sim_vmm.reservations[i].bytes != bytes)) {
    st = CUDA_ERROR_INVALID_VALUE; /* ptr and size must be exactly a reservation */
  }
  /* CUDA leaves freeing mapped addresses undefined; refuse so tests notice. */
  if (st == CUDA_SUCCESS && gmr__sim_vmm_range_has_mapping((uintptr_t)ptr, bytes))
    st = CUDA_ERROR_INVALID_VALUE;
  if (st == CUDA_SUCCESS) {
    munmap((void *)(uintptr_t)ptr, bytes);
    memmove(&gmr__sim_vmm.reservations[i], &gmr__sim_vmm.reservations[i + 1],
            (gmr__sim_vmm.reservation_count - i - 1) * sizeof(sim_reservation));
    gmr__sim_vmm.reservation_count--;
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_map(CUdeviceptr ptr, size_t bytes, CUmemGenericAllocationHandle handle) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_MAP, true);
  sim_physical *p = gmr__sim_vmm_physical_of(handle);
  size_t gran = gmr__sim_vmm_config().granularity_bytes;
  uintptr_t addr = (uintptr_t)ptr;
  if (st == CUDA_SUCCESS && (p == NULL || p->refs == 0)) {
    gmr__sim_count_stale_handle();
    st = CUDA_ERROR_INVALID_VALUE;
  }
  /* Address and size on the granularity, within the allocation, inside a
   * reservation, over addresses nothing is mapped at. */
  if (st == CUDA_SUCCESS && (bytes == 0 || !gmr__sim_vmm_multiple_of(bytes, gran) ||
                             !gmr__sim_vmm_multiple_of(addr, gran) || bytes > p->bytes ||
                             gmr__sim_vmm_reservation_holding(addr, bytes) == NULL ||
                             gmr__sim_vmm_range_has_mapping(addr, bytes))) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS &&
      !gmr__sim_vmm_reserve_one((void **)&gmr__sim_vmm.mappings, &gmr__sim_vmm.mapping_capacity,
                                gmr__sim_vmm.mapping_count, sizeof(sim_mapping))) {
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS) {
    void *m = mmap((void *)addr, bytes, PROT_NONE, MAP_SHARED | MAP_FIXED,
                   gmr__sim_vmm.device[p->device].fd, (off_t)p->offset);
    if (m == MAP_FAILED) {
      st = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      size_t i = gmr__sim_vmm_mapping_lower_bound(addr);
      memmove(&gmr__sim_vmm.mappings[i + 1], &gmr__sim_vmm.mappings[i],
              (gmr__sim_vmm.mapping_count - i) * sizeof(sim_mapping));
      gmr__sim_vmm.mappings[i] = (sim_mapping){addr, bytes, p, 0};
      gmr__sim_vmm.mapping_count++;
      p->map_count++;
    }
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_unmap(CUdeviceptr ptr, size_t bytes) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_UNMAP, true);
  uintptr_t addr = (uintptr_t)ptr;
  sim_mapping *m = gmr__sim_vmm_mapping_containing(addr);
  /* Only a whole mapping, never part of one. */
  if (st == CUDA_SUCCESS && (m == NULL || m->addr != addr || m->bytes != bytes)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  /* Work still pending on these addresses would fault on a GPU: counted
   * (the driver unmaps all the same). */
  bool under_work = st == CUDA_SUCCESS && gmr__sim_uses_pending_over(addr, bytes);
  if (st == CUDA_SUCCESS && !gmr__sim_vmm_remap_reserved(addr, bytes))
    st = CUDA_ERROR_OUT_OF_MEMORY;
  if (st == CUDA_SUCCESS && under_work) gmr__sim_vmm.unmap_under_work_count++;
  if (st == CUDA_SUCCESS) {
    sim_physical *p = m->physical;
    size_t i = (size_t)(m - gmr__sim_vmm.mappings);
    memmove(&gmr__sim_vmm.mappings[i], &gmr__sim_vmm.mappings[i + 1],
            (gmr__sim_vmm.mapping_count - i - 1) * sizeof(sim_mapping));
    gmr__sim_vmm.mapping_count--;
    p->map_count--;
    gmr__sim_vmm_physical_maybe_destroy(p);
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_set_access(CUdeviceptr ptr, size_t bytes, const int *devices,
                                 size_t device_count) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_SET_ACCESS, true);
  uintptr_t addr = (uintptr_t)ptr;
  gmr_cuda_sim_vmm_config c = gmr__sim_vmm_config();
  uint32_t mask = 0;
  if (st == CUDA_SUCCESS && (devices == NULL || device_count == 0 || bytes == 0)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; st == CUDA_SUCCESS && i < device_count; ++i) {
    if (!gmr__sim_vmm_valid_device(devices[i])) st = CUDA_ERROR_INVALID_DEVICE;
    if (st == CUDA_SUCCESS) mask |= 1u << devices[i];
  }
  /* The range must be mapped throughout, starting and ending on mapping
   * boundaries; peers must be able to reach the memory. */
  size_t first = gmr__sim_vmm_mapping_lower_bound(addr);
  size_t last = first;
  if (st == CUDA_SUCCESS) {
    uintptr_t at = addr;
    while (last < gmr__sim_vmm.mapping_count && gmr__sim_vmm.mappings[last].addr == at &&
           at < addr + bytes) {
      at += gmr__sim_vmm.mappings[last].bytes;
      last++;
    }
    if (at != addr + bytes) st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = first; st == CUDA_SUCCESS && i < last; ++i) {
    if ((mask & ~(1u << gmr__sim_vmm.mappings[i].physical->device)) != 0 &&
        !c.peer_access_supported) {
      st = CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  if (st == CUDA_SUCCESS && mprotect((void *)addr, bytes, PROT_READ | PROT_WRITE) != 0) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = first; st == CUDA_SUCCESS && i < last; ++i)
    gmr__sim_vmm.mappings[i].access_mask = mask;
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_retain_allocation_handle(CUmemGenericAllocationHandle *handle,
                                               CUdeviceptr ptr) {
  gmr__sim_lock();
  *handle = 0;
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_RETAIN_ALLOCATION_HANDLE, false);
  sim_mapping *m = gmr__sim_vmm_mapping_containing((uintptr_t)ptr);
  if (st == CUDA_SUCCESS && m == NULL) st = CUDA_ERROR_INVALID_VALUE;
  if (st == CUDA_SUCCESS) {
    m->physical->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->physical;
  }
  gmr__sim_unlock();
  return st;
}
