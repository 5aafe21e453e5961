/*
 * resources/pool/pool_lifecycle.c (internal): create (with a message that
 * names the one option that is wrong), trim and destroy. See
 * gmr/pool_resource.h.
 *
 * Destroy either succeeds completely or fails leaving a valid pool: it waits
 * for the streams that used freed memory, destroys its CUDA events (a failure
 * is returned, the events not destroyed are kept), then gives its chunks back
 * one by one (the first upstream failure stops it: the chunks not given back
 * stay the pool's, free), and frees itself only when all of that succeeded.
 * A retry after the fault continues where it stopped.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/failure.h"
#include "core/resource_type.h"
#include "resources/pool/pool_internal.h"

/* gmr_resource_downcast() knows the type by this, and gmr_resource_check()
 * its books (core/resource_type.h). */
static const gmr__resource_type pool_type = {&gmr__pool_vtbl, gmr__pool_check_books};

/* ---- trim, destroy ------------------------------------------------------ */

gmr_status gmr__pool_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  *released_bytes = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    pthread_mutex_lock(&a->grow_lock);
    gmr__pool_settle_everything(a);
    gmr_status st = gmr__pool_release_settled_chunks(a, released_bytes);
    pthread_mutex_unlock(&a->grow_lock);
    if (st != GMR_OK) return st;
  }
  return GMR_OK;
}

/* Free everything host-side; the chunks must have been given back already. */
static void pool_free(gmr_pool_resource *pool) {
  for (uint32_t i = 0; i < pool->arena_count; ++i) gmr__pool_arena_free(pool->arenas[i]);
  free(pool->arenas);
  free(pool->registry.items);
  pthread_rwlock_destroy(&pool->registry.lock);
  free(pool);
}

gmr_status gmr__pool_destroy(gmr_resource *self) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    if (pool->arenas[i]->in_use_count != 0) return GMR_ERR_BUSY;
  }
  /* The work that used freed blocks is waited for before the chunks go back
   * on the default stream; a stream that cannot be waited for one by one is
   * waited for through the device. */
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__pool_settle_everything(a);
    /* A block still waiting (its wait failed): everything goes back anyway,
     * and its events must be among those destroyed next. */
    while (a->deferred != NULL) {
      gmr__pool_block *b = a->deferred;
      uint32_t si = b->slot;
      gmr__pool_deferred_drop(a, b);
      gmr__pool_file_free(a, si, b);
    }
  }
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    cudaError_t err = gmr__stream_slots_destroy_events(&pool->arenas[i]->slots,
                                                       &pool->arenas[i]->spare_events);
    if (err != cudaSuccess) return gmr__status_from_cuda(err);
  }
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr_status st = gmr__pool_release_all_chunks(pool->arenas[i]);
    if (st != GMR_OK) return st;
  }
  pool_free(pool);
  return GMR_OK;
}

/* ---- create --------------------------------------------------------------- */

/* Pool ids: from 1, never reused (gmr__pool_arena_for's per-thread answer). */
static _Atomic uint64_t next_pool_id = 1;

static uint32_t default_arena_count(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  if (cpus > (long)GMR__POOL_MAX_ARENAS) cpus = (long)GMR__POOL_MAX_ARENAS;
  return (uint32_t)cpus;
}

/* The first constraint `c` breaks, in a sentence naming the option, its
 * value, the limit and what to change; GMR_OK when none. */
static gmr_status check_config(const gmr_pool_resource_config *c, gmr_failure *f) {
  const char *p = "pool_resource: ";
  if (!gmr__is_power_of_two(c->chunk_granularity_bytes) ||
      c->chunk_granularity_bytes < GMR__POOL_UNIT ||
      c->chunk_granularity_bytes > ((size_t)1 << 40)) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%schunk_granularity_bytes is %zu; it must be a power of two from 256 "
                            "to 1099511627776 (1 TiB): set chunk_granularity_bytes (spec option "
                            "'granularity'), e.g. 2097152",
                            p, c->chunk_granularity_bytes);
  }
  if (c->min_growth_bytes == 0) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%smin_growth_bytes is 0; it must be at least 1: raise "
                            "min_growth_bytes (spec option 'min_growth')",
                            p);
  }
  if (c->max_growth_bytes > GMR_MAX_ALLOCATION_BYTES) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%smax_growth_bytes is %zu, above the largest allocation (%zu): "
                            "lower max_growth_bytes (spec option 'max_growth')",
                            p, c->max_growth_bytes, (size_t)GMR_MAX_ALLOCATION_BYTES);
  }
  if (c->min_growth_bytes > c->max_growth_bytes) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%smin_growth_bytes (%zu) is above max_growth_bytes (%zu): lower "
                            "min_growth_bytes or raise max_growth_bytes (spec options "
                            "'min_growth', 'max_growth')",
                            p, c->min_growth_bytes, c->max_growth_bytes);
  }
  if (c->growth_percent > 1000u) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sgrowth_percent is %u; at most 1000: lower growth_percent (spec "
                            "option 'growth_percent')",
                            p, (unsigned)c->growth_percent);
  }
  if (c->arena_count > GMR__POOL_MAX_ARENAS) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sarena_count is %u; at most %u (0: one per CPU): lower arena_count "
                            "(spec option 'arenas')",
                            p, (unsigned)c->arena_count, GMR__POOL_MAX_ARENAS);
  }
  if (c->recent_free_count > GMR__POOL_CACHE_ENTRIES) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%srecent_free_count is %u; at most %u: lower recent_free_count "
                            "(spec option 'recent_frees')",
                            p, (unsigned)c->recent_free_count, GMR__POOL_CACHE_ENTRIES);
  }
  if (c->initial_pool_bytes > GMR_MAX_ALLOCATION_BYTES) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sinitial_pool_bytes is %zu, above the largest allocation (%zu): "
                            "lower initial_pool_bytes (spec option 'initial')",
                            p, c->initial_pool_bytes, (size_t)GMR_MAX_ALLOCATION_BYTES);
  }
  if (c->maximum_pool_bytes != 0 && c->initial_pool_bytes > c->maximum_pool_bytes) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sinitial_pool_bytes (%zu) is above maximum_pool_bytes (%zu): lower "
                            "initial_pool_bytes or raise maximum_pool_bytes (spec options "
                            "'initial', 'max')",
                            p, c->initial_pool_bytes, c->maximum_pool_bytes);
  }
  return GMR_OK;
}

/* The first chunk is taken on the default stream and is free for any stream
 * once that stream's work up to now is done: filed as the default stream's,
 * in the arena that serves the default stream (the creating thread's). */
static gmr_status take_initial(gmr_pool_resource *pool, gmr_failure *f) {
  gmr__stream_key key = {NULL, 0};
  gmr__pool_arena *a = gmr__pool_arena_for(pool, key);
  size_t bytes = gmr__align_up(pool->config.initial_pool_bytes, GMR__POOL_UNIT);
  uint32_t si = gmr__pool_slot_of(a, key);
  if (si == UINT32_MAX) {
    return gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                            "pool_resource: no host memory for the pool's bookkeeping");
  }
  (void)gmr__pool_held_reserve(pool, bytes); /* under the maximum: checked above */
  void *ptr = NULL;
  gmr_status st = gmr_resource_allocate_ex(pool->upstream, bytes, GMR__POOL_UNIT, NULL, &ptr, f);
  if (st == GMR_OK && !gmr__pool_add_chunk(a, si, ptr, bytes)) {
    GMR_IGNORE_STATUS(gmr_resource_deallocate(pool->upstream, ptr, bytes, GMR__POOL_UNIT, NULL));
    st = gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                          "pool_resource: no host memory to keep track of the initial chunk");
  } else if (st != GMR_OK) {
    /* The upstream said why; say what was asked and what to change. */
    char text[2 * GMR_FAILURE_MESSAGE_BYTES];
    snprintf(text, sizeof text,
             "pool_resource: initial_pool_bytes = %zu bytes refused by %s (%s); lower "
             "initial_pool_bytes (spec option 'initial')%s%s",
             bytes, gmr_resource_get_type_name(pool->upstream), gmr_status_name(st),
             f->message[0] != '\0' ? ": " : "", f->message);
    size_t n = strlen(text);
    if (n >= sizeof f->message) n = sizeof f->message - 1;
    memcpy(f->message, text, n);
    f->message[n] = '\0';
  }
  if (st != GMR_OK) gmr__pool_held_release(pool, bytes);
  return st;
}

static gmr_status pool_resource_create_ex_impl(gmr_resource *upstream,
                                               const gmr_pool_resource_config *config,
                                               gmr_pool_resource **out, gmr_failure *f) {
  gmr__failure_reset(f);
  f->status = GMR_OK;
  if (out == NULL) {
    return f->status = gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT, "pool_resource: out is NULL");
  }
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK) {
    return f->status = gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                                        "pool_resource: upstream is NULL or not a valid resource");
  }
  gmr_pool_resource_config cfg = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  gmr_status st = check_config(&cfg, f);
  if (st != GMR_OK) return f->status = st;
  /* RMM refuses sizes that are not multiples of 256; the pool rounds them up
   * (the unit of every block) and reports the sizes it uses in its stats. */
  cfg.initial_pool_bytes = gmr__align_up(cfg.initial_pool_bytes, GMR__POOL_UNIT);
  if (cfg.maximum_pool_bytes != 0 && cfg.maximum_pool_bytes <= SIZE_MAX - GMR__POOL_UNIT) {
    cfg.maximum_pool_bytes = gmr__align_up(cfg.maximum_pool_bytes, GMR__POOL_UNIT);
  }
  gmr_pool_resource *pool = calloc(1, sizeof *pool);
  if (pool == NULL || pthread_rwlock_init(&pool->registry.lock, NULL) != 0) {
    free(pool);
    return f->status = gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                                        "pool_resource: no host memory for the pool");
  }
  pool->base.vtbl = &gmr__pool_vtbl;
  gmr__resource_type_register(&pool_type);
  pool->upstream = upstream;
  pool->cuda = gmr__cuda();
  pool->config = cfg;
  pool->events_mode = gmr__stream_events_mode_of(&cfg.streams);
  pool->stream_ids = gmr__stream_ids_of(&cfg.streams);
  pool->id = atomic_fetch_add_explicit(&next_pool_id, 1, memory_order_relaxed);
  uint32_t arenas = cfg.arena_count == 0 ? default_arena_count() : cfg.arena_count;
  pool->arenas = calloc(arenas, sizeof *pool->arenas);
  for (; pool->arenas != NULL && pool->arena_count < arenas; pool->arena_count++) {
    gmr__pool_arena *a = gmr__pool_arena_new(pool);
    if (a == NULL) break;
    pool->arenas[pool->arena_count] = a;
  }
  if (pool->arenas == NULL || pool->arena_count < arenas) {
    pool_free(pool);
    return f->status = gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                                        "pool_resource: no host memory for %u arenas", arenas);
  }
  if (cfg.initial_pool_bytes > 0 && (st = take_initial(pool, f)) != GMR_OK) {
    pool_free(pool);
    f->status = st;
    return st;
  }
  *out = pool;
  return GMR_OK;
}

gmr_status gmr_pool_resource_create_ex(gmr_resource *upstream,
                                       const gmr_pool_resource_config *config,
                                       gmr_pool_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, pool_resource_create_ex_impl(upstream, config, out, f));
}

gmr_status gmr_pool_resource_create(gmr_resource *upstream, const gmr_pool_resource_config *config,
                                    gmr_pool_resource **out) {
  return gmr_pool_resource_create_ex(upstream, config, out, NULL);
}
