/*
 * tools/bench_vmm/vmm_calls.c: replay allocation traces through stacks on
 * the host simulation of CUDA and count, per pass, the driver calls a VMM
 * pool makes (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease, cuMemAddressReserve, cuMemAddressFree) and the stream-order
 * calls (cudaEventRecord, cudaEventQuery, cudaStreamWaitEvent), with the
 * peak held over the peak live bytes. The proxy for cold and warm speed:
 * on an H100 a driver call costs tens of microseconds (GPU_FACTS, bench_vmm),
 * a pooled allocation tens of nanoseconds. Footprint does not depend on
 * timing, so the peaks equal a GPU's.
 *
 *   bazel run -c opt //tools/bench_vmm:vmm_calls -- --passes 3 [--capture] \
 *       vmm $PWD/tools/traces/gpt2_train.csv.gz
 *
 * Passes as tools/replay runs them: every pass replays the whole trace on
 * the same stack; what a pass leaves live is freed at its end, then every
 * stream is synchronised. Capture rows are ignored, or with --capture the
 * stream captures a graph between them (destroyed at once, never launched).
 * Output: one line per pass, "SPEC TRACE pass N peak/live X create C map M
 * access A unmap U release R reserve V free F record E query Q wait W".
 * Exit status: 0 all replays succeeded; 1 a replay failed; 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tools/replay/trace.h"

static const gmr_cuda_call kCounted[] = {
    GMR_CUDA_CALL_MEM_CREATE,       GMR_CUDA_CALL_MEM_MAP,      GMR_CUDA_CALL_MEM_SET_ACCESS,
    GMR_CUDA_CALL_MEM_UNMAP,        GMR_CUDA_CALL_MEM_RELEASE,  GMR_CUDA_CALL_MEM_ADDRESS_RESERVE,
    GMR_CUDA_CALL_MEM_ADDRESS_FREE, GMR_CUDA_CALL_EVENT_RECORD, GMR_CUDA_CALL_EVENT_QUERY,
    GMR_CUDA_CALL_STREAM_WAIT_EVENT};
static const char *const kNames[] = {"create",  "map",  "access", "unmap", "release",
                                     "reserve", "free", "record", "query", "wait"};
#define COUNTED (sizeof kCounted / sizeof kCounted[0])

static void snapshot(uint64_t *out) {
  for (size_t i = 0; i < COUNTED; ++i) out[i] = gmr_cuda_sim_get_call_count(kCounted[i]);
}

/* Replay `passes` passes of `trace` through a fresh stack of `spec`. */
static int run(const char *spec, const char *name, const replay_trace *t, size_t passes,
               bool capture) {
  gmr_stack *stack = NULL;
  gmr_spec_error error;
  if (gmr_stack_create(spec, &stack, &error) != GMR_OK) {
    fprintf(stderr, "vmm_calls: %s\n", error.message);
    return 1;
  }
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_stream *streams = calloc(t->stream_count + 1, sizeof *streams);
  void **ptrs = calloc(t->summary.alloc_count + 1, sizeof *ptrs);
  size_t *sizes = calloc(t->summary.alloc_count + 1, sizeof *sizes);
  uint32_t *alloc_stream = calloc(t->summary.alloc_count + 1, sizeof *alloc_stream);
  int rc = streams != NULL && ptrs != NULL && sizes != NULL && alloc_stream != NULL ? 0 : 1;
  for (size_t i = 0; rc == 0 && i < t->stream_count; ++i) {
    if (t->stream_values[i] != 0 && gmr_cuda_stream_create(&streams[i]) != GMR_OK) rc = 1;
  }
  for (size_t pass = 1; rc == 0 && pass <= passes; ++pass) {
    uint64_t before[COUNTED], after[COUNTED];
    snapshot(before);
    gmr_footprint fp;
    size_t peak = 0;
    for (size_t i = 0; rc == 0 && i < t->event_count; ++i) {
      const replay_event *e = &t->events[i];
      if (e->op == REPLAY_OP_ALLOC) {
        gmr_failure f = GMR_FAILURE_INIT;
        gmr_status st = gmr_resource_allocate_ex(
            top, (size_t)e->size_bytes, 0, streams[e->stream_index], &ptrs[e->alloc_index], &f);
        if (st != GMR_OK) {
          fprintf(stderr, "vmm_calls: %s line %" PRIu64 ": allocate %" PRIu64 ": %s: %s\n", name,
                  e->line, e->size_bytes, gmr_status_name(st), f.message);
          rc = 1;
        }
        sizes[e->alloc_index] = (size_t)e->size_bytes;
        alloc_stream[e->alloc_index] = e->stream_index;
      } else if (capture && e->op == REPLAY_OP_CAPTURE_BEGIN) {
        if (gmr_cuda_stream_begin_capture(streams[e->stream_index]) != GMR_OK) rc = 1;
      } else if (capture && e->op == REPLAY_OP_CAPTURE_END) {
        gmr_graph g = NULL;
        if (gmr_cuda_stream_end_capture(streams[e->stream_index], &g) != GMR_OK ||
            gmr_cuda_graph_destroy(g) != GMR_OK) {
          fprintf(stderr, "vmm_calls: %s line %" PRIu64 ": the capture broke\n", name, e->line);
          rc = 1;
        }
      } else if (e->op == REPLAY_OP_FREE && ptrs[e->alloc_index] != NULL) {
        gmr_status st = gmr_resource_deallocate(top, ptrs[e->alloc_index], (size_t)e->size_bytes, 0,
                                                streams[e->stream_index]);
        if (st != GMR_OK) {
          fprintf(stderr, "vmm_calls: %s line %" PRIu64 ": free: %s\n", name, e->line,
                  gmr_status_name(st));
          rc = 1;
        }
        ptrs[e->alloc_index] = NULL;
      }
      if (gmr_resource_get_footprint(top, &fp) == GMR_OK && fp.held_bytes > peak) {
        peak = fp.held_bytes;
      }
    }
    for (size_t i = 0; i < t->summary.alloc_count; ++i) {
      if (ptrs[i] == NULL) continue;
      if (gmr_resource_deallocate(top, ptrs[i], sizes[i], 0, streams[alloc_stream[i]]) != GMR_OK)
        rc = 1;
      ptrs[i] = NULL;
    }
    for (size_t i = 0; i < t->stream_count; ++i) {
      if (streams[i] != NULL) GMR_IGNORE_STATUS(gmr_cuda_stream_synchronize(streams[i]));
    }
    GMR_IGNORE_STATUS(gmr_device_synchronize());
    snapshot(after);
    uint64_t driver = 0;
    for (size_t i = 0; i < 7; ++i) driver += after[i] - before[i];
    printf("%-34s %-20s pass %zu peak/live %.4f driver %6" PRIu64, spec, name, pass,
           (double)peak / (double)t->summary.peak_live_bytes, driver);
    for (size_t i = 0; i < COUNTED; ++i) printf(" %s %" PRIu64, kNames[i], after[i] - before[i]);
    printf("\n");
  }
  for (size_t i = 0; i < t->stream_count; ++i) {
    if (streams[i] != NULL) GMR_IGNORE_STATUS(gmr_cuda_stream_destroy(streams[i]));
  }
  if (gmr_stack_destroy(stack) != GMR_OK) {
    fprintf(stderr, "vmm_calls: destroying %s failed\n", spec);
    rc = 1;
  }
  free(streams);
  free(ptrs);
  free(sizes);
  free(alloc_stream);
  return rc;
}

int main(int argc, char **argv) {
  size_t passes = 3;
  bool capture = false;
  int i = 1;
  for (; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--passes") == 0) {
      passes = (size_t)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--capture") == 0) {
      capture = true;
    } else {
      break;
    }
  }
  if (argc - i < 2 || passes == 0 || passes > 100) {
    fprintf(stderr, "usage: vmm_calls [--passes N] [--capture] SPEC TRACE...\n");
    return 2;
  }
  const char *spec = argv[i++];
  int rc = 0;
  for (; i < argc; ++i) {
    replay_trace *t = NULL;
    char err[512];
    if (replay_trace_read(argv[i], NULL, &t, err, sizeof err) != GMR_OK) {
      fprintf(stderr, "vmm_calls: %s\n", err);
      return 1;
    }
    gmr_cuda_sim_config c = GMR_CUDA_SIM_CONFIG_DEFAULT;
    if (gmr_cuda_sim_enable(&c) != GMR_OK) {
      fprintf(stderr, "vmm_calls: gmr_cuda_sim_enable failed\n");
      replay_trace_destroy(t);
      return 1;
    }
    const char *name = strrchr(argv[i], '/');
    name = name != NULL ? name + 1 : argv[i];
    rc |= run(spec, name, t, passes, capture);
    replay_trace_destroy(t);
  }
  return rc;
}
