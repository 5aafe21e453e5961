/*
 * resources/fixed_block/fixed_block_lifecycle.c: create (with a message that
 * names the one option that is wrong), trim, destroy, statistics,
 * get_memory_info and the getters. See gmr/fixed_block_resource.h.
 *
 * Destroy either succeeds completely or fails leaving a valid resource: it
 * waits for the streams that used freed blocks, destroys its CUDA events (a
 * failure is returned, the events not destroyed kept), then gives the chunks
 * back one by one (the first upstream failure stops it, the chunk kept), and
 * frees itself only when all of that succeeded.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/failure.h"
#include "core/resource_type.h"
#include "core/stats.h"
#include "resources/fixed_block/fixed_block_internal.h"

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type fixed_block_type = {&gmr__fb_vtbl, NULL};

/* ---- figures ---------------------------------------------------------------------- */

void gmr__fb_free_figures(gmr_fixed_block_resource *r, size_t *free_blocks, size_t *blocks,
                          size_t *in_use_blocks) {
  *free_blocks = *blocks = *in_use_blocks = 0;
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_shard *s = r->shards[i];
    gmr__spin_lock_acquire(&s->lock);
    *blocks += s->total_blocks;
    *in_use_blocks += s->in_use_blocks;
    gmr__spin_lock_release(&s->lock);
  }
  *free_blocks = *blocks - *in_use_blocks;
}

gmr_status gmr__fb_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  size_t free_blocks = 0, blocks = 0, in_use = 0;
  gmr__fb_free_figures(r, &free_blocks, &blocks, &in_use);
  gmr__spin_lock_acquire(&r->books);
  size_t forwarded = r->forwarded_bytes;
  gmr__spin_lock_release(&r->books);
  gmr_memory_info m;
  memset(&m, 0, sizeof m);
  m.held_bytes = blocks * r->config.block_bytes + forwarded;
  m.live_bytes = in_use * r->config.block_bytes + forwarded;
  m.free_bytes = free_blocks * r->config.block_bytes;
  m.largest_free_block_bytes = free_blocks > 0 ? r->config.block_bytes : 0;
  m.free_block_count = free_blocks;
  size_t header = offsetof(gmr_memory_info, held_bytes);
  size_t known = out->size < sizeof m ? out->size : sizeof m;
  memcpy((char *)out + header, (const char *)&m + header, known - header);
  return GMR_OK;
}

gmr_status gmr_fixed_block_resource_get_stats(gmr_fixed_block_resource *r,
                                              gmr_fixed_block_resource_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_fixed_block_resource_stats s;
  memset(&s, 0, sizeof s);
  s.block_bytes = r->config.block_bytes;
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_shard *sh = r->shards[i];
    gmr__spin_lock_acquire(&sh->lock);
    s.chunk_count += sh->chunk_count;
    s.block_count += sh->total_blocks;
    s.in_use_block_count += sh->in_use_blocks;
    s.stream_count += sh->slots.count;
    s.deferred_block_count += sh->deferred_count;
    gmr__spin_lock_release(&sh->lock);
  }
  s.free_block_count = s.block_count - s.in_use_block_count;
  gmr__spin_lock_acquire(&r->books);
  s.forwarded_count = r->forwarded_count;
  s.forwarded_bytes = r->forwarded_bytes;
  gmr__spin_lock_release(&r->books);
  s.held_bytes = atomic_load(&r->held_bytes);
  s.peak_held_bytes = atomic_load(&r->peak_held_bytes);
  s.grow_count = atomic_load(&r->grow_count);
  s.release_count = atomic_load(&r->release_count);
  s.event_record_count = atomic_load(&r->events.record_count);
  s.event_query_count = atomic_load(&r->events.query_count);
  s.stream_wait_count = atomic_load(&r->events.wait_count);
  s.event_synchronize_count = atomic_load(&r->events.synchronize_count);
  s.event_destroy_failure_count = atomic_load(&r->events.destroy_failure_count);
  s.device_synchronize_count = atomic_load(&r->events.device_synchronize_count);
  s.shard_count = r->shard_count;
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}

/* ---- trim, destroy ------------------------------------------------------------------- */

gmr_status gmr__fb_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  *released_bytes = 0;
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_shard *s = r->shards[i];
    pthread_mutex_lock(&s->grow_lock);
    gmr__fb_settle_everything(s);
    gmr_status st = gmr__fb_release_chunks(s, false, released_bytes);
    pthread_mutex_unlock(&s->grow_lock);
    if (st != GMR_OK) return st;
  }
  return GMR_OK;
}

static void fb_free(gmr_fixed_block_resource *r) {
  for (uint32_t i = 0; i < r->shard_count; ++i) gmr__fb_shard_free(r->shards[i]);
  free(r->shards);
  free(r->registry);
  pthread_rwlock_destroy(&r->registry_lock);
  gmr__u64_map_clear(&r->lists);
  gmr__u64_map_clear(&r->forwarded);
  free(r);
}

gmr_status gmr__fb_destroy(gmr_resource *self) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  if (r->forwarded_count != 0 || r->lists.count != 0) return GMR_ERR_BUSY;
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    if (r->shards[i]->in_use_blocks != 0) return GMR_ERR_BUSY;
  }
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_settle_everything(r->shards[i]);
    gmr__fb_drop_deferred(r->shards[i]);
  }
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    cudaError_t err =
        gmr__stream_slots_destroy_events(&r->shards[i]->slots, &r->shards[i]->spare_events);
    if (err != cudaSuccess) return gmr__status_from_cuda(err);
  }
  size_t released = 0;
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr_status st = gmr__fb_release_chunks(r->shards[i], true, &released);
    if (st != GMR_OK) return st;
  }
  fb_free(r);
  return GMR_OK;
}

/* ---- create ------------------------------------------------------------------------- */

/* Resource ids: from 1, never reused (gmr__fb_shard_for's per-thread answer). */
static _Atomic uint64_t next_resource_id = 1;

static uint32_t default_shard_count(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  if (cpus > (long)GMR__FB_MAX_SHARDS) cpus = (long)GMR__FB_MAX_SHARDS;
  return (uint32_t)cpus;
}

/* The first constraint `c` breaks, in a sentence naming the option, its
 * value, the limit and what to change; GMR_OK when none. */
static gmr_status check_config(const gmr_fixed_block_resource_config *c, gmr_failure *f) {
  const char *p = "fixed_block_resource: ";
  if (c->block_bytes == 0 || c->block_bytes % GMR__FB_UNIT != 0) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sblock_bytes is %zu; it must be a positive multiple of 256: set "
                            "block_bytes (spec option 'block'), e.g. %zu",
                            p, c->block_bytes,
                            c->block_bytes < GMR__FB_UNIT ? GMR__FB_UNIT
                                                          : gmr__align_up(c->block_bytes, GMR__FB_UNIT));
  }
  if (c->blocks_per_chunk == 0) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sblocks_per_chunk is 0; at least 1: raise blocks_per_chunk (spec "
                            "option 'blocks_per_chunk')",
                            p);
  }
  if (c->block_bytes > GMR_MAX_ALLOCATION_BYTES / c->blocks_per_chunk) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sa chunk of blocks_per_chunk (%zu) blocks of %zu bytes passes the "
                            "largest allocation (%zu bytes): lower blocks_per_chunk or block_bytes",
                            p, c->blocks_per_chunk, c->block_bytes,
                            (size_t)GMR_MAX_ALLOCATION_BYTES);
  }
  if ((int)c->oversize != GMR_FIXED_BLOCK_OVERSIZE_FORWARD &&
      (int)c->oversize != GMR_FIXED_BLOCK_OVERSIZE_REFUSE) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%soversize is %d; it must be GMR_FIXED_BLOCK_OVERSIZE_FORWARD or "
                            "_REFUSE (spec option 'oversize': forward or refuse)",
                            p, (int)c->oversize);
  }
  if (c->max_chunk_count != 0 && c->initial_chunk_count > c->max_chunk_count) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sinitial_chunk_count (%zu) is above max_chunk_count (%zu): lower "
                            "initial_chunk_count or raise max_chunk_count (spec options "
                            "'initial_chunks', 'max_chunks')",
                            p, c->initial_chunk_count, c->max_chunk_count);
  }
  if (c->shard_count > GMR__FB_MAX_SHARDS) {
    return gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                            "%sshard_count is %u; at most %u (0: one per CPU): lower shard_count "
                            "(spec option 'shards')",
                            p, (unsigned)c->shard_count, GMR__FB_MAX_SHARDS);
  }
  return GMR_OK;
}

/* The initial chunks, on the default stream, into the shard that serves the
 * default stream (the creating thread's). */
static gmr_status take_initial(gmr_fixed_block_resource *r, gmr_failure *f) {
  const gmr_fixed_block_resource_config *c = &r->config;
  gmr__stream_key none = {NULL, 0};
  gmr__fb_shard *s = gmr__fb_shard_for(r, none);
  size_t bytes = c->blocks_per_chunk * c->block_bytes;
  for (size_t i = 0; i < c->initial_chunk_count; ++i) {
    pthread_mutex_lock(&s->grow_lock);
    gmr_status st =
        gmr__fb_grow(s, none, (i + 1) * c->blocks_per_chunk, NULL, false, NULL, NULL, f);
    pthread_mutex_unlock(&s->grow_lock);
    if (st == GMR_OK && s->total_blocks < (i + 1) * c->blocks_per_chunk) st = GMR_ERR_OUT_OF_MEMORY;
    if (st == GMR_OK) continue;
    char text[2 * GMR_FAILURE_MESSAGE_BYTES];
    snprintf(text, sizeof text,
             "fixed_block_resource: initial chunk %zu of initial_chunk_count (%zu), %zu bytes, "
             "refused by %s (%s); lower initial_chunk_count, blocks_per_chunk or block_bytes%s%s",
             i + 1, c->initial_chunk_count, bytes, gmr_resource_get_type_name(r->upstream),
             gmr_status_name(st), f->message[0] != '\0' ? ": " : "", f->message);
    size_t n = strlen(text);
    if (n >= sizeof f->message) n = sizeof f->message - 1;
    memcpy(f->message, text, n);
    f->message[n] = '\0';
    /* Nothing is left allocated: the chunks taken go back. */
    size_t released = 0;
    (void)gmr__fb_release_chunks(s, true, &released);
    (void)gmr__stream_slots_destroy_events(&s->slots, &s->spare_events);
    return st;
  }
  return GMR_OK;
}

static gmr_status fixed_block_resource_create_ex_impl(gmr_resource *upstream,
                                                      const gmr_fixed_block_resource_config *config,
                                                      gmr_fixed_block_resource **out,
                                                      gmr_failure *f) {
  gmr__failure_reset(f);
  f->status = GMR_OK;
  if (out == NULL) {
    return f->status = gmr__failure_set(f, GMR_ERR_INVALID_ARGUMENT,
                                        "fixed_block_resource: out is NULL");
  }
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK) {
    return f->status = gmr__failure_set(
               f, GMR_ERR_INVALID_ARGUMENT,
               "fixed_block_resource: upstream is NULL or not a valid resource");
  }
  gmr_fixed_block_resource_config cfg = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  gmr_status st = check_config(&cfg, f);
  if (st != GMR_OK) return f->status = st;
  gmr_fixed_block_resource *r = calloc(1, sizeof *r);
  if (r == NULL || pthread_rwlock_init(&r->registry_lock, NULL) != 0) {
    free(r);
    return f->status = gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                                        "fixed_block_resource: no host memory for the resource");
  }
  r->base.vtbl = &gmr__fb_vtbl;
  gmr__resource_type_register(&fixed_block_type);
  r->upstream = upstream;
  r->cuda = gmr__cuda();
  r->config = cfg;
  /* A power-of-two block (the common case) finds a block by shifting. */
  if ((cfg.block_bytes & (cfg.block_bytes - 1)) == 0) {
    r->block_shift = (unsigned)__builtin_ctzll((unsigned long long)cfg.block_bytes);
  }
  r->events_mode = gmr__stream_events_mode_of(&cfg.streams);
  r->stream_ids = gmr__stream_ids_of(&cfg.streams);
  r->id = atomic_fetch_add_explicit(&next_resource_id, 1, memory_order_relaxed);
  atomic_init(&r->books.locked, 0);
  gmr__u64_map empty = GMR__U64_MAP_INIT;
  r->lists = empty;
  r->forwarded = empty;
  uint32_t shards = cfg.shard_count == 0 ? default_shard_count() : cfg.shard_count;
  r->shards = calloc(shards, sizeof *r->shards);
  for (; r->shards != NULL && r->shard_count < shards; r->shard_count++) {
    gmr__fb_shard *s = gmr__fb_shard_new(r);
    if (s == NULL) break;
    r->shards[r->shard_count] = s;
  }
  if (r->shards == NULL || r->shard_count < shards) {
    fb_free(r);
    return f->status = gmr__failure_set(f, GMR_ERR_OUT_OF_MEMORY,
                                        "fixed_block_resource: no host memory for %u shards",
                                        shards);
  }
  if (cfg.initial_chunk_count > 0 && (st = take_initial(r, f)) != GMR_OK) {
    fb_free(r);
    f->status = st;
    return st;
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr_fixed_block_resource_create_ex(gmr_resource *upstream,
                                              const gmr_fixed_block_resource_config *config,
                                              gmr_fixed_block_resource **out,
                                              gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = fixed_block_resource_create_ex_impl(upstream, config, out, f);
  return gmr__failure_end(failure, f, st);
}

gmr_status gmr_fixed_block_resource_create(gmr_resource *upstream,
                                           const gmr_fixed_block_resource_config *config,
                                           gmr_fixed_block_resource **out) {
  return gmr_fixed_block_resource_create_ex(upstream, config, out, NULL);
}

size_t gmr_fixed_block_resource_get_block_bytes(const gmr_fixed_block_resource *r) {
  return r == NULL ? 0 : r->config.block_bytes;
}
