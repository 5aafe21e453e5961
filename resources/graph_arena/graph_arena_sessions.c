/*
 * resources/graph_arena/graph_arena_sessions.c (internal): capture sessions (a stream that
 * captures now) and the graph memories they fill; telling, from the CUDA
 * layer or from the caller, whether a stream captures.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_internal.h"

bool gmr__ga_memory_known(const gmr_graph_arena_resource *a, const gmr_graph_memory *m) {
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i] == m) return true;
  }
  return false;
}

gmr__ga_session *gmr__ga_find_session(const gmr_graph_arena_resource *a, gmr_stream stream) {
  for (size_t i = 0; i < a->session_count; ++i) {
    if (a->sessions[i]->stream == stream) return a->sessions[i];
  }
  return NULL;
}

/* Room for one more session and one more memory, so that opening a session
 * cannot fail half-way. */
static bool sessions_reserve(gmr_graph_arena_resource *a) {
  return gmr__ga_ensure((void **)&a->sessions, &a->session_capacity, a->session_count + 1,
                sizeof *a->sessions) &&
         gmr__ga_ensure((void **)&a->memories, &a->memory_capacity, a->memory_count + 1,
                sizeof *a->memories);
}

/* Open a session on `stream` appending to `share`, or to a new memory. */
static gmr_status open_session(gmr_graph_arena_resource *a, gmr_stream stream,
                               gmr_graph_memory *share, bool explicit_session,
                               unsigned long long capture_id, gmr__ga_session **out) {
  if (!sessions_reserve(a)) return GMR_ERR_OUT_OF_MEMORY;
  gmr__ga_session *s = calloc(1, sizeof *s);
  gmr_graph_memory *m = share;
  if (s == NULL || (m == NULL && (m = calloc(1, sizeof *m)) == NULL)) {
    free(s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (share == NULL) {
    m->arena = a;
    m->entries = a->spare_entries;
    a->spare_entries = (gmr__ga_entries){NULL, 0, 0};
    a->memories[a->memory_count++] = m;
  }
  m->session = s;
  m->last_stream = stream;
  m->session_count++;
  s->stream = stream;
  s->memory = m;
  s->capture_id = capture_id;
  s->explicit_session = explicit_session;
  s->first_entry = m->entries.count;
  a->sessions[a->session_count++] = s;
  atomic_fetch_add_explicit(&a->open_session_count, 1, memory_order_relaxed);
  if (explicit_session) {
    atomic_fetch_add_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
  }
  *out = s;
  return GMR_OK;
}

static void close_session(gmr_graph_arena_resource *a, gmr__ga_session *s) {
  for (size_t i = 0; i < a->session_count; ++i) {
    if (a->sessions[i] == s) {
      a->sessions[i] = a->sessions[--a->session_count];
      break;
    }
  }
  atomic_fetch_sub_explicit(&a->open_session_count, 1, memory_order_relaxed);
  if (s->explicit_session) {
    atomic_fetch_sub_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
  }
  /* The capture has joined every stream it forked: frees that waited for
   * that may now be reused. */
  gmr__ga_settle_deferred(a, s->memory);
  s->memory->session = NULL;
  free(s->marks.items);
  free(s);
}

/* An automatic session whose capture is over: its memory waits to be claimed. */
static void end_automatic_session(gmr_graph_arena_resource *a, gmr__ga_session *s) {
  gmr_graph_memory *m = s->memory;
  close_session(a, s);
  if (m->references == 0) m->unclaimed = true;
}

/* The extents a memory gives back when it is released: its FREED entries and
 * its reuse list. */
size_t gmr__ga_memory_returnable_count(const gmr_graph_memory *m) {
  size_t n = m->reuse.count;
  for (size_t i = 0; i < m->entries.count; ++i) {
    if (m->entries.items[i].state == GMR__GA_ENTRY_FREED) n++;
  }
  return n;
}

/* Return a released memory's bytes. `scratch` has room for
 * gmr__ga_memory_returnable_count(m) extents and the free space for as many more. */
void gmr__ga_dissolve_memory(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                             gmr__extent *scratch) {
  size_t n = 0;
  /* The regions of bytes the memory gives back go first: a live block carved
   * from a reuse list lies inside them, and gets its own region below. */
  for (size_t i = 0; i < m->entries.count; ++i) {
    gmr__ga_entry *e = &m->entries.items[i];
    if (e->state != GMR__GA_ENTRY_LIVE && e->region) {
      gmr__nvtx_mem_region_unregister((void *)e->begin);
      e->region = false;
    }
  }
  for (size_t i = 0; i < m->entries.count; ++i) {
    gmr__ga_entry *e = &m->entries.items[i];
    if (e->state == GMR__GA_ENTRY_FREED) {
      scratch[n++] = (gmr__extent){e->begin, e->end, 0, e->order};
    } else if (e->state == GMR__GA_ENTRY_LIVE) {
      /* Still allocated: its bytes come back when it is deallocated. */
      gmr__ga_block *b = &a->blocks[e->slot];
      b->scope = GMR__GA_SCOPE_LOOSE;
      b->memory = NULL;
      b->entry = GMR__GA_NO_ENTRY;
      if (a->cfg.nvtx_annotate && !e->region) gmr__ga_region_add(a, b->addr, b->bytes);
    }
  }
  for (size_t i = 0; i < m->reuse.count; ++i) {
    scratch[n++] = m->reuse.items[i];
    scratch[n - 1].tag = 0;
  }
  gmr__extent_set_add_many(&a->free, scratch, n);
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i] == m) {
      memmove(&a->memories[i], &a->memories[i + 1], (a->memory_count - i - 1) * sizeof m);
      a->memory_count--;
      break;
    }
  }
  if (a->spare_entries.capacity < m->entries.capacity) {
    free(a->spare_entries.items);
    a->spare_entries = (gmr__ga_entries){m->entries.items, 0, m->entries.capacity};
  } else {
    free(m->entries.items);
  }
  gmr__extent_set_clear(&m->reuse);
  gmr__ga_deferred_free(m);
  free(m);
}

/* Release `m` (no reference, no session) after reserving what it needs.
 * Returns GMR_ERR_OUT_OF_MEMORY, changing nothing, if host memory is short. */
static gmr_status release_memory_locked(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  size_t n = gmr__ga_memory_returnable_count(m);
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__ga_dissolve_memory(a, m, scratch);
  free(scratch);
  return GMR_OK;
}

/* Ask the CUDA layer whether `stream` captures (a capture-safe query). */
static gmr_status query_capture(const gmr_graph_arena_resource *a, gmr_stream stream,
                                bool *capturing, unsigned long long *id, gmr_failure *failure) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  cudaError_t err = a->cuda->stream_get_capture_info((cudaStream_t)stream, &status, &capture_id);
  if (err != cudaSuccess) {
    *capturing = false;
    *id = 0;
    return gmr__cuda_fail(failure, "cudaStreamGetCaptureInfo", err);
  }
  /* An invalidated capture is still a capture: nothing unsafe until it ends. */
  *capturing = status != cudaStreamCaptureStatusNone;
  *id = *capturing ? capture_id : 0;
  return GMR_OK;
}

/* Bring the session table in line with what CUDA said about `stream`; return
 * the session requests on `stream` belong to (NULL: none). Lock held. */
static gmr_status reconcile(gmr_graph_arena_resource *a, gmr_stream stream, bool capturing,
                            unsigned long long id, gmr__ga_session **out) {
  gmr__ga_session *s = gmr__ga_find_session(a, stream);
  *out = NULL;
  if (s != NULL && s->explicit_session) {
    *out = s;
    return GMR_OK;
  }
  if (capturing && s != NULL && s->capture_id == id) {
    *out = s;
    return GMR_OK;
  }
  if (capturing) {
    /* Reserve first, so that ending the stale session cannot be followed by
     * a failure to open the new one. */
    if (!sessions_reserve(a)) return GMR_ERR_OUT_OF_MEMORY;
    if (s != NULL) end_automatic_session(a, s);
    return open_session(a, stream, NULL, false, id, out);
  }
  if (s != NULL) end_automatic_session(a, s);
  return GMR_OK;
}

_Thread_local unsigned gmr__ga_thread_hint_count;

gmr_status gmr_graph_arena_resource_thread_hint_enter(void) {
  if (gmr__ga_thread_hint_count == UINT32_MAX) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_thread_hint_count++;
  return GMR_OK;
}

gmr_status gmr_graph_arena_resource_thread_hint_leave(void) {
  if (gmr__ga_thread_hint_count == 0) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_thread_hint_count--;
  return GMR_OK;
}

void gmr__ga_forget_hints(gmr_graph_arena_resource *a) {
  for (size_t i = 0; i < a->session_count; ++i) {
    a->sessions[i]->hint_version = UINT64_MAX; /* never a version of the free space */
    a->sessions[i]->chunk = NULL;
  }
}

/*
 * Whether a request on a stream without an explicit session must ask CUDA if
 * the stream captures (the detection modes of gmr/graph_arena_resource.h):
 * AUTO always; HINTED only while a capture may be under way as far as gmr
 * knows: the calling thread raised a hint, an explicit session of this arena
 * is open (its capture may have forked onto other streams), or the stream
 * has an automatic session (to see its capture end).
 */
static bool must_ask(const gmr_graph_arena_resource *a, size_t explicit_count,
                     bool has_automatic_session) {
  if (a->cfg.detection == GMR_GRAPH_ARENA_DETECT_AUTO) return true;
  if (a->cfg.detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT) return false;
  return gmr__ga_thread_hint_count > 0 || explicit_count > 0 || has_automatic_session;
}

gmr_status gmr__ga_resolve(gmr_graph_arena_resource *a, gmr_stream stream, gmr__ga_session **out,
                           gmr_failure *failure) {
  *out = NULL;
  size_t explicit_count = atomic_load_explicit(&a->explicit_session_count, memory_order_relaxed);
  size_t open_count = atomic_load_explicit(&a->open_session_count, memory_order_relaxed);
  if (open_count > 0) {
    /* Some stream has a session: look this one up (a few compares). */
    gmr__ga_lock(a);
    gmr__ga_session *s = gmr__ga_find_session(a, stream);
    if (s != NULL && s->explicit_session) {
      *out = s;
      return GMR_OK;
    }
    bool ask = must_ask(a, explicit_count, s != NULL);
    gmr__ga_unlock(a);
    if (!ask) return GMR_OK;
  } else if (!must_ask(a, explicit_count, false)) {
    return GMR_OK; /* callers test gmr__ga_no_capture_possible() first */
  }
  bool capturing = false;
  unsigned long long id = 0;
  gmr_status st = query_capture(a, stream, &capturing, &id, failure);
  if (st != GMR_OK) return st;
  /* Not capturing and no session anywhere: nothing to reconcile. */
  if (!capturing && open_count == 0) return GMR_OK;
  gmr__ga_lock(a);
  st = reconcile(a, stream, capturing, id, out);
  if (st != GMR_OK) {
    gmr__ga_unlock(a);
    if (failure != NULL) {
      snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    }
    return st;
  }
  if (*out == NULL) gmr__ga_unlock(a);
  return GMR_OK;
}

gmr_status gmr__ga_resolve_locked(gmr_graph_arena_resource *a, gmr_stream stream,
                                  gmr__ga_session **out, gmr_failure *failure) {
  gmr_status st = gmr__ga_resolve(a, stream, out, failure);
  if (st == GMR_OK && *out == NULL) gmr__ga_lock(a);
  return st;
}

gmr_status gmr_graph_arena_resource_begin_capture(gmr_graph_arena_resource *a, gmr_stream stream,
                                                  gmr_graph_memory *share) {
  if (a == NULL || stream == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  gmr_status st = GMR_OK;
  gmr__ga_session *s = gmr__ga_find_session(a, stream);
  if (share != NULL && (!gmr__ga_memory_known(a, share) || share->references == 0)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (s != NULL) {
    if (s->explicit_session || share != NULL) {
      st = GMR_ERR_BUSY;
    } else {
      /* The caller declares the capture the arena already detected. */
      s->explicit_session = true;
      atomic_fetch_add_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
    }
  } else if (share != NULL && share->session != NULL) {
    st = GMR_ERR_BUSY;
  } else {
    /* The graph pool: the upstream's idle memory serves the capture first. */
    size_t adopted = gmr__ga_adopt_upstream_free(a, stream);
    st = open_session(a, stream, share, true, 0, &s);
    if (st != GMR_OK && adopted > 0) gmr__ga_return_idle_chunks(a, stream);
  }
  gmr__ga_unlock(a);
  return st;
}

gmr_status gmr_graph_arena_resource_end_capture(gmr_graph_arena_resource *a, gmr_stream stream,
                                                gmr_graph_memory **out_memory) {
  if (out_memory != NULL) *out_memory = NULL;
  if (a == NULL || out_memory == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  gmr_graph_memory *m = NULL;
  gmr__ga_session *s = gmr__ga_find_session(a, stream);
  if (s != NULL) {
    m = s->memory;
    close_session(a, s);
  } else {
    for (size_t i = a->memory_count; i-- > 0;) {
      gmr_graph_memory *c = a->memories[i];
      if (c->unclaimed && c->last_stream == stream) {
        m = c;
        break;
      }
    }
  }
  if (m != NULL) {
    m->unclaimed = false;
    m->references++;
    *out_memory = m;
    /* The graph pool: what the capture did not use serves others again. */
    gmr__ga_return_idle_chunks(a, stream);
  }
  gmr__ga_unlock(a);
  return m != NULL ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_graph_arena_resource_release_graph_memory(gmr_graph_arena_resource *a,
                                                         gmr_graph_memory *m) {
  if (a == NULL || m == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  gmr_status st = GMR_OK;
  if (!gmr__ga_memory_known(a, m) || m->references == 0) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (m->references == 1 && m->session == NULL) {
    st = release_memory_locked(a, m);
    /* The graph pool: its chunks no graph memory uses go back. */
    if (st == GMR_OK) gmr__ga_return_idle_chunks(a, NULL);
  } else {
    m->references--;
  }
  gmr__ga_unlock(a);
  return st;
}

gmr_status gmr_graph_arena_resource_get_graph_memory_info(gmr_graph_arena_resource *a,
                                                          const gmr_graph_memory *m,
                                                          gmr_graph_memory_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || m == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  if (gmr__ga_memory_known(a, m)) {
    out->held_bytes = m->held_bytes;
    out->live_bytes = m->live_bytes;
    out->live_count = m->live_count;
    out->allocation_count = m->allocation_count;
    out->session_count = m->session_count;
    out->reference_count = m->references;
    out->capturing = m->session != NULL;
    st = GMR_OK;
  }
  gmr__ga_unlock(a);
  return st;
}
