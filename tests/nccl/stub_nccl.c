/*
 * tests/nccl/stub_nccl.c: a stand-in for libnccl.so.2 that
 * gmr_nccl_library_open() loads with dlopen (tests/nccl/BUILD.bazel builds
 * three variants). Every function exists with NCCL's name and signature and
 * does the least that lets the loader's test see it was reached; the test
 * reads stub_nccl_calls() through its own dlopen of the same file.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int ncclResult_t; /* an enum in nccl.h: int-sized */
typedef struct ncclComm *ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

static int calls;
static char comms[8]; /* distinct addresses to hand out as communicators */

int stub_nccl_calls(void) { return calls; }

ncclResult_t ncclGetVersion(int *version) {
  calls++;
  *version = STUB_NCCL_VERSION;
  return 0;
}

const char *ncclGetErrorString(ncclResult_t result) { return result == 0 ? "no error" : "stub"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  calls++;
  memset(id, 7, sizeof *id);
  return 0;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  calls++;
  if (id.internal[0] != 7 || rank >= nranks || rank >= 8) return 4; /* ncclInvalidArgument */
  *comm = (ncclComm_t)&comms[rank];
  return 0;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  calls++;
  (void)devlist;
  for (int i = 0; i < ndev && i < 8; ++i) comm[i] = (ncclComm_t)&comms[i];
  return 0;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  calls++;
  return comm != NULL ? 0 : 4;
}

ncclResult_t ncclCommCuDevice(ncclComm_t comm, int *device) {
  calls++;
  *device = (int)((char *)comm - comms);
  return 0;
}

ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank) {
  *rank = (int)((char *)comm - comms);
  return 0;
}

ncclResult_t ncclCommCount(ncclComm_t comm, int *count) {
  (void)comm;
  *count = 2;
  return 0;
}

#ifndef STUB_NCCL_NO_REGISTER
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  calls++;
  (void)comm;
  (void)size;
  *handle = buff;
  return 0;
}
#endif

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  calls++;
  (void)comm;
  (void)handle;
  return 0;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype,
                           int op, ncclComm_t comm, void *stream) {
  calls++;
  (void)comm;
  (void)stream;
  /* One int32 sum on host memory, enough to see the arguments arrive. */
  if (datatype == 2 && op == 0 && count == 1) {
    *(int32_t *)recvbuff = *(const int32_t *)sendbuff * 2;
  }
  return 0;
}

ncclResult_t ncclGroupStart(void) {
  calls++;
  return 0;
}

ncclResult_t ncclGroupEnd(void) {
  calls++;
  return 0;
}
