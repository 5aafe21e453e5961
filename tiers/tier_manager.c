/*
 * tiers/tier_manager.c: the tier manager (see gmr/tiers/tier_manager.h): its
 * spaces, the choice of a space by strategy, waiting for room, shutdown.
 *
 * Waiting without lost wake-ups: a blocking reserve registers with the
 * notification channel (watch_begin) before it first checks for room, reads
 * the channel's generation before each check, and waits for a generation
 * other than the one it read. Releases and shrinks notify under the
 * manager's mutex; frees through a space's resource notify when someone
 * watches (tiers/notification_channel.c explains the fences).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/tiers_internal.h"
#include "core/failure.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

typedef enum reserve_mode { MODE_BLOCK, MODE_TRY, MODE_UP_TO } reserve_mode;

/* Candidate spaces of a strategy, in the order to try them. */
typedef struct candidates {
  gmr_memory_space *items[GMR_TIER_MANAGER_MAX_SPACES];
  size_t available[GMR_TIER_MANAGER_MAX_SPACES];
  size_t count;
} candidates;

static bool same_id(gmr_memory_space_id a, gmr_memory_space_id b) {
  return a.tier == b.tier && a.index == b.index;
}

static gmr_memory_space *find_space(gmr_tier_manager *m, gmr_memory_space_id id) {
  for (size_t i = 0; i < m->space_count; ++i) {
    if (same_id(m->spaces[i]->config.id, id)) return m->spaces[i];
  }
  return NULL;
}

/* Append the spaces of `tier`, most available first (ties: lower index
 * first); `preferred_index` (>= 0) goes before the others. (M held) */
static void add_tier(gmr_tier_manager *m, gmr_tier tier, int preferred_index, candidates *c) {
  size_t first = c->count;
  for (size_t i = 0; i < m->space_count; ++i) {
    gmr_memory_space *s = m->spaces[i];
    if (s->config.id.tier != tier) continue;
    gmr__space_usage u;
    gmr__space_usage_locked(s, &u);
    size_t j = c->count++;
    c->items[j] = s;
    c->available[j] = u.available_bytes;
    /* Insertion sort: a handful of spaces per tier. */
    while (j > first) {
      gmr_memory_space *a = c->items[j - 1], *b = c->items[j];
      bool b_first = b->config.id.index == preferred_index;
      bool a_first = a->config.id.index == preferred_index;
      bool swap = b_first != a_first ? b_first
                  : c->available[j] != c->available[j - 1]
                      ? c->available[j] > c->available[j - 1]
                      : b->config.id.index < a->config.id.index;
      if (!swap) break;
      c->items[j - 1] = b;
      c->items[j] = a;
      size_t t = c->available[j - 1];
      c->available[j - 1] = c->available[j];
      c->available[j] = t;
      --j;
    }
  }
}

static bool tier_valid(gmr_tier t) { return (int)t >= 0 && t < GMR_TIER_COUNT; }

/* The strategy's candidates now. (M held) */
static gmr_status resolve(gmr_tier_manager *m, const gmr_reservation_strategy *st, candidates *c,
                          gmr_failure *failure) {
  c->count = 0;
  switch (st->kind) {
    case GMR_RESERVATION_STRATEGY_SPACE: {
      gmr_memory_space *s = find_space(m, st->space);
      if (s == NULL) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "strategy names space (%s, %d), which this manager does not have",
                              gmr_tier_name(st->space.tier), st->space.index);
      }
      gmr__space_usage u;
      gmr__space_usage_locked(s, &u);
      c->items[0] = s;
      c->available[0] = u.available_bytes;
      c->count = 1;
      break;
    }
    case GMR_RESERVATION_STRATEGY_TIER:
    case GMR_RESERVATION_STRATEGY_TIERS: {
      size_t n = st->kind == GMR_RESERVATION_STRATEGY_TIER ? 1 : st->tier_count;
      if (n == 0 || n > GMR_TIER_COUNT) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "strategy lists %zu tiers (1..%d)", n, GMR_TIER_COUNT);
      }
      for (size_t i = 0; i < n; ++i) {
        if (!tier_valid(st->tiers[i])) {
          return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "unknown tier %d",
                                (int)st->tiers[i]);
        }
        add_tier(m, st->tiers[i], -1, c);
      }
      if (c->count == 0) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "the strategy's tier(s) (first: %s) have no space in this manager",
                              gmr_tier_name(st->tiers[0]));
      }
      break;
    }
    case GMR_RESERVATION_STRATEGY_DOWNGRADE: {
      gmr_memory_space *src = find_space(m, st->space);
      if (src == NULL) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "downgrade source (%s, %d) is not a space of this manager",
                              gmr_tier_name(st->space.tier), st->space.index);
      }
      gmr_tier target = st->tier_count == 0 ? (gmr_tier)(src->config.id.tier + 1) : st->tiers[0];
      if (!tier_valid(target) || target <= src->config.id.tier) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "downgrade from (%s, %d) to tier %d: the target must be a slower "
                              "tier",
                              gmr_tier_name(src->config.id.tier), src->config.id.index,
                              (int)target);
      }
      int preferred = src->config.id.tier == GMR_TIER_GPU && target == GMR_TIER_HOST
                          ? src->config.downgrade_numa_node
                          : -1;
      add_tier(m, target, preferred, c);
      if (c->count == 0) {
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "downgrade target tier %s has no space in this manager",
                              gmr_tier_name(target));
      }
      break;
    }
    default:
      return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "unknown strategy kind %d",
                            (int)st->kind);
  }
  return GMR_OK;
}

/* A new reservation of `bytes` in `s`. (M held) */
static gmr_status make_reservation(gmr_tier_manager *m, gmr_memory_space *s, size_t bytes,
                                   gmr_reservation_id *out_id, gmr_failure *failure) {
  gmr__tier_reservation *r = calloc(1, sizeof *r);
  if (r == NULL || !gmr__u64_map_put(&m->reservations, m->next_id, (uint64_t)(uintptr_t)r)) {
    free(r);
    return gmr__tier_fail(failure, GMR_ERR_OUT_OF_MEMORY, bytes,
                          "no host memory for the reservation's bookkeeping");
  }
  r->id = m->next_id++;
  r->space = s;
  r->bytes = bytes;
  s->reserved_bytes += bytes;
  if (s->reserved_bytes > s->peak_reserved_bytes) s->peak_reserved_bytes = s->reserved_bytes;
  s->reservation_count++;
  *out_id = r->id;
  return GMR_OK;
}

static void describe_best(const candidates *c, char *buf, size_t len) {
  size_t best = 0;
  for (size_t i = 1; i < c->count; ++i) {
    if (c->available[i] > c->available[best]) best = i;
  }
  const gmr_memory_space *s = c->items[best];
  snprintf(buf, len, "(%s, %d) has %zu bytes available of a reservation limit of %zu",
           gmr_tier_name(s->config.id.tier), s->config.id.index, c->available[best],
           s->limit_bytes);
}

/* The candidate to reserve *size bytes in: the first that has them all;
 * for MODE_UP_TO else the one with the most available (*size becomes that),
 * and when none has a byte, a reservation of 0 bytes that can grow later
 * (cuCascade's make_reservation_upto) in the first candidate that is not
 * DISK (DISK reservations cannot grow). NULL when none will do. */
static gmr_memory_space *pick_space(const candidates *c, reserve_mode mode, size_t *size) {
  for (size_t i = 0; i < c->count; ++i) {
    if (c->available[i] >= *size) return c->items[i];
  }
  if (mode != MODE_UP_TO || c->count == 0) return NULL;
  size_t best = 0;
  for (size_t i = 1; i < c->count; ++i) {
    if (c->available[i] > c->available[best]) best = i;
  }
  *size = c->available[best];
  if (*size > 0) return c->items[best];
  for (size_t i = 0; i < c->count; ++i) {
    if (c->items[i]->config.id.tier != GMR_TIER_DISK) return c->items[i];
  }
  return NULL;
}

/* Count a reserve call's waiting time and, when it succeeded, its latency
 * (started at t0; wait_started 0: it never waited). (M held) */
static void note_times(gmr_tier_manager *m, bool reserved, uint64_t t0, uint64_t wait_started) {
  uint64_t t1 = gmr__monotonic_ns();
  if (wait_started != 0) {
    uint64_t w = t1 - wait_started;
    m->wait_ns += w;
    if (w > m->max_wait_ns) m->max_wait_ns = w;
  }
  if (!reserved) return;
  uint64_t took = t1 - t0;
  m->reserve_count++;
  m->reserve_latency_ns += took;
  if (took > m->max_reserve_latency_ns) m->max_reserve_latency_ns = took;
  if (wait_started == 0) {
    m->immediate_reserve_count++;
    m->immediate_reserve_latency_ns += took;
    if (took > m->max_immediate_reserve_latency_ns) m->max_immediate_reserve_latency_ns = took;
  }
}

static gmr_status reserve_impl(gmr_tier_manager *m, const gmr_reservation_strategy *strategy,
                               size_t bytes, reserve_mode mode, uint64_t timeout_ns,
                               gmr_reservation_id *out_id, size_t *out_bytes,
                               gmr_failure *failure) {
  if (out_id != NULL) *out_id = 0;
  if (out_bytes != NULL) *out_bytes = 0;
  if (m == NULL || strategy == NULL || out_id == NULL) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, bytes,
                          "manager, strategy or out_id is NULL");
  }
  if (bytes == 0) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "a reservation of 0 bytes");
  }
  uint64_t t0 = gmr__monotonic_ns();
  uint64_t deadline = gmr__deadline_after(timeout_ns);
  uint64_t wait_started = 0;
  bool blocking = mode == MODE_BLOCK;
  if (blocking) gmr__notification_channel_watch_begin(m->channel);
  gmr_status st = GMR_OK;
  char best[160];
  candidates c;
  pthread_mutex_lock(&m->mutex);
  for (;;) {
    if (m->shut_down) {
      m->shutdown_count++;
      st = gmr__tier_fail(failure, GMR_ERR_SHUTDOWN, bytes,
                          "reserve %zu bytes: the tier manager is shut down", bytes);
      break;
    }
    uint64_t generation = gmr_notification_channel_get_generation(m->channel);
    st = resolve(m, strategy, &c, failure);
    if (st != GMR_OK) break;
    size_t largest_limit = 0;
    for (size_t i = 0; i < c.count; ++i) {
      if (c.items[i]->limit_bytes > largest_limit) largest_limit = c.items[i]->limit_bytes;
    }
    if (mode != MODE_UP_TO && bytes > largest_limit) {
      m->refused_count++;
      st = gmr__tier_fail(failure, GMR_ERR_LIMIT_EXCEEDED, bytes,
                          "reserve %zu bytes: above the reservation limit of every candidate "
                          "space (largest: %zu bytes); it could never fit",
                          bytes, largest_limit);
      break;
    }
    size_t size = bytes;
    gmr_memory_space *pick = pick_space(&c, mode, &size);
    if (pick != NULL) {
      st = make_reservation(m, pick, size, out_id, failure);
      if (st == GMR_OK && out_bytes != NULL) *out_bytes = size;
      break;
    }
    describe_best(&c, best, sizeof best);
    if (!blocking) {
      m->refused_count++;
      st = gmr__tier_fail(failure, GMR_ERR_LIMIT_EXCEEDED, bytes,
                          "reserve %zu bytes: no candidate space has room now%s; %s", bytes,
                          mode == MODE_UP_TO ? " (and DISK reservations cannot grow from 0)" : "",
                          best);
      break;
    }
    if (wait_started == 0) {
      wait_started = gmr__monotonic_ns();
      m->wait_count++;
    }
    if (timeout_ns == 0 || (deadline != UINT64_MAX && gmr__monotonic_ns() >= deadline)) {
      m->timeout_count++;
      st = gmr__tier_fail(failure, GMR_ERR_TIMEOUT, bytes,
                          "reserve %zu bytes: no room within %llu ns; %s", bytes,
                          (unsigned long long)timeout_ns, best);
      break;
    }
    m->waiter_count++;
    pthread_mutex_unlock(&m->mutex);
    uint64_t left = deadline == UINT64_MAX ? GMR_WAIT_FOREVER : deadline - gmr__monotonic_ns();
    if (deadline != UINT64_MAX && gmr__monotonic_ns() >= deadline) left = 0;
    gmr_wait_result result = GMR_WAIT_IDLE;
    if (gmr_notification_channel_wait(m->channel, generation, left, &result) != GMR_OK) {
      result = GMR_WAIT_IDLE; /* cannot happen: both arguments are valid */
    }
    pthread_mutex_lock(&m->mutex);
    m->waiter_count--;
    /* Whatever woke us (notify, timeout, shutdown), look again from the top. */
  }
  note_times(m, st == GMR_OK, t0, wait_started);
  pthread_mutex_unlock(&m->mutex);
  if (blocking) gmr__notification_channel_watch_end(m->channel);
  return st;
}

/* The three public ways to reserve; each works in a whole failure record
 * (gmr__failure_begin) and copies out what the caller's record holds. */
gmr_status gmr_tier_manager_reserve(gmr_tier_manager *m, const gmr_reservation_strategy *strategy,
                                    size_t bytes, uint64_t timeout_ns, gmr_reservation_id *out_id,
                                    gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = reserve_impl(m, strategy, bytes, MODE_BLOCK, timeout_ns, out_id, NULL, f);
  return gmr__failure_end(failure, f, st);
}

gmr_status gmr_tier_manager_try_reserve(gmr_tier_manager *m,
                                        const gmr_reservation_strategy *strategy, size_t bytes,
                                        gmr_reservation_id *out_id, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = reserve_impl(m, strategy, bytes, MODE_TRY, 0, out_id, NULL, f);
  return gmr__failure_end(failure, f, st);
}

gmr_status gmr_tier_manager_reserve_up_to(gmr_tier_manager *m,
                                          const gmr_reservation_strategy *strategy, size_t bytes,
                                          gmr_reservation_id *out_id, size_t *out_bytes,
                                          gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = reserve_impl(m, strategy, bytes, MODE_UP_TO, 0, out_id, out_bytes, f);
  return gmr__failure_end(failure, f, st);
}

/* ---- life -------------------------------------------------------------------------- */

static void release_policies(const gmr_memory_space_config *configs, size_t from, size_t count) {
  for (size_t i = from; i < count; ++i) {
    if (configs[i].on_oom.release != NULL) configs[i].on_oom.release(configs[i].on_oom.ctx);
  }
}

static void free_manager(gmr_tier_manager *m) {
  for (size_t i = 0; i < m->space_count; ++i) gmr__space_destroy(m->spaces[i]);
  if (m->channel != NULL) GMR_IGNORE_STATUS(gmr_notification_channel_destroy(m->channel));
  gmr__u64_map_clear(&m->reservations);
  pthread_mutex_destroy(&m->mutex);
  free(m);
}

static gmr_status tier_manager_create_impl(const gmr_memory_space_config *configs, size_t count,
                                           gmr_tier_manager **out, gmr_failure *failure) {
  if (out != NULL) *out = NULL;
  if (out == NULL || configs == NULL || count == 0 || count > GMR_TIER_MANAGER_MAX_SPACES) {
    if (configs != NULL) release_policies(configs, 0, count);
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "out or configs is NULL, or %zu spaces (1..%d)", count,
                          GMR_TIER_MANAGER_MAX_SPACES);
  }
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (same_id(configs[i].id, configs[j].id)) {
        release_policies(configs, 0, count);
        return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                              "configs %zu and %zu both name space (%s, %d)", j, i,
                              gmr_tier_name(configs[i].id.tier), configs[i].id.index);
      }
    }
  }
  gmr_tier_manager *m = calloc(1, sizeof *m);
  if (m == NULL || pthread_mutex_init(&m->mutex, NULL) != 0) {
    free(m);
    release_policies(configs, 0, count);
    return gmr__tier_fail(failure, GMR_ERR_OUT_OF_MEMORY, 0, "no host memory for the manager");
  }
  gmr__u64_map empty = GMR__U64_MAP_INIT;
  m->reservations = empty;
  m->next_id = 1;
  gmr_status st = gmr_notification_channel_create(&m->channel);
  if (st != GMR_OK) {
    free_manager(m);
    release_policies(configs, 0, count);
    return gmr__tier_fail(failure, st, 0, "the notification channel could not be made");
  }
  for (size_t i = 0; i < count; ++i) {
    st = gmr__space_create(m, &configs[i], &m->spaces[i], failure);
    if (st != GMR_OK) {
      release_policies(configs, i + 1, count); /* config i's was released by the space */
      free_manager(m);
      return st;
    }
    m->space_count++;
  }
  *out = m;
  return GMR_OK;
}

gmr_status gmr_tier_manager_create(const gmr_memory_space_config *configs, size_t count,
                                   gmr_tier_manager **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, tier_manager_create_impl(configs, count, out, f));
}

gmr_status gmr_tier_manager_destroy(gmr_tier_manager *m) {
  if (m == NULL) return GMR_OK;
  pthread_mutex_lock(&m->mutex);
  bool busy = m->reservations.count != 0 || m->waiter_count != 0;
  pthread_mutex_unlock(&m->mutex);
  gmr_notification_channel_stats cs = GMR_NOTIFICATION_CHANNEL_STATS_INIT;
  if (gmr_notification_channel_get_stats(m->channel, &cs) != GMR_OK || cs.waiter_count != 0) {
    busy = true;
  }
  for (size_t i = 0; i < m->space_count && !busy; ++i) {
    busy = gmr__space_check_idle(m->spaces[i]) != GMR_OK;
  }
  if (busy) return GMR_ERR_BUSY;
  /* Every stream's work completes before anything is destroyed, so a CUDA
   * failure leaves the manager as it was. */
  for (size_t i = 0; i < m->space_count; ++i) {
    gmr_status st = gmr__space_synchronize_streams(m->spaces[i]);
    if (st != GMR_OK) return st;
  }
  free_manager(m);
  return GMR_OK;
}

gmr_status gmr_tier_manager_shutdown(gmr_tier_manager *m) {
  if (m == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&m->mutex);
  m->shut_down = true;
  pthread_mutex_unlock(&m->mutex);
  GMR_IGNORE_STATUS(gmr_notification_channel_shutdown(m->channel));
  for (size_t i = 0; i < m->space_count; ++i) {
    if (m->spaces[i]->streams != NULL) GMR_IGNORE_STATUS(gmr_stream_pool_shutdown(m->spaces[i]->streams));
  }
  return GMR_OK;
}

size_t gmr_tier_manager_get_space_count(const gmr_tier_manager *m) {
  return m == NULL ? 0 : m->space_count;
}

gmr_memory_space *gmr_tier_manager_get_space_at(gmr_tier_manager *m, size_t index) {
  return m == NULL || index >= m->space_count ? NULL : m->spaces[index];
}

gmr_memory_space *gmr_tier_manager_get_space(gmr_tier_manager *m, gmr_memory_space_id id) {
  return m == NULL ? NULL : find_space(m, id);
}

gmr_notification_channel *gmr_tier_manager_get_notification_channel(gmr_tier_manager *m) {
  return m == NULL ? NULL : m->channel;
}

gmr_status gmr_tier_manager_get_stats(gmr_tier_manager *m, gmr_tier_manager_stats *out) {
  if (m == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_tier_manager_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&m->mutex);
  s.space_count = m->space_count;
  s.reservation_count = m->reservations.count;
  s.reserve_count = m->reserve_count;
  s.refused_count = m->refused_count;
  s.wait_count = m->wait_count;
  s.wait_ns = m->wait_ns;
  s.max_wait_ns = m->max_wait_ns;
  s.timeout_count = m->timeout_count;
  s.shutdown_count = m->shutdown_count;
  s.release_count = m->release_count;
  s.reserve_latency_ns = m->reserve_latency_ns;
  s.max_reserve_latency_ns = m->max_reserve_latency_ns;
  s.waiter_count = m->waiter_count;
  s.shut_down = m->shut_down;
  s.immediate_reserve_count = m->immediate_reserve_count;
  s.immediate_reserve_latency_ns = m->immediate_reserve_latency_ns;
  s.max_immediate_reserve_latency_ns = m->max_immediate_reserve_latency_ns;
  pthread_mutex_unlock(&m->mutex);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
