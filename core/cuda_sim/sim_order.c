/*
 * core/cuda_sim/sim_order.c (internal): the happens-before order of the
 * simulated streams, as a GPU keeps it: work on a stream runs after the work
 * queued before it on that stream and after every event the stream waited
 * on, transitively (CUDA's order is transitive). Each stream and each
 * recorded event carries a clock: the positions of other streams' work it
 * is ordered after (entries already complete are dropped). An event is
 * complete only when every position of its clock is: a stream that waited
 * on a held stream's event records events that stay pending while that
 * stream is held, as on a GPU.
 *
 * Positions: a stream's own work is numbered by its recorded_seq (events and
 * marks); while it captures a graph, by its capture_seq, in a namespace of
 * its own (the work is a node of the graph, ordered by the graph's edges,
 * and never runs in this timeline: such a position is "complete" once the
 * capture is over).
 *
 * Marks (gmr/sim/cuda_sim.h) are clocks a test keeps: "this stream's work up
 * to now", asked later whether another stream's next work is ordered after
 * it (a test's oracle of stream-ordered reuse).
 */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_sim/sim_internal.h"

/* A position in a capture's namespace: the stream's id with this bit. */
#define CAPTURE_KEY_BIT (UINT64_C(1) << 63)

static bool entry_complete(const gmr__sim_clock_entry *x) {
  if (x->capture_id != 0) return !gmr__sim_capture_in_progress(x->capture_id);
  gmr__sim_stream *s = gmr__sim_stream_by_id(x->key);
  if (s != NULL) return x->seq <= s->completed_seq;
  uint64_t completed = 0;
  if (gmr__u64_map_get(&gmr__sim.draining, x->key, &completed)) return x->seq <= completed;
  return true; /* a destroyed stream's work runs to its end */
}

void gmr__sim_clock_clear(gmr__sim_clock *c) {
  free(c->entries);
  memset(c, 0, sizeof *c);
}

/* Drop the complete entries: they order nothing any more. */
static void prune(gmr__sim_clock *c) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < c->count; ++i) {
    if (!entry_complete(&c->entries[i])) c->entries[kept++] = c->entries[i];
  }
  c->count = kept;
}

static gmr__sim_clock_entry *find(const gmr__sim_clock *c, uint64_t key) {
  for (uint32_t i = 0; i < c->count; ++i) {
    if (c->entries[i].key == key) return &c->entries[i];
  }
  return NULL;
}

/* Raise c's entry for x's key to x (add it if missing). False when host
 * memory ran out (the simulation is then less strict, never wrong the other
 * way: an entry missing orders nothing). */
static bool raise(gmr__sim_clock *c, const gmr__sim_clock_entry *x) {
  gmr__sim_clock_entry *have = find(c, x->key);
  if (have != NULL) {
    if (have->seq < x->seq) *have = *x;
    return true;
  }
  if (c->count == c->capacity) {
    uint32_t capacity = c->capacity == 0 ? 4u : c->capacity * 2u;
    gmr__sim_clock_entry *grown = realloc(c->entries, capacity * sizeof *grown);
    if (grown == NULL) return false;
    c->entries = grown;
    c->capacity = capacity;
  }
  c->entries[c->count++] = *x;
  return true;
}

bool gmr__sim_clock_merge(gmr__sim_clock *dst, const gmr__sim_clock *src) {
  prune(dst);
  bool ok = true;
  for (uint32_t i = 0; i < src->count; ++i) {
    if (!entry_complete(&src->entries[i])) ok = raise(dst, &src->entries[i]) && ok;
  }
  return ok;
}

bool gmr__sim_clock_complete(const gmr__sim_clock *c) {
  for (uint32_t i = 0; i < c->count; ++i) {
    if (!entry_complete(&c->entries[i])) return false;
  }
  return true;
}

void gmr__sim_clock_finish(const gmr__sim_clock *c) {
  for (uint32_t i = 0; i < c->count; ++i) {
    const gmr__sim_clock_entry *x = &c->entries[i];
    if (x->capture_id != 0) continue; /* graph work runs at replay, not now */
    gmr__sim_stream *s = gmr__sim_stream_by_id(x->key);
    if (s != NULL) {
      if (s->completed_seq < x->seq) s->completed_seq = x->seq;
      continue;
    }
    uint64_t completed = 0;
    if (gmr__u64_map_get(&gmr__sim.draining, x->key, &completed) && completed < x->seq) {
      (void)gmr__u64_map_put(&gmr__sim.draining, x->key, x->seq);
    }
  }
}

/* The position of the work queued on s from now, advanced by one: a record
 * or a mark (with the stream's capture namespace while it captures). */
static gmr__sim_clock_entry next_position(gmr__sim_stream *s) {
  gmr__sim_clock_entry x = {s->id, 0, 0};
  if (gmr__sim_stream_capturing(s)) {
    x.key = s->id | CAPTURE_KEY_BIT;
    x.seq = ++s->capture_seq;
    x.capture_id = s->capture_id;
    return x;
  }
  x.seq = ++s->recorded_seq;
  if (!s->held) s->completed_seq = s->recorded_seq;
  return x;
}

bool gmr__sim_clock_snapshot(gmr__sim_stream *s, gmr__sim_clock *out) {
  out->count = 0;
  gmr__sim_clock_entry own = next_position(s);
  bool ok = gmr__sim_clock_merge(out, &s->clock);
  if (own.capture_id != 0) {
    /* Captured work follows the stream's work before the capture (see
     * gmr__sim_stream_ordered_after), and so does whatever waits on it. */
    gmr__sim_clock_entry before = {s->id, s->recorded_seq, 0};
    if (before.seq > 0 && !entry_complete(&before)) ok = raise(out, &before) && ok;
  }
  return raise(out, &own) && ok;
}

bool gmr__sim_stream_ordered_after(const gmr__sim_stream *t, const gmr__sim_clock *mark) {
  bool capturing = gmr__sim_stream_capturing(t);
  for (uint32_t i = 0; i < mark->count; ++i) {
    const gmr__sim_clock_entry *x = &mark->entries[i];
    if (entry_complete(x)) continue;
    /* t's own earlier work. Its captured work counts as after its work
     * before the capture: the graph is launched in stream order on it (the
     * rule every stream-ordered allocator follows, as PyTorch's does). */
    if (x->key == t->id && x->seq <= t->recorded_seq) continue;
    if (capturing && x->key == (t->id | CAPTURE_KEY_BIT) && x->seq <= t->capture_seq) continue;
    const gmr__sim_clock_entry *have = find(&t->clock, x->key);
    if (have == NULL || have->seq < x->seq) return false;
  }
  return true;
}

/* ---- marks (gmr/sim/cuda_sim.h) ------------------------------------------ */

static gmr_status mark_stream_locked(gmr_stream stream, gmr_cuda_sim_mark *out) {
  if (!gmr__sim.enabled) return GMR_ERR_UNSUPPORTED;
  if (gmr__sim_stream_is_default((cudaStream_t)stream) ||
      !gmr__sim_is_object((const void *)stream, GMR__SIM_OBJ_STREAM)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__sim_clock *c = calloc(1, sizeof *c);
  if (c == NULL) return GMR_ERR_OUT_OF_MEMORY;
  /* In a capture the marked work is a node of the graph (a kernel). */
  if (!gmr__sim_capture_add_node((gmr__sim_stream *)(void *)stream)) {
    free(c);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  uint64_t id = ++gmr__sim.next_mark_id;
  if (!gmr__sim_clock_snapshot((gmr__sim_stream *)(void *)stream, c) ||
      !gmr__u64_map_put(&gmr__sim.marks, id, (uint64_t)(uintptr_t)c)) {
    gmr__sim_clock_clear(c);
    free(c);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out = id;
  return GMR_OK;
}

gmr_status gmr_cuda_sim_mark_stream(gmr_stream stream, gmr_cuda_sim_mark *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  gmr_status st = mark_stream_locked(stream, out);
  gmr__sim_unlock();
  return st;
}

static gmr__sim_clock *mark_clock(gmr_cuda_sim_mark mark) {
  uint64_t v = 0;
  return gmr__u64_map_get(&gmr__sim.marks, mark, &v) ? (gmr__sim_clock *)(uintptr_t)v : NULL;
}

gmr_status gmr_cuda_sim_mark_ordered_before(gmr_cuda_sim_mark mark, gmr_stream stream,
                                            bool *out_ordered) {
  if (out_ordered == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  gmr__sim_clock *c = gmr__sim.enabled ? mark_clock(mark) : NULL;
  if (!gmr__sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (c == NULL || gmr__sim_stream_is_default((cudaStream_t)stream) ||
             !gmr__sim_is_object((const void *)stream, GMR__SIM_OBJ_STREAM)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    *out_ordered = gmr__sim_stream_ordered_after((const gmr__sim_stream *)(const void *)stream, c);
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_mark_query(gmr_cuda_sim_mark mark, bool *out_complete) {
  if (out_complete == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  gmr__sim_clock *c = gmr__sim.enabled ? mark_clock(mark) : NULL;
  if (!gmr__sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (c == NULL) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    *out_complete = gmr__sim_clock_complete(c);
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_mark_release(gmr_cuda_sim_mark mark) {
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  uint64_t v = 0;
  if (!gmr__sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (!gmr__u64_map_remove(&gmr__sim.marks, mark, &v)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    gmr__sim_clock *c = (gmr__sim_clock *)(uintptr_t)v;
    gmr__sim_clock_clear(c);
    free(c);
  }
  gmr__sim_unlock();
  return st;
}

void gmr__sim_marks_clear(void) {
  size_t cursor = 0;
  uint64_t key = 0, v = 0;
  while (gmr__u64_map_next(&gmr__sim.marks, &cursor, &key, &v)) {
    gmr__sim_clock *c = (gmr__sim_clock *)(uintptr_t)v;
    gmr__sim_clock_clear(c);
    free(c);
  }
  gmr__u64_map_clear(&gmr__sim.marks);
}

/* ---- pending uses of memory (unmap under running work) -------------------- */

/* Work queued on a stream that has not completed yet, and the addresses it
 * touches: [lo, hi) while `clock` is incomplete. */
typedef struct sim_use {
  uintptr_t lo, hi;
  gmr__sim_clock clock;
} sim_use;

static sim_use *uses;
static size_t use_count, use_capacity;

/* Drop the uses whose work is complete. */
static void uses_prune(void) {
  size_t kept = 0;
  for (size_t i = 0; i < use_count; ++i) {
    if (gmr__sim_clock_complete(&uses[i].clock)) {
      gmr__sim_clock_clear(&uses[i].clock);
    } else {
      uses[kept++] = uses[i];
    }
  }
  use_count = kept;
}

void gmr__sim_uses_record(gmr__sim_stream *s, const void *a, size_t a_bytes, const void *b,
                          size_t b_bytes) {
  /* Work on a stream that is neither held nor ordered after pending work
   * completes at once: nothing to remember. */
  if (s == NULL || gmr__sim_stream_capturing(s) || (!s->held && s->clock.count == 0)) return;
  gmr__sim_clock c = {NULL, 0, 0};
  if (!gmr__sim_clock_snapshot(s, &c) || gmr__sim_clock_complete(&c)) {
    gmr__sim_clock_clear(&c);
    return;
  }
  uses_prune();
  const void *ptrs[2] = {a, b};
  size_t sizes[2] = {a_bytes, b_bytes};
  for (int k = 0; k < 2; ++k) {
    if (ptrs[k] == NULL || sizes[k] == 0) continue;
    if (use_count == use_capacity) {
      size_t n = use_capacity == 0 ? 16 : use_capacity * 2;
      sim_use *grown = realloc(uses, n * sizeof *grown);
      if (grown == NULL) break; /* less strict, never wrong the other way */
      uses = grown;
      use_capacity = n;
    }
    sim_use *u = &uses[use_count];
    u->lo = (uintptr_t)ptrs[k];
    u->hi = u->lo + sizes[k];
    u->clock = (gmr__sim_clock){NULL, 0, 0};
    if (!gmr__sim_clock_merge(&u->clock, &c)) {
      gmr__sim_clock_clear(&u->clock);
      continue;
    }
    use_count++;
  }
  gmr__sim_clock_clear(&c);
}

bool gmr__sim_uses_pending_over(uintptr_t addr, size_t bytes) {
  uses_prune();
  for (size_t i = 0; i < use_count; ++i) {
    if (uses[i].lo < addr + bytes && addr < uses[i].hi) return true;
  }
  return false;
}

void gmr__sim_uses_clear(void) {
  for (size_t i = 0; i < use_count; ++i) gmr__sim_clock_clear(&uses[i].clock);
  free(uses);
  uses = NULL;
  use_count = use_capacity = 0;
}
