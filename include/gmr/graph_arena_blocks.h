/*
 * gmr/graph_arena_blocks.h: the blocks of a gmr_graph_arena_resource
 * (gmr/graph_arena_resource.h, which includes this header): allocation with
 * a block id and at a given address, lookup and return by id, reset,
 * checkpoints and rewinds inside and outside capture sessions. Sources: the
 * C# CUDA graph memory pool spec (BlockId, GetBlock, ReturnBlock, Reset),
 * numr's arena and AdaptiveArrayPools.jl (checkpoint/rewind), PyTorch's
 * setCheckpointPoolState (allocate_at). The arena's banner says what a
 * session, a graph memory and the capture policies are.
 *
 * Thread-safe: yes, as the arena (its one lock; each function says more).
 */
#ifndef GMR_GRAPH_ARENA_BLOCKS_H_
#define GMR_GRAPH_ARENA_BLOCKS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Allocate exactly [ptr, ptr + bytes) as a block of `memory` used on
 * `stream`, for restoring a checkpoint of a graph memory's blocks: PyTorch's
 * setCheckpointPoolState, which CUDA graph trees (torch.compile's
 * reduce-overhead mode) call to return a private pool to its state after an
 * earlier graph of the tree. The bytes must be free for `memory`: bytes it
 * freed (whatever stream they were freed on, or a freed block kept whole) or
 * the arena's free space; a memory's bytes never go to another memory before
 * it is released, so a block that was live in it at the checkpoint is free
 * again once the memory's later blocks are freed. The block is like one
 * carved in a session of `memory` (ordered reuse, record_stream, release) and
 * is freed with gmr_resource_deallocate(arena, ptr, bytes, 0, stream). With
 * nvtx_annotate, a block restored over freed bytes gets no region of its own
 * (it lies in their widened regions), nor does one over freed bytes and free
 * space together.
 *
 * Units: bytes (the block takes `bytes` rounded up to the alignment); *out_id
 *   (may be NULL) receives its id, as gmr_graph_arena_resource_allocate().
 * Ownership: the caller owns the block; `memory` stays the caller's.
 * Thread-safe: yes (the arena's lock). Stream/device: no CUDA call, no
 *   upstream call; the caller orders `stream` after the work that freed the
 *   bytes (a checkpoint restore runs on the stream the graphs were captured
 *   on).
 * Returns:
 *   GMR_OK                    the block is live.
 *   GMR_ERR_INVALID_ARGUMENT  a NULL argument, bytes 0 or above
 *                             GMR_MAX_ALLOCATION_BYTES, `ptr` not a multiple
 *                             of the arena's alignment or the range not inside
 *                             one chunk, or `memory` is not a live graph
 *                             memory of the arena.
 *   GMR_ERR_BUSY              part of the range is live, or held by another
 *                             graph memory.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the bookkeeping.
 * On failure nothing changed and *out_id is 0.
 * Source: PyTorch's CUDACachingAllocator setCheckpointPoolState (Note
 *   [Checkpointing PrivatePoolState]).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_allocate_at(
    gmr_graph_arena_resource *arena, gmr_graph_memory *memory, void *ptr, size_t bytes,
    gmr_stream stream, uint64_t *out_id);

/**
 * Reset between iterations (Reset of the C# CUDA graph memory pool spec): every block served
 * outside sessions is released at once, live or not (deallocating one of them afterwards returns
 * GMR_ERR_DOUBLE_FREE), rewind marks outside sessions are dropped, and unclaimed memories of
 * automatic sessions are released. Graph memories the caller holds are untouched. With the same
 * graph memories held, the same sequence of requests after a reset gets the same addresses, so code
 * that captures again every iteration gets identical pointers.
 *
 * pre: no queued work still uses the released memory.
 * Units: *out_released_count (may be NULL) receives the number of live blocks
 *   released. Thread-safe: yes. Stream/device: no CUDA call, no upstream call
 *   (chunks are kept; gmr_resource_trim() gives them back).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena NULL); GMR_ERR_BUSY (a
 * session is open, automatic ones included; nothing changed);
 * GMR_ERR_OUT_OF_MEMORY (host memory for the bookkeeping; nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_reset(gmr_graph_arena_resource *arena,
                                                                size_t *out_released_count);

/**
 * Set a rewind mark (AdaptiveArrayPools' checkpoint!) in the scope of
 * `stream`: its open session if it has one (asked of CUDA with automatic
 * detection), otherwise the arena's uncaptured blocks. Marks nest.
 *
 * Units: *out_mark receives an id, unique in the arena.
 * Thread-safe: yes. Stream/device: with automatic detection, one capture query.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument); GMR_ERR_UNSUPPORTED
 * (uncaptured scope with UNCAPTURED_FORWARD: the arena serves nothing there);
 * GMR_ERR_OUT_OF_MEMORY (host memory); GMR_ERR_CUDA (the capture query failed).
 * On failure *out_mark is 0.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_checkpoint(
    gmr_graph_arena_resource *arena, gmr_stream stream, uint64_t *out_mark);

/**
 * Rewind to `mark` (AdaptiveArrayPools' rewind!): every block allocated in
 * the scope after the mark is freed, live or not (deallocating one afterwards
 * returns GMR_ERR_DOUBLE_FREE); the mark and marks set after it are
 * dropped (LIFO). What happens to the bytes:
 *  - uncaptured scope: back to the free space; the same requests after the
 *    rewind get the same addresses.
 *  - in a session, MONOTONE: nothing; they stay with the graph memory (a
 *    later allocation in the capture never aliases a rewound one, numr).
 *  - in a session, ORDERED_REUSE: reusable later in the same capture on that
 *    stream, as if freed there.
 *
 * pre: no queued work still uses the rewound blocks outside the capture.
 * Units: *out_released_count (may be NULL): live blocks freed.
 * Thread-safe: yes. Stream/device: with automatic detection, one capture query.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena NULL, or `mark` is not a
 * live mark of this scope); GMR_ERR_BUSY (uncaptured scope: a live block
 * allocated after the mark belongs to another stream; a caller that owns
 * every stream uses gmr_graph_arena_resource_rewind_uncaptured() instead);
 * GMR_ERR_UNSUPPORTED (as for checkpoint); GMR_ERR_OUT_OF_MEMORY (host
 * memory); GMR_ERR_CUDA (the capture query failed). On failure nothing
 * changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_rewind(gmr_graph_arena_resource *arena,
                                                                 gmr_stream stream, uint64_t mark,
                                                                 size_t *out_released_count);

/**
 * Checkpoint and rewind of the uncaptured scope alone, for a caller that owns
 * every stream the arena's uncaptured blocks are used on (a pool per thread:
 * gmr/scoped/scoped_pool.h). checkpoint_uncaptured sets a mark in the uncaptured
 * scope whatever session is open (no capture query); rewind_uncaptured
 * rewinds that scope to a mark as gmr_graph_arena_resource_rewind() does, but
 * frees the live blocks allocated after the mark on any stream instead of
 * refusing those of another stream: the caller vouches for all of them. Marks
 * of both kinds are the same: a mark that gmr_graph_arena_resource_checkpoint()
 * set outside sessions may be rewound here, and the other way round.
 *
 * pre (rewind): no queued work on any stream still uses the rewound blocks
 *   (synchronise every stream that used them first).
 * Units: *out_mark an id unique in the arena; *out_released_count (may be
 *   NULL) the live blocks freed.
 * Thread-safe: yes. Stream/device: no CUDA call, no upstream call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena or out_mark NULL, or `mark`
 * is not a live mark of the uncaptured scope); GMR_ERR_UNSUPPORTED
 * (UNCAPTURED_FORWARD: the arena serves nothing there); GMR_ERR_OUT_OF_MEMORY
 * (host memory). On failure nothing changed (*out_mark is 0).
 * Source: AdaptiveArrayPools.jl's checkpoint!/rewind! of a task's own pool.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_checkpoint_uncaptured(
    gmr_graph_arena_resource *arena, uint64_t *out_mark);

/**
 * Rewind the uncaptured scope to `mark` (from
 * gmr_graph_arena_resource_checkpoint_uncaptured()): every block served
 * outside sessions since the mark is freed at once, whatever stream it was
 * allocated on, and later marks are dropped. For a caller that owns all the
 * streams it used (a scoped pool); gmr_graph_arena_resource_rewind() refuses
 * another stream's blocks instead.
 * pre: no queued work still uses the freed blocks.
 * Units: *out_released_count (may be NULL) receives the live blocks freed.
 * Thread-safe: yes. Stream/device: no CUDA call, no upstream call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena NULL, or `mark` is not a
 * live mark of the uncaptured scope); GMR_ERR_UNSUPPORTED
 * (UNCAPTURED_FORWARD); GMR_ERR_OUT_OF_MEMORY (host memory for the
 * bookkeeping). On failure nothing changed.
 * Source: AdaptiveArrayPools.jl's rewind! of a task's own pool.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_rewind_uncaptured(
    gmr_graph_arena_resource *arena, uint64_t mark, size_t *out_released_count);

/**
 * gmr_resource_allocate() on the arena that also returns the block's 64-bit id (the
 * BlockId of the C# CUDA graph memory pool spec; never 0, never reused in the arena's life). Zero
 * bytes gives *out_ptr NULL and *out_id 0, and so does nothing else: a request forwarded to the
 * upstream (UNCAPTURED_FORWARD, outside sessions) has no id (*out_id 0). `failure` may be NULL.
 *
 * Thread-safe: yes. Stream/device, Returns and state after failure: as
 *   gmr_resource_allocate_ex() on the arena; on failure *out_id is 0.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_allocate(gmr_graph_arena_resource *arena,
                                                                   size_t bytes, size_t alignment,
                                                                   gmr_stream stream,
                                                                   void **out_ptr, uint64_t *out_id,
                                                                   gmr_failure *failure);

/** A live block of the arena. */
typedef struct gmr_graph_arena_block_info {
  uint64_t id;
  void *ptr;
  size_t bytes;               /* as requested */
  size_t carved_bytes;        /* taken from the arena (rounded to the alignment) */
  gmr_stream stream;          /* the allocation's stream */
  gmr_graph_memory *memory;   /* graph memory it belongs to; NULL outside sessions
                                 or once that memory was released */
  bool captured;              /* allocated inside a session */
} gmr_graph_arena_block_info;

/**
 * Look up a live block by id (GetBlock of the C# CUDA graph memory pool
 * spec).
 * Thread-safe: yes (the arena's lock). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL argument);
 * GMR_ERR_UNKNOWN_POINTER (no live block has that id: never allocated,
 * freed, reset or rewound). On failure *out is zeroed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_get_block(
    gmr_graph_arena_resource *arena, uint64_t id, gmr_graph_arena_block_info *out);

/**
 * Look up the live block that starts at `ptr`.
 * Thread-safe: yes (the arena's lock). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL argument);
 * GMR_ERR_UNKNOWN_POINTER (no live block of the arena starts there: never
 * allocated, freed, reset, rewound, or forwarded to the upstream). On failure
 * *out is zeroed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_find_block(
    gmr_graph_arena_resource *arena, const void *ptr, gmr_graph_arena_block_info *out);

/**
 * Deallocate a live block by id on `stream` (ReturnBlock of the C# CUDA graph
 * memory pool spec), with the same meaning as gmr_resource_deallocate() of its pointer
 * and size.
 * Thread-safe: yes. Stream/device: as deallocate (no CUDA call).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena NULL); GMR_ERR_DOUBLE_FREE
 * (the arena gave out this id and its block is gone: freed, reset or
 * rewound); GMR_ERR_UNKNOWN_POINTER (an id the arena never gave out). On
 * failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_return_block(
    gmr_graph_arena_resource *arena, uint64_t id, gmr_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* GMR_GRAPH_ARENA_BLOCKS_H_ */
