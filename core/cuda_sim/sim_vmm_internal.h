/*
 * core/cuda_sim/sim_vmm_internal.h (internal): the state the simulation of
 * the driver's VMM calls shares between its files, under the simulation's
 * one lock (sim_internal.h):
 *   sim_vmm.c           attributes, granularity, peers, error names, the ops
 *                       table, reset and the public control functions
 *   sim_vmm_physical.c  physical memory: one sparse memfd per device,
 *                       cuMemCreate / cuMemRelease
 *   sim_vmm_va.c        reservations and mappings: cuMemAddressReserve /
 *                       Free, cuMemMap / Unmap, cuMemSetAccess,
 *                       cuMemRetainAllocationHandle
 * Physical memory: a physical allocation is a range of its device's backing
 * file (twice the device's capacity, so that ranges of different sizes never
 * fail to fit while capacity remains), punched out (fallocate) when freed,
 * so host memory really goes back. Reservations are PROT_NONE anonymous
 * mappings; cuMemMap replaces part of one with a MAP_SHARED mapping of the
 * range, so two mappings of one allocation share their bytes.
 */
#ifndef GMR_CORE_CUDA_SIM_SIM_VMM_INTERNAL_H_
#define GMR_CORE_CUDA_SIM_SIM_VMM_INTERNAL_H_

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_sim/sim_internal.h"
#include "core/cuda_vmm.h"
#include "util/u64_map.h"
#include "gmr/sim/cuda_sim.h"

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

typedef struct sim_vmm_state {
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
  size_t unmap_under_work_count; /* cuMemUnmap over pending work (gmr_cuda_sim_vmm_usage) */
} sim_vmm_state;

extern sim_vmm_state gmr__sim_vmm;

/* ---- sim_vmm.c: shared helpers ---- */
gmr_cuda_sim_vmm_config gmr__sim_vmm_config(void);
size_t gmr__sim_vmm_host_page_bytes(void);
/* Grow a dynamic array so it holds one more element. */
bool gmr__sim_vmm_reserve_one(void **items, size_t *capacity, size_t count, size_t item_bytes);
bool gmr__sim_vmm_valid_device(int d);
bool gmr__sim_vmm_multiple_of(size_t x, size_t unit);
/* Count and inject like every call; refuse a potentially unsafe call during a
 * capture it would break. */
CUresult gmr__sim_vmm_enter(gmr_cuda_call call, bool unsafe_in_capture);
/* The checks cuMemCreate and cuMemGetAllocationGranularity share. */
CUresult gmr__sim_vmm_check_prop(const gmr__vmm_prop *prop);

/* ---- sim_vmm_physical.c ---- */
bool gmr__sim_vmm_device_open(int d);
bool gmr__sim_vmm_device_take(int d, size_t bytes, size_t *offset);
/* Give a range back (merged with its neighbours) and its host pages too. */
void gmr__sim_vmm_device_give(int d, size_t offset, size_t bytes);
/* Free a physical allocation once it is released and no longer mapped. */
void gmr__sim_vmm_physical_maybe_destroy(sim_physical *p);
sim_physical *gmr__sim_vmm_physical_of(CUmemGenericAllocationHandle handle);
CUresult gmr__sim_vmm_create(CUmemGenericAllocationHandle *handle, size_t bytes,
                             const gmr__vmm_prop *prop);
CUresult gmr__sim_vmm_release(CUmemGenericAllocationHandle handle);

/* ---- sim_vmm_va.c ---- */
/* The reservation holding [addr, addr + bytes), or NULL. */
sim_reservation *gmr__sim_vmm_reservation_holding(uintptr_t addr, size_t bytes);
/* Index of the first mapping that ends after `addr`. */
size_t gmr__sim_vmm_mapping_lower_bound(uintptr_t addr);
sim_mapping *gmr__sim_vmm_mapping_containing(uintptr_t addr);
bool gmr__sim_vmm_range_has_mapping(uintptr_t addr, size_t bytes);
/* Turn [addr, addr + bytes) back into reserved, inaccessible addresses. */
bool gmr__sim_vmm_remap_reserved(uintptr_t addr, size_t bytes);
CUresult gmr__sim_vmm_address_reserve(CUdeviceptr *ptr, size_t bytes, size_t alignment_bytes);
CUresult gmr__sim_vmm_address_free(CUdeviceptr ptr, size_t bytes);
CUresult gmr__sim_vmm_map(CUdeviceptr ptr, size_t bytes, CUmemGenericAllocationHandle handle);
CUresult gmr__sim_vmm_unmap(CUdeviceptr ptr, size_t bytes);
CUresult gmr__sim_vmm_set_access(CUdeviceptr ptr, size_t bytes, const int *devices,
                                 size_t device_count);
CUresult gmr__sim_vmm_retain_allocation_handle(CUmemGenericAllocationHandle *handle,
                                               CUdeviceptr ptr);

#endif /* GMR_CORE_CUDA_SIM_SIM_VMM_INTERNAL_H_ */
