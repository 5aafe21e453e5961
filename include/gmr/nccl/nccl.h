/*
 * gmr/nccl/nccl.h: NCCL collectives on gmr memory. NCCL is loaded at run time
 * (dlopen of libnccl.so.2), so gmr builds and runs without it; the few
 * symbols gmr uses are declared here with NCCL's types and values
 * (nccl.h): a program that has nccl.h can pass its ncclComm_t, which is the
 * same type as gmr_nccl_comm_handle.
 *
 * Zero-copy collectives need registered memory: NCCL maps a registered
 * buffer on its peers (through cuMemRetainAllocationHandle and, between
 * processes, a POSIX file descriptor from cuMemExportToShareableHandle) and
 * then reads and writes it in place instead of staging it through its own
 * buffers. gmr_nccl_register_pool() registers every chunk a pool holds
 * (now and later) once with a communicator, and deregisters each before it
 * goes back to the driver; every block the pool hands out is then inside a
 * registration. The pool's stack needs a chunk_listener layer
 * (gmr/nccl/chunk_listener_adaptor.h) below the pool:
 *
 *     pool > chunk_listener > cumem(nccl_ready=true, peer_access=all)
 *
 * Registrations follow physical allocations. NCCL before 2.29 maps on a peer
 * only the physical allocation (cuMemGetAddressRange extent) that holds a
 * buffer's start and reuses that mapping for every later buffer of the same
 * registration, so a registration over several physical allocations can make
 * a collective read the wrong memory. gmr therefore registers each chunk per
 * physical allocation ("segment"), as the driver reports them: with cumem
 * below, one segment per chunk; with vmm_pages below, one per page, so a
 * buffer that crosses a page boundary is simply not registered (NCCL then
 * copies through its own buffers: correct, not zero-copy).
 * gmr_nccl_registration_covers() tells whether a buffer is zero-copy.
 *
 * Communicators: gmr_nccl_comm wraps an ncclComm_t and counts the
 * registrations made on it; gmr_nccl_comm_destroy() refuses (GMR_ERR_BUSY)
 * while any is left, because ncclCommDestroy frees the registrations that a
 * later deregistration would then touch. Destroying the ncclComm_t behind
 * gmr's back is undefined, as in NCCL.
 *
 * Multicast: gmr never calls cuMulticast*; programs on machines that forbid
 * NVLink multicast set NCCL_NVLS_ENABLE=0 before NCCL initialises (gmr does
 * not change the environment).
 *
 * Statuses: GMR_ERR_NCCL for a failed NCCL call (the message names the call,
 * NCCL's result name and ncclGetErrorString / ncclGetLastError), or for a
 * libnccl.so.2 that cannot be loaded or lacks a symbol; GMR_ERR_UNSUPPORTED
 * for an optional entry point a caller's table left out.
 *
 * Source: NCCL's nccl.h (types, values, signatures), src/register/
 * register.cc and src/transport/p2p.cc (what registration needs),
 * src/allocator.cc (ncclMemAlloc); PyTorch's ProcessGroupNCCL
 * (registerMemPool: register every segment of a MemPool, deregister on
 * segment free).
 *
 * Thread-safe: the library and communicator objects: yes (internal mutex),
 * with NCCL's own rules on top (a communicator is used by one thread at a
 * time; group calls are per thread). Registrations: yes. Create/open and
 * destroy/close are not thread-safe with other use of the same object.
 */
#ifndef GMR_NCCL_H_
#define GMR_NCCL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/context.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NCCL's types, as nccl.h declares them ---------------------------- */

/* The same type as ncclComm_t. */
typedef struct ncclComm *gmr_nccl_comm_handle;

#define GMR_NCCL_UNIQUE_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

/* Laid out as ncclUniqueId. */
typedef struct gmr_nccl_unique_id {
  char internal[GMR_NCCL_UNIQUE_ID_BYTES];
} gmr_nccl_unique_id;

/* ncclResult_t's values. */
typedef enum gmr_nccl_result {
  GMR_NCCL_SUCCESS = 0,
  GMR_NCCL_UNHANDLED_CUDA_ERROR = 1,
  GMR_NCCL_SYSTEM_ERROR = 2,
  GMR_NCCL_INTERNAL_ERROR = 3,
  GMR_NCCL_INVALID_ARGUMENT = 4,
  GMR_NCCL_INVALID_USAGE = 5,
  GMR_NCCL_REMOTE_ERROR = 6,
  GMR_NCCL_IN_PROGRESS = 7
} gmr_nccl_result;

/* ncclDataType_t's values (the ones gmr names). */
typedef enum gmr_nccl_data_type {
  GMR_NCCL_INT8 = 0,
  GMR_NCCL_UINT8 = 1,
  GMR_NCCL_INT32 = 2,
  GMR_NCCL_UINT32 = 3,
  GMR_NCCL_INT64 = 4,
  GMR_NCCL_UINT64 = 5,
  GMR_NCCL_FLOAT16 = 6,
  GMR_NCCL_FLOAT32 = 7,
  GMR_NCCL_FLOAT64 = 8,
  GMR_NCCL_BFLOAT16 = 9
} gmr_nccl_data_type;

/* ncclRedOp_t's built-in values. */
typedef enum gmr_nccl_red_op {
  GMR_NCCL_SUM = 0,
  GMR_NCCL_PROD = 1,
  GMR_NCCL_MAX = 2,
  GMR_NCCL_MIN = 3,
  GMR_NCCL_AVG = 4
} gmr_nccl_red_op;

#define GMR_NCCL_API_VERSION 1u

/**
 * The NCCL entry points gmr uses, with NCCL's signatures (the function in
 * the comment). gmr_nccl_library_open() fills one from libnccl.so.2; a
 * program that links NCCL itself, or a test double, passes its own to
 * gmr_nccl_library_open_api(). Required: get_version, get_error_string,
 * comm_register, comm_deregister, comm_destroy, comm_cu_device. The others
 * may be NULL: the gmr call that needs one then returns
 * GMR_ERR_UNSUPPORTED.
 */
typedef struct gmr_nccl_api {
  size_t size;      /* sizeof(gmr_nccl_api) as the caller knows it */
  uint32_t version; /* GMR_NCCL_API_VERSION */
  gmr_nccl_result (*get_version)(int *version);                        /* ncclGetVersion */
  const char *(*get_error_string)(gmr_nccl_result result);             /* ncclGetErrorString */
  const char *(*get_last_error)(gmr_nccl_comm_handle comm);            /* ncclGetLastError */
  gmr_nccl_result (*get_unique_id)(gmr_nccl_unique_id *id);            /* ncclGetUniqueId */
  gmr_nccl_result (*comm_init_rank)(gmr_nccl_comm_handle *comm, int rank_count,
                                    gmr_nccl_unique_id id, int rank);  /* ncclCommInitRank */
  gmr_nccl_result (*comm_init_all)(gmr_nccl_comm_handle *comms, int device_count,
                                   const int *devices);                /* ncclCommInitAll */
  gmr_nccl_result (*comm_destroy)(gmr_nccl_comm_handle comm);          /* ncclCommDestroy */
  gmr_nccl_result (*comm_cu_device)(gmr_nccl_comm_handle comm, int *device); /* ncclCommCuDevice */
  gmr_nccl_result (*comm_user_rank)(gmr_nccl_comm_handle comm, int *rank);   /* ncclCommUserRank */
  gmr_nccl_result (*comm_count)(gmr_nccl_comm_handle comm, int *count);      /* ncclCommCount */
  gmr_nccl_result (*comm_register)(gmr_nccl_comm_handle comm, void *buffer, size_t bytes,
                                   void **handle);                     /* ncclCommRegister */
  gmr_nccl_result (*comm_deregister)(gmr_nccl_comm_handle comm, void *handle); /* ncclCommDeregister */
  gmr_nccl_result (*all_reduce)(const void *send, void *recv, size_t count,
                                gmr_nccl_data_type type, gmr_nccl_red_op op,
                                gmr_nccl_comm_handle comm, gmr_stream stream); /* ncclAllReduce */
  gmr_nccl_result (*group_start)(void);                                /* ncclGroupStart */
  gmr_nccl_result (*group_end)(void);                                  /* ncclGroupEnd */
} gmr_nccl_api;

/* The library file gmr_nccl_library_open() loads when given no path. */
#define GMR_NCCL_LIBRARY_NAME "libnccl.so.2"

/* NCCL registration (ncclCommRegister) arrived in 2.19.1: older is refused. */
#define GMR_NCCL_MIN_VERSION 21901

/* ---- stack spec components ------------------------------------------- */

/**
 * Make this library's stack spec components (cumem, symmetric,
 * chunk_listener) known in context `ctx` (NULL: the default context), so
 * specs built there can name them. libgmr knows none of them by itself and
 * never loads this library: when the library is loaded (linked, or
 * dlopen'ed by the program) it registers them in the default context, so
 * only a context of the program's own (gmr_context_create) needs this call.
 * Registering again changes nothing. The context keeps pointers into this
 * library until it is destroyed (the default context: until the process
 * ends), so the library must stay loaded that long (no dlclose).
 * Thread-safe: yes (the context's lock). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_UNSUPPORTED (the libgmr this library runs with has
 * another extension interface: a libgmr_nccl of another gmr release; the
 * context remembers it, and a spec naming cumem there says so);
 * GMR_ERR_INVALID_ARGUMENT (a component of another library in `ctx` has one
 * of these names); GMR_ERR_BUSY (`ctx` holds as many components of optional
 * libraries as it can). On failure none is registered.
 * Source: gmr's own.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_register_components(gmr_context *ctx);

/* ---- the library ------------------------------------------------------ */

typedef struct gmr_nccl_library gmr_nccl_library;

/**
 * Load NCCL: dlopen(`path`, or GMR_NCCL_LIBRARY_NAME when NULL) and look up
 * every entry point of gmr_nccl_api.
 *
 * Ownership: `path` is read during the call only; close *out with
 *   gmr_nccl_library_close(); the library stays loaded until then.
 *   `failure` (may be NULL) receives the reason.
 * Thread-safe: yes (dlopen is). Stream/device: calls ncclGetVersion only
 *   (no CUDA call).
 * Source: NCCL's nccl.h (the entry points and ncclGetVersion).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL.
 *   GMR_ERR_NCCL              the file cannot be loaded (the message names
 *                             it and dlerror()'s reason: install NCCL or pass
 *                             its path), a symbol is missing, or NCCL is
 *                             older than GMR_NCCL_MIN_VERSION.
 *   GMR_ERR_OUT_OF_MEMORY     host memory.
 * On failure *out is NULL and nothing stays loaded.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_library_open(const char *path, gmr_nccl_library **out,
                                                       gmr_failure *failure);

/**
 * Use the caller's entry points (copied) instead of loading a file: a
 * program that links NCCL, or a test double.
 * Ownership: `api` is copied; the functions it points to must stay valid
 *   until gmr_nccl_library_close(). Close *out with gmr_nccl_library_close().
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: calls the table's ncclGetVersion only (no CUDA call).
 * Returns as gmr_nccl_library_open(), with GMR_ERR_INVALID_ARGUMENT for a
 * NULL table, a bad header (size below version 1, version 0) or a required
 * entry point missing (the message names it).
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_library_open_api(const gmr_nccl_api *api,
                                                           gmr_nccl_library **out,
                                                           gmr_failure *failure);

/**
 * Close a library: unload the file (if gmr loaded it) and free the object.
 * NULL: GMR_OK.
 * Ownership: `lib` and its entry points are gone afterwards.
 * Thread-safe: no (no other thread may use `lib` during or after it).
 * Stream/device: no CUDA call (dlclose only).
 * Returns:
 *   GMR_OK                    closed (or lib was NULL).
 *   GMR_ERR_BUSY              communicators made or wrapped with it exist.
 * On failure nothing changed: the library stays loaded and usable.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_library_close(gmr_nccl_library *lib);

/**
 * NCCL's version code (ncclGetVersion at open: 22803 for 2.28.3); 0 for
 * NULL.
 * Thread-safe: yes (fixed at open). Stream/device: no call.
 */
GMR_API int gmr_nccl_library_get_version(const gmr_nccl_library *lib);

/**
 * The entry points in use; NULL for NULL. Ownership: the library's, valid
 * until gmr_nccl_library_close().
 * Thread-safe: yes (fixed at open). Stream/device: no call.
 */
GMR_API const gmr_nccl_api *gmr_nccl_library_get_api(const gmr_nccl_library *lib);

/**
 * ncclGetUniqueId: the id every rank of a new communicator passes to
 * gmr_nccl_comm_init_rank() (rank 0 makes it and sends it to the others).
 * Ownership: *out is the caller's (plain bytes to send to the other ranks).
 * Thread-safe: yes. Stream/device: NCCL starts its bootstrap; no CUDA call.
 * Source: NCCL's ncclGetUniqueId.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  lib or out is NULL.
 *   GMR_ERR_UNSUPPORTED       the library's table has no ncclGetUniqueId.
 *   GMR_ERR_NCCL              NCCL failed (its result and message in
 *                             *failure, which may be NULL).
 * On failure *out holds nothing usable and no NCCL state was kept.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_get_unique_id(gmr_nccl_library *lib,
                                                        gmr_nccl_unique_id *out,
                                                        gmr_failure *failure);

/**
 * ncclGroupStart: calls after it (collectives on several communicators
 * driven by one thread, as with gmr_nccl_comm_init_all) are issued together
 * at the matching gmr_nccl_group_end().
 * Thread-safe: per thread, as in NCCL (the group is the calling thread's).
 * Stream/device: no CUDA call; the grouped collectives are stream-ordered
 *   when the group ends.
 * Source: NCCL's ncclGroupStart.
 * Returns:
 *   GMR_OK                    a group is open in this thread.
 *   GMR_ERR_INVALID_ARGUMENT  lib is NULL.
 *   GMR_ERR_UNSUPPORTED       the library's table has no ncclGroupStart.
 *   GMR_ERR_NCCL              NCCL failed (the message in *failure, which
 *                             may be NULL).
 * On failure no group was opened by this call.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_group_start(gmr_nccl_library *lib, gmr_failure *failure);

/**
 * ncclGroupEnd: issue the calls made since the matching
 * gmr_nccl_group_start() together.
 * Thread-safe: per thread, as in NCCL.
 * Stream/device: enqueues the grouped collectives on their streams (no
 *   host synchronisation); may block while NCCL connects ranks.
 * Source: NCCL's ncclGroupEnd.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (lib is NULL);
 * GMR_ERR_UNSUPPORTED (the table has no ncclGroupEnd); GMR_ERR_NCCL (NCCL
 * failed; the message in *failure, which may be NULL). After a failure the
 * state of the grouped calls is NCCL's (its ncclGroupEnd documents it).
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_group_end(gmr_nccl_library *lib, gmr_failure *failure);

/* ---- communicators ---------------------------------------------------- */

typedef struct gmr_nccl_comm gmr_nccl_comm;

/**
 * ncclCommInitRank with `device` current (restored after): one rank of a
 * communicator of `rank_count` ranks; every rank calls it (one per process
 * or thread) with the same id.
 *
 * Ownership: destroy *out with gmr_nccl_comm_destroy() (which destroys the
 *   NCCL communicator). `lib` must outlive it; `id` is read during the call.
 * Thread-safe: yes. Stream/device: makes `device` current around the call;
 *   blocks until every rank has joined.
 * Source: NCCL's ncclCommInitRank.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, rank outside
 * 0..rank_count-1, device negative); GMR_ERR_CUDA (the device could not be
 * made current); GMR_ERR_UNSUPPORTED; GMR_ERR_NCCL; GMR_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_comm_init_rank(gmr_nccl_library *lib, int rank_count,
                                                         const gmr_nccl_unique_id *id, int rank,
                                                         int device, gmr_nccl_comm **out,
                                                         gmr_failure *failure);

/**
 * ncclCommInitAll: one process drives `device_count` devices, one rank each
 * (rank i on devices[i]); out[i] receives rank i's communicator. The
 * caller's device is restored.
 * Ownership: `devices` is read during the call; the caller destroys each
 *   out[i] with gmr_nccl_comm_destroy(). `lib` must outlive them.
 * Thread-safe: yes. Stream/device: NCCL sets each device current while it
 *   initialises; cudaGetDevice / cudaSetDevice restore the caller's.
 * Source: NCCL's ncclCommInitAll.
 * Returns as gmr_nccl_comm_init_rank() (GMR_ERR_INVALID_ARGUMENT for a NULL
 * lib, devices or out, or device_count below 1; GMR_ERR_CUDA when the
 * caller's device cannot be read); on failure every out[i] is NULL and no
 * communicator is left.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_comm_init_all(gmr_nccl_library *lib, int device_count,
                                                        const int *devices, gmr_nccl_comm **out,
                                                        gmr_failure *failure);

/**
 * Wrap a communicator the program made itself (with NCCL from the same
 * library). gmr_nccl_comm_destroy() then frees only the wrapper; the
 * program destroys `handle` after that.
 * Ownership: `handle` stays the program's; `lib` must outlive the wrapper.
 * Thread-safe: yes. Stream/device: no CUDA call (ncclCommCuDevice,
 *   ncclCommUserRank and ncclCommCount are asked).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  lib, handle or out is NULL.
 *   GMR_ERR_NCCL              NCCL did not answer ncclCommCuDevice (or the
 *                             rank queries): not a live communicator.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the wrapper.
 * On failure *out is NULL (when out is not NULL) and `handle` is untouched.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_comm_wrap(gmr_nccl_library *lib,
                                                    gmr_nccl_comm_handle handle,
                                                    gmr_nccl_comm **out, gmr_failure *failure);

/**
 * Destroy the communicator (ncclCommDestroy, with its device current; for a
 * wrapped one, only the wrapper). NULL: GMR_OK.
 * Ownership: `comm` is gone afterwards; a wrapped handle stays the
 *   program's. `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: no (no other thread may use `comm` during or after it).
 * Stream/device: makes the communicator's device current around
 *   ncclCommDestroy (which waits for the communicator's work).
 * Source: NCCL's ncclCommDestroy.
 * Returns:
 *   GMR_OK                    destroyed (or comm was NULL).
 *   GMR_ERR_BUSY              registrations made on it are left (deregister
 *                             them first: the message says how many).
 *   GMR_ERR_CUDA              the device could not be made current.
 *   GMR_ERR_NCCL              ncclCommDestroy failed.
 * On failure nothing changed: the wrapper stays, so the call can be retried.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_comm_destroy(gmr_nccl_comm *comm, gmr_failure *failure);

/**
 * The NCCL communicator, for NCCL calls gmr does not wrap; NULL for NULL.
 * Ownership: borrowed: valid until gmr_nccl_comm_destroy() (a wrapped one:
 *   the program's, as before).
 * Thread-safe: yes (fixed at create). Stream/device: no call.
 */
GMR_API gmr_nccl_comm_handle gmr_nccl_comm_get_handle(const gmr_nccl_comm *comm);

/**
 * The communicator's CUDA device (ncclCommCuDevice at create); -1 for NULL.
 * Thread-safe: yes (fixed at create). Stream/device: no call.
 */
GMR_API int gmr_nccl_comm_get_device(const gmr_nccl_comm *comm);

/**
 * The communicator's rank (ncclCommUserRank at create, else the rank given);
 * -1 for NULL.
 * Thread-safe: yes (fixed at create). Stream/device: no call.
 */
GMR_API int gmr_nccl_comm_get_rank(const gmr_nccl_comm *comm);

/**
 * The number of ranks (ncclCommCount at create, else the count given); 0
 * for NULL.
 * Thread-safe: yes (fixed at create). Stream/device: no call.
 */
GMR_API int gmr_nccl_comm_get_rank_count(const gmr_nccl_comm *comm);

/**
 * ncclAllReduce of `count` elements of `type` from `send` into `recv` with
 * `op`, stream-ordered on `stream` (a stream of the communicator's device).
 * Units: count in elements of `type`.
 * Ownership: the buffers stay the caller's and must stay allocated until
 *   the work on `stream` has run.
 * Thread-safe: as NCCL (one thread per communicator at a time).
 * Stream/device: enqueues on `stream`; no host synchronisation.
 * Source: NCCL's ncclAllReduce.
 * Returns:
 *   GMR_OK                    enqueued.
 *   GMR_ERR_INVALID_ARGUMENT  comm is NULL, or a buffer is NULL with
 *                             count > 0.
 *   GMR_ERR_UNSUPPORTED       the library's table has no ncclAllReduce.
 *   GMR_ERR_NCCL              NCCL refused it (its result and message in
 *                             *failure, which may be NULL).
 * On failure nothing was enqueued by gmr (NCCL's own state is NCCL's).
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_all_reduce(gmr_nccl_comm *comm, const void *send,
                                                     void *recv, size_t count,
                                                     gmr_nccl_data_type type, gmr_nccl_red_op op,
                                                     gmr_stream stream, gmr_failure *failure);

/* ---- registration ----------------------------------------------------- */

typedef struct gmr_nccl_registration gmr_nccl_registration;

/**
 * Register every chunk of the pool whose stack `stack` heads with `comm`:
 * the chunks live now and, until gmr_nccl_deregister(), every chunk the
 * pool takes later; each chunk is deregistered before it goes back upstream
 * (trim, release before growth, the pool's destroy). Each chunk is
 * registered per physical allocation the driver reports in it (see the
 * banner). The chunks must be memory of the communicator's device.
 *
 * Ownership: `stack` is borrowed and must stay alive until
 *   gmr_nccl_deregister(); the chunk_listener layer refuses to be destroyed
 *   before that (GMR_ERR_BUSY). Free *out with gmr_nccl_deregister().
 * Thread-safe: yes. Stream/device: makes the communicator's device current
 *   around cuMemGetAddressRange and ncclCommRegister calls (restored).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  a NULL argument; no chunk_listener layer in
 *                             the stack (the message shows where to put it);
 *                             the pool is registered with this communicator
 *                             already.
 *   GMR_ERR_UNKNOWN_POINTER   a chunk is not memory the driver knows.
 *   GMR_ERR_NCCL              ncclCommRegister failed.
 *   GMR_ERR_OUT_OF_MEMORY, GMR_ERR_CUDA
 * On failure nothing stays registered and *out is NULL.
 * Later chunks: when registering a new chunk fails, the pool's allocation
 * fails with that status (the chunk went back upstream).
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_register_pool(gmr_nccl_comm *comm, gmr_resource *stack,
                                                        gmr_nccl_registration **out,
                                                        gmr_failure *failure);

/**
 * Register one buffer the caller owns, [ptr, ptr + bytes), per physical
 * allocation in it (as ncclCommRegister would be called by hand, but split
 * where the driver's allocations end). The caller keeps the memory alive and
 * calls gmr_nccl_deregister() before freeing it.
 * Units: bytes. Ownership: the buffer stays the caller's; free *out with
 *   gmr_nccl_deregister().
 * Thread-safe: yes. Stream/device: as gmr_nccl_register_pool().
 * Source: NCCL's ncclCommRegister; cuMemGetAddressRange (cuda.h).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, bytes 0);
 * GMR_ERR_UNKNOWN_POINTER (part of the range is not mapped device memory:
 * freed, or never allocated; the message gives the first address the driver
 * does not know); GMR_ERR_NCCL; GMR_ERR_OUT_OF_MEMORY; GMR_ERR_CUDA.
 * On failure nothing stays registered and *out is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_register_buffer(gmr_nccl_comm *comm, void *ptr,
                                                          size_t bytes,
                                                          gmr_nccl_registration **out,
                                                          gmr_failure *failure);

/**
 * Deregister everything `reg` registered (ncclCommDeregister per segment)
 * and, for a pool, stop following it; then free `reg`. NULL: GMR_OK.
 * Ownership: `reg` is gone after GMR_OK; the pool or buffer stays the
 *   caller's. `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: no (with other use of `reg`).
 * Stream/device: makes the communicator's device current around the
 *   ncclCommDeregister calls (restored).
 * Source: NCCL's ncclCommDeregister.
 * Returns:
 *   GMR_OK                    deregistered and freed (or reg was NULL).
 *   GMR_ERR_NCCL              a deregistration failed.
 *   GMR_ERR_CUDA              the device could not be made current.
 *   GMR_ERR_OUT_OF_MEMORY     (a pool) host memory for its list of chunks.
 * On failure `reg` stays valid and true to what NCCL holds, and the call can
 * be retried: for a pool, the chunks already deregistered in the call are
 * registered again and the pool stays followed; for a buffer, the segments
 * deregistered before the failure stay deregistered.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_deregister(gmr_nccl_registration *reg,
                                                     gmr_failure *failure);

/**
 * True when [ptr, ptr + bytes) lies inside one registered segment of `reg`:
 * a collective on that buffer can be zero-copy. false for NULL reg or ptr.
 * Thread-safe: yes (under the registration's lock; a pool's chunk may be
 *   deregistered right after by another thread's trim).
 * Stream/device: no call.
 */
GMR_API bool gmr_nccl_registration_covers(gmr_nccl_registration *reg, const void *ptr,
                                          size_t bytes);

#define GMR_NCCL_REGISTRATION_STATS_VERSION 1u

typedef struct gmr_nccl_registration_stats {
  size_t size;      /* sizeof as the caller knows it */
  uint32_t version; /* GMR_NCCL_REGISTRATION_STATS_VERSION */
  size_t chunk_count;        /* chunks (or the one buffer) registered now */
  size_t segment_count;      /* ncclCommRegister handles held now */
  size_t registered_bytes;
  uint64_t register_count;   /* ncclCommRegister calls that succeeded */
  uint64_t deregister_count; /* ncclCommDeregister calls that succeeded */
  uint64_t failure_count;    /* NCCL or driver calls that failed */
} gmr_nccl_registration_stats;

#define GMR_NCCL_REGISTRATION_STATS_INIT \
  {sizeof(gmr_nccl_registration_stats), GMR_NCCL_REGISTRATION_STATS_VERSION, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with the registration's counters (the caller set size and
 * version: GMR_NCCL_REGISTRATION_STATS_INIT; fields past `size` are left
 * alone).
 * Units: bytes, unless a field is named _count.
 * Thread-safe: yes (a snapshot under the registration's lock).
 * Stream/device: no call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  reg or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nccl_registration_get_stats(
    gmr_nccl_registration *reg, gmr_nccl_registration_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_NCCL_H_ */
