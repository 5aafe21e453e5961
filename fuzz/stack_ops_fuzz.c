/*
 * fuzz/stack_ops_fuzz.c: libFuzzer target that runs a sequence of operations,
 * decoded from the input, against a stack with a tracking adaptor on top
 * (tracking > limiting > pool > cuda, fixed_block, graph_arena, oom, host
 * leaves, ...), on the host simulation of CUDA, with an accounting oracle after
 * every step.
 *
 * Input: the first byte picks the stack (see `stacks`); then operations of a
 * few bytes each: allocate (size, alignment, stream), free, bad frees (double
 * free, wrong size, interior or unknown pointer, bad alignment, wrong
 * stream), a NULL free, trim, synchronise, hold or release a stream,
 * destroy and recreate a stream, inject a CUDA failure, begin or end a CUDA
 * graph capture (with the graph arena's sessions: explicit or automatic,
 * claimed and released).
 *
 * The oracle, after every operation:
 *   - tracking's live bytes and live allocation count equal the sum and count
 *     of the allocations the harness holds;
 *   - a limiting layer's used bytes equal the sum of their charges
 *     (256-byte units);
 *   - a pool's invariants hold (gmr_resource_check's walk, with its text);
 *   - a successful allocation is non-NULL (bytes > 0) and aligned; a failed
 *     one leaves NULL;
 *   - every bad call returns a status other than GMR_OK and changes nothing
 *     (the counts above stay; the allocation it named is still live and is
 *     later freed with GMR_OK);
 *   - a free of a live allocation with its own arguments returns GMR_OK
 *     (unless a CUDA failure was injected or a stream captures: then it may
 *     fail and must change nothing).
 * At the end every allocation is freed, the stack destroyed with GMR_OK, and
 * no simulated CUDA object is left alive or was named after its death.
 *
 * Run it with fuzz/run.sh stack_ops SECONDS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/tracking_adaptor.h"

/* The same sanitizer options by hand as under fuzz/run.sh: a huge request
 * gets NULL from malloc (the code under test must cope) instead of ending the
 * run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

static const char *const stacks[] = {
    "tracking > limiting(limit=256MiB) > pool(arenas=2, min_growth=1MiB, max_growth=8MiB, "
    "granularity=64KiB) > cuda(kind=async)",
    "tracking > pool(arenas=1, recent_frees=4, min_growth=256KiB, max_growth=4MiB, "
    "granularity=4KiB) > cuda(kind=device)",
    "tracking > fixed_block(block=64KiB, blocks_per_chunk=8, max_chunks=16) > cuda(kind=device)",
    "tracking > fixed_block(block=4KiB, blocks_per_chunk=4, oversize=refuse) > cuda(kind=async)",
    "tracking > graph_arena(initial=8MiB, chunk=4MiB, max=64MiB) > cuda(kind=device)",
    "tracking > graph_arena(uncaptured=forward, policy=ordered_reuse) > pool(arenas=1) > "
    "cuda(kind=async)",
    "tracking > limiting(limit=1MiB, on_limit=increase, padding=1.5, cap=64MiB) > "
    "pool(arenas=1, min_growth=1MiB, max_growth=2MiB) > cuda(kind=async)",
    "tracking > oom(policy=trim_retry) > pool(max=32MiB, min_growth=4MiB) > cuda(kind=device)",
    "tracking(per=thread) > pool(stream_ordered=false, arenas=1, min_growth=64KiB, "
    "granularity=4KiB) > host",
    "tracking > limiting(per_stream=true, stream_limit=4MiB, on_limit=ignore) > "
    "fixed_block(block=256KiB, blocks_per_chunk=4) > cuda(kind=async)",
    "tracking > cuda(kind=device)",
    "tracking > cuda(kind=async, release_threshold=0)",
    "tracking > limiting(limit=16MiB, on_oom=retry, oom_attempts=2) > cuda(kind=managed)",
    "tracking > host",
    "tracking > graph_arena(detect=explicit, policy=ordered_reuse, initial=4MiB, chunk=1MiB) > "
    "pool(arenas=1) > cuda(kind=async)",
};
#define STACK_COUNT (sizeof stacks / sizeof stacks[0])

enum { MAX_LIVE = 64, RING = 16, STREAMS = 3, MEMORIES = 8 };

typedef struct allocation {
  void *ptr;
  size_t bytes;
  size_t alignment; /* as given: 0 means 256 */
  int stream;       /* index into streams */
} allocation;

typedef struct state {
  const uint8_t *data;
  size_t size, pos;
  const char *spec;
  gmr_stack *stack;
  gmr_resource *top;
  gmr_tracking_adaptor *tracking;
  gmr_limiting_adaptor *limiting;
  gmr_pool_resource *pool;
  gmr_graph_arena_resource *arena;
  gmr_stream streams[STREAMS]; /* [0] is the default stream (NULL) */
  bool held[STREAMS];
  bool capturing[STREAMS];
  gmr_graph_memory *memories[MEMORIES]; /* claimed graph memories not yet released */
  size_t memory_count;
  allocation live[MAX_LIVE];
  size_t live_count;
  allocation freed[RING]; /* recent frees, for double frees */
  size_t freed_count, freed_next;
  bool injected; /* a CUDA failure may be pending */
  size_t step;
} state;

static void fail(const state *s, const char *what, const char *detail) {
  fprintf(stderr, "stack_ops_fuzz: step %zu: %s (%s)\n  stack: %s\n", s->step, what, detail,
          s->spec);
  abort();
}

static uint8_t next(state *s) { return s->pos < s->size ? s->data[s->pos++] : 0; }

static size_t effective_alignment(size_t a) { return a == 0 ? 256 : a; }

static size_t charge(size_t bytes) { return (bytes + 255) / 256 * 256; }

static bool is_live_address(const state *s, const void *p) {
  for (size_t i = 0; i < s->live_count; ++i) {
    if (s->live[i].ptr == p) return true;
  }
  return false;
}

/* The accounting oracle. */
static void check(state *s, const char *after) {
  gmr_tracking_adaptor_stats st = GMR_TRACKING_ADAPTOR_STATS_INIT;
  if (gmr_tracking_adaptor_get_stats(s->tracking, &st) != GMR_OK) fail(s, after, "stats");
  int64_t bytes = 0;
  size_t charged = 0;
  for (size_t i = 0; i < s->live_count; ++i) {
    bytes += (int64_t)s->live[i].bytes;
    charged += charge(s->live[i].bytes);
  }
  if (st.bytes.current != bytes) fail(s, after, "tracking's live bytes differ from the live sum");
  if (st.allocations.current != (int64_t)s->live_count) {
    fail(s, after, "tracking's live count differs");
  }
  if (s->limiting != NULL && gmr_limiting_adaptor_get_used_bytes(s->limiting) != charged) {
    fail(s, after, "limiting's used bytes differ from the charges of the live allocations");
  }
  if (s->pool != NULL) {
    char err[256];
    if (gmr__resource_check_deep(gmr_pool_resource_as_resource(s->pool), err, sizeof err) !=
        GMR_OK) {
      fail(s, after, err);
    }
  }
}

static size_t decode_size(state *s) {
  uint8_t kind = next(s), b = next(s);
  switch (kind % 8) {
    case 0:
      return 0;
    case 1:
      return (size_t)b + 1;
    case 2:
      return (size_t)b * 256;
    case 3:
      return ((size_t)b + 1) << 12;
    case 4:
      return ((size_t)b + 1) << 16; /* up to 16 MiB */
    case 5:
      return (size_t)(b % 16 + 1) << 20;
    case 6:
      return (size_t)b * 37 + 1;
    default:
      return (size_t)1 << (36 + b % 28); /* past the device, and past the largest request */
  }
}

static const size_t alignments[] = {0, 256, 512, 4096, (size_t)1 << 16, (size_t)1 << 20,
                                    (size_t)1 << 21, 3};

static void op_allocate(state *s) {
  size_t bytes = decode_size(s);
  size_t alignment = alignments[next(s) % 8];
  int stream = next(s) % STREAMS;
  if (s->live_count == MAX_LIVE) return;
  void *p = (void *)0x1;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st =
      gmr_resource_allocate_ex(s->top, bytes, alignment, s->streams[stream], &p, &failure);
  if (st != GMR_OK) {
    if (p != NULL) fail(s, "allocate", "a failed allocation left a pointer");
    if (alignment == 3 && st != GMR_ERR_INVALID_ARGUMENT) {
      fail(s, "allocate", "an alignment that is not a power of two was not INVALID_ARGUMENT");
    }
    return;
  }
  if (alignment == 3) fail(s, "allocate", "an alignment of 3 was accepted");
  if (bytes == 0) {
    if (p != NULL) fail(s, "allocate", "0 bytes gave a pointer");
    return;
  }
  if (p == NULL || (uintptr_t)p % effective_alignment(alignment) != 0) {
    fail(s, "allocate", "NULL or misaligned pointer");
  }
  if (is_live_address(s, p)) fail(s, "allocate", "a live address was handed out twice");
  s->live[s->live_count++] = (allocation){p, bytes, alignment, stream};
}

static bool any_capture(const state *s) {
  for (int i = 0; i < STREAMS; ++i) {
    if (s->capturing[i]) return true;
  }
  return false;
}

static void op_free(state *s) {
  uint8_t pick = next(s);
  if (s->live_count == 0) return;
  size_t i = pick % s->live_count;
  allocation a = s->live[i];
  gmr_status st =
      gmr_resource_deallocate(s->top, a.ptr, a.bytes, a.alignment, s->streams[a.stream]);
  if (st != GMR_OK) {
    if (!s->injected && !any_capture(s)) fail(s, "free", gmr_status_name(st));
    return; /* refused under an injected failure or a capture: it must have changed nothing */
  }
  s->live[i] = s->live[--s->live_count];
  s->freed[s->freed_next] = a;
  s->freed_next = (s->freed_next + 1) % RING;
  if (s->freed_count < RING) s->freed_count++;
}

/* A call that must be refused and change nothing. */
static void expect_refused(state *s, const char *what, void *ptr, size_t bytes, size_t alignment,
                           gmr_stream stream) {
  gmr_status st = gmr_resource_deallocate(s->top, ptr, bytes, alignment, stream);
  if (st == GMR_OK) fail(s, what, "a bad free returned GMR_OK");
  check(s, what);
}

static void op_bad_free(state *s, uint8_t kind) {
  uint8_t pick = next(s), extra = next(s);
  if (kind == 0) { /* double free: a freed address that is not live again */
    if (s->freed_count == 0) return;
    allocation a = s->freed[pick % s->freed_count];
    if (a.ptr == NULL || is_live_address(s, a.ptr)) return;
    expect_refused(s, "double free", a.ptr, a.bytes, a.alignment, s->streams[a.stream]);
    return;
  }
  if (s->live_count == 0) return;
  allocation a = s->live[pick % s->live_count];
  gmr_stream stream = s->streams[a.stream];
  switch (kind) {
    case 1: { /* wrong size */
      size_t bytes = a.bytes + 1 + extra;
      if (extra % 2 == 0 && a.bytes > (size_t)extra + 1) bytes = a.bytes - extra - 1;
      expect_refused(s, "free with the wrong size", a.ptr, bytes, a.alignment, stream);
      break;
    }
    case 2: /* interior pointer: never the start of an allocation (all are 256-aligned) */
      expect_refused(s, "free of an interior pointer", (char *)a.ptr + 8 + extra % 200, a.bytes,
                     a.alignment, stream);
      break;
    case 3: /* an alignment that is not a power of two */
      expect_refused(s, "free with a bad alignment", a.ptr, a.bytes, 3 + 2 * (size_t)extra,
                     stream);
      break;
    case 4: { /* another valid alignment than the allocation's */
      size_t other = effective_alignment(a.alignment) * 2;
      expect_refused(s, "free with another alignment", a.ptr, a.bytes, other, stream);
      break;
    }
    case 5: { /* another stream than the allocation's */
      int other = (a.stream + 1 + extra % (STREAMS - 1)) % STREAMS;
      expect_refused(s, "free on another stream", a.ptr, a.bytes, a.alignment,
                     s->streams[other]);
      break;
    }
    case 6: /* 0 bytes with a pointer */
      expect_refused(s, "free of 0 bytes", a.ptr, 0, a.alignment, stream);
      break;
    default: { /* an address nobody allocated */
      void *p = (void *)(uintptr_t)(0x10000000u + 256u * extra);
      if (is_live_address(s, p)) return;
      expect_refused(s, "free of an unknown pointer", p, a.bytes, 0, stream);
      break;
    }
  }
}

static void op_stream(state *s) {
  uint8_t what = next(s), pick = next(s);
  int i = 1 + pick % (STREAMS - 1); /* never the default stream */
  switch (what % 4) {
    case 0:
    case 1:
      if (gmr_cuda_sim_stream_hold(s->streams[i], what % 2 == 0) != GMR_OK) {
        fail(s, "hold", "the simulation refused a stream hold");
      }
      s->held[i] = what % 2 == 0;
      break;
    case 2:
      GMR_IGNORE_STATUS(gmr_cuda_stream_synchronize(s->streams[i]));
      break;
    default: { /* destroy and recreate, as a program may once a call returned */
      if (s->capturing[i]) return;
      for (size_t k = 0; k < s->live_count; ++k) {
        if (s->live[k].stream == i) return; /* its allocations still need it */
      }
      for (size_t k = 0; k < s->freed_count; ++k) {
        if (s->freed[k].stream == i) s->freed[k].ptr = NULL;
      }
      if (gmr_cuda_stream_destroy(s->streams[i]) != GMR_OK) fail(s, "stream", "destroy failed");
      s->held[i] = false;
      if (gmr_cuda_stream_create(&s->streams[i]) != GMR_OK) {
        s->streams[i] = NULL; /* an injected failure: use the default stream */
      }
      break;
    }
  }
}

static void op_inject(state *s) {
  static const gmr_cuda_call calls[] = {
      GMR_CUDA_CALL_MALLOC,       GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, GMR_CUDA_CALL_MALLOC_MANAGED,
      GMR_CUDA_CALL_EVENT_CREATE, GMR_CUDA_CALL_EVENT_RECORD,           GMR_CUDA_CALL_FREE,
      GMR_CUDA_CALL_FREE_ASYNC,   GMR_CUDA_CALL_STREAM_WAIT_EVENT,      GMR_CUDA_CALL_EVENT_QUERY,
  };
  uint8_t pick = next(s), skip = next(s);
  gmr_cuda_call call = calls[pick % (sizeof calls / sizeof calls[0])];
  /* cudaErrorMemoryAllocation for the allocating calls, cudaErrorInvalidValue otherwise. */
  int error = call == GMR_CUDA_CALL_MALLOC || call == GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC ||
                      call == GMR_CUDA_CALL_MALLOC_MANAGED
                  ? 2
                  : 1;
  if (gmr_cuda_sim_inject_failure(call, skip % 4, 1, error) != GMR_OK) {
    fail(s, "inject", "the simulation refused an injection");
  }
  s->injected = true;
}

/* Claim what the graph arena holds for `stream`: the open session's memory,
 * or unclaimed memories of automatic sessions that ended there. */
static void claim_memories(state *s, int i) {
  if (s->arena == NULL) return;
  for (int round = 0; round < 64; ++round) { /* each claim takes one; 64 is past any count */
    gmr_graph_memory *memory = NULL;
    if (gmr_graph_arena_resource_end_capture(s->arena, s->streams[i], &memory) != GMR_OK) return;
    if (memory == NULL) fail(s, "claim", "end_capture said OK without a memory");
    if (s->memory_count < MEMORIES) {
      s->memories[s->memory_count++] = memory;
    } else if (gmr_graph_arena_resource_release_graph_memory(s->arena, memory) != GMR_OK) {
      fail(s, "claim", "a claimed memory could not be released");
    }
  }
}

static void end_capture(state *s, int i) {
  gmr_graph graph = NULL;
  /* Fails if something invalidated the capture. */
  GMR_IGNORE_STATUS(gmr_cuda_stream_end_capture(s->streams[i], &graph));
  s->capturing[i] = false;
  if (graph != NULL && gmr_cuda_graph_destroy(graph) != GMR_OK) fail(s, "capture", "graph destroy");
  claim_memories(s, i);
}

static void op_capture(state *s) {
  uint8_t what = next(s), pick = next(s);
  int i = 1 + pick % (STREAMS - 1); /* the legacy default stream cannot capture */
  switch (what % 3) {
    case 0:
      if (s->capturing[i]) return;
      if (gmr_cuda_stream_begin_capture(s->streams[i]) != GMR_OK) return;
      s->capturing[i] = true;
      /* An explicit session too, half of the time (the arena's fast path). */
      if (s->arena != NULL && what % 2 == 0) {
        GMR_IGNORE_STATUS(gmr_graph_arena_resource_begin_capture(s->arena, s->streams[i], NULL));
      }
      break;
    case 1:
      if (s->capturing[i]) end_capture(s, i);
      break;
    default:
      if (s->memory_count == 0) return;
      {
        size_t k = pick % s->memory_count;
        if (gmr_graph_arena_resource_release_graph_memory(s->arena, s->memories[k]) != GMR_OK) {
          fail(s, "release", "a claimed memory could not be released");
        }
        s->memories[k] = s->memories[--s->memory_count];
      }
      break;
  }
}

static void run(state *s) {
  while (s->pos < s->size) {
    s->step++;
    uint8_t op = next(s);
    switch (op % 16) {
      case 0:
      case 1:
      case 2:
      case 3:
        op_allocate(s);
        break;
      case 4:
      case 5:
      case 6:
        op_free(s);
        break;
      case 7:
      case 8:
        op_bad_free(s, (uint8_t)(next(s) % 8));
        break;
      case 9:
        if (gmr_resource_deallocate(s->top, NULL, op, 0, NULL) != GMR_OK)
          fail(s, "free NULL", "refused");
        break;
      case 10: {
        size_t released = 0;
        gmr_status st = gmr_resource_trim(s->top, &released);
        /* A trim may need CUDA calls a capture forbids (CAPTURE_UNSAFE). */
        if (st != GMR_OK && !s->injected && !any_capture(s)) {
          fail(s, "trim", gmr_status_name(st));
        }
        break;
      }
      case 11:
      case 12:
        op_stream(s);
        break;
      case 13:
        op_inject(s);
        break;
      case 14:
        if (next(s) % 2 == 0) {
          GMR_IGNORE_STATUS(gmr_cuda_sim_clear_failures());
          s->injected = false;
        } else {
          op_capture(s);
        }
        break;
      default:
        if (next(s) % 2 == 0) {
          GMR_IGNORE_STATUS(gmr_device_synchronize());
        } else {
          op_capture(s);
        }
        break;
    }
    check(s, "step");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  state s;
  memset(&s, 0, sizeof s);
  s.data = data;
  s.size = size;
  s.spec = stacks[next(&s) % STACK_COUNT];
  if (gmr_cuda_sim_enable(NULL) != GMR_OK) fail(&s, "start", "the simulation is not fresh");
  gmr_spec_error e;
  if (gmr_stack_create(s.spec, &s.stack, &e) != GMR_OK) fail(&s, "create", e.message);
  s.top = gmr_stack_as_resource(s.stack);
  s.tracking = gmr_tracking_adaptor_from_resource(s.top);
  s.limiting = gmr_limiting_adaptor_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s.stack), "limiting_adaptor"));
  s.pool = gmr_pool_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s.stack), "pool_resource"));
  s.arena = gmr_graph_arena_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s.stack), "graph_arena_resource"));
  for (int i = 1; i < STREAMS; ++i) {
    if (gmr_cuda_stream_create(&s.streams[i]) != GMR_OK) fail(&s, "start", "stream");
  }

  run(&s);

  /* Tear down: no failure injected, no capture, nothing held, every graph
   * memory released, everything freed. */
  s.step++;
  GMR_IGNORE_STATUS(gmr_cuda_sim_clear_failures());
  s.injected = false;
  for (int i = 1; i < STREAMS; ++i) {
    if (s.capturing[i]) end_capture(&s, i);
    claim_memories(&s, i);
  }
  while (s.memory_count > 0) {
    if (gmr_graph_arena_resource_release_graph_memory(s.arena, s.memories[--s.memory_count]) != GMR_OK) {
      fail(&s, "final release", "a claimed memory could not be released");
    }
  }
  for (int i = 1; i < STREAMS; ++i) {
    if (s.held[i]) GMR_IGNORE_STATUS(gmr_cuda_sim_stream_hold(s.streams[i], false));
  }
  while (s.live_count > 0) {
    allocation a = s.live[--s.live_count];
    gmr_status st =
        gmr_resource_deallocate(s.top, a.ptr, a.bytes, a.alignment, s.streams[a.stream]);
    if (st != GMR_OK) fail(&s, "final free", gmr_status_name(st));
  }
  check(&s, "final frees");
  gmr_status st = gmr_stack_destroy(s.stack);
  if (st != GMR_OK) fail(&s, "destroy", gmr_status_name(st));
  for (int i = 1; i < STREAMS; ++i) GMR_IGNORE_STATUS(gmr_cuda_stream_destroy(s.streams[i]));
  if (gmr_cuda_sim_get_stale_handle_count() != 0) fail(&s, "end", "a dead CUDA handle was used");
  if (gmr_cuda_sim_disable() != GMR_OK) fail(&s, "end", "simulated CUDA objects leaked");
  return 0;
}
