/*
 * resources/vmm/placement/vmf_free.c (internal): what a placement engine
 * (vmf.h) does with what it handed out: the live map and the bad-free
 * verdicts, free (with the regions record_stream holds back until their
 * uses are over), record_stream, tags, and extend.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_sleep_run.h"
#include "resources/vmm/placement/vmf.h"

/* ---- the live map ---------------------------------------------------------- */

static vmf_region *live_region(vmf_engine *e, const void *ptr, bool *freed) {
  uint64_t v = 0;
  *freed = false;
  if (!gmr__u64_map_get(&e->live, (uint64_t)(uintptr_t)ptr, &v)) return NULL;
  if (v == VMF_FREED) {
    *freed = true;
    return NULL;
  }
  return (vmf_region *)(uintptr_t)v;
}

/* Keep "freed" marks from outgrowing the live entries: rebuild the map
 * without them when they are many (a double free older than that is then
 * reported as an unknown pointer). */
static void purge_freed_marks(vmf_engine *e) {
  size_t held = e->live_count + e->asleep_count; /* the other entries are marks */
  size_t marks = e->live.count - held;
  if (marks < 4096 || marks < 2 * held) return;
  gmr__u64_map fresh = GMR__U64_MAP_INIT;
  if (!gmr__u64_map_reserve(&fresh, held + 16)) return;
  size_t cursor = 0;
  uint64_t k = 0, v = 0;
  while (gmr__u64_map_next(&e->live, &cursor, &k, &v)) {
    if (v != VMF_FREED) (void)gmr__u64_map_put(&fresh, k, v);
  }
  gmr__u64_map_clear(&e->live);
  e->live = fresh;
}

bool gmr__vmf_owns(vmf_engine *e, const void *ptr) {
  bool freed = false;
  return live_region(e, ptr, &freed) != NULL;
}

gmr_status gmr__vmf_verdict(vmf_engine *e, const void *ptr) {
  gmr__vmf_lock(e);
  bool freed = false;
  bool live = live_region(e, ptr, &freed) != NULL;
  gmr__vmf_unlock(e);
  return live ? GMR_OK : freed ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
}

/* ---- record_stream blockers ------------------------------------------------ */

static bool blockers_done(vmf_engine *e, vmf_extra *x, bool host_wait) {
  for (uint32_t i = 0; i < x->blocker_count; ++i) {
    atomic_fetch_add_explicit(host_wait ? &e->events.synchronize_count : &e->events.query_count, 1,
                              memory_order_relaxed);
    /* Queried on the fast path too, while any thread may capture: relaxed
     * mode (stream_ordered/stream_event.h). */
    cudaError_t err = host_wait ? e->cuda->event_synchronize(x->blockers[i])
                                : gmr__event_query_relaxed(e->cuda, x->blockers[i]);
    if (err != cudaSuccess) return false;
  }
  return true;
}

static void blocked_remove(vmf_engine *e, vmf_region *r) {
  gmr__free_node *n = &r->node;
  if (n->free_prev != NULL) {
    n->free_prev->free_next = n->free_next;
  } else {
    e->blocked = gmr__vmf_region_of(n->free_next);
  }
  if (n->free_next != NULL) n->free_next->free_prev = n->free_prev;
  n->free_prev = n->free_next = NULL;
  r->blocked = false;
}

/* Whether the captured uses of blocked region r are over for a request on
 * `stream` (QUERY) or at all (the other modes). */
static bool captured_uses_done(vmf_engine *e, const vmf_region *r, vmf_unblock_mode mode,
                               gmr_stream stream) {
  const vmf_extra *x = r->extra;
  if (!x->capture_wait || mode == VMF_UNBLOCK_DEVICE_SYNCED) return true;
  if (e->sync_epoch > x->sync_epoch) return true; /* the device synchronised since: over */
  if (mode != VMF_UNBLOCK_QUERY || stream == NULL || x->markers.capture_id == 0) return false;
  /* Inside the capture: back to the freeing stream once it comes after
   * every use (PyTorch's graph_capture_record_stream_reuse rule). */
  if (gmr__vmf_slot(e, r->slot)->base.ev.key.stream != stream) return false;
  return gmr__capture_markers_precede(e->cuda, &e->capture_walks, &x->markers, stream);
}

void gmr__vmf_unblock(vmf_engine *e, vmf_unblock_mode mode, gmr_stream stream) {
  vmf_region *next = NULL;
  for (vmf_region *r = e->blocked; r != NULL; r = next) {
    next = gmr__vmf_region_of(r->node.free_next);
    if (!captured_uses_done(e, r, mode, stream)) continue;
    if (!blockers_done(e, r->extra, mode == VMF_UNBLOCK_HOST_WAIT)) continue;
    blocked_remove(e, r);
    gmr__vmf_free_extra(e, r);
    /* Merging may absorb any region but the blocked ones: `next` survives. */
    (void)gmr__vmf_file_freed(e, r, r->slot);
  }
}

/* Cover every stream record_stream named (but the freeing one, and those
 * that capture: their work runs at the graph's replay, and the graph's
 * edges tell when it ends: take_capture_markers) for the free of r:
 * an event recorded on it now, or where none can be (no event, a refused
 * record, the device not made current, no host memory) a host wait for the
 * stream (cudaStreamSynchronize: its use is then over), so that the free
 * succeeds, as gmr's pool's does, and nothing is reused early.
 * A stream destroyed before the free (PyTorch's rule says it must live
 * until then; gmr's pool tolerates it) answers the record with an invalid
 * handle and is not named again: the driver still runs the work it had
 * queued, which one device synchronisation (naming no stream) waits for,
 * covering every use at once. GMR_ERR_CUDA only when a stream can be
 * neither recorded on nor waited for; nothing is kept then. *count may be 0
 * (every use waited for). */
/* The streams record_stream named that capture at the free (at most
 * VMF_CAPTURED of them kept; `more`: there were more). */
#define VMF_CAPTURED 16
typedef struct captured_uses {
  gmr_stream streams[VMF_CAPTURED];
  uint32_t count;
  bool more;
} captured_uses;

static gmr_status record_blockers(vmf_engine *e, vmf_region *r, gmr_stream stream,
                                  cudaEvent_t **out, uint32_t *count, captured_uses *captured) {
  vmf_extra *x = r->extra;
  *out = NULL;
  *count = 0;
  captured->count = 0;
  captured->more = false;
  cudaEvent_t *ev = calloc(x->used_count, sizeof *ev); /* NULL: host waits only */
  int saved = -1;
  bool entered = gmr__cuda_device_enter(e->cuda, e->device, &saved) == cudaSuccess;
  uint32_t n = 0;
  bool destroyed = false; /* a recorded stream no longer exists */
  cudaError_t err = cudaSuccess;
  for (uint32_t i = 0; err == cudaSuccess && i < x->used_count; ++i) {
    gmr_stream u = x->used_streams[i];
    if (u == stream) continue;
    if (gmr__cuda_stream_is_capturing(e->cuda, (cudaStream_t)u)) {
      if (captured->count < VMF_CAPTURED) {
        captured->streams[captured->count++] = u;
      } else {
        captured->more = true;
      }
      continue;
    }
    if (entered && ev != NULL && e->cuda->event_create(&ev[n]) == cudaSuccess) {
      atomic_fetch_add_explicit(&e->events.record_count, 1, memory_order_relaxed);
      cudaError_t record = e->cuda->event_record(ev[n], (cudaStream_t)u);
      if (record == cudaSuccess) {
        n++;
        continue;
      }
      (void)e->cuda->event_destroy(ev[n]);
      if (record == cudaErrorInvalidResourceHandle) { /* the event is new: the stream is gone */
        destroyed = true;
        continue;
      }
    }
    err = e->cuda->stream_synchronize((cudaStream_t)u);
    if (err == cudaErrorInvalidResourceHandle) {
      destroyed = true;
      err = cudaSuccess;
    }
  }
  if (err == cudaSuccess && destroyed) {
    /* On this pool's device only: a device not made current could not be
     * the one waited for. */
    err = cudaErrorInvalidResourceHandle;
    if (entered) {
      atomic_fetch_add_explicit(&e->events.device_synchronize_count, 1, memory_order_relaxed);
      err = e->cuda->device_synchronize();
    }
    if (err == cudaSuccess) { /* every recorded use is over too */
      for (uint32_t i = 0; i < n; ++i) (void)e->cuda->event_destroy(ev[i]);
      n = 0;
    }
  }
  if (entered) gmr__cuda_device_leave(e->cuda, saved);
  if (err != cudaSuccess || n == 0) {
    for (uint32_t i = 0; i < n; ++i) (void)e->cuda->event_destroy(ev[i]);
    free(ev);
    return err != cudaSuccess ? GMR_ERR_CUDA : GMR_OK;
  }
  *out = ev;
  *count = n;
  return GMR_OK;
}

/* The free of r on `stream` while a stream record_stream named captures: the
 * region waits (capture_wait) with the free markers of its uses when the
 * freeing stream captures in the same capture (stream_ordered/capture_reuse.h),
 * else for the next device synchronisation. Returns whether any used stream
 * captures. */
static bool take_capture_markers(vmf_engine *e, vmf_region *r, gmr_stream stream,
                                 const captured_uses *captured) {
  vmf_extra *x = r->extra;
  if (captured->count == 0 && !captured->more) return false;
  x->capture_wait = true;
  x->sync_epoch = e->sync_epoch;
  if (!captured->more) {
    (void)gmr__capture_markers_take(e->cuda, stream, captured->streams, captured->count,
                                    &x->markers);
  }
  return true;
}

/* ---- free ------------------------------------------------------------------ */

/* The verdict on a free (or extend) of `ptr` with `bytes` and `alignment`:
 * exactly the size and alignment asked for at allocation, not what they
 * round to (a free of 999 bytes for 1,000 is a mismatch, so that the
 * correct free that follows is not taken for a double free). */
static gmr_status check_free(vmf_engine *e, const void *ptr, size_t bytes, size_t alignment,
                             vmf_region **out) {
  bool freed = false;
  vmf_region *r = live_region(e, ptr, &freed);
  *out = r;
  if (r == NULL) return freed ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
  if (bytes != r->requested_bytes || alignment != r->alignment) return GMR_ERR_FREE_MISMATCH;
  return GMR_OK;
}

static void forget_live(vmf_engine *e, vmf_region *r) {
  (void)gmr__u64_map_put(&e->live, (uint64_t)r->node.addr, VMF_FREED); /* replaces: no growth */
  r->requested_bytes = 0;
  r->stream = NULL;
}

/* An asleep allocation has no pages to free: it becomes free memory that
 * wake makes whole again. */
static void free_asleep(vmf_engine *e, vmf_region *r, uint32_t slot) {
  if (r->extra != NULL && r->extra->saved != NULL) {
    e->saved_bytes -= r->node.bytes;
    (void)gmr__vmm_host_free(&e->unreleased, e->saved_host, r->extra->saved, r->node.bytes);
    r->extra->saved = NULL;
  }
  gmr__vmf_free_extra(e, r);
  e->asleep_bytes -= r->node.bytes;
  e->asleep_count--;
  forget_live(e, r);
  gmr__vmf_set_state(e, r, VMF_FREE);
  (void)gmr__vmf_file_freed(e, r, slot);
}

gmr_status gmr__vmf_deallocate(vmf_engine *e, void *ptr, size_t bytes, size_t alignment,
                               gmr_stream stream) {
  gmr__vmf_lock(e);
  vmf_region *r = NULL;
  gmr_status st = check_free(e, ptr, bytes, alignment, &r);
  uint32_t slot = 0;
  if (st == GMR_OK && !gmr__vmf_slot_of(e, stream, &slot)) st = GMR_ERR_OUT_OF_MEMORY;
  /* The stream's id is checked where a mistake would cost order
   * (docs/stream_ordering.md): before a record that would also cover
   * earlier frees no record covers (they must be this stream's), or take
   * over covered memory not known done (a record on a successor that got
   * the handle would stand for the dead stream's work), and at the first
   * free a record will not cover while the slot's id is not known (so that
   * a later record knows whose the frees are: a known id found again proves
   * the stream kept the handle). A failed check records nothing (the
   * memory stays this stream's, reached by others through a device
   * synchronisation). */
  bool record_ok = true, not_capturing = false;
  if (st == GMR_OK && !gmr__vmf_slot(e, slot)->base.ev.lazy) {
    const vmf_slot *s = gmr__vmf_slot(e, slot);
    bool fresh = gmr__stream_event_fresh(&s->base.ev);
    bool check = gmr__stream_event_record_due_for(&s->base.ev, r->node.bytes)
                     ? fresh || (!s->base.ev.complete && s->index.block_count > 0)
                     : !fresh && !gmr__stream_id_is_stream(s->base.ev.key.id);
    if (check) record_ok = gmr__vmf_slot_check(e, stream, &slot, &not_capturing);
  }
  if (st == GMR_OK && r->state == VMF_ASLEEP) {
    free_asleep(e, r, slot);
    purge_freed_marks(e);
    gmr__vmf_unlock(e);
    return GMR_OK;
  }
  cudaEvent_t *blockers = NULL;
  uint32_t blocker_count = 0;
  bool capture_wait = false;
  if (st == GMR_OK && r->extra != NULL && r->extra->used_count > 0) {
    captured_uses captured;
    st = record_blockers(e, r, stream, &blockers, &blocker_count, &captured);
    /* Nothing changed yet when the record failed: markers only after. */
    if (st == GMR_OK) capture_wait = take_capture_markers(e, r, stream, &captured);
  }
  if (st != GMR_OK) {
    gmr__vmf_unlock(e);
    return st;
  }
  /* Reuse by other streams waits for this stream's work (recorded now on a
   * created stream, lazily on a default one). */
  gmr__stream_event *ev = &gmr__vmf_slot(e, slot)->base.ev;
  if (record_ok) {
    uint64_t before = ev->covered_seq;
    gmr__stream_event_freed(e->cuda, ev, r->node.bytes, not_capturing, &e->events);
    gmr__vmf_note_covered(e, slot, before);
  } else {
    gmr__stream_event_freed_unrecorded(ev, r->node.bytes); /* fresh: not covered by a record */
  }
  forget_live(e, r);
  e->live_bytes -= r->node.bytes;
  e->live_count--;
  if (blocker_count > 0 || capture_wait) {
    /* Held back: the extra that held the uses now holds what it waits for
     * (no new host memory needed, so nothing can fail here). */
    vmf_extra *x = r->extra;
    free(x->used_streams);
    x->used_streams = NULL;
    x->used_count = 0;
    x->blockers = blockers;
    x->blocker_count = blocker_count;
    gmr__vmf_set_state(e, r, VMF_FREE);
    r->slot = slot;
    r->blocked = true;
    r->node.free_prev = NULL;
    r->node.free_next = gmr__vmf_node(e->blocked);
    if (e->blocked != NULL) e->blocked->node.free_prev = &r->node;
    e->blocked = r;
  } else {
    gmr__vmf_free_extra(e, r);
    gmr__vmf_set_state(e, r, VMF_FREE);
  }
  if (!r->blocked) (void)gmr__vmf_file_freed(e, r, slot);
  purge_freed_marks(e);
  gmr__vmf_unlock(e);
  return GMR_OK;
}

/* ---- record_stream, tags --------------------------------------------------- */

gmr_status gmr__vmf_record_stream(vmf_engine *e, void *ptr, gmr_stream stream) {
  gmr__vmf_lock(e);
  bool freed = false;
  vmf_region *r = live_region(e, ptr, &freed);
  gmr_status st = GMR_OK;
  if (r == NULL) {
    st = freed ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
  } else if (stream != r->stream) {
    vmf_extra *x = gmr__vmf_extra(r);
    if (x == NULL || !gmr__vmm_streams_add(&x->used_streams, &x->used_count, stream)) {
      st = GMR_ERR_OUT_OF_MEMORY;
    }
  }
  gmr__vmf_unlock(e);
  return st;
}

gmr_status gmr__vmf_set_tag(vmf_engine *e, void *ptr, uint32_t tag) {
  gmr__vmf_lock(e);
  bool freed = false;
  vmf_region *r = live_region(e, ptr, &freed);
  if (r != NULL) r->tag = tag;
  gmr__vmf_unlock(e);
  return r != NULL ? GMR_OK : GMR_ERR_UNKNOWN_POINTER;
}

/* ---- extend ---------------------------------------------------------------- */

void gmr__vmf_grow_into_next(vmf_engine *e, vmf_region *r, size_t grow_bytes) {
  vmf_region *n = r->next;
  if (n->node.bytes > grow_bytes) {
    vmf_region *tail = gmr__vmf_region_new(e); /* reserved by the caller */
    gmr__vmf_split(e, n, grow_bytes, tail);
    gmr__vmf_bin_insert(e, tail); /* the rest stays free, in n's slot */
  }
  gmr__vmf_absorb_next(e, r);
  e->live_bytes += grow_bytes;
}

gmr_status gmr__vmf_extend(vmf_engine *e, void *ptr, size_t bytes, size_t new_bytes,
                           size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr__vmf_lock(e);
  vmf_region *r = NULL;
  gmr_status st = check_free(e, ptr, bytes, alignment, &r);
  if (st != GMR_OK) {
    gmr__vmf_unlock(e);
    return gmr__failure_set(failure, st, "vmm_pool: %p is not a live allocation of %zu bytes", ptr,
                            bytes);
  }
  if (e->asleep_count > 0) {
    gmr__vmf_unlock(e);
    return gmr__vmm_busy_asleep(failure, "allocating");
  }
  st = gmr__vmm_refuse_beyond_device(e->pool, new_bytes, failure);
  if (st != GMR_OK) {
    gmr__vmf_unlock(e);
    return st;
  }
  size_t want = gmr__align_up(new_bytes, VMF_UNIT);
  size_t grow = want > r->node.bytes ? want - r->node.bytes : 0;
  uint32_t slot = 0;
  if (grow > 0 && (!gmr__vmf_slot_of(e, stream, &slot) || !gmr__vmf_reserve_regions(e, 4))) {
    gmr__vmf_unlock(e);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  vmf_region *n = r->next;
  bool usable = n != NULL && n->state == VMF_FREE && !n->blocked &&
                (n->slot == slot || n->slot == VMF_SHARED);
  if (grow == 0) {
    st = GMR_OK;
  } else if (usable && n->node.bytes >= grow) {
    gmr__vmf_bin_remove(e, n);
    gmr__vmf_grow_into_next(e, r, grow);
  } else if (e->source->extend == NULL) {
    st = gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                          "vmm_pool: the %zu bytes after the allocation at %p are not free "
                          "(extend grows in place only)",
                          grow, ptr);
  } else {
    int saved_device = -1;
    cudaError_t err = gmr__cuda_device_enter(e->cuda, e->device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else {
      bool capturing = gmr__cuda_stream_is_capturing(e->cuda, (cudaStream_t)stream);
      enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
      /* Relaxed whoever captures: page mapping and event queries are
       * potentially unsafe calls, which in global mode would break a capture
       * another stream (or thread) is making. */
      err = gmr__cuda_capture_relaxed_enter(e->cuda, &saved_mode);
      if (err != cudaSuccess) {
        st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
      } else {
        st = e->source->extend(e, r, grow, stream, slot, capturing, failure);
        gmr__cuda_capture_relaxed_leave(e->cuda, saved_mode);
      }
      gmr__cuda_device_leave(e->cuda, saved_device);
    }
  }
  if (st == GMR_OK) {
    if (e->live_bytes > e->peak_live_bytes) e->peak_live_bytes = e->live_bytes;
    r->requested_bytes = new_bytes;
    if (grow > 0) e->counts.extend++;
  } else if (st == GMR_ERR_OUT_OF_MEMORY) {
    gmr__vmf_fill_free_info(e, failure);
  }
  gmr__vmf_unlock(e);
  return st;
}
