/*
 * resources/vmm/fine/vmm_fine_shards.c (internal): the shards of a `vmm`
 * (vmm_fine.h), so that threads on streams of their own do not share a
 * lock; and what the handle's functions (the VMM base's operations table)
 * do over every shard.
 *
 * A shard is a whole placement engine (resources/vmm/placement/vmf.h: its
 * own spin lock, VA chunks, handles, stream slots and free lists). Shard 0 is made at create; the
 * others at their first use (a VA reservation, under the pool's mutex).
 * A stream is served by the home shard of the first thread that used it
 * (stream_ordered/stream_home.h, as gmr's pool picks arenas): one thread's warm
 * allocate and free touch only its shard's lock and lines. Any shard is a
 * correct pool for any stream (each orders reuse between streams itself),
 * so the choice only decides whose memory is used:
 *  - a free goes to the shard that owns the pointer: the stream's shard is
 *    asked first, then the others (each answers the bad-free statuses
 *    without changing anything, so asking is harmless);
 *  - before a shard grows, it takes memory another shard holds free for the
 *    same stream or for any stream (no CUDA call), as gmr's pool does;
 *  - when a growth finds the device out of memory, the other shards serve
 *    the request (each may move its own free handles), then give back their
 *    wholly free memory (trim) and the growth is tried once more.
 * Everything that maps or unmaps pages stays inside one shard, under its
 * lock.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

/* ---- which shard ------------------------------------------------------------ */

/* The shard of `stream`, made now if it is new and `create` (else shard 0);
 * shard 0 when making it failed (host memory or VA: shard 0 serves then). */
static vmf_engine *shard_of(vmm_fine *f, gmr_stream stream, bool create) {
  if (f->shard_count == 1) return gmr__vmm_fine_shard(f, 0);
  /* cudaStreamPerThread is another stream in each thread: keyed by thread. */
  gmr__stream_key key = {stream, stream == (gmr_stream)cudaStreamPerThread
                                     ? (uint64_t)gmr__thread_home() + 1u
                                     : 0u};
  uint32_t i = gmr__stream_home_of(&f->home, key, f->shard_count);
  vmf_engine *e = gmr__vmm_fine_shard(f, i);
  if (e != NULL) return e;
  if (!create) return gmr__vmm_fine_shard(f, 0);
  pthread_mutex_lock(&f->pool.lock);
  e = gmr__vmm_fine_shard(f, i);
  if (e == NULL) {
    gmr_failure ignored = GMR_FAILURE_INIT;
    gmr__failure_reset(&ignored);
    if (gmr__vmm_fine_shard_new(f, false, &e, &ignored) == GMR_OK) {
      atomic_store_explicit(&f->shards[i], e, memory_order_release);
      atomic_fetch_add_explicit(&f->shards_made, 1u, memory_order_relaxed);
    } else {
      e = gmr__vmm_fine_shard(f, 0);
    }
  }
  pthread_mutex_unlock(&f->pool.lock);
  return e;
}


/* ---- requests --------------------------------------------------------------- */

gmr_status gmr__vmm_shards_allocate(vmm_fine *f, size_t bytes, size_t alignment,
                                    gmr_stream stream, bool capturing_api, void **out_ptr,
                                    gmr_failure *failure) {
  if (gmr__vmm_asleep(&f->pool)) return gmr__vmm_busy_asleep(failure, "allocating");
  gmr_status beyond = gmr__vmm_refuse_beyond_device(&f->pool, bytes, failure);
  if (beyond != GMR_OK) return beyond;
  vmf_engine *home = shard_of(f, stream, true);
  /* With one shard made so far there is nowhere else to look first. */
  bool alone = atomic_load_explicit(&f->shards_made, memory_order_relaxed) == 1u;
  bool would_grow = false;
  gmr_status st = gmr__vmf_allocate_ex(home, bytes, alignment, stream, capturing_api, alone,
                                       &would_grow, out_ptr, failure);
  if (!would_grow && (st != GMR_ERR_OUT_OF_MEMORY || f->shard_count == 1)) return st;
  if (would_grow && !capturing_api) {
    for (uint32_t i = 0; i < f->shard_count; ++i) {
      vmf_engine *e = gmr__vmm_fine_shard(f, i);
      if (e == NULL || e == home) continue;
      if (gmr__vmf_take_cached(e, bytes, alignment, stream, out_ptr)) return GMR_OK;
    }
  }
  if (would_grow) {
    st = gmr__vmf_allocate(home, bytes, alignment, stream, capturing_api, out_ptr, failure);
    if (st != GMR_ERR_OUT_OF_MEMORY) return st;
  }
  /* The device is out of memory for this shard: the others serve it, or
   * give back what is wholly free, and the growth is tried once more. */
  gmr_failure scratch = GMR_FAILURE_INIT;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL || e == home) continue;
    gmr__failure_reset(&scratch);
    if (gmr__vmf_allocate(e, bytes, alignment, stream, capturing_api, out_ptr, &scratch) ==
        GMR_OK) {
      return GMR_OK;
    }
  }
  size_t released = 0;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL || e == home) continue;
    size_t r = 0;
    (void)gmr__vmf_trim(e, &r, &scratch); /* r: only what went back, also on a refusal */
    released += r;
  }
  if (released == 0) return st;
  gmr__failure_reset(failure);
  return gmr__vmf_allocate(home, bytes, alignment, stream, capturing_api, out_ptr, failure);
}

/* Whether a shard's answer says the pointer is its own (done, or refused
 * for a reason only its owner knows). */
static bool owned_answer(gmr_status st) {
  return st != GMR_ERR_UNKNOWN_POINTER && st != GMR_ERR_DOUBLE_FREE;
}

/* One request about a pointer, put to one shard. */
typedef enum ask_kind { ASK_FREE, ASK_RECORD_STREAM, ASK_EXTEND, ASK_SET_TAG } ask_kind;

typedef struct ask {
  ask_kind kind;
  void *ptr;
  size_t bytes;
  size_t new_bytes;
  size_t alignment;
  gmr_stream stream;
  uint32_t tag;
  gmr_failure *failure;
} ask;

static gmr_status ask_one(vmf_engine *e, const ask *a) {
  switch (a->kind) {
    case ASK_FREE:
      return gmr__vmf_deallocate(e, a->ptr, a->bytes, a->alignment, a->stream);
    case ASK_RECORD_STREAM:
      return gmr__vmf_record_stream(e, a->ptr, a->stream);
    case ASK_EXTEND:
      return gmr__vmf_extend(e, a->ptr, a->bytes, a->new_bytes, a->alignment, a->stream,
                             a->failure);
    case ASK_SET_TAG:
      return gmr__vmf_set_tag(e, a->ptr, a->tag);
  }
  return GMR_ERR_INTERNAL;
}

/* Ask `first`, then every other shard, until one owns the pointer (a shard
 * that does not changes nothing). None does: DOUBLE_FREE if a shard
 * remembers freeing it, else the first answer. */
static gmr_status ask_shards(vmm_fine *f, vmf_engine *first, const ask *a) {
  gmr_status st = ask_one(first, a);
  if (owned_answer(st) || f->shard_count == 1) return st;
  gmr_status verdict = st;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL || e == first) continue;
    gmr_status other = ask_one(e, a);
    if (owned_answer(other)) return other;
    if (other == GMR_ERR_DOUBLE_FREE) verdict = other;
  }
  return verdict;
}

gmr_status gmr__vmm_shards_deallocate(vmm_fine *f, void *ptr, size_t bytes,
                                      size_t alignment, gmr_stream stream) {
  ask a = {ASK_FREE, ptr, bytes, 0, alignment, stream, 0, NULL};
  return ask_shards(f, shard_of(f, stream, false), &a);
}

gmr_status gmr__vmm_shards_record_stream(vmm_fine *f, void *ptr, gmr_stream stream) {
  ask a = {ASK_RECORD_STREAM, ptr, 0, 0, 0, stream, 0, NULL};
  return ask_shards(f, gmr__vmm_fine_shard(f, 0), &a);
}

gmr_status gmr__vmm_shards_extend(vmm_fine *f, void *ptr, size_t bytes,
                                  size_t new_bytes, size_t alignment, gmr_stream stream,
                                  gmr_failure *failure) {
  if (gmr__vmm_asleep(&f->pool)) return gmr__vmm_busy_asleep(failure, "extending");
  ask a = {ASK_EXTEND, ptr, bytes, new_bytes, alignment, stream, 0, failure};
  return ask_shards(f, shard_of(f, stream, false), &a);
}

static gmr_status fine_set_tag(gmr_vmm_pool_resource *p, void *ptr, uint32_t tag) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  ask a = {ASK_SET_TAG, ptr, 0, 0, 0, NULL, tag, NULL};
  return ask_shards(f, gmr__vmm_fine_shard(f, 0), &a);
}

/* ---- every shard ------------------------------------------------------------ */

static void fine_set_default_tag(gmr_vmm_pool_resource *p, uint32_t tag) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  pthread_mutex_lock(&f->pool.lock); /* a shard made meanwhile copies it */
  f->default_tag = tag;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr__vmf_lock(e);
    e->default_tag = tag;
    gmr__vmf_unlock(e);
  }
  pthread_mutex_unlock(&f->pool.lock);
}

void gmr__vmm_shards_memory_info(vmm_fine *f, gmr_memory_info *info) {
  info->held_bytes = info->live_bytes = info->free_bytes = 0;
  info->largest_free_block_bytes = info->free_block_count = 0;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr_memory_info one = *info;
    gmr__vmf_memory_info(e, &one);
    info->held_bytes += one.held_bytes;
    info->live_bytes += one.live_bytes;
    info->free_bytes += one.free_bytes;
    info->free_block_count += one.free_block_count;
    if (one.largest_free_block_bytes > info->largest_free_block_bytes) {
      info->largest_free_block_bytes = one.largest_free_block_bytes;
    }
  }
}

void gmr__vmm_shards_footprint(vmm_fine *f, gmr_footprint *out) {
  out->held_bytes = atomic_load_explicit(&f->total.held_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&f->total.peak_held_bytes, memory_order_relaxed);
}

/* Add one shard's statistics to the pool's. */
static void stats_add(gmr_vmm_pool_resource_stats *s, const gmr_vmm_pool_resource_stats *o) {
  s->mapped_bytes += o->mapped_bytes;
  s->reserved_bytes += o->reserved_bytes;
  s->va_chunk_count += o->va_chunk_count;
  s->live_bytes += o->live_bytes;
  s->live_count += o->live_count;
  s->free_bytes += o->free_bytes;
  s->free_region_count += o->free_region_count;
  s->hole_bytes += o->hole_bytes;
  s->hole_count += o->hole_count;
  s->asleep_bytes += o->asleep_bytes;
  s->asleep_count += o->asleep_count;
  s->saved_bytes += o->saved_bytes;
  s->unreleased_bytes += o->unreleased_bytes;
  s->unreleased_handle_count += o->unreleased_handle_count;
  s->unfreed_host_bytes += o->unfreed_host_bytes;
  s->unfreed_host_count += o->unfreed_host_count;
  s->page_create_count += o->page_create_count;
  s->page_release_count += o->page_release_count;
  s->map_count += o->map_count;
  s->unmap_count += o->unmap_count;
  s->defrag_count += o->defrag_count;
  s->remapped_page_count += o->remapped_page_count;
  s->extend_count += o->extend_count;
  s->event_record_count += o->event_record_count;
  s->event_query_count += o->event_query_count;
  s->stream_wait_count += o->stream_wait_count;
  s->event_synchronize_count += o->event_synchronize_count;
}

static void fine_stats(gmr_vmm_pool_resource *p, gmr_vmm_pool_resource_stats *s) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr_vmm_pool_resource_stats one;
    memset(&one, 0, sizeof one);
    gmr__vmf_fill_stats(e, &one);
    stats_add(s, &one);
    if (i == 0) { /* one sleep or wake of the pool acts on every shard */
      s->sleep_count = one.sleep_count;
      s->wake_count = one.wake_count;
    }
  }
  s->peak_mapped_bytes = atomic_load_explicit(&f->total.peak_held_bytes, memory_order_relaxed);
}

gmr_status gmr__vmm_shards_trim(vmm_fine *f, size_t *released_bytes) {
  *released_bytes = 0;
  gmr_status st = GMR_OK;
  gmr_failure scratch = GMR_FAILURE_INIT; /* trim returns no record; the callees write one */
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    size_t released = 0;
    gmr_status one = gmr__vmf_trim(e, &released, &scratch);
    *released_bytes += released;
    if (st == GMR_OK) st = one; /* the others are still trimmed */
  }
  return st;
}

/* Every shard made so far, locked (the pool's mutex held): the participants
 * of one sleep or wake, each with its context. */
typedef struct shard_set {
  vmf_engine *engines[GMR_VMM_POOL_MAX_SHARDS];
  vmf_sleep_ctx ctx[GMR_VMM_POOL_MAX_SHARDS];
  gmr__vmm_sleeper parts[GMR_VMM_POOL_MAX_SHARDS];
  size_t count;
} shard_set;

static void shards_lock(vmm_fine *f, shard_set *set, uint64_t keep_tag_mask) {
  set->count = 0;
  /* Shard 0 first: it always exists, and its counts are the pool's. */
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr__vmf_lock(e);
    size_t k = set->count++;
    set->engines[k] = e;
    set->ctx[k] = (vmf_sleep_ctx){e, keep_tag_mask, NULL, 0, NULL};
    set->parts[k] = (gmr__vmm_sleeper){&gmr__vmf_sleep_ops, &set->ctx[k], &e->unreleased};
  }
}

static void shards_unlock(shard_set *set) {
  for (size_t k = set->count; k-- > 0;) {
    gmr__vmf_sleep_ctx_free(&set->ctx[k]);
    gmr__vmf_unlock(set->engines[k]);
  }
}

static gmr_status fine_sleep(gmr_vmm_pool_resource *p, const gmr_vmm_pool_sleep_options *o,
                             gmr_failure *failure, bool *asleep) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  *asleep = false;
  shard_set *set = malloc(sizeof *set);
  if (set == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  shards_lock(f, set, o->keep_tag_mask);
  gmr_status st = gmr__vmm_sleep_run(&f->pool, set->parts, set->count, o, failure, asleep);
  shards_unlock(set);
  free(set);
  return st;
}

static gmr_status fine_wake(gmr_vmm_pool_resource *p, const gmr_vmm_pool_wake_options *o,
                            gmr_failure *failure, bool *woken, bool *still_asleep) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  *woken = false;
  shard_set *set = malloc(sizeof *set);
  if (set == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  shards_lock(f, set, 0);
  gmr_status st = gmr__vmm_wake_run(&f->pool, set->parts, set->count, o, failure, woken);
  *still_asleep = false;
  for (size_t k = 0; k < set->count; ++k) {
    vmf_engine *e = set->engines[k];
    if (e->asleep_count > 0 || e->slept) *still_asleep = true;
  }
  shards_unlock(set);
  free(set);
  return st;
}

static void fine_tag_stats(gmr_vmm_pool_resource *p, uint64_t tag_mask,
                           gmr_vmm_pool_tag_stats *s) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e != NULL) gmr__vmf_tag_stats(e, tag_mask, s);
  }
}

static size_t fine_regions(gmr_vmm_pool_resource *p, gmr_vmm_pool_region *out,
                           size_t capacity) {
  vmm_fine *f = gmr__vmm_fine_of(p);
  size_t n = 0;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    size_t room = n < capacity ? capacity - n : 0;
    n += gmr__vmf_regions(e, room > 0 ? out + n : NULL, room);
  }
  return n;
}

gmr_status gmr__vmm_fine_check_books(gmr_resource *self, char *err, size_t err_bytes) {
  if (self == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  vmm_fine *f = (vmm_fine *)(void *)self;
  size_t held = 0;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr__vmf_lock(e);
    gmr_status st = gmr__vmf_check(e, err, err_bytes);
    held += e->held_bytes + e->unreleased.handles.bytes;
    gmr__vmf_unlock(e);
    if (st != GMR_OK) return st;
  }
  size_t total = atomic_load_explicit(&f->total.held_bytes, memory_order_relaxed);
  if (held != total) {
    return gmr__vmm_violation(err, err_bytes, "the shards hold %zu bytes, the pool counts %zu",
                              held, total);
  }
  return gmr__vmm_base_check(&f->pool, err, err_bytes);
}

bool gmr__vmm_shards_busy(vmm_fine *f) {
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr__vmf_lock(e);
    bool busy = e->live_count + e->asleep_count > 0;
    gmr__vmf_unlock(e);
    if (busy) return true;
  }
  return false;
}

gmr_status gmr__vmm_shards_retry_unreleased(vmm_fine *f) {
  gmr_status st = GMR_OK;
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    size_t released = 0;
    gmr__vmf_lock(e);
    gmr_status one = gmr__vmf_retry_unreleased(e, &released, NULL);
    gmr__vmf_unlock(e);
    if (st == GMR_OK) st = one; /* the others are still asked */
  }
  return st;
}

gmr_status gmr__vmm_shards_destroy(vmm_fine *f) {
  if (gmr__vmm_shards_busy(f)) return GMR_ERR_BUSY;
  /* Shard 0 last: until it is gone the pool stays valid for another try. */
  for (uint32_t i = f->shard_count; i-- > 0;) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr_status st = gmr__vmf_destroy(e);
    if (st != GMR_OK) return st; /* a later destroy goes on from here */
  }
  return GMR_OK;
}

void gmr__vmm_shards_free_host(vmm_fine *f) {
  for (uint32_t i = 0; i < f->shard_count; ++i) {
    vmf_engine *e = gmr__vmm_fine_shard(f, i);
    if (e == NULL) continue;
    gmr__vmf_delete(e);
    atomic_store_explicit(&f->shards[i], NULL, memory_order_relaxed);
  }
}

const gmr__vmm_engine_ops gmr__vmm_fine_ops = {
    .stats = fine_stats,
    .regions = fine_regions,
    .dump_regions = gmr__vmm_dump_listed_regions,
    .set_default_tag = fine_set_default_tag,
    .set_tag = fine_set_tag,
    .tag_stats = fine_tag_stats,
    .sleep = fine_sleep,
    .wake = fine_wake,
};
