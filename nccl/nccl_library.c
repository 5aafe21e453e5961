/*
 * nccl/nccl_library.c: loading NCCL at run time, or taking the caller's
 * table of entry points; NCCL failure messages; unique ids and groups
 * (gmr/nccl/nccl.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "nccl/nccl_internal.h"

/* Where each entry point lives in gmr_nccl_api, under NCCL's symbol name. */
typedef struct entry_point {
  const char *symbol;
  size_t offset;
  bool required; /* by gmr_nccl_library_open_api; the file must have all but the last */
} entry_point;

static const entry_point entry_points[] = {
    {"ncclGetVersion", offsetof(gmr_nccl_api, get_version), true},
    {"ncclGetErrorString", offsetof(gmr_nccl_api, get_error_string), true},
    {"ncclCommRegister", offsetof(gmr_nccl_api, comm_register), true},
    {"ncclCommDeregister", offsetof(gmr_nccl_api, comm_deregister), true},
    {"ncclCommDestroy", offsetof(gmr_nccl_api, comm_destroy), true},
    {"ncclCommCuDevice", offsetof(gmr_nccl_api, comm_cu_device), true},
    {"ncclGetUniqueId", offsetof(gmr_nccl_api, get_unique_id), false},
    {"ncclCommInitRank", offsetof(gmr_nccl_api, comm_init_rank), false},
    {"ncclCommInitAll", offsetof(gmr_nccl_api, comm_init_all), false},
    {"ncclCommUserRank", offsetof(gmr_nccl_api, comm_user_rank), false},
    {"ncclCommCount", offsetof(gmr_nccl_api, comm_count), false},
    {"ncclAllReduce", offsetof(gmr_nccl_api, all_reduce), false},
    {"ncclGroupStart", offsetof(gmr_nccl_api, group_start), false},
    {"ncclGroupEnd", offsetof(gmr_nccl_api, group_end), false},
    /* Since NCCL 2.13; only improves messages. */
    {"ncclGetLastError", offsetof(gmr_nccl_api, get_last_error), false},
};

#define ENTRY_POINT_COUNT (sizeof entry_points / sizeof entry_points[0])

/* The slot of `api` at `offset` holds a function pointer; C gives no
 * generic function pointer type, so slots are read and written as bytes
 * (void * and function pointers share a representation where dlsym
 * exists: POSIX requires it). */
static bool slot_is_set(const gmr_nccl_api *api, size_t offset) {
  void *fn = NULL;
  memcpy(&fn, (const char *)api + offset, sizeof fn);
  return fn != NULL;
}

const char *gmr__nccl_result_name(gmr_nccl_result result) {
  switch (result) {
    case GMR_NCCL_SUCCESS:
      return "ncclSuccess";
    case GMR_NCCL_UNHANDLED_CUDA_ERROR:
      return "ncclUnhandledCudaError";
    case GMR_NCCL_SYSTEM_ERROR:
      return "ncclSystemError";
    case GMR_NCCL_INTERNAL_ERROR:
      return "ncclInternalError";
    case GMR_NCCL_INVALID_ARGUMENT:
      return "ncclInvalidArgument";
    case GMR_NCCL_INVALID_USAGE:
      return "ncclInvalidUsage";
    case GMR_NCCL_REMOTE_ERROR:
      return "ncclRemoteError";
    case GMR_NCCL_IN_PROGRESS:
      return "ncclInProgress";
  }
  return "ncclResult(unknown)";
}

gmr_status gmr__nccl_fail(const gmr_nccl_library *lib, gmr_nccl_comm_handle comm,
                          gmr_failure *failure, const char *call, gmr_nccl_result result,
                          const char *what) {
  const char *text = lib->api.get_error_string != NULL ? lib->api.get_error_string(result) : NULL;
  const char *last = comm != NULL && lib->api.get_last_error != NULL
                         ? lib->api.get_last_error(comm)
                         : NULL;
  return gmr__failure_set(failure, GMR_ERR_NCCL, "%s%s%s failed: %s (%d)%s%s%s%s", call,
                          what != NULL ? " " : "", what != NULL ? what : "",
                          gmr__nccl_result_name(result), (int)result, text != NULL ? ": " : "",
                          text != NULL ? text : "", last != NULL && last[0] != '\0' ? "; " : "",
                          last != NULL ? last : "");
}

static gmr_status finish_open(gmr_nccl_library *lib, gmr_nccl_library **out,
                              gmr_failure *failure) {
  int version = 0;
  gmr_nccl_result r = lib->api.get_version(&version);
  gmr_status st = GMR_OK;
  if (r != GMR_NCCL_SUCCESS) {
    st = gmr__nccl_fail(lib, NULL, failure, "ncclGetVersion", r, NULL);
  } else if (version < GMR_NCCL_MIN_VERSION) {
    st = gmr__failure_set(failure, GMR_ERR_NCCL,
                          "NCCL %d is too old: buffer registration (ncclCommRegister) needs "
                          "NCCL %d or newer",
                          version, GMR_NCCL_MIN_VERSION);
  }
  if (st != GMR_OK) {
    if (lib->dl != NULL) dlclose(lib->dl);
    free(lib);
    return st;
  }
  lib->version = version;
  pthread_mutex_init(&lib->lock, NULL);
  *out = lib;
  return GMR_OK;
}

static gmr_status nccl_library_open_impl(const char *path, gmr_nccl_library **out,
                                         gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: out is NULL");
  *out = NULL;
  const char *file = path != NULL ? path : GMR_NCCL_LIBRARY_NAME;
  gmr_nccl_library *lib = calloc(1, sizeof *lib);
  if (lib == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  lib->dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (lib->dl == NULL) {
    const char *why = dlerror();
    free(lib);
    /* The advice first: a long path or dlerror() is what gets cut. */
    return gmr__failure_set(failure, GMR_ERR_NCCL,
                            "NCCL not loaded: install NCCL (libnccl2) or give the path of "
                            "libnccl.so.2; dlopen(%s): %s",
                            file, why != NULL ? why : "no reason given");
  }
  lib->api.size = sizeof lib->api;
  lib->api.version = GMR_NCCL_API_VERSION;
  for (size_t i = 0; i < ENTRY_POINT_COUNT; ++i) {
    void *fn = dlsym(lib->dl, entry_points[i].symbol);
    bool optional = i + 1 == ENTRY_POINT_COUNT;
    if (fn == NULL && !optional) {
      dlclose(lib->dl);
      free(lib);
      return gmr__failure_set(failure, GMR_ERR_NCCL,
                              "no %s in the NCCL library (gmr needs NCCL 2.19 or newer): %s",
                              entry_points[i].symbol, file);
    }
    memcpy((char *)&lib->api + entry_points[i].offset, &fn, sizeof fn);
  }
  return finish_open(lib, out, failure);
}

gmr_status gmr_nccl_library_open(const char *path, gmr_nccl_library **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_library_open_impl(path, out, f));
}

static gmr_status nccl_library_open_api_impl(const gmr_nccl_api *api, gmr_nccl_library **out,
                                             gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: out is NULL");
  *out = NULL;
  if (api == NULL || api->size < sizeof(gmr_nccl_api) || api->version == 0) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "nccl: the table of entry points needs size and version set "
                            "(sizeof(gmr_nccl_api), GMR_NCCL_API_VERSION)");
  }
  for (size_t i = 0; i < ENTRY_POINT_COUNT; ++i) {
    if (entry_points[i].required && !slot_is_set(api, entry_points[i].offset)) {
      return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                              "nccl: the table of entry points has no %s, which gmr needs",
                              entry_points[i].symbol);
    }
  }
  gmr_nccl_library *lib = calloc(1, sizeof *lib);
  if (lib == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "nccl: host memory");
  lib->api = *api;
  lib->api.size = sizeof lib->api;
  return finish_open(lib, out, failure);
}

gmr_status gmr_nccl_library_open_api(const gmr_nccl_api *api, gmr_nccl_library **out,
                                     gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_library_open_api_impl(api, out, f));
}

gmr_status gmr_nccl_library_close(gmr_nccl_library *lib) {
  if (lib == NULL) return GMR_OK;
  pthread_mutex_lock(&lib->lock);
  size_t comms = lib->comm_count;
  pthread_mutex_unlock(&lib->lock);
  if (comms != 0) return GMR_ERR_BUSY;
  if (lib->dl != NULL) dlclose(lib->dl);
  pthread_mutex_destroy(&lib->lock);
  free(lib);
  return GMR_OK;
}

int gmr_nccl_library_get_version(const gmr_nccl_library *lib) {
  return lib == NULL ? 0 : lib->version;
}

const gmr_nccl_api *gmr_nccl_library_get_api(const gmr_nccl_library *lib) {
  return lib == NULL ? NULL : &lib->api;
}

void gmr__nccl_library_add_comm(gmr_nccl_library *lib) {
  pthread_mutex_lock(&lib->lock);
  lib->comm_count++;
  pthread_mutex_unlock(&lib->lock);
}

void gmr__nccl_library_remove_comm(gmr_nccl_library *lib) {
  pthread_mutex_lock(&lib->lock);
  lib->comm_count--;
  pthread_mutex_unlock(&lib->lock);
}

static gmr_status missing(gmr_failure *failure, const char *symbol) {
  return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                          "nccl: the library's table has no %s", symbol);
}

static gmr_status nccl_get_unique_id_impl(gmr_nccl_library *lib, gmr_nccl_unique_id *out,
                                          gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (lib == NULL || out == NULL) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: a NULL argument");
  }
  if (lib->api.get_unique_id == NULL) return missing(failure, "ncclGetUniqueId");
  gmr_nccl_result r = lib->api.get_unique_id(out);
  return r == GMR_NCCL_SUCCESS ? GMR_OK
                               : gmr__nccl_fail(lib, NULL, failure, "ncclGetUniqueId", r, NULL);
}

gmr_status gmr_nccl_get_unique_id(gmr_nccl_library *lib, gmr_nccl_unique_id *out,
                                  gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, nccl_get_unique_id_impl(lib, out, f));
}

static gmr_status group_call(gmr_nccl_library *lib, bool start, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (lib == NULL) return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "nccl: lib is NULL");
  gmr_nccl_result (*fn)(void) = start ? lib->api.group_start : lib->api.group_end;
  const char *name = start ? "ncclGroupStart" : "ncclGroupEnd";
  if (fn == NULL) return missing(failure, name);
  gmr_nccl_result r = fn();
  return r == GMR_NCCL_SUCCESS ? GMR_OK : gmr__nccl_fail(lib, NULL, failure, name, r, NULL);
}

gmr_status gmr_nccl_group_start(gmr_nccl_library *lib, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, group_call(lib, true, f));
}

gmr_status gmr_nccl_group_end(gmr_nccl_library *lib, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, group_call(lib, false, f));
}
