/*
 * tools/bench_cuda_calls: host time per call of the CUDA calls the pools make
 * on their paths (docs/stream_ordering.md), one thread and many threads each
 * on a stream of its own: cudaStreamGetId, the capture-mode exchange around
 * it, cudaStreamGetCaptureInfo, cudaEventRecord, cudaEventQuery,
 * cudaGetDevice. Straight runtime calls, no gmr resource: the numbers say what
 * each call costs the pools, so their call counts can be turned into ns.
 * Also the driver's cuStreamGetId (through cudaGetDriverEntryPointByVersion):
 * its cost, and what it does during a global-mode capture (printed as facts:
 * if the driver's call is legal there, the pools could ask the id without
 * the two mode exchanges).
 *
 *   bench_cuda_calls [--iterations N] [--threads 1,16]
 *
 * Needs a GPU; exits 2 without one.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct thread_ctx {
  cudaStream_t stream;
  cudaEvent_t event;
  long iterations;
  int which;
  double ns_per_call;
  cudaError_t error;
  pthread_barrier_t *start;
} thread_ctx;

typedef int (*stream_get_id_fn)(cudaStream_t stream, unsigned long long *id); /* CUresult */
static stream_get_id_fn driver_stream_get_id;

typedef enum call_kind {
  CALL_GET_DEVICE,
  CALL_STREAM_GET_ID,
  CALL_STREAM_GET_ID_PER_THREAD,
  CALL_EXCHANGE_MODE,
  CALL_STREAM_GET_ID_RELAXED,
  CALL_CAPTURE_INFO,
  CALL_EVENT_RECORD,
  CALL_EVENT_QUERY,
  CALL_EVENT_QUERY_RELAXED,
  CALL_DRIVER_STREAM_GET_ID,
  CALL_KIND_COUNT
} call_kind;

static const char *const call_names[CALL_KIND_COUNT] = {
    "cudaGetDevice",
    "cudaStreamGetId (created stream)",
    "cudaStreamGetId (cudaStreamPerThread)",
    "cudaThreadExchangeStreamCaptureMode (one)",
    "relaxed + cudaStreamGetId + restore",
    "cudaStreamGetCaptureInfo",
    "cudaEventRecord (idle stream)",
    "cudaEventQuery (done)",
    "relaxed + cudaEventQuery + restore",
    "cuStreamGetId (driver entry point)",
};

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* One call of kind `which`; the exchange counts as two calls per round. */
static cudaError_t one(thread_ctx *c) {
  unsigned long long id = 0;
  int device = 0;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaSuccess;
  switch ((call_kind)c->which) {
    case CALL_GET_DEVICE:
      return cudaGetDevice(&device);
    case CALL_STREAM_GET_ID:
      return cudaStreamGetId(c->stream, &id);
    case CALL_STREAM_GET_ID_PER_THREAD:
      return cudaStreamGetId(cudaStreamPerThread, &id);
    case CALL_EXCHANGE_MODE:
      err = cudaThreadExchangeStreamCaptureMode(&mode);
      if (err == cudaSuccess) err = cudaThreadExchangeStreamCaptureMode(&mode);
      return err;
    case CALL_STREAM_GET_ID_RELAXED:
      err = cudaThreadExchangeStreamCaptureMode(&mode);
      if (err != cudaSuccess) return err;
      err = cudaStreamGetId(c->stream, &id);
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      return err;
    case CALL_CAPTURE_INFO:
      return cudaStreamGetCaptureInfo(c->stream, &status, NULL, NULL, NULL, NULL, NULL);
    case CALL_EVENT_RECORD:
      return cudaEventRecord(c->event, c->stream);
    case CALL_EVENT_QUERY:
      return cudaEventQuery(c->event);
    case CALL_EVENT_QUERY_RELAXED:
      err = cudaThreadExchangeStreamCaptureMode(&mode);
      if (err != cudaSuccess) return err;
      err = cudaEventQuery(c->event);
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      return err;
    case CALL_DRIVER_STREAM_GET_ID:
      if (driver_stream_get_id == NULL) return cudaErrorNotSupported;
      return driver_stream_get_id(c->stream, &id) == 0 ? cudaSuccess : cudaErrorUnknown;
    default:
      return cudaErrorInvalidValue;
  }
}

static void *run_thread(void *arg) {
  thread_ctx *c = arg;
  c->error = cudaSetDevice(0);
  if (c->error == cudaSuccess) c->error = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (c->error == cudaSuccess) c->error = cudaEventCreateWithFlags(&c->event, cudaEventDisableTiming);
  if (c->error == cudaSuccess) c->error = cudaEventRecord(c->event, c->stream);
  if (c->error == cudaSuccess) c->error = cudaStreamSynchronize(c->stream);
  for (long i = 0; i < 1000 && c->error == cudaSuccess; ++i) c->error = one(c); /* warm */
  pthread_barrier_wait(c->start);
  double t0 = now_ns();
  for (long i = 0; i < c->iterations && c->error == cudaSuccess; ++i) c->error = one(c);
  double t1 = now_ns();
  int per_round = c->which == CALL_EXCHANGE_MODE ? 2 : 1;
  c->ns_per_call = (t1 - t0) / (double)(c->iterations * per_round);
  if (c->event != NULL) (void)cudaEventDestroy(c->event);
  if (c->stream != NULL) (void)cudaStreamDestroy(c->stream);
  return NULL;
}

/* Mean ns per call over `threads` threads, each on its own stream. */
static int measure(int which, int threads, long iterations, double *ns) {
  thread_ctx *ctx = calloc((size_t)threads, sizeof *ctx);
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  pthread_barrier_t start;
  if (ctx == NULL || ids == NULL || pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) {
    free(ctx);
    free(ids);
    return 1;
  }
  for (int t = 0; t < threads; ++t) {
    ctx[t].iterations = iterations;
    ctx[t].which = which;
    ctx[t].start = &start;
    pthread_create(&ids[t], NULL, run_thread, &ctx[t]);
  }
  double sum = 0;
  int failed = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    if (ctx[t].error != cudaSuccess) {
      fprintf(stderr, "%s: %s\n", call_names[which], cudaGetErrorName(ctx[t].error));
      failed = 1;
    }
    sum += ctx[t].ns_per_call;
  }
  pthread_barrier_destroy(&start);
  *ns = sum / threads;
  free(ctx);
  free(ids);
  return failed;
}

/* One probe: begin a global-mode capture on `captured`, make `call` with the
 * thread in global mode, end the capture; print what the call and the end
 * returned. */
static void probe(const char *what, cudaStream_t captured, cudaStream_t named, int use_driver) {
  cudaError_t begin = cudaStreamBeginCapture(captured, cudaStreamCaptureModeGlobal);
  if (begin != cudaSuccess) {
    printf("  %-50s could not begin a capture: %s\n", what, cudaGetErrorName(begin));
    return;
  }
  unsigned long long id = 0;
  int result = use_driver ? driver_stream_get_id(named, &id) : (int)cudaStreamGetId(named, &id);
  cudaGraph_t graph = NULL;
  cudaError_t end = cudaStreamEndCapture(captured, &graph);
  if (graph != NULL) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  printf("  %-50s call -> %d %s, capture -> %s\n", what, result,
         use_driver ? "" : cudaGetErrorName((cudaError_t)result), cudaGetErrorName(end));
}

static void capture_probes(void) {
  cudaStream_t a = NULL, b = NULL;
  if (cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) != cudaSuccess) {
    printf("capture probes: no streams\n");
    return;
  }
  printf("capture probes (global-mode capture, the thread in global mode; CUresult 0 = success,\n"
         "900 = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED):\n");
  probe("cudaStreamGetId on the capturing stream", a, a, 0);
  probe("cudaStreamGetId on another stream", a, b, 0);
  if (driver_stream_get_id != NULL) {
    probe("cuStreamGetId (driver) on the capturing stream", a, a, 1);
    probe("cuStreamGetId (driver) on another stream", a, b, 1);
  } else {
    printf("  cuStreamGetId: no driver entry point\n");
  }
  (void)cudaStreamDestroy(a);
  (void)cudaStreamDestroy(b);
}

int main(int argc, char **argv) {
  long iterations = 200000;
  int thread_counts[8] = {1, 16};
  int n_counts = 2;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = strtol(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      n_counts = 0;
      for (char *tok = strtok(argv[++i], ","); tok != NULL && n_counts < 8; tok = strtok(NULL, ",")) {
        thread_counts[n_counts++] = atoi(tok);
      }
    } else {
      fprintf(stderr, "usage: %s [--iterations N] [--threads 1,16]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    fprintf(stderr, "bench_cuda_calls: no CUDA device (%s): run it on the GPU machine\n",
            cudaGetErrorName(err));
    return 2;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) printf("device 0: %s\n", prop.name);
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuStreamGetId", &fn, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    /* void * holds a function pointer on every platform CUDA supports. */
    memcpy(&driver_stream_get_id, &fn, sizeof fn);
  }
  capture_probes();
  printf("%-45s", "host ns per call (mean over threads)");
  for (int k = 0; k < n_counts; ++k) printf("  %4d thr", thread_counts[k]);
  printf("\n");
  int failed = 0;
  for (int which = 0; which < CALL_KIND_COUNT; ++which) {
    printf("%-45s", call_names[which]);
    for (int k = 0; k < n_counts; ++k) {
      double ns = 0;
      failed |= measure(which, thread_counts[k], iterations, &ns);
      printf("  %8.1f", ns);
    }
    printf("\n");
    fflush(stdout);
  }
  return failed;
}
