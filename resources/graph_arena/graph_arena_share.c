/*
 * resources/graph_arena/graph_arena_share.c (internal): sharing the upstream's
 * memory in the graph pool (UNCAPTURED_FORWARD), where the arena serves the
 * captures and the upstream (a pool) everything else, out of one footprint.
 *
 * Taking: when an explicit session opens, before its capture starts, the
 * arena takes the upstream's free blocks, largest first, as chunks. During
 * the capture the upstream could serve only memory it may hand to that stream
 * without waiting for other streams (a pool's other streams' free blocks need
 * an event wait, which a capture forbids), so without this step the capture
 * grows the upstream while its idle memory stays idle. Taken before the
 * capture, through the ordinary allocate, the upstream orders the stream
 * after the blocks' earlier users as for any request. A large block also
 * keeps the capture's memory contiguous, which ordered reuse needs to fit a
 * large late request (a graph's output) into bytes freed earlier.
 *
 * Giving back: chunks that no graph memory uses (wholly free) go back when a
 * capture ends and when a graph memory is released, so that memory a capture
 * did not need serves the traffic outside captures again; what the caller
 * asked for (initial, reserve) stays.
 *
 * Both need the upstream's own word (gmr_resource_get_memory_info: the largest
 * request it can serve from free memory; gmr_resource_get_footprint) and make
 * upstream calls under the arena's lock, never while a session of the arena is
 * open or on a stream that captures.
 */
#include <string.h>

#include "resources/graph_arena/graph_arena_internal.h"

/* Free blocks smaller than this are not worth a chunk of their own (each costs
 * a block table and a range of the free space; the capture's small requests
 * fit in the large ones). The pool's chunk granularity. */
#define GMR__GA_ADOPT_MIN_BYTES ((size_t)2 << 20)
/* Most blocks taken at one capture's start. */
#define GMR__GA_ADOPT_MAX_COUNT 16

/* Whether `stream` captures now, asked of the CUDA layer (a capture-safe
 * query). A failed query counts as capturing: no upstream call then. */
static bool stream_captures(const gmr_graph_arena_resource *a, gmr_stream stream) {
  if (stream == NULL) return false; /* the legacy default stream cannot capture */
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t err = a->cuda->stream_get_capture_info((cudaStream_t)stream, &status, &id);
  return err != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

/* The largest free block of the upstream worth taking now, rounded down to
 * the arena's alignment and kept under max_capacity_bytes; 0 for none (or no
 * answer). Fills *footprint with the upstream's, to see whether taking it
 * made the upstream grow. No CUDA call of the arena's own. */
static size_t block_to_adopt(const gmr_graph_arena_resource *a, gmr_footprint *footprint) {
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  if (gmr_resource_get_memory_info(a->upstream, &info) != GMR_OK ||
      gmr_resource_get_footprint(a->upstream, footprint) != GMR_OK) {
    return 0;
  }
  size_t mask = a->cfg.alignment - 1;
  size_t bytes = info.largest_free_block_bytes & ~mask;
  size_t room = (a->cfg.max_capacity_bytes - a->held_bytes) & ~mask;
  if (bytes > room) bytes = room;
  return bytes < GMR__GA_ADOPT_MIN_BYTES ? 0 : bytes;
}

size_t gmr__ga_adopt_upstream_free(gmr_graph_arena_resource *a, gmr_stream stream) {
  if (!gmr__ga_shares_upstream(a) || a->cfg.chunk_bytes == 0 || a->session_count > 0) return 0;
  gmr_footprint before, after;
  size_t bytes = block_to_adopt(a, &before);
  /* Asked only when there is something to take. */
  if (bytes == 0 || stream_captures(a, stream)) return 0;
  size_t taken = 0;
  while (bytes > 0 && taken < GMR__GA_ADOPT_MAX_COUNT && gmr__extent_set_reserve(&a->free, 1)) {
    gmr_failure failure = GMR_FAILURE_INIT;
    /* Not being able to take it is no error: the capture grows as needed. */
    if (gmr__ga_add_chunk(a, bytes, GMR__GA_CHUNK_ADOPTED, GMR__GA_GROW_PLAIN, stream, &failure) !=
        GMR_OK) {
      break;
    }
    if (gmr_resource_get_footprint(a->upstream, &after) != GMR_OK ||
        after.held_bytes > before.held_bytes) {
      /* The upstream grew for it after all (its free block was not one it
       * could give this stream): give it back, and take nothing more. */
      for (size_t i = 0; i < a->chunk_count; ++i) {
        bool released = false;
        if (a->chunks[i].order == a->next_chunk_order - 1) {
          (void)gmr__ga_release_chunk(a, i, stream, &released);
          break;
        }
      }
      break;
    }
    a->adopted_chunk_count++;
    a->adopted_bytes += bytes;
    taken++;
    bytes = block_to_adopt(a, &before);
  }
  return taken;
}

/* Index of a GROWN or ADOPTED chunk at or below `from` (exclusive) that is
 * wholly free (one range of the free space is all of it), or SIZE_MAX. */
static size_t idle_chunk_below(const gmr_graph_arena_resource *a, size_t from) {
  for (size_t i = from; i-- > 0;) {
    const gmr__ga_chunk *c = &a->chunks[i];
    if ((c->origin == GMR__GA_CHUNK_GROWN || c->origin == GMR__GA_CHUNK_ADOPTED) &&
        gmr__extent_set_find_exact(&a->free, (gmr__extent){c->base, c->base + c->bytes, 0,
                                                           c->order}) != SIZE_MAX) {
      return i;
    }
  }
  return SIZE_MAX;
}

void gmr__ga_return_idle_chunks(gmr_graph_arena_resource *a, gmr_stream stream) {
  if (!gmr__ga_shares_upstream(a) || a->session_count > 0) return;
  size_t i = idle_chunk_below(a, a->chunk_count);
  /* Asked only when there is something to give back. */
  if (i == SIZE_MAX || stream_captures(a, stream)) return;
  for (; i != SIZE_MAX; i = idle_chunk_below(a, i)) {
    size_t bytes = a->chunks[i].bytes;
    bool released = false;
    /* A failed free leaves the chunk with the arena, free and usable. */
    if (gmr__ga_release_chunk(a, i, stream, &released) == GMR_OK && released) {
      a->returned_chunk_count++;
      a->returned_bytes += bytes;
    }
  }
}
