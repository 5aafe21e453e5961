/*
 * stack/device_resource.c: the per-device registry (gmr/device_resource.h).
 *
 * One slot per device: the resource handed out (an atomic, so the getters'
 * fast path takes no lock) and the stack the registry created for it. All
 * changes happen under one mutex; creation too, so concurrent first
 * requests for a device build one stack. Teardown follows the order of
 * creation backwards.
 */
#include "gmr/device_resource.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/resource_type.h"
#include "gmr/device.h"
#include "stack/device_guard.h"
#include "stack/stack_internal.h"

#define MAX_DEVICES GMR_DEVICE_RESOURCE_MAX_DEVICES

typedef struct slot {
  _Atomic(gmr_resource *) current; /* what the getters return; NULL: none yet */
  gmr_stack *owned;                /* the stack the registry created, or NULL */
  gmr__device_guard *guard;        /* on top of `owned`, owned by the registry */
} slot;

static slot slots[MAX_DEVICES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static char *configured_spec; /* from gmr_device_resource_set_spec; NULL: GMR_STACK */
static int creation_order[MAX_DEVICES];
static int creation_count;
static bool exit_handler_registered;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void set_message(gmr_spec_error *error, const char *fmt, ...) {
  if (error == NULL) return;
  memset(error, 0, sizeof *error);
  va_list args;
  va_start(args, fmt);
  vsnprintf(error->message, sizeof error->message, fmt, args);
  va_end(args);
}

/* `device` is an ordinal this machine has. Lock not needed. */
static gmr_status check_device(int device, gmr_spec_error *error) {
  if (device < 0 || device >= MAX_DEVICES) {
    set_message(error, "device %d is out of range (0..%d)", device, MAX_DEVICES - 1);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  int count = 0;
  if (gmr_device_get_count(&count) != GMR_OK) {
    set_message(error, "cudaGetDeviceCount failed while checking device %d", device);
    return GMR_ERR_CUDA;
  }
  if (device >= count) {
    set_message(error, "device %d does not exist (this machine has %d CUDA devices)", device,
                count);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

static void release_at_exit(void) { GMR_IGNORE_STATUS(gmr_device_resource_release_all()); }

/* Create device's stack with the device current. Lock held. */
static gmr_status create_locked(int device, gmr_spec_error *error) {
  const gmr__cuda_ops *cuda = gmr__cuda();
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(cuda, device, &saved);
  if (err != cudaSuccess) {
    set_message(error, "%s failed making device %d current: CUDA error %d",
                gmr__cuda_device_enter_failed_call(err), device, (int)err);
    return gmr__status_from_cuda(err) == GMR_OK ? GMR_ERR_CUDA : gmr__status_from_cuda(err);
  }
  gmr_stack *stack = NULL;
  bool from_env = false;
  gmr_status st = configured_spec != NULL
                      ? gmr_stack_create(configured_spec, &stack, error)
                      : gmr__stack_create_from_env(GMR_DEVICE_RESOURCE_DEFAULT_SPEC, &stack,
                                                   error, &from_env);
  if (st == GMR_ERR_UNSUPPORTED && configured_spec == NULL && !from_env) {
    /* The default needs virtual memory management, which this device's
     * driver lacks (vGPU, WSL, old drivers): the stream-ordered pool. */
    st = gmr_stack_create(GMR_DEVICE_RESOURCE_FALLBACK_SPEC, &stack, error);
  }
  gmr__device_guard *guard = NULL;
  if (st == GMR_OK) {
    st = gmr__device_guard_create(gmr_stack_as_resource(stack), device, &guard);
    if (st != GMR_OK) {
      GMR_IGNORE_STATUS(gmr_stack_destroy(stack)); /* nothing was allocated from it */
      stack = NULL;
      set_message(error, "no host memory for the resource of device %d", device);
    }
  }
  gmr__cuda_device_leave(cuda, saved);
  if (st != GMR_OK) return st;

  slots[device].owned = stack;
  slots[device].guard = guard;
  creation_order[creation_count++] = device;
  atomic_store_explicit(&slots[device].current, gmr__device_guard_as_resource(guard),
                        memory_order_release);
  /* Registered after the first stack made its CUDA calls, so the handler runs
   * before the CUDA runtime's own exit handlers (atexit runs in reverse). */
  if (!exit_handler_registered && atexit(release_at_exit) == 0) exit_handler_registered = true;
  return GMR_OK;
}

gmr_status gmr_device_resource_get(int device, gmr_resource **out, gmr_spec_error *error) {
  if (out == NULL) {
    set_message(error, "out is NULL (device %d)", device);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  if (device >= 0 && device < MAX_DEVICES) {
    gmr_resource *r = atomic_load_explicit(&slots[device].current, memory_order_acquire);
    if (r != NULL) {
      *out = r;
      return GMR_OK;
    }
  }
  gmr_status st = check_device(device, error);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&registry_lock);
  gmr_resource *r = atomic_load_explicit(&slots[device].current, memory_order_acquire);
  if (r == NULL) {
    st = create_locked(device, error);
    r = atomic_load_explicit(&slots[device].current, memory_order_acquire);
  }
  pthread_mutex_unlock(&registry_lock);
  if (st == GMR_OK) *out = r;
  return st;
}

gmr_status gmr_device_resource_get_current(gmr_resource **out, gmr_spec_error *error) {
  if (out == NULL) return gmr_device_resource_get(0, out, error);
  *out = NULL;
  int device = -1;
  if (gmr_device_get_current(&device) != GMR_OK) {
    set_message(error, "cudaGetDevice failed: no current CUDA device");
    return GMR_ERR_CUDA;
  }
  return gmr_device_resource_get(device, out, error);
}

gmr_status gmr_device_resource_set(int device, gmr_resource *resource,
                                   gmr_resource **out_previous) {
  if (out_previous != NULL) *out_previous = NULL;
  if (resource != NULL && gmr__resource_check_vtbl(resource) != GMR_OK) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_status st = check_device(device, NULL);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&registry_lock);
  gmr_resource *own = gmr__device_guard_as_resource(slots[device].guard);
  gmr_resource *previous = atomic_exchange_explicit(&slots[device].current,
                                                    resource != NULL ? resource : own,
                                                    memory_order_acq_rel);
  pthread_mutex_unlock(&registry_lock);
  if (out_previous != NULL) *out_previous = previous;
  return GMR_OK;
}

gmr_status gmr_device_resource_set_spec(const char *spec, gmr_spec_error *error) {
  char *copy = NULL;
  if (spec != NULL) {
    gmr_status st = gmr_stack_check(spec, error);
    if (st != GMR_OK) return st;
    copy = malloc(strlen(spec) + 1);
    if (copy == NULL) return GMR_ERR_OUT_OF_MEMORY;
    strcpy(copy, spec);
  }
  pthread_mutex_lock(&registry_lock);
  char *old = configured_spec;
  configured_spec = copy;
  pthread_mutex_unlock(&registry_lock);
  free(old);
  return GMR_OK;
}

const char *gmr_device_resource_get_spec(int device) {
  if (device < 0 || device >= MAX_DEVICES) return NULL;
  pthread_mutex_lock(&registry_lock);
  const char *spec = NULL;
  gmr_stack *owned = slots[device].owned;
  if (owned != NULL && atomic_load_explicit(&slots[device].current, memory_order_acquire) ==
                           gmr__device_guard_as_resource(slots[device].guard)) {
    spec = gmr_stack_get_spec(owned);
  }
  pthread_mutex_unlock(&registry_lock);
  return spec;
}

gmr_status gmr_device_resource_release_all(void) {
  gmr_status first = GMR_OK;
  pthread_mutex_lock(&registry_lock);
  int survivors[MAX_DEVICES];
  int kept = 0;
  for (int i = creation_count; i-- > 0;) {
    int device = creation_order[i];
    slot *s = &slots[device];
    gmr_status st = gmr_stack_destroy(s->owned);
    if (st == GMR_OK) {
      /* The guard keeps nothing of its own: its destroy never refuses. */
      GMR_IGNORE_STATUS(gmr_resource_destroy(gmr__device_guard_as_resource(s->guard)));
      s->owned = NULL;
      s->guard = NULL;
      continue;
    }
    if (first == GMR_OK) first = st;
    /* The layers above the one that refused are gone; what is left still
     * works (the refusing layer and those below): the guard moves onto it. */
    gmr__device_guard_set_upstream(s->guard, gmr_stack_as_resource(s->owned));
    survivors[kept++] = device;
  }
  /* The survivors were collected newest first; keep the order of creation. */
  for (int i = 0; i < kept; ++i) creation_order[i] = survivors[kept - 1 - i];
  creation_count = kept;
  /* Point every device at what the registry still owns; resources the
   * program set are forgotten, never destroyed. */
  for (int d = 0; d < MAX_DEVICES; ++d) {
    atomic_store_explicit(&slots[d].current, gmr__device_guard_as_resource(slots[d].guard),
                          memory_order_release);
  }
  pthread_mutex_unlock(&registry_lock);
  return first;
}
