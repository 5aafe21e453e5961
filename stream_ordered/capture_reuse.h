/*
 * stream_ordered/capture_reuse.h (internal): reusing, inside a CUDA graph
 * capture, memory freed with record_stream uses on other streams of the
 * capture: the one rule of pool, vmm and graph_arena (PyTorch's opt-in
 * graph_capture_record_stream_reuse, c10/cuda/CUDACachingAllocator.cpp).
 *
 * Inside a capture no work runs, so events cannot tell when a use ends; the
 * graph's edges can. At the free, the "free markers" are the dependencies of
 * the next captured work of the freeing stream and of every stream that used
 * the block (cudaStreamGetCaptureInfo): every captured use of the block comes
 * before one of them. A later request on stream S of the capture may reuse
 * the block once every marker is an ancestor of (or one of) S's own
 * dependencies: S's next work then runs after every use, on every replay.
 * Until then the block waits, as it did before for the capture's end: a
 * forked stream that has not joined back (or joined only partly, or through
 * a nested fork that has not) keeps it. A stream that does not capture in
 * the same capture as the freeing one (its work runs outside the graph), or
 * markers that cannot be taken, leave the block to the next device
 * synchronisation after the capture, as before.
 *
 * Only graph queries are made (cudaStreamGetCaptureInfo,
 * cudaGraphNodeGetDependencies): legal during a capture in every thread mode,
 * and made only while the capture is known to be in progress (the asking
 * stream captures in it), never on a finished graph's nodes.
 *
 * Thread-safe: no; the owning resource holds its lock around every call.
 */
#ifndef GMR_STREAM_ORDERED_CAPTURE_REUSE_H_
#define GMR_STREAM_ORDERED_CAPTURE_REUSE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "util/u64_map.h"

/* The free markers of one block. capture_id 0: none taken. */
typedef struct gmr__capture_markers {
  unsigned long long capture_id;
  cudaGraphNode_t *nodes;
  uint32_t count;
} gmr__capture_markers;

/*
 * The markers of a block freed on `freeing` and also used on `uses`
 * (`use_count` streams; the freeing stream among them is ignored). True with
 * *out filled when `freeing` captures and every use stream captures in the
 * same capture and at least one of them has captured work; false otherwise
 * (or on a CUDA error or no host memory), *out then empty: the block must
 * wait for the capture's end as before.
 */
bool gmr__capture_markers_take(const gmr__cuda_ops *cuda, gmr_stream freeing,
                               const gmr_stream *uses, size_t use_count,
                               gmr__capture_markers *out);

/* Free the markers' memory; *m becomes empty. */
void gmr__capture_markers_release(gmr__capture_markers *m);

/* The ancestors of one capturing stream's dependencies seen so far, kept
 * between calls (they only grow while the capture goes on). */
typedef struct gmr__capture_walk {
  unsigned long long capture_id;
  gmr_stream stream;
  gmr__u64_map seen; /* node -> 1 */
} gmr__capture_walk;

#define GMR__CAPTURE_WALKS 4

/* A resource's walks, one per capturing stream it asked for lately. */
typedef struct gmr__capture_walks {
  gmr__capture_walk items[GMR__CAPTURE_WALKS];
  uint32_t next; /* the one to replace next */
} gmr__capture_walks;

#define GMR__CAPTURE_WALKS_INIT {0}

void gmr__capture_walks_free(gmr__capture_walks *w);

/*
 * Whether `stream` may reuse a block with markers `m` now: it captures in
 * m's capture and every marker is an ancestor of, or one of, its next
 * work's dependencies. False on any error (the block keeps waiting).
 */
bool gmr__capture_markers_precede(const gmr__cuda_ops *cuda, gmr__capture_walks *walks,
                                  const gmr__capture_markers *m, gmr_stream stream);

#endif /* GMR_STREAM_ORDERED_CAPTURE_REUSE_H_ */
