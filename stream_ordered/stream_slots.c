/*
 * stream_ordered/stream_slots.c (internal): see stream_slots.h.
 */
#include "stream_ordered/stream_slots.h"

#include <stdlib.h>

bool gmr__stream_slots_init(gmr__stream_slots *t, const gmr__stream_slots_ops *ops, void *ctx,
                            bool shared, gmr__stream_events_mode mode, bool ids, uint32_t reuse_at,
                            const gmr__cuda_ops *cuda, gmr__stream_event_counts *counts) {
  t->items = NULL;
  t->count = 0;
  t->capacity = 0;
  t->cached = GMR__STREAM_SLOT_NONE;
  t->first = shared ? 1u : 0u;
  t->reuse_at = reuse_at;
  t->active = 0;
  t->mode = mode;
  t->ids = ids;
  t->ops = ops;
  t->ctx = ctx;
  t->cuda = cuda;
  t->counts = counts;
  t->sync_epoch = 0;
  t->lock = NULL;
  if (!shared) return true;
  t->items = malloc(4 * sizeof *t->items);
  gmr__stream_slot *s = t->items != NULL ? ops->create(ctx) : NULL;
  if (s == NULL) {
    free(t->items);
    t->items = NULL;
    return false;
  }
  gmr__stream_key none = {NULL, 0};
  gmr__stream_event_init(&s->ev, none, GMR__STREAM_EVENTS_LAZY);
  s->retired = false;
  t->items[GMR__STREAM_SLOT_SHARED] = s;
  t->count = 1;
  t->capacity = 4;
  return true;
}

void gmr__stream_slots_deinit(gmr__stream_slots *t) {
  for (uint32_t i = 0; i < t->count; ++i) {
    if (t->ops->destroy != NULL) {
      t->ops->destroy(t->ctx, t->items[i]);
    } else {
      free(t->items[i]);
    }
  }
  free(t->items);
  t->items = NULL;
  t->count = t->capacity = 0;
  t->cached = GMR__STREAM_SLOT_NONE;
  t->active = 0;
}

cudaError_t gmr__stream_slots_destroy_events(gmr__stream_slots *t, gmr__event_cache *spare) {
  for (uint32_t i = 0; i < t->count; ++i) {
    cudaError_t err = gmr__stream_event_deinit(t->cuda, &t->items[i]->ev, t->counts);
    if (err != cudaSuccess) return err;
  }
  cudaError_t err = spare != NULL ? gmr__event_cache_clear(spare, t->cuda) : cudaSuccess;
  if (err != cudaSuccess) {
    atomic_fetch_add_explicit(&t->counts->destroy_failure_count, 1, memory_order_relaxed);
  }
  return err;
}

static void retire(gmr__stream_slots *t, uint32_t i) {
  t->items[i]->retired = true;
  t->active--;
}

/* Slot `i` (empty) serves the stream of `key` from now on; its CUDA event
 * is kept for reuse. */
static uint32_t start(gmr__stream_slots *t, uint32_t i, gmr__stream_key key) {
  gmr__stream_slot *s = t->items[i];
  gmr__stream_event_init(&s->ev, key, t->mode);
  if (s->retired) t->active++;
  s->retired = false;
  s->pending_query_seq = UINT64_MAX; /* no query found its work pending yet */
  t->cached = i;
  if (t->ops->started != NULL) t->ops->started(t->ctx, i);
  return i;
}

/* The stream of `key` lived from the call that keyed retired slot `back`
 * until now (stream ids are never reused, a stream's life is one interval),
 * owning the handle throughout: slot `cur`, keyed meanwhile by a capture of
 * that handle, was its too. Its memory goes back to `back`, which serves the
 * stream again; `cur` is left retired (reusable once empty: what waits for
 * record_stream events stays with it). */
static uint32_t slot_return(gmr__stream_slots *t, uint32_t back, uint32_t cur) {
  gmr__stream_slot *b = t->items[back];
  b->retired = false;
  t->active++;
  if (cur != GMR__STREAM_SLOT_NONE) {
    if (t->ops->move_all(t->ctx, cur, back)) b->ev.free_seq++; /* not covered by back's event */
    retire(t, cur);
  }
  t->cached = back;
  return back;
}

/* One more slot for the stream of `key`; GMR__STREAM_SLOT_NONE without host
 * memory (nothing changed). */
static uint32_t add(gmr__stream_slots *t, gmr__stream_key key) {
  if (t->count == t->capacity) {
    uint32_t capacity = t->capacity == 0 ? 4u : t->capacity * 2u;
    gmr__stream_slot **items = realloc(t->items, capacity * sizeof *items);
    if (items == NULL) return GMR__STREAM_SLOT_NONE;
    t->items = items;
    t->capacity = capacity;
  }
  gmr__stream_slot *s = t->ops->create(t->ctx);
  if (s == NULL) return GMR__STREAM_SLOT_NONE;
  s->retired = true; /* counted as it starts */
  t->items[t->count] = s;
  return start(t, t->count++, key);
}

uint32_t gmr__stream_slots_of_slow(gmr__stream_slots *t, gmr__stream_key key) {
  /* The handle's slot (one at most is not retired), and a retired one of
   * exactly this stream (it was retired for a capture key: stream_ids). */
  uint32_t cur = GMR__STREAM_SLOT_NONE, back = GMR__STREAM_SLOT_NONE;
  for (uint32_t i = t->first; i < t->count; ++i) {
    const gmr__stream_slot *s = t->items[i];
    if (s->ev.key.stream != key.stream) continue;
    if (!s->retired) {
      cur = i;
    } else if (gmr__stream_id_is_stream(key.id) && s->ev.key.id == key.id) {
      back = i;
    }
  }
  if (cur != GMR__STREAM_SLOT_NONE) {
    gmr__stream_slot *s = t->items[cur];
    switch (gmr__stream_key_compare(t->ids, s->ev.key, key)) {
      case GMR__STREAM_KEY_SAME:
        t->cached = cur;
        return cur;
      case GMR__STREAM_KEY_ADOPT:
        s->ev.key.id = key.id;
        t->cached = cur;
        return cur;
      case GMR__STREAM_KEY_OTHER:
        break;
    }
    if (back != GMR__STREAM_SLOT_NONE && !gmr__stream_id_is_stream(s->ev.key.id)) {
      return slot_return(t, back, cur);
    }
    /* Another stream had the handle (or, with stream_ids, may have had it).
     * What that stream freed is not the caller's to reuse in stream order:
     * its slot is retired (its memory goes to others only through its event
     * or a device synchronisation); an empty one simply changes hands. */
    if (t->ops->empty(t->ctx, cur)) return start(t, cur, key);
    retire(t, cur);
  } else if (back != GMR__STREAM_SLOT_NONE) {
    return slot_return(t, back, GMR__STREAM_SLOT_NONE);
  }
  /* A slot nobody needs any more: one of a destroyed stream, or, once there
   * are many, any empty one. */
  for (uint32_t i = t->first; i < t->count; ++i) {
    if ((t->items[i]->retired || t->count >= t->reuse_at) && t->ops->empty(t->ctx, i)) {
      return start(t, i, key);
    }
  }
  return add(t, key);
}

uint32_t gmr__stream_slots_find(const gmr__stream_slots *t, gmr__stream_key key) {
  for (uint32_t i = t->first; i < t->count; ++i) {
    const gmr__stream_slot *s = t->items[i];
    if (!s->retired && gmr__stream_key_equal(s->ev.key, key)) return i;
  }
  return GMR__STREAM_SLOT_NONE;
}

uint32_t gmr__stream_slots_for_handle_slow(gmr__stream_slots *t, gmr_stream stream) {
  /* One slot at most per handle is not retired (gmr__stream_slots_of). */
  for (uint32_t i = t->first; i < t->count; ++i) {
    const gmr__stream_slot *s = t->items[i];
    if (!s->retired && s->ev.key.stream == stream) {
      t->cached = i;
      return i;
    }
  }
  return GMR__STREAM_SLOT_NONE;
}
