/*
 * tiers/notification_channel.c: see gmr/tiers/notification_channel.h.
 *
 * The generation is an atomic so that notify can skip the mutex when nobody
 * waits; a waiter registers itself (waiter_count) before it compares the
 * generation under the mutex, and a notifier raises the generation before it
 * reads waiter_count, so one of the two always sees the other (both sides
 * use sequentially consistent operations).
 */
#include "gmr/tiers/notification_channel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/counters.h"
#include "tiers/tiers_internal.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

struct gmr_notification_channel {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  _Atomic uint64_t generation;
  _Atomic bool shut_down;
  _Atomic size_t waiter_count;
  _Atomic size_t watcher_count; /* threads between watch_begin and watch_end */
  _Atomic size_t peak_waiter_count;
  _Atomic uint64_t wait_count;
  _Atomic uint64_t notified_count;
  _Atomic uint64_t idle_count;
  _Atomic uint64_t shutdown_count;
};

gmr_status gmr_notification_channel_create(gmr_notification_channel **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_notification_channel *c = calloc(1, sizeof *c);
  if (c == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&c->mutex, NULL) != 0) {
    free(c);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (!gmr__cond_init_monotonic(&c->cond)) {
    pthread_mutex_destroy(&c->mutex);
    free(c);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out = c;
  return GMR_OK;
}

gmr_status gmr_notification_channel_destroy(gmr_notification_channel *c) {
  if (c == NULL) return GMR_OK;
  pthread_mutex_lock(&c->mutex);
  size_t waiters = atomic_load(&c->waiter_count);
  pthread_mutex_unlock(&c->mutex);
  if (waiters != 0) return GMR_ERR_BUSY;
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->mutex);
  free(c);
  return GMR_OK;
}

uint64_t gmr_notification_channel_get_generation(const gmr_notification_channel *c) {
  return c == NULL ? 0 : atomic_load(&c->generation);
}

gmr_status gmr_notification_channel_notify(gmr_notification_channel *c) {
  if (c == NULL) return GMR_ERR_INVALID_ARGUMENT;
  atomic_fetch_add(&c->generation, 1);
  if (atomic_load(&c->waiter_count) == 0) return GMR_OK;
  pthread_mutex_lock(&c->mutex);
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->mutex);
  return GMR_OK;
}

gmr_status gmr_notification_channel_wait(gmr_notification_channel *c, uint64_t seen_generation,
                                         uint64_t timeout_ns, gmr_wait_result *out_result) {
  if (c == NULL || out_result == NULL) return GMR_ERR_INVALID_ARGUMENT;
  uint64_t deadline = gmr__deadline_after(timeout_ns);
  atomic_fetch_add_explicit(&c->wait_count, 1, memory_order_relaxed);
  pthread_mutex_lock(&c->mutex);
  size_t now = atomic_fetch_add(&c->waiter_count, 1) + 1;
  gmr__raise_peak(&c->peak_waiter_count, now);
  gmr_wait_result result = GMR_WAIT_IDLE;
  for (;;) {
    if (atomic_load(&c->shut_down)) {
      result = GMR_WAIT_SHUTDOWN;
      break;
    }
    if (atomic_load(&c->generation) != seen_generation) {
      result = GMR_WAIT_NOTIFIED;
      break;
    }
    if (timeout_ns == 0 || !gmr__cond_wait_until(&c->cond, &c->mutex, deadline)) {
      /* One last look: a notify may have come with the timeout. */
      if (atomic_load(&c->shut_down)) {
        result = GMR_WAIT_SHUTDOWN;
      } else if (atomic_load(&c->generation) != seen_generation) {
        result = GMR_WAIT_NOTIFIED;
      }
      break;
    }
  }
  atomic_fetch_sub(&c->waiter_count, 1);
  pthread_mutex_unlock(&c->mutex);
  _Atomic uint64_t *counter = result == GMR_WAIT_NOTIFIED ? &c->notified_count
                              : result == GMR_WAIT_SHUTDOWN ? &c->shutdown_count
                                                            : &c->idle_count;
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
  *out_result = result;
  return GMR_OK;
}

gmr_status gmr_notification_channel_shutdown(gmr_notification_channel *c) {
  if (c == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->mutex);
  atomic_store(&c->shut_down, true);
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->mutex);
  return GMR_OK;
}

bool gmr_notification_channel_is_shut_down(const gmr_notification_channel *c) {
  return c != NULL && atomic_load(&c->shut_down);
}

gmr_status gmr_notification_channel_get_stats(const gmr_notification_channel *c,
                                              gmr_notification_channel_stats *out) {
  if (c == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_notification_channel_stats s;
  memset(&s, 0, sizeof s);
  s.generation = atomic_load(&c->generation);
  s.wait_count = atomic_load_explicit(&c->wait_count, memory_order_relaxed);
  s.notified_count = atomic_load_explicit(&c->notified_count, memory_order_relaxed);
  s.idle_count = atomic_load_explicit(&c->idle_count, memory_order_relaxed);
  s.shutdown_count = atomic_load_explicit(&c->shutdown_count, memory_order_relaxed);
  s.waiter_count = atomic_load(&c->waiter_count);
  s.peak_waiter_count = atomic_load(&c->peak_waiter_count);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}

void gmr__notification_channel_watch_begin(gmr_notification_channel *c) {
  atomic_fetch_add(&c->watcher_count, 1);
  /* Pairs with the fence in notify_if_watched: either the freeing thread
   * sees this watcher, or this thread's next check sees the free. */
  atomic_thread_fence(memory_order_seq_cst);
}

void gmr__notification_channel_watch_end(gmr_notification_channel *c) {
  atomic_fetch_sub(&c->watcher_count, 1);
}

void gmr__notification_channel_notify_if_watched(gmr_notification_channel *c) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load(&c->watcher_count) == 0 && atomic_load(&c->waiter_count) == 0) return;
  GMR_IGNORE_STATUS(gmr_notification_channel_notify(c));
}
