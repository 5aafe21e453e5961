/*
 * stream_ordered/reclaim.c (internal): see reclaim.h.
 */
#include "stream_ordered/reclaim.h"

static void lock(const gmr__stream_slots *t) {
  if (t->lock != NULL) gmr__spin_lock_acquire(t->lock);
}

static void unlock(const gmr__stream_slots *t) {
  if (t->lock != NULL) gmr__spin_lock_release(t->lock);
}

static bool split(const gmr__stream_slots *t) { return gmr__stream_slots_split(t->ops); }

/* Slot `i`'s memory could be taken by a wait: another stream's, covered by
 * its record (in a split table its covered memory, whatever is fresh). */
static bool waitable(const gmr__stream_slots *t, uint32_t i, uint32_t taker) {
  if (i == taker || !t->ops->holds(t->ctx, i)) return false;
  const gmr__stream_event *e = &t->items[i]->ev;
  return split(t) ? e->complete || e->event != NULL : !gmr__stream_event_fresh(e);
}

/* A record whose completion is not known and was not found pending since. */
static bool unknown(const gmr__stream_slots *t, const gmr__stream_slot *s) {
  return (split(t) || !gmr__stream_event_fresh(&s->ev)) && !s->ev.complete &&
         s->ev.event != NULL && s->pending_query_seq != s->ev.covered_seq;
}

/* Whether slot `i` holds fresh memory a split table keeps apart. */
static bool holds_fresh(const gmr__stream_slots *t, uint32_t i) {
  return split(t) && t->ops->fresh_amount(t->ctx, i) > 0;
}

/* In a split table, a record or synchronisation that advanced slot `i`'s
 * coverage past `before` makes its fresh memory covered. */
static void note_covered(gmr__stream_slots *t, uint32_t i, uint64_t before) {
  if (split(t) && t->items[i]->ev.covered_seq != before) t->ops->covered(t->ctx, i);
}

/* Settle slot `i` (stream_event.h), telling a split table what the record
 * covered. */
static cudaError_t settle(gmr__stream_slots *t, uint32_t i) {
  gmr__stream_event *e = &t->items[i]->ev;
  uint64_t before = e->covered_seq;
  cudaError_t err = gmr__stream_event_settle(t->cuda, e, t->counts);
  note_covered(t, i, before);
  return err;
}

/* ---- 1: memory whose work is known done ---------------------------------- */

bool gmr__reclaim_collect(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want,
                          gmr__reclaim_mode mode) {
  const gmr__stream_slots_ops *ops = t->ops;
  uint32_t to = t->first > 0 ? GMR__STREAM_SLOT_SHARED : taker;
  bool pending = false;
  for (uint32_t i = t->first; i < t->count; ++i) {
    gmr__stream_slot *s = t->items[i];
    if (i == taker) continue;
    if (split(t)) {
      /* Only covered memory moves; a lazy stream (it outlives the resource)
       * is recorded on first, so that its fresh memory is covered too. */
      if (mode == GMR__RECLAIM_SETTLE && s->ev.lazy && holds_fresh(t, i)) (void)settle(t, i);
      if (!ops->holds(t->ctx, i) || (mode == GMR__RECLAIM_QUERY_ONCE && !unknown(t, s))) continue;
    } else {
      if (!ops->holds(t->ctx, i)) continue;
      if (mode == GMR__RECLAIM_SETTLE) {
        /* A fresh stream that may be gone is not recorded on: it is asked
         * to record at its next call and its newest memory stays its own. */
        if (settle(t, i) != cudaSuccess) continue;
      } else if (mode == GMR__RECLAIM_QUERY ? gmr__stream_event_fresh(&s->ev) : !unknown(t, s)) {
        continue;
      }
    }
    bool done = split(t) ? gmr__stream_event_query_covered(t->cuda, &s->ev, t->counts)
                         : gmr__stream_event_query(t->cuda, &s->ev, t->counts);
    if (done) {
      ops->take(t->ctx, i, to);
      /* Its memory is wanted: its next free records (a split table asks
       * only where fresh memory would have served: gmr__reclaim_demand). */
      if (split(t)) {
        gmr__stream_event_taken(&s->ev);
      } else {
        gmr__stream_event_demand(&s->ev);
      }
      if (want != NULL && to == taker && ops->fits(t->ctx, taker, want)) break;
    } else {
      pending = true;
      if (mode == GMR__RECLAIM_QUERY_ONCE) s->pending_query_seq = s->ev.covered_seq;
    }
  }
  return pending;
}

bool gmr__reclaim_completion_unknown(const gmr__stream_slots *t, uint32_t taker) {
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (i != taker && t->ops->holds(t->ctx, i) && unknown(t, t->items[i])) return true;
  }
  return false;
}

/* ---- 2: waiting for another stream --------------------------------------- */

/* The taker's stream waits for slot `i`'s record and takes its memory (what
 * serves `want`, where the table can tell; NULL: all), which is the taker's
 * newest free from then on. */
static bool wait_and_take(gmr__stream_slots *t, uint32_t i, uint32_t taker,
                          const gmr__reclaim_want *want) {
  gmr__stream_event *taker_ev = &t->items[taker]->ev;
  const gmr__stream_event *e = &t->items[i]->ev;
  cudaError_t err = split(t) ? gmr__stream_event_wait_covered(t->cuda, e, taker_ev->key.stream,
                                                              t->counts)
                             : gmr__stream_event_wait(t->cuda, e, taker_ev->key.stream, t->counts);
  if (err != cudaSuccess) return false;
  if (want != NULL && t->ops->take_fit != NULL) {
    t->ops->take_fit(t->ctx, i, taker, want);
  } else {
    t->ops->take(t->ctx, i, taker);
  }
  if (split(t)) {
    gmr__stream_event_taken(&t->items[i]->ev);
  } else {
    gmr__stream_event_demand(&t->items[i]->ev);
  }
  uint64_t before = taker_ev->covered_seq;
  gmr__stream_event_took_after_wait(t->cuda, taker_ev, t->counts);
  note_covered(t, taker, before);
  return true;
}

bool gmr__reclaim_wait(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want) {
  const gmr__stream_slots_ops *ops = t->ops;
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (waitable(t, i, taker) && ops->fits(t->ctx, i, want) && wait_and_take(t, i, taker, want)) {
      return true;
    }
  }
  if (ops->amount == NULL) return false;
  /* No stream alone fits, but together they may hold enough: take them
   * all, so that touching memory of different streams merges. */
  size_t have = ops->amount(t->ctx, taker);
  if (t->first > 0) have += ops->amount(t->ctx, GMR__STREAM_SLOT_SHARED);
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (waitable(t, i, taker)) have += ops->amount(t->ctx, i);
  }
  if (have < want->amount) return false;
  bool moved = false;
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (waitable(t, i, taker) && wait_and_take(t, i, taker, NULL)) moved = true;
  }
  return moved;
}

/* ---- 3: device synchronisation ------------------------------------------- */

/* Whether slot `i` is another stream's whose frees no record covers yet
 * (it owes a record, or died) and holds such memory. */
static bool owes(const gmr__stream_slots *t, uint32_t i, uint32_t taker) {
  const gmr__stream_event *e = &t->items[i]->ev;
  if (i == taker || e->lazy || !gmr__stream_event_fresh(e)) return false;
  return split(t) ? t->ops->fresh_amount(t->ctx, i) > 0 : t->ops->holds(t->ctx, i);
}

/* ... and that memory alone fits `want`. */
static bool fresh_fits(const gmr__stream_slots *t, uint32_t i, uint32_t taker,
                       const gmr__reclaim_want *want) {
  if (!owes(t, i, taker)) return false;
  return split(t) ? t->ops->fresh_fits(t->ctx, i, want) : t->ops->fits(t->ctx, i, want);
}

bool gmr__reclaim_sync_would_help(const gmr__stream_slots *t, uint32_t taker,
                                  const gmr__reclaim_want *want) {
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (fresh_fits(t, i, taker, want)) return true;
  }
  return false;
}

bool gmr__reclaim_demand(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want,
                         size_t have) {
  bool fits = false;
  size_t fresh = 0;
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (!owes(t, i, taker)) continue;
    fits = fits || fresh_fits(t, i, taker, want);
    if (split(t)) fresh += t->ops->fresh_amount(t->ctx, i);
  }
  /* A split table's fresh memory may serve together with what the taker
   * has (a stream's last frees before it went quiet, beside shared memory). */
  bool helps = fits || (split(t) && fresh > 0 && have + fresh >= want->amount);
  if (!helps) return false;
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (split(t) ? owes(t, i, taker) : fresh_fits(t, i, taker, want)) {
      gmr__stream_event_demand(&t->items[i]->ev);
    }
  }
  return true;
}

/* gmr__reclaim_device_synchronize with the table's lock held. */
static cudaError_t device_synchronize(gmr__stream_slots *t) {
  uint32_t count = t->count;
  for (uint32_t i = t->first; i < count; ++i) {
    gmr__stream_slot *s = t->items[i];
    s->sync_key = s->ev.key;
    s->sync_seq = s->ev.free_seq;
  }
  uint64_t epoch = ++t->sync_epoch;
  unlock(t);
  atomic_fetch_add_explicit(&t->counts->device_synchronize_count, 1, memory_order_relaxed);
  cudaError_t err = t->cuda->device_synchronize();
  lock(t);
  if (err != cudaSuccess) return err;
  /* Slots made meanwhile, or handed to another stream, were not covered. */
  for (uint32_t i = t->first; i < count && i < t->count; ++i) {
    gmr__stream_slot *s = t->items[i];
    if (gmr__stream_key_equal(s->ev.key, s->sync_key)) {
      uint64_t before = s->ev.covered_seq;
      gmr__stream_event_device_synchronized(&s->ev, s->sync_seq);
      /* Fresh memory is covered only if nothing was freed meanwhile. */
      if (s->ev.covered_seq == s->ev.free_seq) note_covered(t, i, before);
    }
  }
  if (t->ops->synchronized != NULL) t->ops->synchronized(t->ctx, epoch);
  return cudaSuccess;
}

cudaError_t gmr__reclaim_device_synchronize(gmr__stream_slots *t) {
  lock(t);
  cudaError_t err = device_synchronize(t);
  unlock(t);
  return err;
}

/* ---- settling everything ------------------------------------------------- */

void gmr__reclaim_settle_all(gmr__stream_slots *t, bool need_sync) {
  for (uint32_t i = t->first; i < t->count; ++i) {
    gmr__stream_slot *s = t->items[i];
    s->waiting = false;
    /* A split table's fresh frees matter only while fresh memory is kept. */
    bool fresh = gmr__stream_event_fresh(&s->ev) && (!split(t) || holds_fresh(t, i));
    bool holds = t->ops->holds(t->ctx, i) || holds_fresh(t, i);
    if (!holds || (!fresh && s->ev.complete)) continue;
    /* Lazy streams are recorded on now; a fresh stream that may be gone
     * can only be waited for through the device. A capturing stream keeps
     * its frees: the device synchronisation would be refused and break the
     * capture. */
    cudaError_t err = fresh ? settle(t, i) : cudaSuccess;
    if (err != cudaSuccess) {
      need_sync = need_sync || err != cudaErrorStreamCaptureUnsupported;
      continue;
    }
    if (split(t) ? gmr__stream_event_query_covered(t->cuda, &s->ev, t->counts)
                 : gmr__stream_event_query(t->cuda, &s->ev, t->counts)) {
      continue;
    }
    s->waiting = true;
    s->wait_key = s->ev.key;
    s->wait_seq = s->ev.covered_seq;
    s->wait_event = s->ev.event;
  }
  /* A device synchronisation covers every record too; if it fails (a
   * stream captures), the records are still waited for one by one. */
  if (need_sync && device_synchronize(t) == cudaSuccess) return;
  for (uint32_t i = t->first; i < t->count; ++i) {
    if (!t->items[i]->waiting) continue;
    cudaEvent_t event = t->items[i]->wait_event;
    unlock(t);
    atomic_fetch_add_explicit(&t->counts->synchronize_count, 1, memory_order_relaxed);
    cudaError_t err = gmr__event_synchronize_relaxed(t->cuda, event);
    lock(t);
    /* Applied only if the slot still covers the same frees. */
    gmr__stream_slot *s = t->items[i];
    if (err == cudaSuccess && gmr__stream_key_equal(s->ev.key, s->wait_key) &&
        s->ev.covered_seq == s->wait_seq) {
      s->ev.complete = true;
    }
    s->waiting = false;
  }
}
