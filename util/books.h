/*
 * util/books.h (internal): the books of live allocations, pointer -> how it
 * was allocated, for every layer that checks a free exactly: the leaf
 * resources (cuda, host) and the tracking adaptor.
 *
 * A free is taken out of the books before the memory goes back below (RMM
 * #2304: once the memory is back, another thread may be handed the same
 * address and record it), and put back if the release below fails. The
 * verdict on a bad free uses gmr's vocabulary (gmr/resource.h): not live ->
 * unknown pointer, or double free when the address is among the recently
 * freed ones; live but with other bytes, alignment or stream -> mismatch.
 *
 * Layout, for threads: the books are split in shards chosen by the address's
 * 64 MiB region, so a thread whose memory comes from regions of its own (a
 * pool arena's chunks) mostly uses shards no other thread touches.
 * Each shard has a spin lock held only for one table operation (no call
 * out, except a table's growth), an open-addressing table that stores each
 * entry beside its key (one cache line per probe, no tombstones), and a ring
 * of recently freed addresses, scanned only to name a bad free. While one
 * thread alone has used a shard, the shard is biased to it and that thread
 * takes no lock (no locked instruction: a flag and a check, util/fence.h);
 * the first other thread, or a reader of every shard (count, collect), ends
 * the bias for good at the price of one membarrier (books.c).
 *
 * Thread-safe: yes, every function; init/deinit excepted.
 */
#ifndef GMR_UTIL_BOOKS_H_
#define GMR_UTIL_BOOKS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the books keep per live allocation. Fields a user has no use for stay 0. */
typedef struct gmr__book_entry {
  size_t bytes;        /* as given at allocation */
  size_t alignment;    /* as given at allocation (0 already made 256) */
  gmr_stream stream;   /* the allocation's stream */
  uint64_t seq;        /* the tracking adaptor's allocation order */
  void *extra;         /* the owner's (the cuda resource: streams given to record_stream) */
  uint32_t owner_slot; /* the tracking adaptor's owner counters */
} gmr__book_entry;

typedef enum gmr__book_verdict {
  GMR__BOOK_OK = 0,
  GMR__BOOK_UNKNOWN_POINTER,  /* not live, not recently freed */
  GMR__BOOK_DOUBLE_FREE,      /* not live, freed recently */
  GMR__BOOK_SIZE_MISMATCH,    /* live, other bytes or alignment */
  GMR__BOOK_STREAM_MISMATCH   /* live, other stream (when the caller checks streams) */
} gmr__book_verdict;

/* The status of a verdict: GMR_OK, GMR_ERR_UNKNOWN_POINTER, GMR_ERR_DOUBLE_FREE
 * or GMR_ERR_FREE_MISMATCH. */
gmr_status gmr__book_verdict_status(gmr__book_verdict verdict);

typedef struct gmr__books_shard gmr__books_shard;

typedef struct gmr__books {
  gmr__books_shard *shards;
  size_t shard_mask; /* shard count - 1 (a power of two) */
  bool asymmetric;   /* util/fence.h: shards may be biased to a thread */
} gmr__books;

/* Set up `shard_count` shards (rounded up to a power of two, at least 1) that
 * remember about `recent_free_count` frees in all (0: none, so every free of
 * a dead pointer reads as unknown; at most GMR__BOOKS_MAX_RECENT_FREES).
 * false: no host memory, or recent_free_count above the most (nothing to
 * deinit). */
#define GMR__BOOKS_MAX_RECENT_FREES ((size_t)1 << 32)
bool gmr__books_init(gmr__books *b, size_t shard_count, size_t recent_free_count);

/* Free the books' storage (not the entries' `extra`). */
void gmr__books_deinit(gmr__books *b);

/* Record the live allocation `ptr` (not NULL, not live). false: no host
 * memory for the table; the books are unchanged. (util/books_inline.h has
 * the same inline, for hot paths in C.) */
bool gmr__books_insert(gmr__books *b, const void *ptr, const gmr__book_entry *entry);

/*
 * Check a free of `ptr` with `bytes` and `alignment` (and `*stream` when
 * `stream` is not NULL) and, when it is good, take the entry out of the books
 * into *out: then the caller releases the memory, and calls
 * gmr__books_restore() if the release failed.
 * On a mismatch *out receives the live entry (unchanged in the books); on
 * other verdicts *out is untouched. Nothing changes unless the verdict is OK.
 */
gmr__book_verdict gmr__books_take(gmr__books *b, const void *ptr, size_t bytes, size_t alignment,
                                  const gmr_stream *stream, gmr__book_entry *out);

/* The release of a take failed: `ptr` is live again with `entry`. Takes no
 * host memory unless more than half of a shard's table (64 entries at
 * least) is in frees that failed at this same moment; false when it then
 * found none (the entry is lost: the caller says so). */
bool gmr__books_restore(gmr__books *b, const void *ptr, const gmr__book_entry *entry);

/*
 * Run `visit(entry, ctx)` on the live entry of `ptr` under its shard's lock
 * (the visitor may change the entry except its alignment, and bytes only to
 * record a growth in place that already happened (the tracking adaptor's
 * extend); it must not call into the books). Returns what the visitor returns, or
 * GMR_ERR_UNKNOWN_POINTER (ptr is not live; the visitor is not called).
 */
typedef gmr_status gmr__books_visit_fn(gmr__book_entry *entry, void *ctx);
gmr_status gmr__books_visit(gmr__books *b, const void *ptr, gmr__books_visit_fn *visit,
                            void *ctx);

/* Live allocations now (a sum over shards; may miss calls in flight). */
size_t gmr__books_count(const gmr__books *b);

/* One live allocation, as gmr__books_collect() copies it. */
typedef struct gmr__book_item {
  uintptr_t ptr;
  gmr__book_entry entry;
} gmr__book_item;

/* Copy every live allocation (shard by shard, each under its lock) into a
 * malloc'd array the caller frees; *items is NULL when there is none.
 * Returns GMR_OK or GMR_ERR_OUT_OF_MEMORY (nothing returned). */
gmr_status gmr__books_collect(const gmr__books *b, gmr__book_item **items, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GMR_UTIL_BOOKS_H_ */
