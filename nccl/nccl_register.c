/*
 * nccl/nccl_register.c: registrations of pools and buffers with a
 * communicator, one ncclCommRegister per physical allocation ("segment")
 * the driver reports (gmr/nccl/nccl.h).
 *
 * A registration mirrors NCCL: its segment list holds exactly the handles
 * NCCL has registered for it, in address order. Registering a range adds
 * the segments it lacks; deregistering removes those it has; a failure
 * part way leaves the list true to NCCL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_vmm.h"
#include "core/failure.h"
#include "core/stats.h"
#include "nccl/nccl_internal.h"

typedef struct segment {
  uintptr_t addr;
  size_t bytes;
  void *handle; /* ncclCommRegister's */
  bool fresh;   /* added by the register_range call in progress */
} segment;

struct gmr_nccl_registration {
  gmr_nccl_comm *comm;
  gmr_chunk_listener_adaptor *adaptor; /* the pool's; NULL for a buffer */
  uint32_t listener_id;
  pthread_mutex_t lock;
  /* Under the lock: */
  segment *segments; /* address order */
  size_t segment_count;
  size_t segment_capacity;
  size_t chunk_count;
  size_t registered_bytes;
  uint64_t register_count;
  uint64_t deregister_count;
  uint64_t failure_count;
};

/* Index of the first segment at or after addr. Pre: lock held. */
static size_t lower_bound(const gmr_nccl_registration *reg, uintptr_t addr) {
  size_t lo = 0, hi = reg->segment_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (reg->segments[mid].addr < addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static bool insert_segment(gmr_nccl_registration *reg, segment s) {
  if (reg->segment_count == reg->segment_capacity) {
    size_t cap = reg->segment_capacity == 0 ? 16 : 2 * reg->segment_capacity;
    segment *grown = realloc(reg->segments, cap * sizeof *grown);
    if (grown == NULL) return false;
    reg->segments = grown;
    reg->segment_capacity = cap;
  }
  size_t i = lower_bound(reg, s.addr);
  memmove(&reg->segments[i + 1], &reg->segments[i], (reg->segment_count - i) * sizeof s);
  reg->segments[i] = s;
  reg->segment_count++;
  reg->registered_bytes += s.bytes;
  return true;
}

static void remove_segment(gmr_nccl_registration *reg, size_t i) {
  reg->registered_bytes -= reg->segments[i].bytes;
  memmove(&reg->segments[i], &reg->segments[i + 1],
          (reg->segment_count - i - 1) * sizeof reg->segments[0]);
  reg->segment_count--;
}

/* ncclCommDeregister of segment i; removed from the list on success. */
static gmr_status deregister_at(gmr_nccl_registration *reg, size_t i, gmr_failure *failure) {
  const gmr_nccl_library *lib = reg->comm->lib;
  gmr_nccl_result r = lib->api.comm_deregister(reg->comm->handle, reg->segments[i].handle);
  if (r != GMR_NCCL_SUCCESS) {
    reg->failure_count++;
    char what[80];
    snprintf(what, sizeof what, "(%p, %zu bytes)", (void *)reg->segments[i].addr,
             reg->segments[i].bytes);
    return gmr__nccl_fail(lib, reg->comm->handle, failure, "ncclCommDeregister", r, what);
  }
  reg->deregister_count++;
  remove_segment(reg, i);
  return GMR_OK;
}

/* Deregister every segment inside [addr, addr + bytes). Pre: lock held,
 * the communicator's device current. Stops at the first failure. */
static gmr_status deregister_range(gmr_nccl_registration *reg, uintptr_t addr, size_t bytes,
                                   gmr_failure *failure) {
  size_t i = lower_bound(reg, addr);
  while (i < reg->segment_count && reg->segments[i].addr < addr + bytes) {
    gmr_status st = deregister_at(reg, i, failure); /* on success i names the next one */
    if (st != GMR_OK) return st;
  }
  return GMR_OK;
}

/* Register [addr, addr + bytes) per physical allocation, skipping segments
 * registered already. Pre: lock held, the communicator's device current.
 * On failure the segments this call added are deregistered again. */
static gmr_status register_range(gmr_nccl_registration *reg, uintptr_t addr, size_t bytes,
                                 gmr_failure *failure) {
  const gmr_nccl_comm *comm = reg->comm;
  const gmr__cuda_vmm_ops *vmm = gmr__cuda_vmm(comm->cuda);
  gmr_status st = GMR_OK;
  size_t added = 0;
  uintptr_t added_from = addr;
  uintptr_t end = addr + bytes;
  for (uintptr_t at = addr; at < end && st == GMR_OK;) {
    CUdeviceptr base = 0;
    size_t extent = 0;
    CUresult cu = vmm->get_address_range(&base, &extent, (CUdeviceptr)at);
    if (cu != CUDA_SUCCESS) {
      reg->failure_count++;
      st = gmr__failure_set(failure, GMR_ERR_UNKNOWN_POINTER,
                            "nccl: %p (byte %zu of [%p, +%zu)) is not device memory the driver "
                            "knows (cuMemGetAddressRange: %s): freed, or never allocated?",
                            (void *)at, (size_t)(at - addr), (void *)addr, bytes,
                            vmm->error_name(cu));
      break;
    }
    uintptr_t seg_end = (uintptr_t)base + extent < end ? (uintptr_t)base + extent : end;
    size_t i = lower_bound(reg, at);
    if (i < reg->segment_count && reg->segments[i].addr == at) {
      at = seg_end; /* registered already (an earlier refused release) */
      continue;
    }
    void *handle = NULL;
    gmr_nccl_result r =
        comm->lib->api.comm_register(comm->handle, (void *)at, seg_end - at, &handle);
    if (r != GMR_NCCL_SUCCESS) {
      reg->failure_count++;
      char what[96];
      snprintf(what, sizeof what, "(%p, %zu bytes; rank %d, device %d)", (void *)at,
               (size_t)(seg_end - at), comm->rank, comm->device);
      st = gmr__nccl_fail(comm->lib, comm->handle, failure, "ncclCommRegister", r, what);
      break;
    }
    reg->register_count++;
    if (!insert_segment(reg, (segment){at, seg_end - at, handle, true})) {
      (void)comm->lib->api.comm_deregister(comm->handle, handle);
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
      break;
    }
    if (added++ == 0) added_from = at;
    at = seg_end;
  }
  /* Settle this call's segments: kept on success, deregistered again on
   * failure (those registered before the call stay). */
  gmr_failure ignored = GMR_FAILURE_INIT;
  for (size_t i = lower_bound(reg, added_from); added > 0 && i < reg->segment_count &&
                                                reg->segments[i].addr < end;) {
    if (!reg->segments[i].fresh) {
      i++;
      continue;
    }
    reg->segments[i].fresh = false;
    gmr__failure_reset(&ignored);
    if (st == GMR_OK || deregister_at(reg, i, &ignored) != GMR_OK) i++;
  }
  return st;
}

/* Run `fn` on a range with the lock held and the communicator's device
 * current (restored after). */
typedef gmr_status range_fn(gmr_nccl_registration *reg, uintptr_t addr, size_t bytes,
                            gmr_failure *failure);

static gmr_status on_device(gmr_nccl_registration *reg, range_fn *fn, uintptr_t addr,
                            size_t bytes, int chunk_delta, gmr_failure *failure) {
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(reg->comm->cuda, reg->comm->device, &saved);
  /* cuMemGetAddressRange needs a current context: cudaSetDevice binds the
   * device's primary context to this thread (CUDA 12), also when the device
   * was current already but this thread never used it. */
  if (err == cudaSuccess && saved == -1) err = reg->comm->cuda->set_device(reg->comm->device);
  if (err != cudaSuccess) {
    gmr__cuda_device_leave(reg->comm->cuda, saved);
    return gmr__cuda_fail(failure, "cudaSetDevice", err);
  }
  pthread_mutex_lock(&reg->lock);
  gmr_status st = fn(reg, addr, bytes, failure);
  if (st == GMR_OK) reg->chunk_count += (size_t)chunk_delta;
  pthread_mutex_unlock(&reg->lock);
  gmr__cuda_device_leave(reg->comm->cuda, saved);
  return st;
}

static gmr_status chunk_acquired(void *ctx, void *addr, size_t bytes, gmr_failure *failure) {
  return on_device(ctx, register_range, (uintptr_t)addr, bytes, 1, failure);
}

static gmr_status chunk_releasing(void *ctx, void *addr, size_t bytes, gmr_failure *failure) {
  return on_device(ctx, deregister_range, (uintptr_t)addr, bytes, -1, failure);
}

static gmr_nccl_registration *registration_new(gmr_nccl_comm *comm) {
  gmr_nccl_registration *reg = calloc(1, sizeof *reg);
  if (reg == NULL) return NULL;
  reg->comm = comm;
  pthread_mutex_init(&reg->lock, NULL);
  return reg;
}

static void registration_free(gmr_nccl_registration *reg) {
  free(reg->segments);
  pthread_mutex_destroy(&reg->lock);
  free(reg);
}

/* Room in the communicator's list for one more. Pre: comm lock held. */
static bool comm_reserve(gmr_nccl_comm *comm) {
  if (comm->registration_count < comm->registration_capacity) return true;
  size_t cap = comm->registration_capacity == 0 ? 4 : 2 * comm->registration_capacity;
  gmr_nccl_registration **grown = realloc(comm->registrations, cap * sizeof *grown);
  if (grown == NULL) return false;
  comm->registrations = grown;
  comm->registration_capacity = cap;
  return true;
}

/* The end of a register call: a registration that worked joins the
 * communicator's list (room reserved) and goes to *out; else it is freed.
 * Unlocks the communicator. Returns `st`. */
static gmr_status finish_registration(gmr_nccl_comm *comm, gmr_nccl_registration *reg,
                                      gmr_status st, gmr_nccl_registration **out) {
  if (st == GMR_OK) {
    comm->registrations[comm->registration_count++] = reg;
    *out = reg;
  } else if (reg != NULL) {
    registration_free(reg);
  }
  pthread_mutex_unlock(&comm->lock);
  return st;
}

static gmr_status nccl_register_pool_impl(gmr_nccl_comm *comm, gmr_resource *stack,
                                          gmr_nccl_registration **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out != NULL) *out = NULL;
  if (comm == NULL || stack == NULL || out == NULL) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: a NULL argument");
  }
  gmr_chunk_listener_adaptor *adaptor =
      gmr_chunk_listener_adaptor_from_resource(gmr_resource_find(stack, "chunk_listener_adaptor"));
  if (adaptor == NULL) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "nccl: the stack headed by %s has no chunk_listener layer to follow "
                            "its chunks; build it as `pool > chunk_listener > cumem(nccl_ready="
                            "true)`",
                            gmr_resource_get_type_name(stack));
  }
  pthread_mutex_lock(&comm->lock);
  gmr_status st = GMR_OK;
  for (size_t i = 0; i < comm->registration_count && st == GMR_OK; ++i) {
    if (comm->registrations[i]->adaptor == adaptor) {
      st = gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "nccl: this pool is registered with the communicator of rank %d "
                            "already",
                            comm->rank);
    }
  }
  gmr_nccl_registration *reg = NULL;
  if (st == GMR_OK && (!comm_reserve(comm) || (reg = registration_new(comm)) == NULL)) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  }
  if (st == GMR_OK) {
    reg->adaptor = adaptor;
    gmr_chunk_listener listener = {GMR_CHUNK_LISTENER_VERSION, chunk_acquired, chunk_releasing,
                                   reg};
    st = gmr_chunk_listener_adaptor_add_listener(adaptor, &listener, &reg->listener_id, failure);
  }
  return finish_registration(comm, reg, st, out);
}

gmr_status gmr_nccl_register_pool(gmr_nccl_comm *comm, gmr_resource *stack,
                                  gmr_nccl_registration **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_register_pool_impl(comm, stack, out, f));
}

static gmr_status nccl_register_buffer_impl(gmr_nccl_comm *comm, void *ptr, size_t bytes,
                                            gmr_nccl_registration **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out != NULL) *out = NULL;
  if (comm == NULL || ptr == NULL || bytes == 0 || out == NULL ||
      (uintptr_t)ptr > UINTPTR_MAX - bytes) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "nccl: register_buffer needs a communicator, a buffer and its size");
  }
  pthread_mutex_lock(&comm->lock);
  gmr_nccl_registration *reg = NULL;
  gmr_status st = GMR_OK;
  if (!comm_reserve(comm) || (reg = registration_new(comm)) == NULL) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  }
  if (st == GMR_OK) st = on_device(reg, register_range, (uintptr_t)ptr, bytes, 1, failure);
  return finish_registration(comm, reg, st, out);
}

gmr_status gmr_nccl_register_buffer(gmr_nccl_comm *comm, void *ptr, size_t bytes,
                                    gmr_nccl_registration **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_register_buffer_impl(comm, ptr, bytes, out, f));
}

static gmr_status nccl_deregister_impl(gmr_nccl_registration *reg, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (reg == NULL) return GMR_OK;
  gmr_status st = GMR_OK;
  if (reg->adaptor != NULL) {
    /* The listener's on_releasing deregisters each live chunk. */
    st = gmr_chunk_listener_adaptor_remove_listener(reg->adaptor, reg->listener_id, failure);
  } else {
    st = on_device(reg, deregister_range, 0, UINTPTR_MAX, -1, failure);
  }
  if (st != GMR_OK) return st;
  gmr__nccl_comm_forget(reg->comm, reg);
  registration_free(reg);
  return GMR_OK;
}

gmr_status gmr_nccl_deregister(gmr_nccl_registration *reg, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_deregister_impl(reg, f));
}

bool gmr_nccl_registration_covers(gmr_nccl_registration *reg, const void *ptr, size_t bytes) {
  if (reg == NULL || ptr == NULL || (uintptr_t)ptr > UINTPTR_MAX - bytes) return false;
  uintptr_t addr = (uintptr_t)ptr;
  pthread_mutex_lock(&reg->lock);
  size_t i = lower_bound(reg, addr + 1); /* the first segment starting after addr */
  bool covered = i > 0 && reg->segments[i - 1].addr <= addr &&
                 addr + bytes <= reg->segments[i - 1].addr + reg->segments[i - 1].bytes;
  pthread_mutex_unlock(&reg->lock);
  return covered;
}

gmr_status gmr_nccl_registration_get_stats(gmr_nccl_registration *reg,
                                           gmr_nccl_registration_stats *out) {
  if (reg == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_nccl_registration_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&reg->lock);
  s.chunk_count = reg->chunk_count;
  s.segment_count = reg->segment_count;
  s.registered_bytes = reg->registered_bytes;
  s.register_count = reg->register_count;
  s.deregister_count = reg->deregister_count;
  s.failure_count = reg->failure_count;
  pthread_mutex_unlock(&reg->lock);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
