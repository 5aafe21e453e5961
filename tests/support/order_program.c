/*
 * tests/support/order_program.c: random programs on several streams, checked
 * by the stream-ordering oracle (order_oracle.h).
 *
 * A program is a sequence of steps, each chosen by the source: allocate on a
 * stream (mixed sizes, so that pools split and merge), free on the
 * allocating stream or hand the memory to another stream first (the other
 * stream waits on the allocating one, then frees), record_stream, hold and
 * release a stream (its work stays pending: the simulation then keeps every
 * event recorded on it, and on streams that waited on it, pending), make a
 * stream wait on another (waits that chain), synchronise a stream or the
 * device, destroy a stream (with work pending or not) and make a new one,
 * trim, and make event calls fail. Every allocation is checked by the oracle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "tests/support/order_oracle.h"

#define MAX_STREAMS 8
#define MAX_LIVE 128

enum { ROLE_NONE = 0, ROLE_ORIGIN = 1, ROLE_FORK = 2 };

typedef struct live_allocation {
  void *ptr;
  size_t bytes;
  uint32_t stream;    /* index of the allocating stream */
  uint32_t uses_mask; /* streams record_stream named */
} live_allocation;

/* GMR_ORDER_TRACE=1 prints every step to stderr (to read a failing seed). */
static bool tracing(void) {
  static int on = -1;
  if (on < 0) {
    const char *v = getenv("GMR_ORDER_TRACE");
    on = v != NULL && v[0] == '1';
  }
  return on == 1;
}

#define TRACE(...)                                  \
  do {                                              \
    if (tracing()) fprintf(stderr, __VA_ARGS__);    \
  } while (0)

typedef struct program {
  gmr_resource *r;
  order_source *src;
  const order_program_options *opt;
  order_program_result *out;
  order_oracle *oracle;
  gmr_stream streams[MAX_STREAMS];
  bool held[MAX_STREAMS];
  uint8_t role[MAX_STREAMS]; /* in the capture: ROLE_NONE, ROLE_ORIGIN or ROLE_FORK */
  bool capturing;            /* a capture is in progress (one at a time) */
  uint32_t origin;           /* its origin stream */
  uint32_t stream_count;
  live_allocation live[MAX_LIVE];
  uint32_t live_count;
  bool ended; /* the source ran out */
  uint64_t failed_frees; /* refused frees (noted by the oracle all the same) */
} program;


/* A status the caller may ignore (an injected failure, a best effort). */
static void ignore(gmr_status st) { (void)st; }
/* ---- choices -------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* A number below n (n > 0). */
static uint32_t pick(program *p, uint32_t n) {
  order_source *s = p->src;
  uint32_t v = 0;
  if (s->data != NULL) {
    if (s->pos + 2 > s->size) {
      p->ended = true;
      return 0;
    }
    v = (uint32_t)s->data[s->pos] | ((uint32_t)s->data[s->pos + 1] << 8);
    s->pos += 2;
  } else {
    v = (uint32_t)(splitmix(&s->state) >> 32);
  }
  return v % n;
}

static size_t pick_bytes(program *p) {
  size_t max = p->opt->max_bytes < 512 ? 512 : p->opt->max_bytes;
  switch (pick(p, 4)) {
    case 0: return 1 + pick(p, 4096);                                 /* small */
    case 1: return 256u * (1 + pick(p, 256));                          /* up to 64 KiB */
    case 2: return (size_t)(1 + pick(p, 64)) << 14;                    /* up to 1 MiB */
    default: return 1 + (size_t)pick(p, (uint32_t)(max > UINT32_MAX ? UINT32_MAX : max));
  }
}

/* ---- steps ---------------------------------------------------------------- */

static void fail(program *p, const char *what, gmr_status st) {
  if (p->out->error[0] != '\0') return;
  (void)snprintf(p->out->error, sizeof p->out->error, "%s: %s", what, gmr_status_name(st));
}

/* Make `waiter` wait for `waited`'s work so far, as CUDA allows it during a
 * capture: a capturing stream waits only on streams of its capture; a
 * stream outside it that waits on one joins it (a fork). False (no wait)
 * otherwise or when the wait failed (an injected failure). */
static bool wait_for(program *p, uint32_t waiter, uint32_t waited) {
  if (waiter == waited) return false;
  bool in_w = p->role[waiter] != ROLE_NONE, in_d = p->role[waited] != ROLE_NONE;
  if (in_w && !in_d) return false; /* would cross the capture's boundary */
  if (gmr_stream_wait_stream(p->streams[waiter], p->streams[waited]) != GMR_OK) return false;
  if (!in_w && in_d) {
    p->role[waiter] = ROLE_FORK;
    TRACE("fork: s%u joins the capture through s%u\n", waiter, waited);
  }
  return true;
}

static bool stream_in_use(const program *p, uint32_t s) {
  for (uint32_t i = 0; i < p->live_count; ++i) {
    if (p->live[i].stream == s || (p->live[i].uses_mask & (1u << s)) != 0) return true;
  }
  return false;
}

static void step_allocate(program *p) {
  if (p->live_count >= p->opt->max_live || p->live_count >= MAX_LIVE) return;
  uint32_t s = pick(p, p->stream_count);
  size_t bytes = pick_bytes(p);
  /* During a capture the program works on the capture's streams only: a
   * pool's slow path may synchronise the device for another stream's
   * request, which CUDA refuses while any stream captures. */
  if (p->ended || (p->capturing && p->role[s] == ROLE_NONE)) return;
  void *ptr = NULL;
  uint64_t waits = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
  /* A request during a capture goes as a framework makes it: through the
   * capture-safe path (growth in relaxed mode). */
  gmr_status st = p->role[s] != ROLE_NONE
                      ? gmr_resource_allocate_capturing(p->r, bytes, 0, p->streams[s], &ptr, NULL)
                      : gmr_resource_allocate(p->r, bytes, 0, p->streams[s], &ptr);
  p->out->resource_waits += gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_WAIT_EVENT) - waits;
  if (st != GMR_OK) {
    p->out->failed_allocations++;
    return;
  }
  p->out->allocations++;
  TRACE("alloc s%u %zu -> %p (stream %p)\n", s, bytes, ptr, (void *)p->streams[s]);
  char why[400];
  if (!order_oracle_check_allocation(p->oracle, ptr, bytes, p->streams[s], why, sizeof why)) {
    if (p->out->violations++ == 0) {
      (void)snprintf(p->out->first_violation, sizeof p->out->first_violation,
                     "step %llu: %s",
                     (unsigned long long)(p->out->allocations + p->out->frees), why);
    }
  }
  live_allocation *a = &p->live[p->live_count++];
  a->ptr = ptr;
  a->bytes = bytes;
  a->stream = s;
  a->uses_mask = 0;
}

/* Free live allocation i on stream `on` (whose work is ordered after every
 * use on the allocating stream). False if the resource refused (the memory
 * stays live). */
static bool free_on(program *p, uint32_t i, uint32_t on) {
  live_allocation a = p->live[i];
  gmr_stream users[MAX_STREAMS + 1];
  size_t n = 0;
  users[n++] = p->streams[on];
  for (uint32_t s = 0; s < p->stream_count; ++s) {
    if ((a.uses_mask & (1u << s)) != 0 && s != on) users[n++] = p->streams[s];
  }
  if (!order_oracle_note_free(p->oracle, a.ptr, a.bytes, users, n)) {
    fail(p, "the oracle could not mark the streams", GMR_ERR_OUT_OF_MEMORY);
    return false;
  }
  TRACE("free #%llu %p %zu on s%u (allocated on s%u, uses %#x)\n",
        (unsigned long long)(p->out->frees + p->failed_frees + 1), a.ptr, a.bytes, on, a.stream,
        a.uses_mask);
  gmr_status st = gmr_resource_deallocate(p->r, a.ptr, a.bytes, 0, p->streams[on]);
  if (st != GMR_OK) {
    p->failed_frees++;
    /* Allowed only for a CUDA failure (injected), or a refusal during a
     * capture (cudaFree of an upstream cuda resource would break it): the
     * memory stays ours. */
    bool allowed = (st == GMR_ERR_CUDA && p->opt->faults) ||
                   (st == GMR_ERR_CAPTURE_UNSAFE && p->capturing);
    if (!allowed) fail(p, "gmr_resource_deallocate", st);
    return false;
  }
  p->out->frees++;
  p->live[i] = p->live[--p->live_count];
  return true;
}

static void step_free(program *p) {
  if (p->live_count == 0) return;
  uint32_t i = pick(p, p->live_count);
  uint32_t on = p->live[i].stream;
  if (p->capturing && p->role[on] == ROLE_NONE) return; /* as in step_allocate */
  if (!p->opt->same_stream_free && pick(p, 4) == 0) {
    /* A handoff: another stream waits for the allocating one, then frees. */
    uint32_t other = pick(p, p->stream_count);
    /* A fork here would move the free into the capture: only streams
     * already on the same side of it. */
    bool same_side = (p->role[other] == ROLE_NONE) == (p->role[on] == ROLE_NONE);
    if (other != on && same_side && wait_for(p, other, on)) {
      TRACE("handoff: s%u waits on s%u\n", other, on);
      on = other;
    }
  }
  if (p->ended) return;
  (void)free_on(p, i, on);
}

static void step_record_stream(program *p) {
  if (p->live_count == 0 || !p->opt->record_stream) return;
  uint32_t i = pick(p, p->live_count);
  uint32_t s = pick(p, p->stream_count);
  if (p->ended || s == p->live[i].stream) return;
  gmr_status st = gmr_resource_record_stream(p->r, p->live[i].ptr, p->streams[s]);
  if (st == GMR_OK) {
    TRACE("record_stream %p s%u\n", p->live[i].ptr, s);
    p->live[i].uses_mask |= 1u << s;
  } else if (st != GMR_ERR_UNSUPPORTED) {
    fail(p, "gmr_resource_record_stream", st);
  }
}

static void step_hold(program *p, bool hold) {
  uint32_t s = pick(p, p->stream_count);
  if (p->ended || p->held[s] == hold) return;
  gmr_status st = gmr_cuda_sim_stream_hold(p->streams[s], hold);
  if (st != GMR_OK) {
    fail(p, "gmr_cuda_sim_stream_hold", st);
    return;
  }
  p->held[s] = hold;
  TRACE("%s s%u\n", hold ? "hold" : "release", s);
  if (hold) p->out->holds++;
}

static void step_wait(program *p) {
  uint32_t waiter = pick(p, p->stream_count);
  uint32_t waited = pick(p, p->stream_count);
  if (p->ended || waiter == waited) return;
  TRACE("wait s%u on s%u\n", waiter, waited);
  (void)wait_for(p, waiter, waited);
}

/* ---- captures --------------------------------------------------------------- */

static void step_begin_capture(program *p) {
  uint32_t s = pick(p, p->stream_count);
  if (p->ended || p->capturing) return;
  gmr_status st = gmr_cuda_stream_begin_capture(p->streams[s]);
  if (st != GMR_OK) {
    fail(p, "gmr_cuda_stream_begin_capture", st);
    return;
  }
  TRACE("begin capture on s%u\n", s);
  p->capturing = true;
  p->origin = s;
  p->role[s] = ROLE_ORIGIN;
  p->out->captures++;
}

/* Join every fork back into the origin, end the capture, drop the graph. */
static void end_capture(program *p) {
  if (!p->capturing) return;
  for (uint32_t s = 0; s < p->stream_count; ++s) {
    if (p->role[s] == ROLE_FORK &&
        gmr_stream_wait_stream(p->streams[p->origin], p->streams[s]) != GMR_OK) {
      fail(p, "joining a forked stream back into the capture's origin", GMR_ERR_CUDA);
    }
  }
  gmr_graph graph = NULL;
  gmr_status st = gmr_cuda_stream_end_capture(p->streams[p->origin], &graph);
  TRACE("end capture on s%u: %s\n", p->origin, gmr_status_name(st));
  if (st != GMR_OK) {
    /* A resource broke the capture (an unsafe call, a wait across it). */
    char what[160];
    (void)snprintf(what, sizeof what, "the capture was invalidated by %s",
                   gmr_cuda_call_name(gmr_cuda_sim_get_capture_breaker()));
    fail(p, what, st);
  } else {
    ignore(gmr_cuda_graph_destroy(graph));
  }
  gmr_stream took_part[MAX_STREAMS];
  size_t n = 0;
  took_part[n++] = p->streams[p->origin];
  for (uint32_t s = 0; s < p->stream_count; ++s) {
    if (p->role[s] == ROLE_FORK) took_part[n++] = p->streams[s];
    p->role[s] = ROLE_NONE;
  }
  p->capturing = false;
  if (p->opt->after_capture != NULL) p->opt->after_capture(p->opt->after_capture_ctx, took_part, n);
}

/* A stream outside the capture waits on one in it: it joins (nested when
 * the waited stream is itself a fork). */
static void step_fork(program *p) {
  uint32_t waiter = pick(p, p->stream_count);
  uint32_t waited = pick(p, p->stream_count);
  if (p->ended || p->role[waiter] != ROLE_NONE || p->role[waited] == ROLE_NONE) return;
  (void)wait_for(p, waiter, waited);
}

/* A capturing stream waits for a forked one: a partial join. */
static void step_join(program *p) {
  uint32_t waiter = pick(p, p->stream_count);
  uint32_t fork = pick(p, p->stream_count);
  if (p->ended || !p->capturing || p->role[waiter] == ROLE_NONE || p->role[fork] != ROLE_FORK) {
    return;
  }
  TRACE("join: s%u waits on s%u\n", waiter, fork);
  (void)wait_for(p, waiter, fork);
}

static void step_synchronize(program *p) {
  if (pick(p, 4) == 0) {
    /* Refused while a stream captures (and it would invalidate the capture). */
    if (p->ended || p->capturing) return;
    TRACE("device synchronize\n");
    ignore(gmr_device_synchronize());
    return;
  }
  uint32_t s = pick(p, p->stream_count);
  /* A synchronisation is a potentially unsafe call: in this thread's global
   * capture it would invalidate the capture. */
  if (p->ended || p->capturing) return;
  TRACE("synchronize s%u\n", s);
  ignore(gmr_cuda_stream_synchronize(p->streams[s]));
}

static void step_new_stream(program *p) {
  uint32_t s = pick(p, p->stream_count);
  bool pending = p->opt->reuse_handles && pick(p, 2) == 0;
  bool reuse = p->opt->reuse_handles && pick(p, 2) == 0;
  if (p->ended || stream_in_use(p, s) || p->capturing) return; /* it may synchronise */
  TRACE("new stream s%u (pending %d, reuse %d)\n", s, pending, reuse);
  if (pending) {
    /* Its work stays pending after the destroy (CUDA runs it to its end). */
    if (gmr_cuda_sim_stream_hold_beyond_destroy(p->streams[s]) != GMR_OK) return;
  } else {
    if (p->held[s] && gmr_cuda_sim_stream_hold(p->streams[s], false) != GMR_OK) return;
    if (gmr_cuda_stream_synchronize(p->streams[s]) != GMR_OK) return;
  }
  if (gmr_cuda_sim_reuse_stream_handles(reuse) != GMR_OK) return;
  if (p->opt->on_stream != NULL) p->opt->on_stream(p->opt->on_stream_ctx, p->streams[s], false);
  gmr_status st = gmr_cuda_stream_destroy(p->streams[s]);
  if (st != GMR_OK) {
    fail(p, "gmr_cuda_stream_destroy", st);
    return;
  }
  p->held[s] = false;
  st = gmr_cuda_stream_create(&p->streams[s]);
  ignore(gmr_cuda_sim_reuse_stream_handles(false));
  if (st == GMR_OK && p->opt->on_stream != NULL) {
    p->opt->on_stream(p->opt->on_stream_ctx, p->streams[s], true);
  }
  if (st != GMR_OK) {
    /* Injected failures do not reach stream creation: this is a real error. */
    p->streams[s] = NULL;
    fail(p, "gmr_cuda_stream_create", st);
  }
}

static void step_trim(program *p) {
  if (p->capturing) return; /* a trim synchronises the device: refused during a capture */
  TRACE("trim\n");
  size_t released = 0;
  gmr_status st = gmr_resource_trim(p->r, &released);
  if (st != GMR_OK && st != GMR_ERR_UNSUPPORTED && !(p->opt->faults && st == GMR_ERR_CUDA)) {
    fail(p, "gmr_resource_trim", st);
  }
}

static const gmr_cuda_call fault_calls[] = {GMR_CUDA_CALL_EVENT_RECORD, GMR_CUDA_CALL_EVENT_QUERY,
                                            GMR_CUDA_CALL_STREAM_WAIT_EVENT,
                                            GMR_CUDA_CALL_EVENT_CREATE};

static void step_fault(program *p) {
  uint32_t which = pick(p, (uint32_t)(sizeof fault_calls / sizeof fault_calls[0]));
  uint32_t skip = pick(p, 4);
  if (p->ended || p->capturing) return; /* the program's own forks and joins must work */
  TRACE("fail call %u after %u\n", which, skip);
  ignore(gmr_cuda_sim_inject_failure(fault_calls[which], skip, 1, 999 /* cudaErrorUnknown */));
}

/* ---- the program ---------------------------------------------------------- */

static void step(program *p) {
  uint32_t k = pick(p, 100);
  if (p->ended) return;
  if (k < 30) {
    step_allocate(p);
  } else if (k < 55) {
    step_free(p);
  } else if (k < 62) {
    step_record_stream(p);
  } else if (k < 70) {
    step_hold(p, true);
  } else if (k < 78) {
    step_hold(p, false);
  } else if (k < 88) {
    step_wait(p);
  } else if (k < 92) {
    step_synchronize(p);
  } else if (k < 95) {
    if (p->opt->destroy_streams) step_new_stream(p);
  } else if (k < 97) {
    if (p->opt->trim) step_trim(p);
  } else {
    if (p->opt->faults) step_fault(p);
  }
  if (!p->opt->captures || p->ended) return;
  uint32_t c = pick(p, 100);
  if (c < 3) {
    if (!p->capturing) step_begin_capture(p);
  } else if (c < 6) {
    end_capture(p);
  } else if (c < 16) {
    if (p->capturing) step_fork(p);
  } else if (c < 24) {
    step_join(p);
  }
}

/* Free everything left, release every stream, synchronise. */
static void finish(program *p) {
  ignore(gmr_cuda_sim_clear_failures());
  end_capture(p);
  for (uint32_t s = 0; s < p->stream_count; ++s) {
    if (p->held[s]) ignore(gmr_cuda_sim_stream_hold(p->streams[s], false));
    p->held[s] = false;
  }
  while (p->live_count > 0) {
    uint32_t before = p->live_count;
    (void)free_on(p, p->live_count - 1, p->live[p->live_count - 1].stream);
    if (p->live_count == before) {
      fail(p, "a free failed with no failure injected", GMR_ERR_INTERNAL);
      break;
    }
  }
  gmr_status st = gmr_device_synchronize();
  if (st != GMR_OK) fail(p, "gmr_device_synchronize", st);
  for (uint32_t s = 0; s < p->stream_count; ++s) {
    if (p->streams[s] == NULL) continue;
    if (p->opt->destroy_streams) {
      if (p->opt->on_stream != NULL) p->opt->on_stream(p->opt->on_stream_ctx, p->streams[s], false);
      ignore(gmr_cuda_stream_destroy(p->streams[s]));
    } else {
      p->out->kept_streams[p->out->kept_count++] = p->streams[s];
    }
    p->streams[s] = NULL;
  }
  size_t released = 0;
  ignore(gmr_resource_trim(p->r, &released));
}

bool order_program_run(gmr_resource *r, order_source *src, const order_program_options *opt,
                       order_program_result *out) {
  memset(out, 0, sizeof *out);
  program *p = calloc(1, sizeof *p);
  if (p == NULL) {
    (void)snprintf(out->error, sizeof out->error, "no host memory for the program");
    return false;
  }
  p->r = r;
  p->src = src;
  p->opt = opt;
  p->out = out;
  p->stream_count = opt->stream_count < 2 ? 2 : opt->stream_count > MAX_STREAMS ? MAX_STREAMS
                                                                                 : opt->stream_count;
  p->oracle = order_oracle_create();
  for (uint32_t s = 0; s < p->stream_count && p->oracle != NULL; ++s) {
    gmr_status st = gmr_cuda_stream_create(&p->streams[s]);
    if (st != GMR_OK) fail(p, "gmr_cuda_stream_create", st);
    if (st == GMR_OK && opt->on_stream != NULL) opt->on_stream(opt->on_stream_ctx, p->streams[s], true);
  }
  if (p->oracle == NULL) fail(p, "no host memory for the oracle", GMR_ERR_OUT_OF_MEMORY);
  for (uint32_t i = 0; i < opt->op_count && !p->ended && out->error[0] == '\0'; ++i) step(p);
  if (p->oracle != NULL) finish(p);
  order_oracle_destroy(p->oracle);
  free(p);
  return out->violations == 0 && out->error[0] == '\0';
}
