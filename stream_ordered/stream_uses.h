/*
 * stream_ordered/stream_uses.h (internal): record_stream's books for one
 * block of pool or fixed_block: the other streams it is used on and, from
 * its free, what ends those uses (an event recorded on each, the capture's
 * free markers: capture_reuse.h, or a device synchronisation). The resource
 * holds the block back meanwhile, then files it as a free of its stream.
 *
 * Thread-safe: no; the owner's lock guards it.
 */
#ifndef GMR_STREAM_ORDERED_STREAM_USES_H_
#define GMR_STREAM_ORDERED_STREAM_USES_H_

#include <stdbool.h>
#include <stdint.h>

#include "stream_ordered/capture_reuse.h"
#include "stream_ordered/event_cache.h"
#include "stream_ordered/stream_slots.h"

typedef struct gmr__stream_use {
  gmr__stream_key key;
  cudaEvent_t event; /* from the free: recorded on key.stream; NULL when over */
} gmr__stream_use;

typedef struct gmr__stream_uses {
  uint32_t count;
  uint32_t capacity;
  uint64_t epoch;         /* the free's table sync_epoch: a synchronisation begun later ends it */
  bool needs_device_sync; /* a record failed, or a captured use has no markers */
  gmr__capture_markers markers; /* captured uses: over inside the capture once joined */
  gmr__stream_use items[];
} gmr__stream_uses;

/* record_stream: `key`'s stream uses the block of *u (NULL: none yet). No
 * CUDA call. GMR_ERR_OUT_OF_MEMORY without host memory, nothing changed. */
gmr_status gmr__stream_uses_add(gmr__stream_uses **u, gmr__stream_key key);

/*
 * The block's free on `freeing`'s stream: each other stream that used it
 * gets an event recorded now (counted in t->counts). One that captures gets
 * none (it would join the user's graph): with `markers`, the capture's free
 * markers are taken; otherwise, or when they cannot be, and for a failed
 * record, the uses last until a device synchronisation begun after this
 * one (t->sync_epoch). Returns false, *u freed, when no other stream used
 * the block (it is an ordinary free).
 */
bool gmr__stream_uses_at_free(gmr__stream_uses **u, gmr__stream_key freeing, bool markers,
                              gmr__stream_slots *t, gmr__event_cache *spare);

/* Whether every use is over: none needs a device synchronisation, the
 * markers (if any) are `markers_passed`, and each event is done (queried in
 * relaxed capture mode, counted; done ones go back to `spare`). */
bool gmr__stream_uses_over(gmr__stream_uses *u, bool markers_passed, gmr__stream_slots *t,
                           gmr__event_cache *spare);

/* Free *u (NULL: nothing), its events back to `spare` (NULL: none left;
 * `t` may then be NULL too). */
void gmr__stream_uses_free(gmr__stream_uses **u, gmr__stream_slots *t, gmr__event_cache *spare);

#endif /* GMR_STREAM_ORDERED_STREAM_USES_H_ */
