/*
 * nccl/nccl_comm.c: communicators made, wrapped and destroyed through gmr,
 * and the all-reduce (gmr/nccl/nccl.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/failure.h"
#include "nccl/nccl_internal.h"

static gmr_status bad(gmr_failure *failure, const char *what) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: %s", what);
}

/* A wrapper for `handle`; device, rank and count asked of NCCL where the
 * table has the calls, else the values given. */
static gmr_status wrap(gmr_nccl_library *lib, gmr_nccl_comm_handle handle, bool owned,
                       int device, int rank, int rank_count, gmr_nccl_comm **out,
                       gmr_failure *failure) {
  gmr_nccl_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  c->lib = lib;
  c->handle = handle;
  c->owned = owned;
  c->device = device;
  c->rank = rank;
  c->rank_count = rank_count;
  c->cuda = gmr__cuda();
  const char *call = "ncclCommCuDevice";
  gmr_nccl_result r = lib->api.comm_cu_device(handle, &c->device);
  if (r == GMR_NCCL_SUCCESS && lib->api.comm_user_rank != NULL) {
    call = "ncclCommUserRank";
    r = lib->api.comm_user_rank(handle, &c->rank);
  }
  if (r == GMR_NCCL_SUCCESS && lib->api.comm_count != NULL) {
    call = "ncclCommCount";
    r = lib->api.comm_count(handle, &c->rank_count);
  }
  if (r != GMR_NCCL_SUCCESS) {
    free(c);
    return gmr__nccl_fail(lib, handle, failure, call, r, "(is it a live communicator?)");
  }
  pthread_mutex_init(&c->lock, NULL);
  gmr__nccl_library_add_comm(lib);
  *out = c;
  return GMR_OK;
}

static gmr_status nccl_comm_init_rank_impl(gmr_nccl_library *lib, int rank_count,
                                           const gmr_nccl_unique_id *id, int rank, int device,
                                           gmr_nccl_comm **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out != NULL) *out = NULL;
  if (lib == NULL || id == NULL || out == NULL) return bad(failure, "a NULL argument");
  if (rank_count < 1 || rank < 0 || rank >= rank_count || device < 0) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "nccl: rank %d of %d ranks on device %d is not a valid rank", rank,
                            rank_count, device);
  }
  if (lib->api.comm_init_rank == NULL) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED, "nccl: the table has no ncclCommInitRank");
  }
  const gmr__cuda_ops *cuda = gmr__cuda();
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(cuda, device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  gmr_nccl_comm_handle handle = NULL;
  gmr_nccl_result r = lib->api.comm_init_rank(&handle, rank_count, *id, rank);
  gmr__cuda_device_leave(cuda, saved);
  if (r != GMR_NCCL_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "(rank %d of %d on device %d)", rank, rank_count, device);
    return gmr__nccl_fail(lib, NULL, failure, "ncclCommInitRank", r, what);
  }
  gmr_status st = wrap(lib, handle, true, device, rank, rank_count, out, failure);
  if (st != GMR_OK) (void)lib->api.comm_destroy(handle);
  return st;
}

gmr_status gmr_nccl_comm_init_rank(gmr_nccl_library *lib, int rank_count,
                                   const gmr_nccl_unique_id *id, int rank, int device,
                                   gmr_nccl_comm **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = nccl_comm_init_rank_impl(lib, rank_count, id, rank, device, out, f);
  return gmr__failure_end(failure, f, st);
}

static gmr_status nccl_comm_init_all_impl(gmr_nccl_library *lib, int device_count,
                                          const int *devices, gmr_nccl_comm **out,
                                          gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (lib == NULL || devices == NULL || out == NULL || device_count < 1) {
    return bad(failure, "init_all needs a library, at least one device and room for the result");
  }
  for (int i = 0; i < device_count; ++i) out[i] = NULL;
  if (lib->api.comm_init_all == NULL) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED, "nccl: the table has no ncclCommInitAll");
  }
  gmr_nccl_comm_handle *handles = calloc((size_t)device_count, sizeof *handles);
  if (handles == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  const gmr__cuda_ops *cuda = gmr__cuda();
  int saved = -1;
  cudaError_t err = cuda->get_device(&saved);
  if (err != cudaSuccess) {
    free(handles);
    return gmr__cuda_fail(failure, "cudaGetDevice", err);
  }
  gmr_nccl_result r = lib->api.comm_init_all(handles, device_count, devices);
  (void)cuda->set_device(saved); /* NCCL may leave another device current */
  gmr_status st = GMR_OK;
  if (r != GMR_NCCL_SUCCESS) {
    char what[48];
    snprintf(what, sizeof what, "(%d devices)", device_count);
    st = gmr__nccl_fail(lib, NULL, failure, "ncclCommInitAll", r, what);
  }
  for (int i = 0; st == GMR_OK && i < device_count; ++i) {
    st = wrap(lib, handles[i], true, devices[i], i, device_count, &out[i], failure);
  }
  if (st != GMR_OK && r == GMR_NCCL_SUCCESS) {
    for (int i = 0; i < device_count; ++i) {
      if (out[i] != NULL) {
        pthread_mutex_destroy(&out[i]->lock);
        free(out[i]);
        gmr__nccl_library_remove_comm(lib);
        out[i] = NULL;
      }
      (void)lib->api.comm_destroy(handles[i]);
    }
  }
  free(handles);
  return st;
}

gmr_status gmr_nccl_comm_init_all(gmr_nccl_library *lib, int device_count, const int *devices,
                                  gmr_nccl_comm **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_comm_init_all_impl(lib, device_count, devices, out, f));
}

static gmr_status nccl_comm_wrap_impl(gmr_nccl_library *lib, gmr_nccl_comm_handle handle,
                                      gmr_nccl_comm **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out != NULL) *out = NULL;
  if (lib == NULL || handle == NULL || out == NULL) return bad(failure, "a NULL argument");
  return wrap(lib, handle, false, -1, 0, 1, out, failure);
}

gmr_status gmr_nccl_comm_wrap(gmr_nccl_library *lib, gmr_nccl_comm_handle handle,
                              gmr_nccl_comm **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_comm_wrap_impl(lib, handle, out, f));
}

static gmr_status nccl_comm_destroy_impl(gmr_nccl_comm *comm, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (comm == NULL) return GMR_OK;
  pthread_mutex_lock(&comm->lock);
  size_t left = comm->registration_count;
  pthread_mutex_unlock(&comm->lock);
  if (left != 0) {
    return gmr__failure_set(failure, GMR_ERR_BUSY,
                            "nccl: %zu registration(s) on the communicator of rank %d (device "
                            "%d) are left: call gmr_nccl_deregister() on each first "
                            "(ncclCommDestroy would free them under gmr)",
                            left, comm->rank, comm->device);
  }
  if (comm->owned) {
    int saved = -1;
    cudaError_t err = gmr__cuda_device_enter(comm->cuda, comm->device, &saved);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
    gmr_nccl_result r = comm->lib->api.comm_destroy(comm->handle);
    gmr__cuda_device_leave(comm->cuda, saved);
    if (r != GMR_NCCL_SUCCESS) {
      return gmr__nccl_fail(comm->lib, NULL, failure, "ncclCommDestroy", r, NULL);
    }
  }
  gmr__nccl_library_remove_comm(comm->lib);
  free(comm->registrations);
  pthread_mutex_destroy(&comm->lock);
  free(comm);
  return GMR_OK;
}

gmr_status gmr_nccl_comm_destroy(gmr_nccl_comm *comm, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_comm_destroy_impl(comm, f));
}

gmr_nccl_comm_handle gmr_nccl_comm_get_handle(const gmr_nccl_comm *comm) {
  return comm == NULL ? NULL : comm->handle;
}

int gmr_nccl_comm_get_device(const gmr_nccl_comm *comm) { return comm == NULL ? -1 : comm->device; }

int gmr_nccl_comm_get_rank(const gmr_nccl_comm *comm) { return comm == NULL ? -1 : comm->rank; }

int gmr_nccl_comm_get_rank_count(const gmr_nccl_comm *comm) {
  return comm == NULL ? 0 : comm->rank_count;
}

static gmr_status nccl_all_reduce_impl(gmr_nccl_comm *comm, const void *send, void *recv,
                                       size_t count, gmr_nccl_data_type type, gmr_nccl_red_op op,
                                       gmr_stream stream, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (comm == NULL || (count > 0 && (send == NULL || recv == NULL))) {
    return bad(failure, "all_reduce needs a communicator and both buffers");
  }
  if (comm->lib->api.all_reduce == NULL) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED, "nccl: the table has no ncclAllReduce");
  }
  gmr_nccl_result r = comm->lib->api.all_reduce(send, recv, count, type, op, comm->handle, stream);
  if (r == GMR_NCCL_SUCCESS) return GMR_OK;
  char what[80];
  snprintf(what, sizeof what, "(%zu elements of type %d, rank %d)", count, (int)type, comm->rank);
  return gmr__nccl_fail(comm->lib, comm->handle, failure, "ncclAllReduce", r, what);
}

gmr_status gmr_nccl_all_reduce(gmr_nccl_comm *comm, const void *send, void *recv, size_t count,
                               gmr_nccl_data_type type, gmr_nccl_red_op op, gmr_stream stream,
                               gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = nccl_all_reduce_impl(comm, send, recv, count, type, op, stream, f);
  return gmr__failure_end(failure, f, st);
}

void gmr__nccl_comm_forget(gmr_nccl_comm *comm, gmr_nccl_registration *reg) {
  pthread_mutex_lock(&comm->lock);
  for (size_t i = 0; i < comm->registration_count; ++i) {
    if (comm->registrations[i] == reg) {
      comm->registrations[i] = comm->registrations[--comm->registration_count];
      break;
    }
  }
  pthread_mutex_unlock(&comm->lock);
}
