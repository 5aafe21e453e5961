/*
 * stream_ordered/stream_uses.c (internal): see stream_uses.h.
 */
#include "stream_ordered/stream_uses.h"

#include <stdlib.h>
#include <string.h>

static void give(gmr__stream_slots *t, gmr__event_cache *spare, cudaEvent_t e) {
  if (gmr__event_cache_give(spare, t->cuda, e) != cudaSuccess) {
    atomic_fetch_add_explicit(&t->counts->destroy_failure_count, 1, memory_order_relaxed);
  }
}

gmr_status gmr__stream_uses_add(gmr__stream_uses **u, gmr__stream_key key) {
  gmr__stream_uses *x = *u;
  for (uint32_t i = 0; x != NULL && i < x->count; ++i) {
    if (gmr__stream_key_equal(x->items[i].key, key)) return GMR_OK;
  }
  if (x == NULL || x->count == x->capacity) {
    uint32_t capacity = x == NULL ? 2u : x->capacity * 2u;
    gmr__stream_uses *grown = realloc(x, sizeof *x + capacity * sizeof x->items[0]);
    if (grown == NULL) return GMR_ERR_OUT_OF_MEMORY;
    if (x == NULL) memset(grown, 0, sizeof *grown);
    grown->capacity = capacity;
    *u = x = grown;
  }
  x->items[x->count].key = key;
  x->items[x->count].event = NULL;
  x->count++;
  return GMR_OK;
}

bool gmr__stream_uses_at_free(gmr__stream_uses **u, gmr__stream_key freeing, bool markers,
                              gmr__stream_slots *t, gmr__event_cache *spare) {
  gmr__stream_uses *x = *u;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < x->count; ++i) {
    /* The freeing stream orders its own work already. */
    if (!gmr__stream_key_equal(x->items[i].key, freeing)) x->items[kept++] = x->items[i];
  }
  x->count = kept;
  if (kept == 0) {
    gmr__stream_uses_free(u, t, NULL);
    return false;
  }
  x->needs_device_sync = false;
  memset(&x->markers, 0, sizeof x->markers);
  gmr_stream captured[16];
  uint32_t captured_count = 0;
  bool too_many = false;
  for (uint32_t i = 0; i < x->count; ++i) {
    gmr__stream_use *use = &x->items[i];
    cudaStream_t s = (cudaStream_t)use->key.stream;
    use->event = NULL;
    if (gmr__cuda_stream_is_capturing(t->cuda, s)) {
      /* A record would join the user's graph: the graph's edges tell instead. */
      if (!markers) {
        x->needs_device_sync = true;
      } else if (captured_count < sizeof captured / sizeof captured[0]) {
        captured[captured_count++] = use->key.stream;
      } else {
        too_many = true;
      }
      continue;
    }
    cudaEvent_t e = NULL;
    atomic_fetch_add_explicit(&t->counts->record_count, 1, memory_order_relaxed);
    if (gmr__event_cache_take(spare, t->cuda, &e) != cudaSuccess || e == NULL ||
        t->cuda->event_record(e, s) != cudaSuccess) {
      if (e != NULL) give(t, spare, e);
      x->needs_device_sync = true;
      continue;
    }
    use->event = e;
  }
  if (captured_count > 0 && (too_many || !gmr__capture_markers_take(t->cuda, freeing.stream,
                                                                     captured, captured_count,
                                                                     &x->markers))) {
    x->needs_device_sync = true;
  }
  x->epoch = t->sync_epoch;
  return true;
}

bool gmr__stream_uses_over(gmr__stream_uses *u, bool markers_passed, gmr__stream_slots *t,
                           gmr__event_cache *spare) {
  if (u->needs_device_sync || (u->markers.capture_id != 0 && !markers_passed)) return false;
  for (uint32_t i = 0; i < u->count; ++i) {
    gmr__stream_use *use = &u->items[i];
    if (use->event == NULL) continue;
    atomic_fetch_add_explicit(&t->counts->query_count, 1, memory_order_relaxed);
    if (gmr__event_query_relaxed(t->cuda, use->event) != cudaSuccess) return false;
    give(t, spare, use->event);
    use->event = NULL;
  }
  return true;
}

void gmr__stream_uses_free(gmr__stream_uses **u, gmr__stream_slots *t, gmr__event_cache *spare) {
  gmr__stream_uses *x = *u;
  if (x == NULL) return;
  for (uint32_t i = 0; spare != NULL && i < x->count; ++i) {
    if (x->items[i].event != NULL) give(t, spare, x->items[i].event);
  }
  gmr__capture_markers_release(&x->markers);
  free(x);
  *u = NULL;
}
