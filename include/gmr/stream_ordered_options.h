/*
 * gmr/stream_ordered_options.h: how a stream-ordered resource treats the
 * streams it is given. One struct, embedded as `streams` in the
 * configurations of pool (gmr/pool_resource.h), fixed_block
 * (gmr/fixed_block_resource.h) and the VMM resources
 * (gmr/vmm_pool_resource.h), and one set of spec options for it
 * (docs/stack_spec.md: stream_ordered, nvtx_annotate, streams_outlive,
 * record_every_free, stream_ids).
 *
 * The rule every stream-ordered resource keeps (docs/stream_ordering.md):
 * memory freed on stream S is reused at once by later work on S; another
 * stream T gets it only once S's work up to the free is known done (an event
 * recorded on S and queried, or a device synchronisation), or after T waits
 * for that event. The fields below choose what it costs, never whether the
 * rule holds (only stream_ordered = false drops it, for memory no stream
 * uses).
 *
 * Units: none. Ownership: a plain value, copied by each create.
 * Thread-safe: not applicable (a value).
 * Stream/device: see each field.
 */
#ifndef GMR_STREAM_ORDERED_OPTIONS_H_
#define GMR_STREAM_ORDERED_OPTIONS_H_

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_stream_ordered_options {
  /* false: ignore streams (host upstreams, single-stream programs): freed
   * memory is reusable by anyone at once and no CUDA call is ever made.
   * pool and fixed_block; the VMM resources are always stream-ordered
   * (false is GMR_ERR_INVALID_ARGUMENT there). */
  bool stream_ordered;
  /* Describe chunks and allocations to memory checkers through the NVTX
   * memory extension (core/nvtx_mem.h; "NVTX annotation" in
   * gmr/pool_resource.h). false: no NVTX call at all. pool and fixed_block;
   * true is GMR_ERR_INVALID_ARGUMENT for the VMM resources. */
  bool nvtx_annotate;
  /* The program keeps every stream it passes alive until the resource is
   * destroyed. Then no stream id is asked and a free records nothing (a
   * stream that wants another stream's memory records that stream's event,
   * once). false (the default): a stream may be destroyed right after the
   * call that named it. Every resource (vmm_pages' whole pages record at
   * every free either way). */
  bool streams_outlive_resource;
  /* RMM's rule instead of records on demand: a free on a created stream
   * records its event at once. Ignored with streams_outlive_resource. pool
   * and fixed_block; true is GMR_ERR_INVALID_ARGUMENT for the VMM resources
   * (which record in batches while a second stream shares an engine:
   * gmr/vmm_resource.h). */
  bool record_at_every_free;
  /* For programs that destroy streams while memory freed on them may still
   * be in use by their work, and create new ones: a created stream is known
   * by its id (cudaStreamGetId, after cudaStreamGetCaptureInfo; about 150 ns
   * on an H100) as well as its handle before it takes back its own memory
   * not known done, so a new stream that got a destroyed one's handle never
   * reuses that memory unordered. false: by handle, as RMM and PyTorch.
   * Ignored with streams_outlive_resource. pool and fixed_block; true is
   * GMR_ERR_INVALID_ARGUMENT for the VMM resources (keyed by handle, the id
   * asked before each record). */
  bool stream_ids;
} gmr_stream_ordered_options;

/* Stream ordered, no NVTX annotation, streams may be destroyed after any
 * call, events recorded on demand, streams known by handle. */
#define GMR_STREAM_ORDERED_OPTIONS_DEFAULT {true, false, false, false, false}

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_ORDERED_OPTIONS_H_ */
