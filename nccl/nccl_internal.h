/*
 * nccl/nccl_internal.h (internal): the objects of gmr/nccl/nccl.h and the
 * functions its files share.
 *
 *   nccl_library.c   loading NCCL (dlopen) or taking a caller's table,
 *                    messages for NCCL failures, unique ids, groups
 *   nccl_comm.c      communicators: init, wrap, destroy, all-reduce
 *   nccl_register.c  registrations of pools (through a chunk listener) and
 *                    of buffers, per physical allocation
 *
 * Lock order: a communicator's lock, then a chunk listener adaptor's lock
 * (its callbacks), then a registration's lock; the library's lock alone.
 */
#ifndef GMR_NCCL_NCCL_INTERNAL_H_
#define GMR_NCCL_NCCL_INTERNAL_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/nccl/nccl.h"

struct gmr_nccl_library {
  gmr_nccl_api api;
  void *dl; /* dlopen handle, or NULL for a caller's table */
  int version;
  pthread_mutex_t lock;
  size_t comm_count; /* communicators made or wrapped with this library */
};

struct gmr_nccl_comm {
  gmr_nccl_library *lib;
  gmr_nccl_comm_handle handle;
  bool owned; /* made by gmr: destroy destroys the NCCL communicator */
  int device;
  int rank;
  int rank_count;
  const gmr__cuda_ops *cuda;
  pthread_mutex_t lock;
  /* Under the lock: the registrations made on this communicator. */
  gmr_nccl_registration **registrations;
  size_t registration_count;
  size_t registration_capacity;
};

/* Write a GMR_ERR_NCCL failure for `call` that returned `result` on `comm`
 * (may be NULL): NCCL's name for the result, ncclGetErrorString and, where
 * the library has it, ncclGetLastError. `what` (may be NULL) says what was
 * asked. Returns GMR_ERR_NCCL. */
gmr_status gmr__nccl_fail(const gmr_nccl_library *lib, gmr_nccl_comm_handle comm,
                          gmr_failure *failure, const char *call, gmr_nccl_result result,
                          const char *what);

/* The name of an ncclResult_t value ("ncclInvalidArgument"). Static. */
const char *gmr__nccl_result_name(gmr_nccl_result result);

/* Count a communicator in or out of its library. */
void gmr__nccl_library_add_comm(gmr_nccl_library *lib);
void gmr__nccl_library_remove_comm(gmr_nccl_library *lib);

/* Forget `reg` in its communicator's list (comm lock taken here). */
void gmr__nccl_comm_forget(gmr_nccl_comm *comm, gmr_nccl_registration *reg);

#endif /* GMR_NCCL_NCCL_INTERNAL_H_ */
