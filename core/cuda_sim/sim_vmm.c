/*
 * core/cuda_sim/sim_vmm.c (internal): the simulation of the driver's virtual
 * memory management calls (see cuda_vmm.h and the VMM section of
 * gmr/sim/cuda_sim.h): device attributes, granularity, peers, error names, the
 * ops table, and the public control functions. Physical memory is in
 * sim_vmm_physical.c, addresses and mappings in sim_vmm_va.c; the shared
 * state in sim_vmm_internal.h. Everything runs under the simulation's one
 * lock (sim_internal.h).
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

sim_vmm_state gmr__sim_vmm;

gmr_cuda_sim_vmm_config gmr__sim_vmm_config(void) {
  gmr_cuda_sim_vmm_config c = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  return gmr__sim_vmm.configured ? gmr__sim_vmm.config : c;
}

size_t gmr__sim_vmm_host_page_bytes(void) {
  long n = sysconf(_SC_PAGESIZE);
  return n > 0 ? (size_t)n : 4096u;
}

/* Grow a dynamic array so it holds one more element. */
bool gmr__sim_vmm_reserve_one(void **items, size_t *capacity, size_t count, size_t item_bytes) {
  if (count < *capacity) return true;
  size_t n = *capacity == 0 ? 16 : *capacity * 2;
  void *p = realloc(*items, n * item_bytes);
  if (p == NULL) return false;
  *items = p;
  *capacity = n;
  return true;
}

bool gmr__sim_vmm_valid_device(int d) { return d >= 0 && d < gmr__sim_device_count(); }

bool gmr__sim_vmm_multiple_of(size_t x, size_t unit) { return unit != 0 && x % unit == 0; }

/* Count and inject like every call; refuse a potentially unsafe call during a
 * capture it would break. */
CUresult gmr__sim_vmm_enter(gmr_cuda_call call, bool unsafe_in_capture) {
  cudaError_t err = gmr__sim_enter_call(call);
  if (err != cudaSuccess) return (CUresult)err;
  if (unsafe_in_capture && gmr__sim_capture_forbids_unsafe_call()) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

static CUresult sim_init(int device) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_valid_device(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
  gmr__sim_unlock();
  return st;
}

static CUresult sim_device_get_attribute(int *value, CUdevice_attribute attr, int device) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_DEVICE_GET_ATTRIBUTE_DRIVER, false);
  if (st == CUDA_SUCCESS && !gmr__sim_vmm_valid_device(device)) st = CUDA_ERROR_INVALID_DEVICE;
  if (st == CUDA_SUCCESS) {
    gmr_cuda_sim_vmm_config c = gmr__sim_vmm_config();
    switch (attr) {
      case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        *value = c.supported ? 1 : 0;
        break;
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        *value = c.supported ? 1 : 0;
        break;
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
        *value = c.supported && c.fabric_handles_supported ? 1 : 0;
        break;
      case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
        *value = c.supported && c.gpu_direct_rdma_supported ? 1 : 0;
        break;
      default:
        *value = 0;
        break;
    }
  }
  gmr__sim_unlock();
  return st;
}

CUresult gmr__sim_vmm_check_prop(const gmr__vmm_prop *prop) {
  gmr_cuda_sim_vmm_config c = gmr__sim_vmm_config();
  if (prop == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!gmr__sim_vmm_valid_device(prop->device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!c.supported) return CUDA_ERROR_NOT_SUPPORTED;
  unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  if ((prop->handle_types & ~known) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  if ((prop->handle_types & CU_MEM_HANDLE_TYPE_FABRIC) != 0 && !c.fabric_handles_supported) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->gpu_direct_rdma && !c.gpu_direct_rdma_supported) return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

static CUresult sim_get_granularity(size_t *granularity_bytes, const gmr__vmm_prop *prop,
                                    bool recommended) {
  gmr__sim_lock();
  CUresult st = gmr__sim_vmm_enter(GMR_CUDA_CALL_MEM_GET_ALLOCATION_GRANULARITY, false);
  if (st == CUDA_SUCCESS) st = gmr__sim_vmm_check_prop(prop);
  if (st == CUDA_SUCCESS) {
    gmr_cuda_sim_vmm_config c = gmr__sim_vmm_config();
    *granularity_bytes = recommended ? c.recommended_granularity_bytes : c.granularity_bytes;
  }
  gmr__sim_unlock();
  return st;
}

static cudaError_t sim_device_can_access_peer(int *can_access, int device, int peer) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_DEVICE_CAN_ACCESS_PEER);
  if (err == cudaSuccess &&
      (!gmr__sim_vmm_valid_device(device) || !gmr__sim_vmm_valid_device(peer))) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess)
    *can_access = device != peer && gmr__sim_vmm_config().peer_access_supported ? 1 : 0;
  gmr__sim_unlock();
  return err;
}

static const char *sim_error_name(CUresult err) {
  switch (err) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_ILLEGAL_STATE:
      return "CUDA_ERROR_ILLEGAL_STATE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_NOT_PERMITTED:
      return "CUDA_ERROR_NOT_PERMITTED";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    default:
      /* The runtime's table: the same numbers for the rest. */
      return cudaGetErrorName((cudaError_t)err);
  }
}

const gmr__cuda_vmm_ops gmr__cuda_vmm_sim_ops = {
    .init = sim_init,
    .device_get_attribute = sim_device_get_attribute,
    .get_granularity = sim_get_granularity,
    .address_reserve = gmr__sim_vmm_address_reserve,
    .address_free = gmr__sim_vmm_address_free,
    .create = gmr__sim_vmm_create,
    .release = gmr__sim_vmm_release,
    .map = gmr__sim_vmm_map,
    .unmap = gmr__sim_vmm_unmap,
    .set_access = gmr__sim_vmm_set_access,
    .retain_allocation_handle = gmr__sim_vmm_retain_allocation_handle,
    .get_address_range = gmr__sim_get_address_range, /* sim_address_range.c */
    .device_can_access_peer = sim_device_can_access_peer,
    .error_name = sim_error_name,
};

/* ---- hooks for cuda_sim.c and sim_state.c (lock held) ---------------------------------- */

void gmr__sim_vmm_reset(void) {
  for (size_t i = 0; i < gmr__sim_vmm.reservation_count; ++i) {
    munmap((void *)gmr__sim_vmm.reservations[i].base, gmr__sim_vmm.reservations[i].bytes);
  }
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&gmr__sim_vmm.physicals, &cursor, &key, &value)) {
    free((void *)(uintptr_t)value);
  }
  gmr__u64_map_clear(&gmr__sim_vmm.physicals);
  for (int d = 0; d < SIM_MAX_DEVICES; ++d) {
    if (gmr__sim_vmm.device[d].open) close(gmr__sim_vmm.device[d].fd);
    free(gmr__sim_vmm.device[d].free_ranges);
  }
  free(gmr__sim_vmm.mappings);
  free(gmr__sim_vmm.reservations);
  uint64_t next_id = gmr__sim_vmm.next_physical_id;
  memset(&gmr__sim_vmm, 0, sizeof gmr__sim_vmm);
  gmr__sim_vmm.next_physical_id = next_id; /* ids stay unique for the process */
}

bool gmr__sim_vmm_mapping_extent(uintptr_t addr, uintptr_t *base, size_t *bytes) {
  const sim_mapping *m = gmr__sim_vmm_mapping_containing(addr);
  if (m == NULL) return false;
  *base = m->addr;
  *bytes = m->bytes;
  return true;
}

size_t gmr__sim_vmm_live_count(void) {
  return gmr__sim_vmm.reservation_count + gmr__sim_vmm.physicals.count;
}

/* ---- gmr/sim/cuda_sim.h ---------------------------------------------------- */

gmr_status gmr_cuda_sim_configure_vmm(const gmr_cuda_sim_vmm_config *cfg) {
  if (cfg == NULL) return GMR_ERR_INVALID_ARGUMENT;
  size_t page = gmr__sim_vmm_host_page_bytes();
  size_t g = cfg->granularity_bytes, r = cfg->recommended_granularity_bytes;
  if (g == 0 || (g & (g - 1)) != 0 || g % page != 0 || r == 0 || r % g != 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  if (!gmr__sim_enabled()) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (gmr__sim_vmm_live_count() > 0) {
    st = GMR_ERR_BUSY;
  } else {
    /* Backing files were sized with the old granularity. */
    for (int d = 0; d < SIM_MAX_DEVICES; ++d) {
      if (gmr__sim_vmm.device[d].open) close(gmr__sim_vmm.device[d].fd);
      free(gmr__sim_vmm.device[d].free_ranges);
      memset(&gmr__sim_vmm.device[d], 0, sizeof gmr__sim_vmm.device[d]);
    }
    gmr__sim_vmm.config = *cfg;
    gmr__sim_vmm.configured = true;
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_vmm_query(const void *ptr, gmr_cuda_sim_vmm_mapping *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  if (!gmr__sim_enabled()) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    uintptr_t addr = (uintptr_t)ptr;
    out->reserved = gmr__sim_vmm_reservation_holding(addr, 1) != NULL;
    const sim_mapping *m = gmr__sim_vmm_mapping_containing(addr);
    if (m != NULL) {
      out->mapped = true;
      out->base = (void *)m->addr;
      out->bytes = m->bytes;
      out->device = m->physical->device;
      out->access_device_mask = m->access_mask;
      out->physical_id = m->physical->id;
      out->handle_types = m->physical->handle_types;
    }
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_get_vmm_usage(gmr_cuda_sim_vmm_usage *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  if (!gmr__sim_enabled()) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    out->reservation_count = gmr__sim_vmm.reservation_count;
    for (size_t i = 0; i < gmr__sim_vmm.reservation_count; ++i) {
      out->reserved_bytes += gmr__sim_vmm.reservations[i].bytes;
    }
    size_t cursor = 0;
    uint64_t key = 0, value = 0;
    while (gmr__u64_map_next(&gmr__sim_vmm.physicals, &cursor, &key, &value)) {
      out->physical_count++;
      out->physical_bytes += ((const sim_physical *)(uintptr_t)value)->bytes;
    }
    out->unmap_under_work_count = gmr__sim_vmm.unmap_under_work_count;
    out->mapping_count = gmr__sim_vmm.mapping_count;
    for (size_t i = 0; i < gmr__sim_vmm.mapping_count; ++i)
      out->mapped_bytes += gmr__sim_vmm.mappings[i].bytes;
  }
  gmr__sim_unlock();
  return st;
}
