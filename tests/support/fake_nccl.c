/*
 * tests/support/fake_nccl.c: see fake_nccl.h.
 */
#include "tests/support/fake_nccl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"

#define COMM_MAGIC 0x6e63636cu /* "nccl" */

/* NCCL's opaque communicator, as this fake has it. Kept allocated until
 * reset, so calls on a destroyed one are seen instead of being undefined. */
struct ncclComm {
  uint32_t magic;
  bool alive;
  int device;
  int rank;
  int rank_count;
};

typedef struct fake_registration {
  struct ncclComm *comm;
  uintptr_t addr;
  size_t bytes;
  uint64_t physical_id; /* 0 for memory that is not a VMM mapping */
  uintptr_t extent_base; /* the allocation's start when registered */
} fake_registration;

typedef struct fake_fault {
  uint64_t skip;
  uint64_t count;
  gmr_nccl_result result;
} fake_fault;

static struct {
  pthread_mutex_t lock;
  int version;
  struct ncclComm **comms;
  size_t comm_count;
  fake_registration **regs; /* live registrations; a handle is the pointer */
  size_t reg_count;
  char **violations;
  size_t violation_count;
  fake_fault faults[GMR_TEST_FAKE_NCCL_CALL_COUNT];
  gmr_test_fake_nccl_counts counts;
  uint64_t next_id;
  char last_error[256];
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER, .version = GMR_TEST_FAKE_NCCL_VERSION};

/* ---- helpers (lock held) --------------------------------------------------- */

static void violation(const char *fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char **grown = realloc(fake.violations, (fake.violation_count + 1) * sizeof *grown);
  char *copy = malloc(strlen(text) + 1);
  if (grown == NULL || copy == NULL) abort(); /* a test double may give up */
  memcpy(copy, text, strlen(text) + 1);
  fake.violations = grown;
  fake.violations[fake.violation_count++] = copy;
  snprintf(fake.last_error, sizeof fake.last_error, "%s", text);
}

static bool injected(gmr_test_fake_nccl_call call, gmr_nccl_result *result) {
  fake_fault *f = &fake.faults[call];
  if (f->count == 0) return false;
  if (f->skip > 0) {
    f->skip--;
    return false;
  }
  f->count--;
  *result = f->result;
  snprintf(fake.last_error, sizeof fake.last_error, "injected failure");
  return true;
}

static bool comm_usable(const struct ncclComm *comm, const char *call) {
  bool known = false;
  for (size_t i = 0; i < fake.comm_count && !known; ++i) known = fake.comms[i] == comm;
  if (!known || comm->magic != COMM_MAGIC) {
    violation("%s on %p, which is no communicator", call, (const void *)comm);
    return false;
  }
  if (!comm->alive) {
    violation("%s on the destroyed communicator of rank %d (a use after free in NCCL)", call,
              comm->rank);
    return false;
  }
  return true;
}

static struct ncclComm *comm_new(int device, int rank, int rank_count) {
  struct ncclComm *c = calloc(1, sizeof *c);
  struct ncclComm **grown = realloc(fake.comms, (fake.comm_count + 1) * sizeof *grown);
  if (c == NULL || grown == NULL) abort();
  *c = (struct ncclComm){COMM_MAGIC, true, device, rank, rank_count};
  fake.comms = grown;
  fake.comms[fake.comm_count++] = c;
  fake.counts.comm_init_count++;
  fake.counts.live_comm_count++;
  return c;
}

/* The allocation extent and VMM identity of addr, as the driver tells. */
static bool extent_of(uintptr_t addr, uintptr_t *base, size_t *bytes, uint64_t *physical_id,
                      int *device) {
  const gmr__cuda_vmm_ops *vmm = gmr__cuda_vmm(gmr__cuda());
  CUdeviceptr b = 0;
  if (vmm->get_address_range(&b, bytes, (CUdeviceptr)addr) != CUDA_SUCCESS) return false;
  *base = (uintptr_t)b;
  gmr_cuda_sim_vmm_mapping m;
  *physical_id = 0;
  *device = -1;
  if (gmr_cuda_sim_vmm_query((const void *)addr, &m) == GMR_OK && m.mapped) {
    *physical_id = m.physical_id;
    *device = m.device;
  }
  return true;
}

static size_t reg_index(const fake_registration *r) {
  for (size_t i = 0; i < fake.reg_count; ++i) {
    if (fake.regs[i] == r) return i;
  }
  return fake.reg_count;
}

static void reg_drop(size_t i) {
  fake.counts.registered_bytes -= fake.regs[i]->bytes;
  free(fake.regs[i]);
  fake.regs[i] = fake.regs[--fake.reg_count];
  fake.counts.live_registration_count = fake.reg_count;
}

/* A registration still on the memory it was made for (lock held). */
static bool reg_still_mapped(const fake_registration *r) {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t id = 0;
  int device = -1;
  return extent_of(r->addr, &base, &bytes, &id, &device) && base == r->extent_base &&
         id == r->physical_id;
}

/* ---- the table ------------------------------------------------------------- */

static gmr_nccl_result fake_get_version(int *version) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  if (!injected(GMR_TEST_FAKE_NCCL_VERSION_CALL, &r)) *version = fake.version;
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static const char *fake_get_error_string(gmr_nccl_result result) {
  switch (result) {
    case GMR_NCCL_SUCCESS:
      return "no error";
    case GMR_NCCL_INVALID_ARGUMENT:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case GMR_NCCL_INVALID_USAGE:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default:
      return "fake NCCL error";
  }
}

static const char *fake_get_last_error(gmr_nccl_comm_handle comm) {
  (void)comm;
  return fake.last_error;
}

static gmr_nccl_result fake_get_unique_id(gmr_nccl_unique_id *id) {
  pthread_mutex_lock(&fake.lock);
  memset(id, 0, sizeof *id);
  uint64_t n = ++fake.next_id;
  memcpy(id->internal, &n, sizeof n);
  pthread_mutex_unlock(&fake.lock);
  return GMR_NCCL_SUCCESS;
}

static gmr_nccl_result fake_comm_init_rank(gmr_nccl_comm_handle *comm, int rank_count,
                                           gmr_nccl_unique_id id, int rank) {
  (void)id;
  int device = -1;
  if (gmr_device_get_current(&device) != GMR_OK) return GMR_NCCL_UNHANDLED_CUDA_ERROR;
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  if (!injected(GMR_TEST_FAKE_NCCL_INIT, &r)) *comm = comm_new(device, rank, rank_count);
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result fake_comm_init_all(gmr_nccl_comm_handle *comms, int device_count,
                                          const int *devices) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  if (!injected(GMR_TEST_FAKE_NCCL_INIT, &r)) {
    for (int i = 0; i < device_count; ++i) {
      comms[i] = comm_new(devices != NULL ? devices[i] : i, i, device_count);
    }
  }
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result fake_comm_destroy(gmr_nccl_comm_handle comm) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  if (!comm_usable(comm, "ncclCommDestroy")) {
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else if (!injected(GMR_TEST_FAKE_NCCL_DESTROY, &r)) {
    size_t left = 0;
    for (size_t i = fake.reg_count; i-- > 0;) {
      if (fake.regs[i]->comm != comm) continue;
      left++;
      reg_drop(i); /* NCCL frees a communicator's registrations with it */
    }
    if (left > 0) {
      violation("ncclCommDestroy of rank %d with %zu registration(s) left: a later "
                "ncclCommDeregister would touch freed memory",
                comm->rank, left);
    }
    comm->alive = false;
    fake.counts.comm_destroy_count++;
    fake.counts.live_comm_count--;
  }
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result comm_query(gmr_nccl_comm_handle comm, int *out, int which,
                                  const char *call) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  if (!comm_usable(comm, call)) {
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else {
    *out = which == 0 ? comm->device : which == 1 ? comm->rank : comm->rank_count;
  }
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result fake_comm_cu_device(gmr_nccl_comm_handle comm, int *device) {
  return comm_query(comm, device, 0, "ncclCommCuDevice");
}

static gmr_nccl_result fake_comm_user_rank(gmr_nccl_comm_handle comm, int *rank) {
  return comm_query(comm, rank, 1, "ncclCommUserRank");
}

static gmr_nccl_result fake_comm_count(gmr_nccl_comm_handle comm, int *count) {
  return comm_query(comm, count, 2, "ncclCommCount");
}

static gmr_nccl_result fake_comm_register(gmr_nccl_comm_handle comm, void *buffer, size_t bytes,
                                          void **handle) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  uintptr_t addr = (uintptr_t)buffer, base = 0;
  size_t extent = 0;
  uint64_t id = 0;
  int device = -1;
  if (!comm_usable(comm, "ncclCommRegister")) {
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else if (injected(GMR_TEST_FAKE_NCCL_REGISTER, &r)) {
  } else if (buffer == NULL || bytes == 0) {
    violation("ncclCommRegister of an empty range (%p, %zu bytes)", buffer, bytes);
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else if (!extent_of(addr, &base, &extent, &id, &device)) {
    violation("ncclCommRegister of %p, which is no device memory (freed?)", buffer);
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else if (addr + bytes > base + extent) {
    violation("ncclCommRegister of [%p, +%zu) crosses the end of its physical allocation at "
              "%p: NCCL < 2.29 would map only the first one on its peers",
              buffer, bytes, (void *)(base + extent));
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else if (device >= 0 && device != comm->device) {
    violation("ncclCommRegister of device %d memory with the communicator of device %d",
              device, comm->device);
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else {
    fake_registration *reg = calloc(1, sizeof *reg);
    fake_registration **grown = realloc(fake.regs, (fake.reg_count + 1) * sizeof *grown);
    if (reg == NULL || grown == NULL) abort();
    *reg = (fake_registration){comm, addr, bytes, id, base};
    fake.regs = grown;
    fake.regs[fake.reg_count++] = reg;
    fake.counts.live_registration_count = fake.reg_count;
    fake.counts.registered_bytes += bytes;
    fake.counts.register_count++;
    *handle = reg;
  }
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result fake_comm_deregister(gmr_nccl_comm_handle comm, void *handle) {
  pthread_mutex_lock(&fake.lock);
  gmr_nccl_result r = GMR_NCCL_SUCCESS;
  size_t i = reg_index(handle);
  if (!comm_usable(comm, "ncclCommDeregister")) {
    r = GMR_NCCL_INVALID_USAGE;
  } else if (injected(GMR_TEST_FAKE_NCCL_DEREGISTER, &r)) {
  } else if (i == fake.reg_count || fake.regs[i]->comm != comm) {
    violation("ncclCommDeregister of %p, which is no registration of rank %d", handle,
              comm->rank);
    r = GMR_NCCL_INVALID_ARGUMENT;
  } else {
    if (!reg_still_mapped(fake.regs[i])) {
      violation("ncclCommDeregister of [%p, +%zu) after its memory went back to the driver",
                (void *)fake.regs[i]->addr, fake.regs[i]->bytes);
    }
    reg_drop(i);
    fake.counts.deregister_count++;
  }
  pthread_mutex_unlock(&fake.lock);
  return r;
}

static gmr_nccl_result fake_group_start(void) { return GMR_NCCL_SUCCESS; }

static gmr_nccl_result fake_group_end(void) {
  pthread_mutex_lock(&fake.lock);
  fake.counts.group_count++;
  pthread_mutex_unlock(&fake.lock);
  return GMR_NCCL_SUCCESS;
}

static const gmr_nccl_api fake_api = {
    .size = sizeof(gmr_nccl_api),
    .version = GMR_NCCL_API_VERSION,
    .get_version = fake_get_version,
    .get_error_string = fake_get_error_string,
    .get_last_error = fake_get_last_error,
    .get_unique_id = fake_get_unique_id,
    .comm_init_rank = fake_comm_init_rank,
    .comm_init_all = fake_comm_init_all,
    .comm_destroy = fake_comm_destroy,
    .comm_cu_device = fake_comm_cu_device,
    .comm_user_rank = fake_comm_user_rank,
    .comm_count = fake_comm_count,
    .comm_register = fake_comm_register,
    .comm_deregister = fake_comm_deregister,
    .all_reduce = NULL, /* no collectives in the simulation */
    .group_start = fake_group_start,
    .group_end = fake_group_end,
};

/* ---- control --------------------------------------------------------------- */

const gmr_nccl_api *gmr_test_fake_nccl_api(void) { return &fake_api; }

void gmr_test_fake_nccl_set_version(int version) {
  pthread_mutex_lock(&fake.lock);
  fake.version = version;
  pthread_mutex_unlock(&fake.lock);
}

void gmr_test_fake_nccl_reset(void) {
  pthread_mutex_lock(&fake.lock);
  for (size_t i = 0; i < fake.comm_count; ++i) free(fake.comms[i]);
  for (size_t i = 0; i < fake.reg_count; ++i) free(fake.regs[i]);
  for (size_t i = 0; i < fake.violation_count; ++i) free(fake.violations[i]);
  free(fake.comms);
  free(fake.regs);
  free(fake.violations);
  fake.comms = NULL;
  fake.regs = NULL;
  fake.violations = NULL;
  fake.comm_count = fake.reg_count = fake.violation_count = 0;
  memset(fake.faults, 0, sizeof fake.faults);
  memset(&fake.counts, 0, sizeof fake.counts);
  fake.version = GMR_TEST_FAKE_NCCL_VERSION;
  fake.last_error[0] = '\0';
  pthread_mutex_unlock(&fake.lock);
}

void gmr_test_fake_nccl_fail(gmr_test_fake_nccl_call call, uint64_t skip_count,
                             uint64_t fail_count, gmr_nccl_result result) {
  pthread_mutex_lock(&fake.lock);
  fake.faults[call] = (fake_fault){skip_count, fail_count, result};
  pthread_mutex_unlock(&fake.lock);
}

void gmr_test_fake_nccl_get_counts(gmr_test_fake_nccl_counts *out) {
  pthread_mutex_lock(&fake.lock);
  *out = fake.counts;
  out->violation_count = fake.violation_count;
  pthread_mutex_unlock(&fake.lock);
}

void gmr_test_fake_nccl_clear_violations(void) {
  pthread_mutex_lock(&fake.lock);
  for (size_t i = 0; i < fake.violation_count; ++i) free(fake.violations[i]);
  free(fake.violations);
  fake.violations = NULL;
  fake.violation_count = 0;
  pthread_mutex_unlock(&fake.lock);
}

const char *gmr_test_fake_nccl_violation(size_t index) {
  pthread_mutex_lock(&fake.lock);
  const char *v = index < fake.violation_count ? fake.violations[index] : NULL;
  pthread_mutex_unlock(&fake.lock);
  return v;
}

size_t gmr_test_fake_nccl_verify(void) {
  pthread_mutex_lock(&fake.lock);
  size_t found = 0;
  for (size_t i = 0; i < fake.reg_count; ++i) {
    if (reg_still_mapped(fake.regs[i])) continue;
    violation("registration [%p, +%zu) of rank %d outlived its memory (it went back to the "
              "driver while registered)",
              (void *)fake.regs[i]->addr, fake.regs[i]->bytes, fake.regs[i]->comm->rank);
    found++;
  }
  pthread_mutex_unlock(&fake.lock);
  return found;
}

int gmr_test_fake_nccl_is_registered(gmr_nccl_comm_handle comm, const void *addr, size_t bytes) {
  pthread_mutex_lock(&fake.lock);
  int found = 0;
  for (size_t i = 0; i < fake.reg_count && !found; ++i) {
    const fake_registration *r = fake.regs[i];
    found = r->comm == comm && r->addr == (uintptr_t)addr && r->bytes == bytes;
  }
  pthread_mutex_unlock(&fake.lock);
  return found;
}
