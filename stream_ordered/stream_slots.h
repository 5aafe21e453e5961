/*
 * stream_ordered/stream_slots.h (internal): the table of stream slots of a
 * stream-ordered sub-allocator: which slot holds the memory freed on which
 * stream. pool_resource has one per arena, fixed_block_resource one per
 * shard, vmm one per engine; the reclaim steps (stream_ordered/reclaim.h)
 * run over it, and the two are the resources' stream-ordered base.
 *
 * A slot is a stream's key and event state (stream_ordered/stream_event.h),
 * a retired flag, the reclaim steps' scratch, and the resource's free list
 * (pool: a free index and a cache of recent frees; fixed_block: a stack of
 * blocks; vmm: a free index). The resource's slot struct embeds a
 * gmr__stream_slot as its first member; the table holds pointers to those
 * and knows the rest only through the resource's operations
 * (gmr__stream_slots_ops: the table's, and the reclaim steps').
 *
 * Slot 0 may be a shared slot (pool, vmm: memory whose work is known done,
 * free for any stream); it is never looked up by stream. A lookup by key
 * (gmr__stream_slots_of) finds the one slot of the stream's handle that is
 * not retired and compares keys (gmr__stream_key_compare): the same stream
 * uses it (learning its id if the slot lacked one); another stream retires
 * it, or takes it over when it is empty. A slot retired for a capture of a
 * stream that is still alive comes back to that stream (slot_return below).
 * A new stream takes a retired empty slot, or once the table has `reuse_at`
 * slots any empty one (its stream gets a new slot if it comes back), before
 * the table grows. The slot of the last lookup is cached: a call on the same
 * stream as the last one costs one comparison (the inline fast paths).
 *
 * Thread-safe: no; the owning resource holds its lock around every call.
 */
#ifndef GMR_STREAM_ORDERED_STREAM_SLOTS_H_
#define GMR_STREAM_ORDERED_STREAM_SLOTS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stream_ordered/event_cache.h"
#include "stream_ordered/stream_event.h"
#include "util/spin_lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No slot (a lookup that found none, or no host memory). */
#define GMR__STREAM_SLOT_NONE UINT32_MAX
/* The shared slot's index, in a table that has one. */
#define GMR__STREAM_SLOT_SHARED 0u
/* Empty slots pool_resource and fixed_block_resource keep before they give
 * one to a new stream. */
#define GMR__STREAM_SLOTS_REUSE_AT 32u
/* reuse_at for a table that gives only retired slots to new streams. */
#define GMR__STREAM_SLOTS_REUSE_NEVER UINT32_MAX

/* The part of a slot the table manages: first member of the resource's slot. */
typedef struct gmr__stream_slot {
  gmr__stream_event ev; /* its stream's key and event state */
  /* Its stream is known destroyed (its handle names another stream now), or
   * it was keyed by a capture the stream left: no lookup finds it; its
   * memory goes to others through its event or a device synchronisation,
   * then the empty slot serves a new stream. */
  bool retired;
  /* The reclaim steps' scratch (reclaim.h): covered_seq of the last query
   * that found work pending; key and free_seq as a device synchronisation
   * began; key, covered_seq and event as settle_all's wait for it began. */
  bool waiting;
  uint64_t pending_query_seq;
  gmr__stream_key sync_key, wait_key;
  uint64_t sync_seq, wait_seq;
  cudaEvent_t wait_event;
} gmr__stream_slot;

/* What a request of the resource needs, as the reclaim steps pass it to the
 * resource's `fits` (stream_ordered/reclaim.h). */
typedef struct gmr__reclaim_want {
  size_t amount;    /* pool, vmm: bytes (as the resource rounds them); fixed_block: blocks */
  size_t alignment; /* vmm: the placement's alignment; unused by the others */
} gmr__reclaim_want;

/* What the table asks of the resource; `ctx` is the table's. */
typedef struct gmr__stream_slots_ops {
  /* A new slot of the resource with its free list empty and everything but
   * the gmr__stream_slot zero; NULL when host memory ran out. */
  gmr__stream_slot *(*create)(void *ctx);
  /* Free a slot create() made (its CUDA event already destroyed or
   * abandoned by the resource); NULL: free(). */
  void (*destroy)(void *ctx, gmr__stream_slot *slot);
  /* Whether slot `i` holds no memory at all (free or waiting for events). */
  bool (*empty)(void *ctx, uint32_t i);
  /* Move every free block of slot `from` that its stream could take at once
   * to slot `to`; true if any moved. */
  bool (*move_all)(void *ctx, uint32_t from, uint32_t to);
  /* Slot `i` now serves the stream of its key (new, or reused with its event
   * state reset); may be NULL. */
  void (*started)(void *ctx, uint32_t i);

  /* The reclaim steps' (reclaim.h), for a table they run on. Whether slot
   * `i` holds free memory that `take` would move: */
  bool (*holds)(void *ctx, uint32_t i);
  /* Move that memory of slot `from` to slot `to` (the shared slot, or the
   * stream that waited for it). */
  void (*take)(void *ctx, uint32_t from, uint32_t to);
  /* Whether slot `i`'s free memory alone serves `want`. */
  bool (*fits)(void *ctx, uint32_t i, const gmr__reclaim_want *want);
  /* Slot `i`'s free memory in the units of want->amount; NULL: the wait
   * step takes only a stream whose memory alone fits (no wait for all). */
  size_t (*amount)(void *ctx, uint32_t i);
  /* A device synchronisation that began as the table's sync_epoch became
   * `epoch` has completed: what the resource holds beyond the slots (memory
   * waiting for record_stream events) may be released. Called with the lock
   * held; may be NULL. */
  void (*synchronized)(void *ctx, uint64_t epoch);

  /* A split table (vmm) keeps each slot's fresh memory (freed after its
   * stream's last record or device synchronisation) apart from its covered
   * memory (freed before): holds, take, fits and amount then see only the
   * covered memory, which another stream may take once that record is done
   * or waited for, and the three below are set. NULL (pool, fixed_block): a
   * slot's memory is one whole, held back while any of its frees is fresh.
   * Slot `i`'s fresh memory in the units of want->amount (0: none): */
  size_t (*fresh_amount)(void *ctx, uint32_t i);
  /* Whether slot `i`'s fresh memory alone serves `want`. */
  bool (*fresh_fits)(void *ctx, uint32_t i, const gmr__reclaim_want *want);
  /* Slot `i`'s event now covers every free filed under it (a record, or a
   * device synchronisation): its fresh memory becomes covered memory. */
  void (*covered)(void *ctx, uint32_t i);
  /* Optional, for the wait step: move only the covered memory of `from`
   * that best serves `want` to `to`, the stream that waited for it (the
   * rest stays with `from`'s stream, which a taker's newest free would no
   * longer be); NULL: `take`. */
  void (*take_fit)(void *ctx, uint32_t from, uint32_t to, const gmr__reclaim_want *want);
} gmr__stream_slots_ops;

/* Whether the table keeps fresh memory apart (see fresh_amount). */
static inline bool gmr__stream_slots_split(const gmr__stream_slots_ops *ops) {
  return ops->covered != NULL;
}

typedef struct gmr__stream_slots {
  gmr__stream_slot **items;
  uint32_t count;
  uint32_t capacity;
  uint32_t cached;   /* the slot of the last lookup (>= first), or GMR__STREAM_SLOT_NONE */
  uint32_t first;    /* 1 with a shared slot 0, else 0 */
  uint32_t reuse_at; /* from this many slots on, any empty one goes to a new stream */
  uint32_t active;   /* slots (but the shared one) that are not retired */
  gmr__stream_events_mode mode; /* the event mode a stream's slot starts in */
  bool ids;                     /* stream_ids: gmr__stream_key_compare's `ids` */
  const gmr__stream_slots_ops *ops;
  void *ctx;
  const gmr__cuda_ops *cuda;        /* the reclaim steps' CUDA calls */
  gmr__stream_event_counts *counts; /* and their counters (the resource's statistics) */
  uint64_t sync_epoch;              /* device synchronisations begun (reclaim.h) */
  /* The resource's lock, which the reclaim steps release around the calls
   * that block the host (synchronisations); NULL (init's): it stays held. */
  gmr__spin_lock *lock;
} gmr__stream_slots;

/* An empty table; with `shared`, slot 0 is made now (keyed by no stream,
 * lazy). `cuda` and `counts` (borrowed, outliving the table) serve the
 * reclaim steps; NULL for a table they never run on. false when host memory
 * ran out (nothing to free then). */
bool gmr__stream_slots_init(gmr__stream_slots *t, const gmr__stream_slots_ops *ops, void *ctx,
                            bool shared, gmr__stream_events_mode mode, bool ids, uint32_t reuse_at,
                            const gmr__cuda_ops *cuda, gmr__stream_event_counts *counts);

/* Free every slot (ops->destroy) and the table's array. */
void gmr__stream_slots_deinit(gmr__stream_slots *t);

/* Destroy every slot's CUDA event, then `spare`'s events (NULL: none). The
 * first failure stops and is returned (counted), what was not destroyed
 * kept, so that a later call goes on. */
cudaError_t gmr__stream_slots_destroy_events(gmr__stream_slots *t, gmr__event_cache *spare);

/* The slot of `key`'s stream, created or reused on first use (the rules of
 * the banner); GMR__STREAM_SLOT_NONE when host memory ran out (a slot of
 * another stream on the handle may have been retired). The fast path: */
uint32_t gmr__stream_slots_of_slow(gmr__stream_slots *t, gmr__stream_key key);
static inline uint32_t gmr__stream_slots_of(gmr__stream_slots *t, gmr__stream_key key) {
  uint32_t c = t->cached;
  if (c < t->count) {
    const gmr__stream_slot *s = t->items[c];
    if (!s->retired && gmr__stream_key_equal(s->ev.key, key)) return c;
  }
  return gmr__stream_slots_of_slow(t, key);
}

/* The slot of `key` if the table has one (never creates, changes nothing);
 * GMR__STREAM_SLOT_NONE if not. */
uint32_t gmr__stream_slots_find(const gmr__stream_slots *t, gmr__stream_key key);

/* The slot of the stream that last had handle `stream` (never creates; for a
 * call that does not know its stream's id, stream_ordered/stream_event.h);
 * GMR__STREAM_SLOT_NONE if none. The fast path: */
uint32_t gmr__stream_slots_for_handle_slow(gmr__stream_slots *t, gmr_stream stream);
static inline uint32_t gmr__stream_slots_for_handle(gmr__stream_slots *t, gmr_stream stream) {
  uint32_t c = t->cached;
  if (c < t->count) {
    const gmr__stream_slot *s = t->items[c];
    if (!s->retired && s->ev.key.stream == stream) return c;
  }
  return gmr__stream_slots_for_handle_slow(t, stream);
}

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_ORDERED_STREAM_SLOTS_H_ */
