/*
 * core/cuda_sim/sim_vmm.c (internal): the simulation of the driver's virtual
 * memory management calls (see cuda_vmm.h and the VMM section of
 * gmr/cuda_sim.h), and its public control functions.
 *
 * Physical memory: one memfd per device, created at the device's first
 * cuMemCreate, sparse and twice the device's capacity (so that ranges of
 * different sizes never fail to fit while capacity remains); a physical
 * allocation is a range of it, punched out (fallocate) when freed, so host
 * memory really goes back. Reservations are PROT_NONE anonymous mappings;
 * cuMemMap replaces part of one with a MAP_SHARED mapping of the range, so
 * two mappings of one allocation share their bytes. Everything runs under
 * the simulation's one lock (sim_internal.h).
 */
/* memfd_create, fallocate and MAP_ANONYMOUS are GNU/Linux, not C11. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cuda_sim/sim_internal.h"
#include "core/cuda_vmm.h"
#include "core/u64_map.h"

#define SIM_MAX_DEVICES 16

typedef struct sim_range {
  size_t offset;
  size_t bytes;
} sim_range;

/* One device's backing file and its free ranges (sorted by offset). */
typedef struct sim_vmm_device {
  bool open;
  int fd;
  sim_range *free_ranges;
  size_t free_count;
  size_t free_capacity;
} sim_vmm_device;

typedef struct sim_physical {
  int device;
  size_t offset;
  size_t bytes;
  uint64_t id;
  unsigned handle_types; /* requested at cuMemCreate */
  unsigned refs;      /* cuMemCreate and retains, less releases */
  unsigned map_count; /* live mappings */
} sim_physical;

typedef struct sim_mapping {
  uintptr_t addr;
  size_t bytes;
  sim_physical *physical;
  uint32_t access_mask;
} sim_mapping;

typedef struct sim_reservation {
  uintptr_t base;
  size_t bytes;
} sim_reservation;

static struct {
  bool configured; /* false: GMR_CUDA_SIM_VMM_CONFIG_DEFAULT applies */
  gmr_cuda_sim_vmm_config config;
  sim_vmm_device device[SIM_MAX_DEVICES];
  gmr__u64_map physicals; /* handle -> sim_physical * */
  sim_mapping *mappings;  /* sorted by address */
  size_t mapping_count;
  size_t mapping_capacity;
  sim_reservation *reservations; /* sorted by address */
  size_t reservation_count;
  size_t reservation_capacity;
  uint64_t next_physical_id;
} vmm;

static gmr_cuda_sim_vmm_config config(void) {
  gmr_cuda_sim_vmm_config c = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  return vmm.configured ? vmm.config : c;
}

static size_t host_page_bytes(void) {
  long n = sysconf(_SC_PAGESIZE);
  return n > 0 ? (size_t)n : 4096u;
}

/* Grow a dynamic array so it holds one more element. */
static bool reserve_one(void **items, size_t *capacity, size_t count, size_t item_bytes) {
  if (count < *capacity) return true;
  size_t n = *capacity == 0 ? 16 : *capacity * 2;
  void *p = realloc(*items, n * item_bytes);
  if (p == NULL) return false;
  *items = p;
  *capacity = n;
  return true;
}

/* ---- physical memory of one device --------------------------------------- */

static bool device_open(int d) {
  sim_vmm_device *dev = &vmm.device[d];
  if (dev->open) return true;
  size_t gran = config().granularity_bytes;
  size_t cap = gmr__sim_device_capacity_bytes();
  size_t bytes = ((cap + gran - 1) / gran) * gran * 2;
  int fd = memfd_create("gmr-sim-device-memory", MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, (off_t)bytes) != 0 ||
      !reserve_one((void **)&dev->free_ranges, &dev->free_capacity, 0, sizeof(sim_range))) {
    close(fd);
    return false;
  }
  dev->fd = fd;
  dev->open = true;
  dev->free_ranges[0] = (sim_range){0, bytes};
  dev->free_count = 1;
  return true;
}

static bool device_take(int d, size_t bytes, size_t *offset) {
  sim_vmm_device *dev = &vmm.device[d];
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
static void device_give(int d, size_t offset, size_t bytes) {
  sim_vmm_device *dev = &vmm.device[d];
  (void)fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)bytes);
  size_t i = 0;
  while (i < dev->free_count && dev->free_ranges[i].offset < offset) i++;
  bool joins_prev = i > 0 && dev->free_ranges[i - 1].offset + dev->free_ranges[i - 1].bytes == offset;
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
  } else if (reserve_one((void **)&dev->free_ranges, &dev->free_capacity, dev->free_count,
                         sizeof(sim_range))) {
    memmove(&dev->free_ranges[i + 1], &dev->free_ranges[i],
            (dev->free_count - i) * sizeof(sim_range));
    dev->free_ranges[i] = (sim_range){offset, bytes};
    dev->free_count++;
  }
  /* else: host memory ran out; the range is lost to this run, no harm done */
}

/* Free a physical allocation once it is released and no longer mapped. */
static void physical_maybe_destroy(sim_physical *p) {
  if (p->refs > 0 || p->map_count > 0) return;
  device_give(p->device, p->offset, p->bytes);
  gmr__sim_device_uncharge(p->device, p->bytes);
  gmr__u64_map_remove(&vmm.physicals, (uint64_t)(uintptr_t)p, NULL);
  free(p);
}

static sim_physical *physical_of(CUmemGenericAllocationHandle handle) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&vmm.physicals, (uint64_t)handle, &v)) return NULL;
  return (sim_physical *)(uintptr_t)v;
}

/* ---- reservations and mappings -------------------------------------------- */

/* The reservation holding [addr, addr + bytes), or NULL. */
static sim_reservation *reservation_holding(uintptr_t addr, size_t bytes) {
  for (size_t i = 0; i < vmm.reservation_count; ++i) {
    sim_reservation *r = &vmm.reservations[i];
    if (addr >= r->base && addr - r->base <= r->bytes && bytes <= r->bytes - (addr - r->base)) {
      return r;
    }
  }
  return NULL;
}

/* Index of the first mapping that ends after `addr`. */
static size_t mapping_lower_bound(uintptr_t addr) {
  size_t lo = 0, hi = vmm.mapping_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (vmm.mappings[mid].addr + vmm.mappings[mid].bytes <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static sim_mapping *mapping_containing(uintptr_t addr) {
  size_t i = mapping_lower_bound(addr);
  if (i < vmm.mapping_count && vmm.mappings[i].addr <= addr) return &vmm.mappings[i];
  return NULL;
}

static bool range_has_mapping(uintptr_t addr, size_t bytes) {
  size_t i = mapping_lower_bound(addr);
  return i < vmm.mapping_count && vmm.mappings[i].addr < addr + bytes;
}

/* Turn [addr, addr + bytes) back into reserved, inaccessible addresses. */
static bool remap_reserved(uintptr_t addr, size_t bytes) {
  void *p = mmap((void *)addr, bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p != MAP_FAILED;
}

static bool valid_device(int d) { return d >= 0 && d < gmr__sim_device_count(); }

static bool multiple_of(size_t x, size_t unit) { return unit != 0 && x % unit == 0; }

/* Count and inject like every call; refuse a potentially unsafe call during a
 * capture it would break. */
static CUresult enter(gmr_cuda_call call, bool unsafe_in_capture) {
  cudaError_t err = gmr__sim_enter_call(call);
  if (err != cudaSuccess) return (CUresult)err;
  if (unsafe_in_capture && gmr__sim_capture_forbids_unsafe_call()) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

/* ---- the ops ----------------------------------------------------------- */

static CUresult sim_init(int device) {
  gmr__sim_lock();
  CUresult st = valid_device(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
  gmr__sim_unlock();
  return st;
}

static CUresult sim_device_get_attribute(int *value, CUdevice_attribute attr, int device) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_DEVICE_GET_ATTRIBUTE_DRIVER, false);
  if (st == CUDA_SUCCESS && !valid_device(device)) st = CUDA_ERROR_INVALID_DEVICE;
  if (st == CUDA_SUCCESS) {
    gmr_cuda_sim_vmm_config c = config();
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

/* The checks cuMemCreate and cuMemGetAllocationGranularity share. */
static CUresult check_prop(const gmr__vmm_prop *prop) {
  gmr_cuda_sim_vmm_config c = config();
  if (prop == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(prop->device)) return CUDA_ERROR_INVALID_DEVICE;
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
  CUresult st = enter(GMR_CUDA_CALL_MEM_GET_ALLOCATION_GRANULARITY, false);
  if (st == CUDA_SUCCESS) st = check_prop(prop);
  if (st == CUDA_SUCCESS) {
    gmr_cuda_sim_vmm_config c = config();
    *granularity_bytes = recommended ? c.recommended_granularity_bytes : c.granularity_bytes;
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_address_reserve(CUdeviceptr *ptr, size_t bytes, size_t alignment_bytes) {
  gmr__sim_lock();
  *ptr = 0;
  CUresult st = enter(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, true);
  size_t gran = config().granularity_bytes;
  if (st == CUDA_SUCCESS && (bytes == 0 || !multiple_of(bytes, host_page_bytes()) ||
                             (alignment_bytes & (alignment_bytes - 1)) != 0)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS &&
      !reserve_one((void **)&vmm.reservations, &vmm.reservation_capacity, vmm.reservation_count,
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
        while (i < vmm.reservation_count && vmm.reservations[i].base < start) i++;
        memmove(&vmm.reservations[i + 1], &vmm.reservations[i],
                (vmm.reservation_count - i) * sizeof(sim_reservation));
        vmm.reservations[i] = (sim_reservation){start, bytes};
        vmm.reservation_count++;
        *ptr = (CUdeviceptr)start;
      }
    }
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_address_free(CUdeviceptr ptr, size_t bytes) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_MEM_ADDRESS_FREE, true);
  size_t i = 0;
  while (i < vmm.reservation_count && vmm.reservations[i].base != (uintptr_t)ptr) i++;
  if (st == CUDA_SUCCESS && (i == vmm.reservation_count || vmm.reservations[i].bytes != bytes)) {
    st = CUDA_ERROR_INVALID_VALUE; /* ptr and size must be exactly a reservation */
  }
  /* CUDA leaves freeing mapped addresses undefined; refuse so tests notice. */
  if (st == CUDA_SUCCESS && range_has_mapping((uintptr_t)ptr, bytes)) st = CUDA_ERROR_INVALID_VALUE;
  if (st == CUDA_SUCCESS) {
    munmap((void *)(uintptr_t)ptr, bytes);
    memmove(&vmm.reservations[i], &vmm.reservations[i + 1],
            (vmm.reservation_count - i - 1) * sizeof(sim_reservation));
    vmm.reservation_count--;
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_create(CUmemGenericAllocationHandle *handle, size_t bytes,
                           const gmr__vmm_prop *prop) {
  gmr__sim_lock();
  *handle = 0;
  CUresult st = enter(GMR_CUDA_CALL_MEM_CREATE, true);
  if (st == CUDA_SUCCESS) st = check_prop(prop);
  if (st == CUDA_SUCCESS && (bytes == 0 || !multiple_of(bytes, config().granularity_bytes))) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  sim_physical *p = NULL;
  if (st == CUDA_SUCCESS) {
    p = calloc(1, sizeof *p);
    if (p == NULL || !device_open(prop->device) ||
        !gmr__u64_map_reserve(&vmm.physicals, vmm.physicals.count + 1)) {
      st = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (st == CUDA_SUCCESS && !gmr__sim_device_charge(prop->device, bytes)) {
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS && !device_take(prop->device, bytes, &p->offset)) {
    gmr__sim_device_uncharge(prop->device, bytes);
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS) {
    p->device = prop->device;
    p->bytes = bytes;
    p->handle_types = prop->handle_types;
    p->id = ++vmm.next_physical_id;
    p->refs = 1;
    (void)gmr__u64_map_put(&vmm.physicals, (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
  } else {
    free(p);
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_release(CUmemGenericAllocationHandle handle) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_MEM_RELEASE, true);
  sim_physical *p = physical_of(handle);
  if (st == CUDA_SUCCESS && (p == NULL || p->refs == 0)) {
    gmr__sim_count_stale_handle(); /* undefined behaviour on a real device */
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS) {
    p->refs--;
    physical_maybe_destroy(p);
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_map(CUdeviceptr ptr, size_t bytes, CUmemGenericAllocationHandle handle) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_MEM_MAP, true);
  sim_physical *p = physical_of(handle);
  size_t gran = config().granularity_bytes;
  uintptr_t addr = (uintptr_t)ptr;
  if (st == CUDA_SUCCESS && (p == NULL || p->refs == 0)) {
    gmr__sim_count_stale_handle();
    st = CUDA_ERROR_INVALID_VALUE;
  }
  /* Address and size on the granularity, within the allocation, inside a
   * reservation, over addresses nothing is mapped at. */
  if (st == CUDA_SUCCESS &&
      (bytes == 0 || !multiple_of(bytes, gran) || !multiple_of(addr, gran) || bytes > p->bytes ||
       reservation_holding(addr, bytes) == NULL || range_has_mapping(addr, bytes))) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS &&
      !reserve_one((void **)&vmm.mappings, &vmm.mapping_capacity, vmm.mapping_count,
                   sizeof(sim_mapping))) {
    st = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (st == CUDA_SUCCESS) {
    void *m = mmap((void *)addr, bytes, PROT_NONE, MAP_SHARED | MAP_FIXED,
                   vmm.device[p->device].fd, (off_t)p->offset);
    if (m == MAP_FAILED) {
      st = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      size_t i = mapping_lower_bound(addr);
      memmove(&vmm.mappings[i + 1], &vmm.mappings[i],
              (vmm.mapping_count - i) * sizeof(sim_mapping));
      vmm.mappings[i] = (sim_mapping){addr, bytes, p, 0};
      vmm.mapping_count++;
      p->map_count++;
    }
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_unmap(CUdeviceptr ptr, size_t bytes) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_MEM_UNMAP, true);
  uintptr_t addr = (uintptr_t)ptr;
  sim_mapping *m = mapping_containing(addr);
  /* Only a whole mapping, never part of one. */
  if (st == CUDA_SUCCESS && (m == NULL || m->addr != addr || m->bytes != bytes)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  if (st == CUDA_SUCCESS && !remap_reserved(addr, bytes)) st = CUDA_ERROR_OUT_OF_MEMORY;
  if (st == CUDA_SUCCESS) {
    sim_physical *p = m->physical;
    size_t i = (size_t)(m - vmm.mappings);
    memmove(&vmm.mappings[i], &vmm.mappings[i + 1],
            (vmm.mapping_count - i - 1) * sizeof(sim_mapping));
    vmm.mapping_count--;
    p->map_count--;
    physical_maybe_destroy(p);
  }
  gmr__sim_unlock();
  return st;
}

static CUresult sim_set_access(CUdeviceptr ptr, size_t bytes, const int *devices,
                               size_t device_count) {
  gmr__sim_lock();
  CUresult st = enter(GMR_CUDA_CALL_MEM_SET_ACCESS, true);
  uintptr_t addr = (uintptr_t)ptr;
  gmr_cuda_sim_vmm_config c = config();
  uint32_t mask = 0;
  if (st == CUDA_SUCCESS && (devices == NULL || device_count == 0 || bytes == 0)) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; st == CUDA_SUCCESS && i < device_count; ++i) {
    if (!valid_device(devices[i])) st = CUDA_ERROR_INVALID_DEVICE;
    if (st == CUDA_SUCCESS) mask |= 1u << devices[i];
  }
  /* The range must be mapped throughout, starting and ending on mapping
   * boundaries; peers must be able to reach the memory. */
  size_t first = mapping_lower_bound(addr);
  size_t last = first;
  if (st == CUDA_SUCCESS) {
    uintptr_t at = addr;
    while (last < vmm.mapping_count && vmm.mappings[last].addr == at && at < addr + bytes) {
      at += vmm.mappings[last].bytes;
      last++;
    }
    if (at != addr + bytes) st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = first; st == CUDA_SUCCESS && i < last; ++i) {
    if ((mask & ~(1u << vmm.mappings[i].physical->device)) != 0 && !c.peer_access_supported) {
      st = CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  if (st == CUDA_SUCCESS &&
      mprotect((void *)addr, bytes, PROT_READ | PROT_WRITE) != 0) {
    st = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = first; st == CUDA_SUCCESS && i < last; ++i) vmm.mappings[i].access_mask = mask;
  gmr__sim_unlock();
  return st;
}

static CUresult sim_retain_allocation_handle(CUmemGenericAllocationHandle *handle,
                                             CUdeviceptr ptr) {
  gmr__sim_lock();
  *handle = 0;
  CUresult st = enter(GMR_CUDA_CALL_MEM_RETAIN_ALLOCATION_HANDLE, false);
  sim_mapping *m = mapping_containing((uintptr_t)ptr);
  if (st == CUDA_SUCCESS && m == NULL) st = CUDA_ERROR_INVALID_VALUE;
  if (st == CUDA_SUCCESS) {
    m->physical->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->physical;
  }
  gmr__sim_unlock();
  return st;
}

static cudaError_t sim_device_can_access_peer(int *can_access, int device, int peer) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_DEVICE_CAN_ACCESS_PEER);
  if (err == cudaSuccess && (!valid_device(device) || !valid_device(peer))) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess) *can_access = device != peer && config().peer_access_supported ? 1 : 0;
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
    .address_reserve = sim_address_reserve,
    .address_free = sim_address_free,
    .create = sim_create,
    .release = sim_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .set_access = sim_set_access,
    .retain_allocation_handle = sim_retain_allocation_handle,
    .get_address_range = gmr__sim_get_address_range, /* sim_address_range.c */
    .device_can_access_peer = sim_device_can_access_peer,
    .error_name = sim_error_name,
};

/* ---- hooks for cuda_sim.c and sim_state.c (lock held) ---------------------------------- */

void gmr__sim_vmm_reset(void) {
  for (size_t i = 0; i < vmm.reservation_count; ++i) {
    munmap((void *)vmm.reservations[i].base, vmm.reservations[i].bytes);
  }
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&vmm.physicals, &cursor, &key, &value)) {
    free((void *)(uintptr_t)value);
  }
  gmr__u64_map_clear(&vmm.physicals);
  for (int d = 0; d < SIM_MAX_DEVICES; ++d) {
    if (vmm.device[d].open) close(vmm.device[d].fd);
    free(vmm.device[d].free_ranges);
  }
  free(vmm.mappings);
  free(vmm.reservations);
  uint64_t next_id = vmm.next_physical_id;
  memset(&vmm, 0, sizeof vmm);
  vmm.next_physical_id = next_id; /* ids stay unique for the process */
}

bool gmr__sim_vmm_mapping_extent(uintptr_t addr, uintptr_t *base, size_t *bytes) {
  const sim_mapping *m = mapping_containing(addr);
  if (m == NULL) return false;
  *base = m->addr;
  *bytes = m->bytes;
  return true;
}

size_t gmr__sim_vmm_live_count(void) {
  return vmm.reservation_count + vmm.physicals.count;
}

/* ---- gmr/cuda_sim.h ---------------------------------------------------- */

gmr_status gmr_cuda_sim_configure_vmm(const gmr_cuda_sim_vmm_config *cfg) {
  if (cfg == NULL) return GMR_ERR_INVALID_ARGUMENT;
  size_t page = host_page_bytes();
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
      if (vmm.device[d].open) close(vmm.device[d].fd);
      free(vmm.device[d].free_ranges);
      memset(&vmm.device[d], 0, sizeof vmm.device[d]);
    }
    vmm.config = *cfg;
    vmm.configured = true;
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
    out->reserved = reservation_holding(addr, 1) != NULL;
    const sim_mapping *m = mapping_containing(addr);
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
    out->reservation_count = vmm.reservation_count;
    for (size_t i = 0; i < vmm.reservation_count; ++i) {
      out->reserved_bytes += vmm.reservations[i].bytes;
    }
    size_t cursor = 0;
    uint64_t key = 0, value = 0;
    while (gmr__u64_map_next(&vmm.physicals, &cursor, &key, &value)) {
      out->physical_count++;
      out->physical_bytes += ((const sim_physical *)(uintptr_t)value)->bytes;
    }
    out->mapping_count = vmm.mapping_count;
    for (size_t i = 0; i < vmm.mapping_count; ++i) out->mapped_bytes += vmm.mappings[i].bytes;
  }
  gmr__sim_unlock();
  return st;
}
