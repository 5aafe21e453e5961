/*
 * core/cuda_sim/sim_vmm_physical.c (internal): simulated physical memory of
 * the driver's VMM calls: one sparse memfd per device and cuMemCreate /
 * cuMemRelease (sim_vmm_internal.h).
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

/* ---- physical memory of one device --------------------------------------- */

bool gmr__sim_vmm_device_open(int d) {
  sim_vmm_device *dev = &gmr__sim_vmm.device[d];
  if (dev->open) return true;
  size_t gran = gmr__sim_vmm_config().granularity_bytes;
  size_t cap = gmr__sim_device_capacity_bytes();
  size_t bytes = ((cap + gran - 1) / gran) * gran * 2;
  int fd = memfd_create("gmr-sim-device-memory", MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, (off_t)bytes) != 0 ||
      !gmr__sim_vmm_reserve_one((void **)&dev->free_ranges, &dev->free_capacity, 0,
                                sizeof(sim_range))) {
    close(fd);
    return false;
  }
  dev->fd = fd;
  dev->open = true;
  dev->free_ranges[0] = (sim_range){0, bytes};
  dev->free_count = 1;
  return true;
}

bool gmr__sim_vmm_device_take(int d, size_t bytes, size_t *offset) {
  sim_vmm_device *dev = &gmr__sim_vmm.device[d];
  for (size_t i = 0; i < dev->free_count; ++i) {
    sim_range *r = &dev->free_ranges[i];
    if (r->bytes < bytes) continue;
    *offset = r->offset;
    r->offset += bytes;
    r->bytes -= bytes;
    if (r->bytes == 0) {
      memmove(r, r + 1, (dev->free_count - i - 1) * sizeof *r);
      dev->free_count--;
    }
    return true;
  }
  return false;
}

/* Give a range back (merged with its neighbours) and its host pages too. */
void gmr__sim_vmm_device_give(int d, size_t offset, size_t bytes) {
  sim_vmm_device *dev = &gmr__sim_vmm.device[d];
  (void)fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)bytes);
  size_t i = 0;
  while (i < dev->free_count && dev->free_ranges[i].offset < offset) i++;
  bool joins_prev =
      i > 0 && dev->free_ranges[i - 1].offset + dev->free_ranges[i - 1].bytes == offset;
  bool joins_next = i < dev->free_count && offset + bytes == dev->free_ranges[i].offset;
  if (joins_prev && joins_next) {
    dev->free_ranges[i - 1].bytes += bytes + dev->free_ranges[i].bytes;
    memmove(&dev->free_ranges[i], &dev->free_ranges[i + 1],
            (dev->free_count - i - 1) * sizeof(sim_range));
    dev->free_count--;
  } else if (joins_prev) {
    dev->free_ranges[i - 1].bytes += bytes;
  } else if (joins_next) {
    dev->free_ranges[i].offset = offset;
    dev->free_ranges[i].bytes += bytes;
  } else if (gmr__sim_vmm_reserve_one((void **)&dev->free_ranges, &dev->free_capacity,
                                      dev->free_count, sizeof(sim_range))) {
    memmove(&dev->free_ranges[i + 1], &dev->free_ranges[i],
            (dev->free_count - i) * sizeof(sim_range));
    dev->free_ranges[i] = (sim_range){offset, bytes};
    dev->free_count++;
  }
  /* else: host memory ran out; the range is lost to this run, no harm done */
}

/* Free a physical allocation once it is released and no longer mapped. */
void gmr__sim_vmm_physical_maybe_destroy(sim_physical *p) {
  if (p->refs > 0 || p->map_count > 0) return;
  gmr__sim_vmm_device_give(p->device, p->offset, p->bytes);
  gmr__sim_device_uncharge(p->device, p->bytes);
  gmr__u64_map_remove(&gmr__sim_vmm.physicals, (uint64_t)(uintptr_t)p, NULL);
  free(p);
}

sim_physical *gmr__sim_vmm_physical_of(CUmemGenericAllocationHandle handle) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&gmr__sim_vmm.physicals, (uint64_t)handle, &v)) return NULL;
  return (sim_physical *)(uintptr_t)v;
}

CUresult gmr__sim_vmm_create(CUmemGenericAllocationHandle *handle, size_t bytes,
                             const gmr__vmm_prop *prop) {
  gmr__sim_lock();
  *handle = 0;
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_CREATE, true);
  if (st == CUDA_SUCCESS) st = gmr__sim_vmm_check_prop(prop);
  if (st == CUDA_SUCCESS &&
      (bytes == 0 || !gmr__sim_vmm_multiple_of(bytes, gmr__sim_vmm_config().granularity_bytes))) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  sim_physical *p = NULL;
  if (st == CUDA_SUCCESS) {
    p = calloc(1, sizeof *p);
    if (p == NULL || !gmr__sim_vmm_device_open(prop->device) ||
        !gmr__u64_map_reserve(&gmr__sim_vmm.physicals, gmr__sim_vmm.physicals.count + 1)) {
      st = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (st == CUDA_SUCCESS && !gmr__sim_device_charge(prop->device, bytes)) {
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS && !gmr__sim_vmm_device_take(prop->device, bytes, &p->offset)) {
    gmr__sim_device_uncharge(prop->device, bytes);
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS) {
    p->device = prop->device;
    p->bytes = bytes;
    p->handle_types = prop->handle_types;
    p->id = ++gmr__sim_vmm.next_physical_id;
    p->refs = 1;
    (void)gmr__u64_map_put(&gmr__sim_vmm.physicals, (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
  } else {
    free(p);
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_release(CUmemGenericAllocationHandle handle) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_RELEASE, true);
  sim_physical *p = gmr__sim_vmm_physical_of(handle);
  if (st == CUDA_SUCCESS && (p == NULL || p->refs == 0)) {
    gmr__sim_count_stale_handle(); /* undefined behaviour on a real device */
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS) {
    p->refs--;
    gmr__sim_vmm_physical_maybe_destroy(p);
  }
  gmr__sim_unlock();
  return st;
}
