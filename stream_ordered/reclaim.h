/*
 * stream_ordered/reclaim.h (internal): the stream-ordered base: when memory
 * freed on one stream goes to another, written once for pool (per arena),
 * fixed_block (per shard) and vmm's placement engine (and so vmm_pages'
 * small path), over a table of stream slots (stream_slots.h) whose
 * operations lend the resource's free lists. A request on stream T that
 * T's and the shared memory cannot serve: 1. collect: memory of streams
 * whose work is known done becomes shared (T's in fixed_block, which has no
 * shared slot); 2. wait: T waits on the GPU for a stream whose recorded
 * memory fits, which becomes T's newest free (rmm#2489 otherwise); 3.
 * before growing, one device synchronisation if only it reaches memory that
 * fits. settle_all readies everything for a trim or destroy. A donor's
 * memory moves whole, and its stream records at its next free (demand). In
 * a split table (stream_slots.h: vmm) only a donor's covered memory moves,
 * whatever it freed since its last record, and a donor is asked to record
 * only where its fresh memory would have served the request
 * (gmr__reclaim_demand).
 *
 * Thread-safe: no; the resource's lock is held around every call (released
 * around synchronisations where the table names it).
 */
#ifndef GMR_STREAM_ORDERED_RECLAIM_H_
#define GMR_STREAM_ORDERED_RECLAIM_H_

#include <stdbool.h>
#include <stdint.h>

#include "stream_ordered/stream_event.h"
#include "stream_ordered/stream_slots.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How collect learns that another stream's work is done. */
typedef enum gmr__reclaim_mode {
  /* Settle first (stream_event.h: a lazy stream's frees not covered are
   * recorded, a created stream is asked to record at its next call), then
   * query. */
  GMR__RECLAIM_SETTLE = 0,
  /* Query recorded events only (T captures: no record may join it). */
  GMR__RECLAIM_QUERY = 1,
  /* Query only records whose completion is not known, once each: one found
   * pending is not asked again until its stream records anew. */
  GMR__RECLAIM_QUERY_ONCE = 2
} gmr__reclaim_mode;

/*
 * Step 1: the memory of every slot but `taker` whose work is known done goes
 * to the shared slot (to `taker` in a table without one, stopping once
 * `want` fits there; `want` NULL: never stops). Queries are made in relaxed
 * capture mode. Returns whether another slot's memory is covered by a
 * record still pending (step 2 could take it). `taker` may be the shared
 * slot.
 */
bool gmr__reclaim_collect(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want,
                          gmr__reclaim_mode mode);

/* Whether collect(GMR__RECLAIM_QUERY_ONCE) would query a slot but `taker`.
 * No CUDA call. */
bool gmr__reclaim_completion_unknown(const gmr__stream_slots *t, uint32_t taker);

/*
 * Step 2: `taker`'s stream waits (cudaStreamWaitEvent) for the record of a
 * slot whose memory alone fits `want`; else, with the table's `amount`, for
 * every recorded slot when together with the taker's and the shared memory
 * they hold want->amount. Each waited-for slot's memory moves to `taker`. A
 * failed wait skips that slot. Returns whether memory moved. Pre: the
 * taker's stream not capturing, its key known.
 */
bool gmr__reclaim_wait(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want);

/* Step 3's question: does a slot but `taker` whose frees no record covers
 * (its stream owes a record, or died) hold memory that alone fits `want`?
 * No CUDA call. */
bool gmr__reclaim_sync_would_help(const gmr__stream_slots *t, uint32_t taker,
                                  const gmr__reclaim_want *want);

/* Step 3's question, asked before a growth, and the demand that follows:
 * does fresh memory of other streams (their frees no record covers: they
 * owe a record, or died) alone fit `want`, or, in a split table, add up to
 * want->amount with `have` (what the taker may use already, in the same
 * units)? If so every such stream (a split table's: every one holding
 * fresh memory) is asked to record at its next call
 * (gmr__stream_event_demand), so that its memory is covered when streams
 * ask again, and true is returned (a device synchronisation would help
 * now). No CUDA call. */
bool gmr__reclaim_demand(gmr__stream_slots *t, uint32_t taker, const gmr__reclaim_want *want,
                         size_t have);

/*
 * cudaDeviceSynchronize (it names no stream: legal whatever streams died),
 * counted, with no lock held: every slot whose key is unchanged then has its
 * frees up to the start covered and done, and the table's `synchronized` is
 * called with the lock held. Returns the CUDA error (nothing marked). Pre:
 * the table's lock not held; a table that names none, its resource's lock
 * held throughout (vmm).
 */
cudaError_t gmr__reclaim_device_synchronize(gmr__stream_slots *t);

/*
 * Before a trim or destroy: every slot's free memory free for anyone as far
 * as the host can wait. Lazy streams are recorded on; records not known done
 * are waited for (cudaEventSynchronize, relaxed mode, the lock released;
 * applied only if the slot still covers the same frees). Frees no record
 * covers, or `need_sync` (the resource holds memory only the device
 * releases), take one device synchronisation; if it fails (a stream
 * captures), the records are still waited for. A capturing stream's frees
 * stay its own (no synchronisation for them: it would break the capture).
 * Pre: the lock held (held again on return).
 */
void gmr__reclaim_settle_all(gmr__stream_slots *t, bool need_sync);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_ORDERED_RECLAIM_H_ */
