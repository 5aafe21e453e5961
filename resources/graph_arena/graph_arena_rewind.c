/*
 * resources/graph_arena/graph_arena_rewind.c (internal): checkpoint and rewind (per
 * session or uncaptured) and reset.
 */
#include <stdlib.h>

#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_internal.h"

static bool marks_reserve(gmr__ga_marks *m) {
  return gmr__ga_ensure((void **)&m->items, &m->capacity, m->count + 1, sizeof *m->items);
}

/* Put every extent of the uncaptured list back in the free space and drop its
 * live blocks. `scratch` and the free space have room for a->open.count. */
size_t gmr__ga_clear_open_from(gmr_graph_arena_resource *a, size_t height, gmr__extent *scratch) {
  size_t released = 0, n = 0;
  for (size_t i = height; i < a->open.count; ++i) {
    gmr__ga_entry *e = &a->open.items[i];
    if (e->state == GMR__GA_ENTRY_LIVE) {
      gmr__ga_drop_block(a, e->slot);
      released++;
    }
    if (e->region) gmr__nvtx_mem_region_unregister((void *)e->begin);
    scratch[n++] = (gmr__extent){e->begin, e->end, 0, e->order};
  }
  gmr__extent_set_add_many(&a->free, scratch, n);
  a->open.count = height;
  return released;
}

gmr_status gmr_graph_arena_resource_reset(gmr_graph_arena_resource *a, size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  if (a->session_count > 0) {
    gmr__ga_unlock(a);
    return GMR_ERR_BUSY;
  }
  /* Reserve for everything first: the reset happens entirely or not at all. */
  size_t n = a->open.count;
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i]->unclaimed) n += gmr__ga_memory_returnable_count(a->memories[i]);
  }
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    gmr__ga_unlock(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t released = gmr__ga_clear_open_from(a, 0, scratch);
  a->open_marks.count = 0;
  for (size_t i = a->memory_count; i-- > 0;) {
    gmr_graph_memory *m = a->memories[i];
    if (m->unclaimed) gmr__ga_dissolve_memory(a, m, scratch); /* its live blocks become loose */
  }
  free(scratch);
  gmr__ga_unlock(a);
  if (out_released_count != NULL) *out_released_count = released;
  return GMR_OK;
}

/* Set a mark in session `s`'s scope, or the uncaptured one (s NULL). Lock held. */
static gmr_status set_mark(gmr_graph_arena_resource *a, gmr__ga_session *s, uint64_t *out_mark) {
  if (s == NULL && a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    return GMR_ERR_UNSUPPORTED;
  }
  gmr__ga_marks *marks = s != NULL ? &s->marks : &a->open_marks;
  size_t height = s != NULL ? s->memory->entries.count : a->open.count;
  if (!marks_reserve(marks)) return GMR_ERR_OUT_OF_MEMORY;
  uint64_t id = a->next_mark_id++;
  marks->items[marks->count++] = (gmr__ga_mark){id, height};
  *out_mark = id;
  return GMR_OK;
}

gmr_status gmr_graph_arena_resource_checkpoint(gmr_graph_arena_resource *a, gmr_stream stream,
                                               uint64_t *out_mark) {
  if (out_mark != NULL) *out_mark = 0;
  if (a == NULL || out_mark == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_session *s = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = gmr__ga_resolve_locked(a, stream, &s, &failure);
  if (st != GMR_OK) return st;
  st = set_mark(a, s, out_mark);
  gmr__ga_unlock(a);
  return st;
}

gmr_status gmr_graph_arena_resource_checkpoint_uncaptured(gmr_graph_arena_resource *a,
                                                          uint64_t *out_mark) {
  if (out_mark != NULL) *out_mark = 0;
  if (a == NULL || out_mark == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  gmr_status st = set_mark(a, NULL, out_mark);
  gmr__ga_unlock(a);
  return st;
}

/* Rewind a session's memory to `height` as its policy says. Lock held. */
static gmr_status rewind_session(gmr_graph_arena_resource *a, gmr__ga_session *s, size_t height,
                                 size_t *released) {
  gmr_graph_memory *m = s->memory;
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  if (reuse) {
    size_t n = 0;
    for (size_t i = height; i < m->entries.count; ++i) {
      if (m->entries.items[i].state != GMR__GA_ENTRY_MOVED) n++;
    }
    if (!gmr__extent_set_reserve(&m->reuse, n)) return GMR_ERR_OUT_OF_MEMORY;
  }
  for (size_t i = height; i < m->entries.count; ++i) {
    gmr__ga_entry *e = &m->entries.items[i];
    if (e->state == GMR__GA_ENTRY_MOVED) continue;
    if (e->state == GMR__GA_ENTRY_LIVE) {
      gmr__ga_drop_block(a, e->slot);
      (*released)++;
    }
    if (reuse) {
      gmr__extent_set_add(&m->reuse,
                          (gmr__extent){e->begin, e->end, (uintptr_t)s->stream, e->order});
      e->state = GMR__GA_ENTRY_MOVED;
      gmr__ga_region_widen(a, e);
    } else {
      e->state = GMR__GA_ENTRY_FREED; /* monotone: the bytes stay with the memory */
    }
  }
  return GMR_OK;
}

/* Rewind the uncaptured list to `height`. Lock held. `any_stream`: the
 * caller vouches for every stream (rewind_uncaptured); otherwise a live block
 * of another stream than `stream` refuses the rewind. */
static gmr_status rewind_open(gmr_graph_arena_resource *a, gmr_stream stream, bool any_stream,
                              size_t height, size_t *released) {
  size_t n = a->open.count - height;
  for (size_t i = height; i < a->open.count && !any_stream; ++i) {
    const gmr__ga_entry *e = &a->open.items[i];
    if (e->state == GMR__GA_ENTRY_LIVE && a->blocks[e->slot].stream != stream) return GMR_ERR_BUSY;
  }
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *released = gmr__ga_clear_open_from(a, height, scratch);
  free(scratch);
  return GMR_OK;
}

/* Rewind session `s`'s scope, or the uncaptured one (s NULL), to `mark`.
 * Lock held. */
static gmr_status rewind_to_mark(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                 gmr_stream stream, bool any_stream, uint64_t mark,
                                 size_t *released) {
  if (s == NULL && a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    return GMR_ERR_UNSUPPORTED;
  }
  gmr__ga_marks *marks = s != NULL ? &s->marks : &a->open_marks;
  size_t pos = marks->count;
  while (pos > 0 && marks->items[pos - 1].id != mark) pos--;
  if (pos == 0 || mark == 0) return GMR_ERR_INVALID_ARGUMENT;
  size_t height = marks->items[pos - 1].height;
  gmr_status st = s != NULL ? rewind_session(a, s, height, released)
                            : rewind_open(a, stream, any_stream, height, released);
  if (st == GMR_OK) marks->count = pos - 1; /* the mark and those after it */
  return st;
}

gmr_status gmr_graph_arena_resource_rewind(gmr_graph_arena_resource *a, gmr_stream stream,
                                           uint64_t mark, size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_session *s = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = gmr__ga_resolve_locked(a, stream, &s, &failure);
  if (st != GMR_OK) return st;
  size_t released = 0;
  st = rewind_to_mark(a, s, stream, false, mark, &released);
  gmr__ga_unlock(a);
  if (st == GMR_OK && out_released_count != NULL) *out_released_count = released;
  return st;
}

gmr_status gmr_graph_arena_resource_rewind_uncaptured(gmr_graph_arena_resource *a, uint64_t mark,
                                                      size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  size_t released = 0;
  gmr_status st = rewind_to_mark(a, NULL, NULL, true, mark, &released);
  gmr__ga_unlock(a);
  if (st == GMR_OK && out_released_count != NULL) *out_released_count = released;
  return st;
}
