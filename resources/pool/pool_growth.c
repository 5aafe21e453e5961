/*
 * resources/pool/pool_growth.c (internal): the bytes a pool holds from its
 * upstream: the held-bytes budget under maximum_pool_bytes, adding chunks and
 * giving them back, and the growth policy. See gmr/pool_resource.h for the
 * policy and pool_internal.h for the data and the locks.
 *
 * Every upstream call here is made with the arena's grow mutex held and its
 * spin lock released: a chunk is added or detached under the spin lock, the
 * upstream allocates or frees without it. A detached chunk keeps its place in
 * the chunk registry and one block header, so that if its upstream free fails
 * it comes back exactly as it was, free, with no host allocation.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "util/counters.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/pool/pool_internal.h"

/* ---- held bytes --------------------------------------------------------- */

/* Count `bytes` as held before asking upstream, so concurrent growths of
 * several arenas never pass the maximum together. */
bool gmr__pool_held_reserve(gmr_pool_resource *pool, size_t bytes) {
  size_t max = pool->config.maximum_pool_bytes;
  size_t cur = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
  for (;;) {
    if (max != 0 && (bytes > max || cur > max - bytes)) return false;
    if (atomic_compare_exchange_weak_explicit(&pool->held_bytes, &cur, cur + bytes,
                                              memory_order_relaxed, memory_order_relaxed)) {
      return true;
    }
  }
}

void gmr__pool_held_release(gmr_pool_resource *pool, size_t bytes) {
  atomic_fetch_sub_explicit(&pool->held_bytes, bytes, memory_order_relaxed);
}

/* ---- chunks ------------------------------------------------------------- */

/* Link chunk `c` (its first header in c->first, spanning it) into `a` and
 * file its one free block under `si`. Pre: lock held, registry place promised
 * when there are several arenas. */
static void attach_chunk(gmr__pool_arena *a, gmr__pool_chunk *c, uint32_t si) {
  gmr_pool_resource *pool = a->pool;
  c->arena = a;
  c->nvtx_heap = NULL;
  if (pool->config.streams.nvtx_annotate) {
    c->nvtx_heap = gmr__nvtx_mem_heap_register((void *)c->base, c->size, "pool_resource chunk");
  }
  if (pool->arena_count > 1) gmr__pool_registry_insert(&pool->registry, c);
  gmr__pool_block *b = c->first;
  b->node.addr = c->base;
  b->node.bytes = c->size;
  b->chunk = c;
  b->phys_prev = NULL;
  b->phys_next = NULL;
  c->prev = NULL;
  c->next = a->chunks;
  if (a->chunks != NULL) a->chunks->prev = c;
  a->chunks = c;
  a->chunk_count++;
  a->held_bytes += c->size;
  gmr__pool_file_free(a, si, b);
}

bool gmr__pool_add_chunk(gmr__pool_arena *a, uint32_t si, void *ptr, size_t bytes) {
  gmr_pool_resource *pool = a->pool;
  gmr__pool_chunk *c = malloc(sizeof *c);
  bool registered = pool->arena_count > 1;
  if (c == NULL || !gmr__pool_reserve_headers(a, 1)) {
    free(c);
    return false;
  }
  if (registered && !gmr__pool_registry_reserve_one(&pool->registry)) {
    free(c);
    return false;
  }
  c->base = (uintptr_t)ptr;
  c->size = bytes;
  c->first = gmr__pool_header_take(a);
  attach_chunk(a, c, si);
  atomic_fetch_add_explicit(&pool->grow_count, 1, memory_order_relaxed);
  gmr__raise_peak(&pool->peak_held_bytes,
                  atomic_load_explicit(&pool->held_bytes, memory_order_relaxed));
  /* Upstream memory is ordered on the stream it was taken on
   * (cudaMallocAsync): the chunk is that stream's until an event covers it,
   * recorded now, while the stream surely exists. */
  if (si != GMR__POOL_SHARED_SLOT) {
    gmr__stream_event_mark_freed(pool->cuda, &gmr__pool_slot_at(a, si)->base.ev, true,
                                 &pool->events);
  }
  return true;
}

/* Whether chunk `c` is wholly free, and every block of it is free for work
 * ordered after `si` (filed under si, shared, or under a settled stream). */
static bool chunk_free_for(const gmr__pool_arena *a, const gmr__pool_chunk *c, uint32_t si) {
  for (const gmr__pool_block *b = c->first; b != NULL; b = b->phys_next) {
    if (!b->is_free || b->deferred || (b->slot != si && !gmr__pool_slot_settled(a, b->slot))) {
      return false;
    }
  }
  return true;
}

/* Take wholly free chunk `c` out of `a` before its upstream free: books
 * first (RMM #2304: once upstream has the memory, another arena may receive
 * the same address and register it), its NVTX heap too. Keeps c->first's
 * header and c's registry place for a return. Pre: lock held. */
static void detach_chunk(gmr__pool_arena *a, gmr__pool_chunk *c) {
  gmr_pool_resource *pool = a->pool;
  if (pool->arena_count > 1) gmr__pool_registry_remove(&pool->registry, c, true);
  gmr__pool_block *keep = c->first, *next = NULL;
  for (gmr__pool_block *b = c->first; b != NULL; b = next) {
    next = b->phys_next;
    gmr__pool_unfile(a, b);
    if (b != keep) gmr__pool_header_give(a, b);
  }
  if (c->prev != NULL) c->prev->next = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  if (a->chunks == c) a->chunks = c->next;
  a->chunk_count--;
  a->held_bytes -= c->size;
  gmr__pool_held_release(pool, c->size);
  if (pool->config.streams.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
}

/* A detached chunk whose upstream free failed: it is still ours, free for
 * the stream of `si`. Pre: lock held. */
static void reattach_chunk(gmr__pool_arena *a, gmr__pool_chunk *c, uint32_t si) {
  atomic_fetch_add_explicit(&a->pool->held_bytes, c->size, memory_order_relaxed);
  attach_chunk(a, c, si);
}

/* Detached chunks go back upstream on `stream` one by one, the spin lock
 * released; the first failure stops and re-attaches the rest. Returns the
 * bytes given back in *released and the first failure. Pre: grow mutex held,
 * spin lock not held. */
static gmr_status give_back(gmr__pool_arena *a, gmr__pool_chunk *detached, uint32_t si,
                            gmr_stream stream, size_t *released) {
  gmr_pool_resource *pool = a->pool;
  gmr_status result = GMR_OK;
  gmr__pool_chunk *next = NULL;
  for (gmr__pool_chunk *c = detached; c != NULL; c = next) {
    next = c->next;
    gmr_status st = result == GMR_OK ? gmr_resource_deallocate(pool->upstream, (void *)c->base,
                                                               c->size, GMR__POOL_UNIT, stream)
                                     : result;
    gmr__spin_lock_acquire(&a->lock);
    if (st == GMR_OK) {
      gmr__pool_header_give(a, c->first);
      if (pool->arena_count > 1) gmr__pool_registry_unreserve(&pool->registry);
    } else {
      reattach_chunk(a, c, si);
    }
    gmr__spin_lock_release(&a->lock);
    if (st == GMR_OK) {
      atomic_fetch_add_explicit(&pool->release_count, 1, memory_order_relaxed);
      *released += c->size;
      free(c);
    }
    result = st;
  }
  return result;
}

/* Detach the chunks of `a` that are wholly free for `si` until `goal` bytes
 * are detached (with `only_if_enough`: none unless they add up to goal).
 * Returns them linked by `next`. Pre: lock held. */
static gmr__pool_chunk *detach_free_for(gmr__pool_arena *a, uint32_t si, size_t goal,
                                        bool only_if_enough) {
  if (only_if_enough) {
    size_t total = 0;
    for (gmr__pool_chunk *c = a->chunks; c != NULL && total < goal; c = c->next) {
      if (chunk_free_for(a, c, si)) total += c->size;
    }
    if (total < goal) return NULL;
  }
  gmr__pool_chunk *detached = NULL, *next = NULL;
  size_t bytes = 0;
  for (gmr__pool_chunk *c = a->chunks; c != NULL && bytes < goal; c = next) {
    next = c->next;
    if (!chunk_free_for(a, c, si)) continue;
    detach_chunk(a, c);
    bytes += c->size;
    c->next = detached;
    detached = c;
  }
  return detached;
}

/* Give back the chunks wholly free for slot `si`, on si's stream (so no
 * synchronisation is needed), as detach_free_for chooses them. Returns the
 * bytes given back. Pre: grow mutex held, spin lock not held. */
static size_t release_free_for(gmr__pool_arena *a, uint32_t si, size_t goal, bool only_if_enough) {
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_chunk *detached = detach_free_for(a, si, goal, only_if_enough);
  gmr_stream stream = gmr__pool_slot_at(a, si)->base.ev.key.stream;
  gmr__spin_lock_release(&a->lock);
  size_t released = 0;
  (void)give_back(a, detached, si, stream, &released);
  return released;
}

gmr_status gmr__pool_release_settled_chunks(gmr__pool_arena *a, size_t *released_bytes) {
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_flush_caches(a);
  gmr__pool_chunk *detached = detach_free_for(a, GMR__POOL_SHARED_SLOT, SIZE_MAX, false);
  gmr__spin_lock_release(&a->lock);
  /* The default stream: the streams that used the chunks are done (settled),
   * and may be gone. */
  return give_back(a, detached, GMR__POOL_SHARED_SLOT, NULL, released_bytes);
}

gmr_status gmr__pool_release_all_chunks(gmr__pool_arena *a) {
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_flush_caches(a);
  gmr__pool_chunk *detached = NULL;
  while (a->chunks != NULL) {
    gmr__pool_chunk *c = a->chunks;
    detach_chunk(a, c);
    c->next = detached;
    detached = c;
  }
  gmr__spin_lock_release(&a->lock);
  size_t released = 0;
  return give_back(a, detached, GMR__POOL_SHARED_SLOT, NULL, &released);
}

/* ---- growth ------------------------------------------------------------- */

/* The chunk size the policy asks for a request that needs `need` bytes. */
static size_t growth_bytes(const gmr_pool_resource *pool, const gmr__pool_arena *a, size_t need) {
  const gmr_pool_resource_config *c = &pool->config;
  size_t step = a->held_bytes / 100u * c->growth_percent;
  if (step < c->min_growth_bytes) step = c->min_growth_bytes;
  if (step > c->max_growth_bytes) step = c->max_growth_bytes;
  size_t want = need > step ? need : step;
  size_t g = c->chunk_granularity_bytes;
  if (want <= GMR_MAX_ALLOCATION_BYTES - g) want = gmr__align_up(want, g);
  return want;
}

/* Serve the request from what `a` has now, events of other streams
 * included (never during capture). Pre: lock not held. */
static bool take_now(gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr, size_t *want,
                     gmr_failure *failure, gmr_status *st) {
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  *st = gmr__pool_prepare(a, r, &si, failure);
  gmr__pool_block *b = NULL;
  if (*st == GMR_OK) {
    b = gmr__pool_find_fit(a, si, r->need);
    if (b == NULL && !r->capturing && si != GMR__POOL_SHARED_SLOT && a->slots.count > 2) {
      b = gmr__pool_from_other_streams(a, si, r->need);
    }
    if (b != NULL) gmr__pool_hand_out(a, b, r, out_ptr);
    if (want != NULL) *want = growth_bytes(a->pool, a, r->need);
  }
  gmr__spin_lock_release(&a->lock);
  return b != NULL;
}

/* Add the chunk the upstream gave (`ptr`, `bytes`, counted as held) and hand
 * out the request from it. Pre: lock not held. */
static gmr_status attach_and_take(gmr__pool_arena *a, const gmr__pool_request *r, void *ptr,
                                  size_t bytes, void **out_ptr, gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  gmr_status st = gmr__pool_prepare(a, r, &si, failure);
  /* Memory allocated during capture is not stream-ordered: anyone's. */
  uint32_t home = r->capturing ? GMR__POOL_SHARED_SLOT : si;
  if (st == GMR_OK && !gmr__pool_add_chunk(a, home, ptr, bytes)) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                          "pool_resource: no host memory to keep track of a new chunk");
  }
  if (st == GMR_OK) gmr__pool_hand_out(a, gmr__pool_find_fit(a, si, r->need), r, out_ptr);
  gmr__spin_lock_release(&a->lock);
  if (st != GMR_OK) {
    /* During capture the memory is on no stream (and the thread is relaxed). */
    GMR_IGNORE_STATUS(gmr_resource_deallocate(pool->upstream, ptr, bytes, GMR__POOL_UNIT,
                                              r->capturing ? NULL : r->stream));
    gmr__pool_held_release(pool, bytes);
  }
  return st;
}

/* The growth itself; see gmr__pool_grow. Pre: grow mutex held. */
static gmr_status grow_locked(gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr,
                              gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  size_t want = 0;
  gmr_status st = GMR_OK;
  /* Another thread may have grown the arena while this one waited. */
  if (take_now(a, r, out_ptr, &want, failure, &st)) return GMR_OK;
  if (st != GMR_OK) return st;
  uint32_t si = 0;
  if (!r->capturing) {
    /* Memory of streams that may be gone (never recorded on) would serve:
     * a device synchronisation is cheaper than holding more. */
    gmr__spin_lock_acquire(&a->lock);
    bool sync = false;
    if (gmr__pool_prepare(a, r, &si, failure) == GMR_OK) {
      gmr__pool_flush_caches(a);
      sync = gmr__pool_sync_would_help(a, si, r->need);
    }
    gmr__spin_lock_release(&a->lock);
    if (sync && gmr__reclaim_device_synchronize(&a->slots) == cudaSuccess &&
        take_now(a, r, out_ptr, NULL, failure, &st)) {
      return GMR_OK;
    }
    /* Wholly free chunks that add up to the new one go back first, so free
     * memory split over chunks too small for the request does not raise the
     * footprint. */
    if (pool->config.release_on_growth) (void)release_free_for(a, si, want, true);
    /* An upstream that extends allocations in place (vmm, vmm_pages): a chunk's
     * free tail grows instead of a new chunk. */
    if (gmr__pool_grow_in_place(a, r, want, out_ptr)) return GMR_OK;
  }
  size_t max = pool->config.maximum_pool_bytes;
  bool released_all = false;
  for (;;) {
    if (!gmr__pool_held_reserve(pool, want)) {
      size_t held = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
      size_t room = held < max ? (max - held) & ~(GMR__POOL_UNIT - 1) : 0;
      if (room >= r->need && room < want) {
        want = room; /* what is left below the maximum still serves the request */
        continue;
      }
      if (!released_all && !r->capturing) {
        released_all = true;
        if (release_free_for(a, si, SIZE_MAX, false) > 0) continue;
      }
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                              "pool_resource: a chunk of %zu bytes for a request of %zu would "
                              "pass maximum_pool_bytes (%zu bytes; %zu held); raise "
                              "maximum_pool_bytes (spec option 'max') or free memory",
                              want, r->bytes, max, held);
    }
    void *ptr = NULL;
    st = r->capturing ? gmr_resource_allocate_capturing(pool->upstream, want, GMR__POOL_UNIT,
                                                        r->stream, &ptr, failure)
                      : gmr_resource_allocate_ex(pool->upstream, want, GMR__POOL_UNIT, r->stream,
                                                 &ptr, failure);
    if (st == GMR_OK) return attach_and_take(a, r, ptr, want, out_ptr, failure);
    gmr__pool_held_release(pool, want);
    atomic_fetch_add_explicit(&pool->upstream_failure_count, 1, memory_order_relaxed);
    if (st != GMR_ERR_OUT_OF_MEMORY && st != GMR_ERR_LIMIT_EXCEEDED) return st;
    if (want > r->need) {
      /* Refused: exactly what the request needs, before anything else. A
       * smaller step would still overshoot a tight upstream (a limit of a few
       * KiB) and leave the next small request without room. */
      want = r->need;
      continue;
    }
    /* PyTorch frees its cached blocks before it gives up: so do we. */
    if (released_all || r->capturing || release_free_for(a, si, SIZE_MAX, false) == 0) return st;
    released_all = true;
  }
}

/* Grow the arena by a chunk that holds at least r->need bytes and hand out
 * the request from it. The upstream is asked for the policy's chunk; when it
 * refuses (OUT_OF_MEMORY or LIMIT_EXCEEDED), for exactly the request, then
 * once more after giving back every wholly free chunk. During capture
 * (allocate_capturing) through the upstream's allocate_capturing, with no
 * release and no synchronisation. */
gmr_status gmr__pool_grow(gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr,
                          gmr_failure *failure) {
  pthread_mutex_lock(&a->grow_lock);
  gmr_status st = grow_locked(a, r, out_ptr, failure);
  pthread_mutex_unlock(&a->grow_lock);
  return st;
}
