/*
 * tiers/space_resource.c: the resource at the top of every memory space's
 * stack (see gmr/tiers/memory_space.h), an adaptor (core/adaptor.h): it
 * refuses what the space cannot serve, forwards to the space's limiting
 * adaptor (whose per-stream limits are the bound reservations; through the
 * OOM layer of on_oom when there is one), and keeps a table of live
 * allocations so that a free knows whose bytes it gives back.
 *
 * Why the table: the limiting adaptor charges an allocation to its stream
 * until it is freed. A stream may be bound to a new reservation while it
 * still holds allocations from before (untracked ones, or a released
 * reservation's). Those count as the binding's baseline: the stream's limit
 * is baseline + reservation size. When such an older allocation is freed,
 * the baseline and the stream's limit go down by its charge, before the free
 * (books first: RMM #2304), so the reservation never gains room it does not
 * have. Each entry packs the stream's slot and the serial of the binding the
 * stream had at allocation (0: none).
 *
 * Thread-safe: yes; the table is split in 16 mutex-guarded shards; the
 * manager's mutex is taken only when an older allocation of a stream that is
 * bound again is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/forward.h"
#include "tiers/tiers_internal.h"
#include "tiers/tiers_util.h"

#define SHARD_COUNT 16
#define ID_BITS 48 /* binding serials: 2^48 binds before they wrap */
#define ID_MASK ((UINT64_C(1) << ID_BITS) - 1)

struct gmr__space_shard {
  pthread_mutex_t mutex;
  gmr__u64_map map; /* pointer -> slot << ID_BITS | binding serial */
  char pad[64];     /* keep the shards' locks on separate cache lines */
};

bool gmr__space_books_init(gmr_memory_space *s) {
  s->shards = calloc(SHARD_COUNT, sizeof *s->shards);
  if (s->shards == NULL) return false;
  for (size_t i = 0; i < SHARD_COUNT; ++i) {
    pthread_mutex_init(&s->shards[i].mutex, NULL);
    gmr__u64_map empty = GMR__U64_MAP_INIT;
    s->shards[i].map = empty;
  }
  return true;
}

void gmr__space_books_deinit(gmr_memory_space *s) {
  if (s->shards == NULL) return;
  for (size_t i = 0; i < SHARD_COUNT; ++i) {
    gmr__u64_map_clear(&s->shards[i].map);
    pthread_mutex_destroy(&s->shards[i].mutex);
  }
  free(s->shards);
  s->shards = NULL;
}

static struct gmr__space_shard *shard_of(gmr_memory_space *s, const void *ptr) {
  uint64_t k = (uint64_t)(uintptr_t)ptr;
  k = (k >> 8) ^ (k >> 20);
  return &s->shards[k & (SHARD_COUNT - 1)];
}

static void space_name(const gmr_memory_space *s, char *buf, size_t len) {
  snprintf(buf, len, "(%s, %d)", gmr_tier_name(s->config.id.tier), s->config.id.index);
}

/* Refuse a request the space cannot serve: a DISK space, or a stream without
 * a reservation where one is required. */
static gmr_status check_request(gmr_memory_space *s, gmr_stream stream, size_t bytes,
                                gmr_failure *failure) {
  char name[48];
  if (s->limiter == NULL) {
    space_name(s, name, sizeof name);
    snprintf(failure->message, sizeof failure->message,
             "memory space %s is a DISK space: it accounts for reservations and holds no memory "
             "to allocate (%zu bytes asked)",
             name, bytes);
    return GMR_ERR_UNSUPPORTED;
  }
  if (!s->config.require_reservation) return GMR_OK;
  size_t slot = gmr__key_slots_find(&s->slots, (uint64_t)(uintptr_t)stream);
  if (slot != s->slots.capacity &&
      atomic_load_explicit(&s->bound_ids[slot], memory_order_acquire) != 0) {
    return GMR_OK;
  }
  atomic_fetch_add_explicit(&s->no_reservation_count, 1, memory_order_relaxed);
  space_name(s, name, sizeof name);
  snprintf(failure->message, sizeof failure->message,
           "memory space %s requires a reservation: stream %p has none (%zu bytes asked); "
           "reserve and call gmr_reservation_bind_stream() first",
           name, (void *)stream, bytes);
  return GMR_ERR_NO_RESERVATION;
}

/* Note a new allocation in the table; on failure give it back. */
static gmr_status remember(gmr_memory_space *s, void **out_ptr, size_t bytes, size_t alignment,
                           gmr_stream stream, size_t slot, uint64_t binding,
                           gmr_failure *failure) {
  struct gmr__space_shard *sh = shard_of(s, *out_ptr);
  pthread_mutex_lock(&sh->mutex);
  bool ok = gmr__u64_map_put(&sh->map, (uint64_t)(uintptr_t)*out_ptr,
                             ((uint64_t)slot << ID_BITS) | (binding & ID_MASK));
  pthread_mutex_unlock(&sh->mutex);
  if (ok) return GMR_OK;
  (void)gmr__forward_deallocate(s->base.upstream, *out_ptr, bytes, alignment, stream);
  *out_ptr = NULL;
  snprintf(failure->message, sizeof failure->message,
           "memory_space: no host memory for its table of allocations");
  return GMR_ERR_OUT_OF_MEMORY;
}

static gmr_status allocate_with(gmr_memory_space *s, gmr__forward_allocate_fn *below,
                                size_t bytes, size_t alignment, gmr_stream stream, void **out_ptr,
                                gmr_failure *failure) {
  gmr_status st = check_request(s, stream, bytes, failure);
  if (st != GMR_OK) return st;
  size_t slot = gmr__key_slots_get(&s->slots, (uint64_t)(uintptr_t)stream);
  uint64_t binding = slot == s->slots.capacity
                         ? 0
                         : atomic_load_explicit(&s->bound_ids[slot], memory_order_acquire);
  st = below(s->base.upstream, bytes, alignment, stream, out_ptr, failure);
  if (st == GMR_ERR_LIMIT_EXCEEDED && binding != 0) {
    /* Cold: say what the reservation's policy did, when there is more to
     * say than the limiting adaptor's message (reservation.c). */
    gmr__reservation_explain_refusal(s, stream, failure);
  }
  if (st != GMR_OK) return st;
  return remember(s, out_ptr, bytes, alignment, stream, slot, binding, failure);
}

static gmr_status space_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return allocate_with((gmr_memory_space *)self, gmr__forward_allocate, bytes, alignment, stream,
                       out_ptr, failure);
}

static gmr_status space_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                           gmr_stream stream, void **out_ptr,
                                           gmr_failure *failure) {
  return allocate_with((gmr_memory_space *)self, gmr__forward_allocate_capturing, bytes,
                       alignment, stream, out_ptr, failure);
}

/* A stream bound again frees an allocation from before its binding: take its
 * charge off the binding's baseline and the stream's limit (`sign` +1 puts it
 * back). Returns whether a binding was adjusted. */
static bool adjust_baseline(gmr_memory_space *s, uint64_t binding, size_t charge, int sign) {
  gmr_tier_manager *m = s->manager;
  bool adjusted = false;
  pthread_mutex_lock(&m->mutex);
  for (size_t i = 0; i < s->bound_count && !adjusted; ++i) {
    gmr__tier_reservation *r = s->bound[i];
    if (r->binding != binding || (sign < 0 && r->baseline_bytes < charge)) continue;
    r->baseline_bytes = sign > 0 ? r->baseline_bytes + charge : r->baseline_bytes - charge;
    GMR_IGNORE_STATUS(gmr_limiting_adaptor_set_stream_limit(s->limiter, r->stream,
                                                r->baseline_bytes + r->bytes));
    adjusted = true;
  }
  pthread_mutex_unlock(&m->mutex);
  return adjusted;
}

static gmr_status space_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  gmr_memory_space *s = (gmr_memory_space *)self;
  if (s->limiter == NULL) return GMR_ERR_UNKNOWN_POINTER; /* DISK never gave out a pointer */
  struct gmr__space_shard *sh = shard_of(s, ptr);
  uint64_t key = (uint64_t)(uintptr_t)ptr, entry = 0;
  pthread_mutex_lock(&sh->mutex);
  bool found = gmr__u64_map_remove(&sh->map, key, &entry);
  pthread_mutex_unlock(&sh->mutex);
  if (!found) return GMR_ERR_UNKNOWN_POINTER;
  size_t slot = (size_t)(entry >> ID_BITS);
  uint64_t binding = entry & ID_MASK;
  uint64_t bound_now = slot == s->slots.capacity
                           ? 0
                           : atomic_load_explicit(&s->bound_ids[slot], memory_order_acquire);
  size_t charge = (bytes + s->charge_mask) & ~s->charge_mask;
  bool adjusted =
      bound_now != 0 && bound_now != binding && adjust_baseline(s, bound_now, charge, -1);
  gmr_status st = gmr__forward_deallocate(s->base.upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) {
    /* Refused below (a size that does not match...): put the books back. */
    if (adjusted) (void)adjust_baseline(s, bound_now, charge, +1);
    pthread_mutex_lock(&sh->mutex);
    (void)gmr__u64_map_put(&sh->map, key, entry); /* the slot it just left: no growth */
    pthread_mutex_unlock(&sh->mutex);
    return st;
  }
  /* Room for a waiting reservation, maybe: wake it (free when nobody waits). */
  gmr__notification_channel_notify_if_watched(s->manager->channel);
  return GMR_OK;
}

static gmr_status space_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  if (((gmr_memory_space *)self)->limiter == NULL) return GMR_ERR_UNKNOWN_POINTER; /* DISK */
  return gmr__adaptor_record_stream(self, ptr, stream);
}

/* The manager owns its spaces. */
static gmr_status space_destroy(gmr_resource *self) {
  (void)self;
  return GMR_ERR_UNSUPPORTED;
}

const gmr_resource_vtbl gmr__space_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "memory_space",
    .allocate = space_allocate,
    .deallocate = space_deallocate,
    .destroy = space_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = space_record_stream,
    .allocate_capturing = space_allocate_capturing,
};
