/*
 * tiers/reservation.c: reservation strategies, the operations on a live
 * reservation (see gmr/tiers/reservation.h), and the limit policy every space's
 * limiting adaptor runs for streams bound to reservations.
 */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiers/tiers_internal.h"
#include "core/failure.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

/* ---- strategies -------------------------------------------------------------------- */

gmr_reservation_strategy gmr_reservation_strategy_space(gmr_memory_space_id space) {
  gmr_reservation_strategy s;
  memset(&s, 0, sizeof s);
  s.kind = GMR_RESERVATION_STRATEGY_SPACE;
  s.space = space;
  return s;
}

gmr_reservation_strategy gmr_reservation_strategy_tier(gmr_tier tier) {
  gmr_reservation_strategy s;
  memset(&s, 0, sizeof s);
  s.kind = GMR_RESERVATION_STRATEGY_TIER;
  s.tiers[0] = tier;
  s.tier_count = 1;
  return s;
}

gmr_reservation_strategy gmr_reservation_strategy_tiers(const gmr_tier *tiers, size_t count) {
  gmr_reservation_strategy s;
  memset(&s, 0, sizeof s);
  s.kind = GMR_RESERVATION_STRATEGY_TIERS;
  if (tiers == NULL) count = 0;
  if (count > GMR_TIER_COUNT) count = GMR_TIER_COUNT;
  for (size_t i = 0; i < count; ++i) s.tiers[i] = tiers[i];
  s.tier_count = count;
  return s;
}

gmr_reservation_strategy gmr_reservation_strategy_downgrade(gmr_memory_space_id source,
                                                            gmr_tier target) {
  gmr_reservation_strategy s;
  memset(&s, 0, sizeof s);
  s.kind = GMR_RESERVATION_STRATEGY_DOWNGRADE;
  s.space = source;
  s.tiers[0] = target;
  s.tier_count = 1;
  return s;
}

/* ---- lookup, binding --------------------------------------------------------------- */

gmr_status gmr__reservation_lookup(gmr_tier_manager *m, gmr_reservation_id id,
                                   gmr__tier_reservation **out) {
  uint64_t v = 0;
  *out = NULL;
  if (id != 0 && gmr__u64_map_get(&m->reservations, id, &v)) {
    *out = (gmr__tier_reservation *)(uintptr_t)v;
    return GMR_OK;
  }
  return id != 0 && id < m->next_id ? GMR_ERR_DOUBLE_FREE : GMR_ERR_INVALID_ARGUMENT;
}

/* lookup for every operation but release: a released id is just invalid. */
static gmr_status find_live(gmr_tier_manager *m, gmr_reservation_id id,
                            gmr__tier_reservation **out, gmr_failure *failure) {
  gmr_status st = gmr__reservation_lookup(m, id, out);
  if (st == GMR_ERR_DOUBLE_FREE) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "reservation %llu was released", (unsigned long long)id);
  }
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0, "reservation %llu was never given out by this manager",
                          (unsigned long long)id);
  }
  return GMR_OK;
}

static void set_bound_id(gmr_memory_space *s, gmr_stream stream, uint64_t binding) {
  size_t slot = gmr__key_slots_find(&s->slots, (uint64_t)(uintptr_t)stream);
  if (slot != s->slots.capacity) {
    atomic_store_explicit(&s->bound_ids[slot], binding, memory_order_release);
  }
}

void gmr__reservation_unbind_locked(gmr__tier_reservation *r) {
  if (!r->bound) return;
  gmr_memory_space *s = r->space;
  /* Requests on the stream are untracked from now on. */
  GMR_IGNORE_STATUS(gmr_limiting_adaptor_set_stream_limit(s->limiter, r->stream, GMR_LIMIT_NONE));
  set_bound_id(s, r->stream, 0);
  size_t last = --s->bound_count;
  s->bound[r->bound_index] = s->bound[last];
  s->bound[r->bound_index]->bound_index = r->bound_index;
  r->bound = false;
  r->stream = NULL;
  r->baseline_bytes = 0;
  r->binding = 0;
  r->noted = false;
}

static gmr__tier_reservation *bound_to(const gmr_memory_space *s, gmr_stream stream) {
  for (size_t i = 0; i < s->bound_count; ++i) {
    if (s->bound[i]->stream == stream) return s->bound[i];
  }
  return NULL;
}

/* ---- operations ------------------------------------------------------------------- */

static gmr_status reservation_release_impl(gmr_tier_manager *m, gmr_reservation_id id,
                                           gmr_failure *failure) {
  if (m == NULL) return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "manager is NULL");
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = gmr__reservation_lookup(m, id, &r);
  if (st == GMR_OK) {
    gmr__reservation_unbind_locked(r);
    gmr_memory_space *s = r->space;
    s->reserved_bytes -= r->bytes;
    s->reservation_count--;
    (void)gmr__u64_map_remove(&m->reservations, id, NULL);
    m->release_count++;
    free(r);
    GMR_IGNORE_STATUS(gmr_notification_channel_notify(m->channel));
  }
  pthread_mutex_unlock(&m->mutex);
  if (st == GMR_ERR_DOUBLE_FREE) {
    return gmr__tier_fail(failure, st, 0, "reservation %llu was already released",
                          (unsigned long long)id);
  }
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0, "reservation %llu was never given out by this manager",
                          (unsigned long long)id);
  }
  return GMR_OK;
}

gmr_status gmr_reservation_release(gmr_tier_manager *m, gmr_reservation_id id,
                                   gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, reservation_release_impl(m, id, f));
}

/* Would `r` at `new_bytes` still fit its space? (M held) A reservation
 * weighs max(size, bytes allocated on its stream) in the space's `used`. */
static bool resize_fits(const gmr__tier_reservation *r, size_t new_bytes) {
  const gmr_memory_space *s = r->space;
  gmr__space_usage u;
  gmr__space_usage_locked(s, &u);
  size_t a = gmr__reservation_allocated_bytes(r);
  size_t now = r->bytes > a ? r->bytes : a;
  size_t next = new_bytes > a ? new_bytes : a;
  if (next <= now) return true;
  return u.used_bytes <= s->limit_bytes && next - now <= s->limit_bytes - u.used_bytes;
}

static void set_size(gmr__tier_reservation *r, size_t new_bytes) {
  gmr_memory_space *s = r->space;
  s->reserved_bytes = s->reserved_bytes - r->bytes + new_bytes;
  if (s->reserved_bytes > s->peak_reserved_bytes) s->peak_reserved_bytes = s->reserved_bytes;
  r->bytes = new_bytes;
  if (r->bound) {
    GMR_IGNORE_STATUS(gmr_limiting_adaptor_set_stream_limit(s->limiter, r->stream,
                                                r->baseline_bytes + new_bytes));
  }
}

static gmr_status reservation_grow_impl(gmr_tier_manager *m, gmr_reservation_id id, size_t bytes,
                                        gmr_failure *failure) {
  if (m == NULL) return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "manager is NULL");
  if (bytes == 0) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "grow by 0 bytes");
  }
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = find_live(m, id, &r, failure);
  if (st == GMR_OK && m->shut_down) {
    m->shutdown_count++;
    st = gmr__tier_fail(failure, GMR_ERR_SHUTDOWN, bytes, "the tier manager is shut down");
  } else if (st == GMR_OK && r->space->config.id.tier == GMR_TIER_DISK) {
    st = gmr__tier_fail(failure, GMR_ERR_UNSUPPORTED, bytes,
                        "reservation %llu is on DISK: disk reservations have a fixed size",
                        (unsigned long long)id);
  } else if (st == GMR_OK && (r->bytes + bytes < r->bytes || !resize_fits(r, r->bytes + bytes))) {
    gmr__space_usage u;
    gmr__space_usage_locked(r->space, &u);
    st = gmr__tier_fail(failure, GMR_ERR_LIMIT_EXCEEDED, bytes,
                        "reservation %llu cannot grow by %zu bytes: its space has %zu available "
                        "of a reservation limit of %zu",
                        (unsigned long long)id, bytes, u.available_bytes, r->space->limit_bytes);
  } else if (st == GMR_OK) {
    set_size(r, r->bytes + bytes);
  }
  pthread_mutex_unlock(&m->mutex);
  return st;
}

gmr_status gmr_reservation_grow(gmr_tier_manager *m, gmr_reservation_id id, size_t bytes,
                                gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, reservation_grow_impl(m, id, bytes, f));
}

static gmr_status reservation_shrink_impl(gmr_tier_manager *m, gmr_reservation_id id,
                                          size_t new_bytes, gmr_failure *failure) {
  if (m == NULL) return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "manager is NULL");
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = find_live(m, id, &r, failure);
  size_t allocated = st == GMR_OK ? gmr__reservation_allocated_bytes(r) : 0;
  if (st != GMR_OK) {
    /* failure filled */
  } else if (r->space->config.id.tier == GMR_TIER_DISK) {
    st = gmr__tier_fail(failure, GMR_ERR_UNSUPPORTED, new_bytes,
                        "reservation %llu is on DISK: disk reservations have a fixed size",
                        (unsigned long long)id);
  } else if (new_bytes == 0 || new_bytes > r->bytes) {
    st = gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, new_bytes,
                        "shrink reservation %llu of %zu bytes to %zu: the new size must be in "
                        "1..%zu (release it, or grow it)",
                        (unsigned long long)id, r->bytes, new_bytes, r->bytes);
  } else if (new_bytes < allocated) {
    st = gmr__tier_fail(failure, GMR_ERR_BUSY, new_bytes,
                        "shrink reservation %llu to %zu bytes: its stream holds %zu bytes; free "
                        "them first",
                        (unsigned long long)id, new_bytes, allocated);
  } else {
    set_size(r, new_bytes);
    GMR_IGNORE_STATUS(gmr_notification_channel_notify(m->channel));
  }
  pthread_mutex_unlock(&m->mutex);
  return st;
}

gmr_status gmr_reservation_shrink(gmr_tier_manager *m, gmr_reservation_id id, size_t new_bytes,
                                  gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, reservation_shrink_impl(m, id, new_bytes, f));
}

static bool bound_reserve(gmr_memory_space *s) {
  if (s->bound_count < s->bound_capacity) return true;
  size_t cap = s->bound_capacity == 0 ? 8 : s->bound_capacity * 2;
  gmr__tier_reservation **b = realloc(s->bound, cap * sizeof *b);
  if (b == NULL) return false;
  s->bound = b;
  s->bound_capacity = cap;
  return true;
}

static gmr_status reservation_bind_stream_impl(gmr_tier_manager *m, gmr_reservation_id id,
                                               gmr_stream stream, const gmr_limit_policy *on_limit,
                                               gmr_failure *failure) {
  if (m == NULL) return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "manager is NULL");
  if (on_limit != NULL && gmr_limit_policy_check(on_limit) != GMR_OK) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "the limit policy fails gmr_limit_policy_check()");
  }
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = find_live(m, id, &r, failure);
  gmr_memory_space *s = st == GMR_OK ? r->space : NULL;
  gmr__tier_reservation *other = s != NULL && s->limiter != NULL ? bound_to(s, stream) : NULL;
  size_t held = 0;
  if (st == GMR_OK && s->limiter != NULL) {
    GMR_IGNORE_STATUS(gmr_limiting_adaptor_get_stream_usage(s->limiter, stream, &held, NULL));
  }
  if (st != GMR_OK) {
    /* failure filled */
  } else if (s->limiter == NULL) {
    st = gmr__tier_fail(failure, GMR_ERR_UNSUPPORTED, 0,
                        "reservation %llu is on DISK: there is nothing to allocate on a stream",
                        (unsigned long long)id);
  } else if (r->bound) {
    st = gmr__tier_fail(failure, GMR_ERR_BUSY, 0,
                        "reservation %llu is already bound to stream %p; unbind it first",
                        (unsigned long long)id, (void *)r->stream);
  } else if (other != NULL) {
    st = gmr__tier_fail(failure, GMR_ERR_BUSY, 0,
                        "stream %p is already bound to reservation %llu", (void *)stream,
                        (unsigned long long)other->id);
  } else if (!bound_reserve(s)) {
    st = gmr__tier_fail(failure, GMR_ERR_OUT_OF_MEMORY, 0, "no host memory for the binding");
  } else {
    size_t slot = gmr__key_slots_get(&s->slots, (uint64_t)(uintptr_t)stream);
    /* What the stream holds already stays untracked: the binding's baseline. */
    if (slot == s->slots.capacity ||
        gmr_limiting_adaptor_set_stream_limit(s->limiter, stream, held + r->bytes) != GMR_OK) {
      st = gmr__tier_fail(failure, GMR_ERR_BUSY, 0,
                          "the space has no stream slot left (max_stream_slots = %zu streams "
                          "have been seen); use the space's stream pool, or raise it",
                          s->config.max_stream_slots);
    } else {
      r->bound = true;
      r->stream = stream;
      r->baseline_bytes = held;
      r->binding = ++m->next_binding;
      r->on_limit = on_limit != NULL ? *on_limit : s->config.on_limit;
      r->on_limit.release = NULL; /* the caller keeps its ctx */
      r->bound_index = s->bound_count;
      s->bound[s->bound_count++] = r;
      atomic_store_explicit(&s->bound_ids[slot], r->binding, memory_order_release);
    }
  }
  pthread_mutex_unlock(&m->mutex);
  return st;
}

gmr_status gmr_reservation_bind_stream(gmr_tier_manager *m, gmr_reservation_id id,
                                       gmr_stream stream, const gmr_limit_policy *on_limit,
                                       gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, reservation_bind_stream_impl(m, id, stream, on_limit, f));
}

gmr_status gmr_reservation_unbind_stream(gmr_tier_manager *m, gmr_reservation_id id) {
  if (m == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = find_live(m, id, &r, NULL);
  if (st == GMR_OK) gmr__reservation_unbind_locked(r);
  pthread_mutex_unlock(&m->mutex);
  return st;
}

gmr_status gmr_reservation_get_info(gmr_tier_manager *m, gmr_reservation_id id,
                                    gmr_reservation_info *out) {
  if (m == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_reservation_info info;
  memset(&info, 0, sizeof info);
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = NULL;
  gmr_status st = find_live(m, id, &r, NULL);
  if (st == GMR_OK) {
    info.id = r->id;
    info.space = r->space->config.id;
    info.bytes = r->bytes;
    info.allocated_bytes = gmr__reservation_allocated_bytes(r);
    info.bound = r->bound;
    info.stream = r->stream;
    info.raise_count = r->raise_count;
    info.overage_count = r->overage_count;
    info.refusal_count = r->refusal_count;
    if (info.space.tier == GMR_TIER_DISK) {
      snprintf(info.path, sizeof info.path, "%s/gmr-%ld-%llu.bin", r->space->config.mount_path,
               (long)getpid(), (unsigned long long)r->id);
    }
  }
  pthread_mutex_unlock(&m->mutex);
  if (st != GMR_OK) return st;
  gmr__stats_copy_out(out, &info, sizeof info);
  return GMR_OK;
}

/* ---- the limit policy of bound streams ------------------------------------------- */

/* The largest size `r` may take now within its space's reservation limit.
 * (M held) A reservation weighs max(size, bytes allocated on its stream) in
 * `used`, so it may grow by what is available beyond that weight.
 * `in_flight_bytes`: the charge of the request being judged, which the
 * limiting adaptor has already added to the space's allocated bytes (it
 * takes the capacity before it asks about the stream's limit) and which the
 * books therefore count as untracked; it is the reservation's once it grows,
 * so it is not counted twice. Capacities are at most
 * GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES: the sums cannot wrap. */
static size_t largest_size_now(const gmr__tier_reservation *r, size_t in_flight_bytes) {
  const gmr_memory_space *s = r->space;
  gmr__space_usage u;
  gmr__space_usage_locked(s, &u);
  size_t counted = in_flight_bytes < u.untracked_bytes ? in_flight_bytes : u.untracked_bytes;
  size_t used = u.used_bytes - counted;
  size_t available = s->limit_bytes > used ? s->limit_bytes - used : 0;
  size_t a = gmr__reservation_allocated_bytes(r);
  size_t weight = r->bytes > a ? r->bytes : a;
  return weight + available;
}

/* The request as the reservation's policy sees it: the stream's baseline
 * (what it held before the binding) is neither used nor limit of it. */
static gmr_limit_request reservation_view(const gmr__tier_reservation *r,
                                          const gmr_limit_request *request,
                                          size_t stream_used_bytes) {
  gmr_limit_request mine = *request;
  mine.used_bytes =
      stream_used_bytes > r->baseline_bytes ? stream_used_bytes - r->baseline_bytes : 0;
  mine.limit_bytes = r->bytes;
  mine.scope_stream = 1;
  return mine;
}

/*
 * Hand a request past reservation `r` to the reservation's policy (M held).
 * `mine` is the reservation's view of it. A raise grows the reservation as
 * far as the space's reservation limit allows, up to the size the policy
 * asked for: when that covers the request the answer is RAISE with the
 * stream's new limit in *new_limit_bytes; a growth that falls short is kept
 * (charged to the reservation, counted as a raise) and the request refused.
 * `at_capacity`: the space's capacity refuses the request whatever the
 * policy says (the policy is asked first, as cuCascade does): a growth is
 * kept, nothing is let past. A refusal that has more to tell than the
 * limiting adaptor's message is noted for gmr__reservation_explain_refusal().
 */
static gmr_limit_action consult(gmr__tier_reservation *r, const gmr_limit_request *mine,
                                bool at_capacity, size_t *new_limit_bytes) {
  gmr_memory_space *s = r->space;
  r->noted = false; /* a note describes the latest request only */
  size_t wanted = 0;
  gmr_limit_action action = GMR_LIMIT_ACTION_FAIL;
  if (r->on_limit.decide != NULL) action = r->on_limit.decide(&r->on_limit, mine, &wanted);
  size_t need = mine->used_bytes + mine->charge_bytes;
  bool sane = need >= mine->used_bytes;
  size_t growth = 0;
  bool covered = false;
  if (action == GMR_LIMIT_ACTION_RAISE && sane && wanted >= need && wanted > r->bytes) {
    size_t largest = largest_size_now(r, at_capacity ? 0 : mine->charge_bytes);
    size_t target = wanted < largest ? wanted : largest;
    if (target > r->bytes) {
      /* The new limit is stored here, under the mutex, so a concurrent grow
       * or shrink cannot interleave; the adaptor then finds it in place and
       * judges again. */
      growth = target - r->bytes;
      set_size(r, target);
      r->raise_count++;
      s->raise_count++;
    }
    covered = r->bytes >= need;
    if (covered && !at_capacity) {
      *new_limit_bytes = r->baseline_bytes + r->bytes;
      return GMR_LIMIT_ACTION_RAISE;
    }
  } else if (action == GMR_LIMIT_ACTION_RAISE) {
    action = GMR_LIMIT_ACTION_FAIL; /* a raise that would not admit the request */
  }
  if (action == GMR_LIMIT_ACTION_ALLOW && !at_capacity) {
    r->overage_count++;
    s->overage_count++;
    return GMR_LIMIT_ACTION_ALLOW;
  }
  if (action == GMR_LIMIT_ACTION_FAIL || (action == GMR_LIMIT_ACTION_RAISE && !covered)) {
    r->refusal_count++;
    s->refusal_count++;
  }
  if (at_capacity || growth > 0) {
    r->noted = true;
    r->noted_at_capacity = at_capacity;
    r->noted_action = action;
    r->noted_growth_bytes = growth;
    r->noted_short_bytes = sane && need > r->bytes ? need - r->bytes : 0;
  }
  return GMR_LIMIT_ACTION_FAIL;
}

static gmr_limit_action space_limit_decide(const gmr_limit_policy *policy,
                                           const gmr_limit_request *request,
                                           size_t *new_limit_bytes) {
  gmr_memory_space *s = policy->ctx;
  gmr_tier_manager *m = s->manager;
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = bound_to(s, request->stream);
  gmr_limit_action action = GMR_LIMIT_ACTION_FAIL;
  if (!request->scope_stream) {
    /* The capacity is a hard limit for everybody. A bound stream's request
     * that also passes its reservation is first handed to the reservation's
     * policy (cuCascade checks the reservation before the capacity), so an
     * `increase` grows the reservation as far as the space allows; the
     * capacity refuses the request all the same. */
    if (r != NULL) {
      gmr_limit_request mine =
          reservation_view(r, request, gmr__stream_held_bytes(s, request->stream));
      size_t need = mine.used_bytes + mine.charge_bytes;
      size_t ignored = 0;
      if (need < mine.used_bytes || need > r->bytes) {
        (void)consult(r, &mine, true, &ignored);
      } else {
        r->noted = false; /* within its reservation: the capacity's words are enough */
      }
    }
  } else if (r == NULL) {
    /* Unbound since the adaptor read the stream's limit (now none): judge again. */
    *new_limit_bytes = GMR_LIMIT_NONE;
    action = GMR_LIMIT_ACTION_RAISE;
  } else {
    gmr_limit_request mine = reservation_view(r, request, request->used_bytes);
    action = consult(r, &mine, false, new_limit_bytes);
  }
  pthread_mutex_unlock(&m->mutex);
  return action;
}

gmr_limit_policy gmr__space_limit_policy(gmr_memory_space *space) {
  gmr_limit_policy p = GMR_LIMIT_POLICY_FAIL_INIT;
  p.name = "reservation";
  p.decide = space_limit_decide;
  p.ctx = space;
  return p;
}

void gmr__reservation_explain_refusal(gmr_memory_space *s, gmr_stream stream,
                                      gmr_failure *failure) {
  gmr_tier_manager *m = s->manager;
  pthread_mutex_lock(&m->mutex);
  gmr__tier_reservation *r = bound_to(s, stream);
  if (r != NULL && r->noted) {
    r->noted = false;
    const char *policy = r->on_limit.name != NULL ? r->on_limit.name : "?";
    char did[112];
    if (r->noted_growth_bytes > 0) {
      snprintf(did, sizeof did, "grew it by %zu to %zu bytes%s", r->noted_growth_bytes,
               r->bytes, r->noted_short_bytes > 0 ? " (all the space allowed)" : "");
    } else if (r->noted_action == GMR_LIMIT_ACTION_ALLOW) {
      snprintf(did, sizeof did, "would let it pass its %zu bytes", r->bytes);
    } else {
      snprintf(did, sizeof did, "refused it (%zu bytes reserved)", r->bytes);
    }
    char space[32];
    snprintf(space, sizeof space, "(%s, %d)", gmr_tier_name(s->config.id.tier),
             s->config.id.index);
    unsigned long long id = (unsigned long long)r->id;
    /* Truncation is acceptable (the record has 192 bytes); the results are
     * read so that GCC does not warn about it. */
    int n;
    if (r->noted_at_capacity) {
      n = snprintf(failure->message, sizeof failure->message,
                   "%s: the capacity of %zu bytes refused %zu bytes; asked first, reservation "
                   "%llu's policy %s %s",
                   space, s->capacity_bytes, failure->bytes, id, policy, did);
    } else {
      n = snprintf(failure->message, sizeof failure->message,
                   "%s: reservation %llu's policy %s %s; the request still passes it by %zu "
                   "bytes",
                   space, id, policy, did, r->noted_short_bytes);
    }
    if (n < 0) failure->message[0] = '\0';
    failure->where = &s->base.resource;
  }
  pthread_mutex_unlock(&m->mutex);
}
