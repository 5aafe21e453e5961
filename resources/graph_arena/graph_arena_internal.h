/*
 * resources/graph_arena/graph_arena_internal.h (internal): the data
 * structures of graph_arena_resource and the functions its files share. See
 * gmr/graph_arena_resource.h for the model. The files:
 *   graph_arena_resource.c  the resource: allocate/deallocate, destroy, trim,
 *                           create, reserve, stats, the public allocate
 *   graph_arena_sessions.c  capture sessions and graph memories, and telling
 *                           whether a stream captures
 *   graph_arena_carve.c     carving a request out of the free space or a
 *                           memory's reuse list
 *   graph_arena_rewind.c    checkpoint, rewind and reset
 *   graph_arena_chunks.c    chunks from the upstream
 *   graph_arena_share.c     sharing the upstream's memory (UNCAPTURED_FORWARD):
 *                           its free blocks taken at a capture's start, idle
 *                           chunks given back
 *   graph_arena_blocks.c    the block table: ids, pointers, block info
 *   graph_arena_streams.c   record_stream: captured blocks used on other
 *                           streams, whose reuse waits for the capture's end
 *   graph_arena_restore.c   allocating at a given address in a graph memory
 *                           (restoring a checkpoint of its blocks)
 *   graph_arena_nvtx.c      NVTX regions of blocks (nvtx_annotate)
 *   graph_arena_extents.c   the address-ordered free ranges
 *
 * Thread-safe: no; the arena's lock guards everything below but the
 * counters marked atomic.
 * *
 * Bookkeeping, all under one lock:
 *  - chunks: what the arena holds from its upstream, sorted by address;
 *  - free: the free space, an address-ordered set of ranges (extents.h);
 *  - blocks: one slot per live allocation, found by id (the slot index and a
 *    generation number, so ids are never reused) or by pointer, through a
 *    per-chunk table with one entry per 256-byte granule (4 bytes of host
 *    memory per 256 bytes of arena, 1/64, touched only where blocks start:
 *    a hash map costs cache misses a capture's allocation cannot afford);
 *  - scopes: every carve is an entry in the list of its scope, the arena's
 *    uncaptured list ("open") or a graph memory's list. An entry is LIVE
 *    (its block is allocated), FREED (deallocated, bytes kept by the scope)
 *    or MOVED (bytes went to a reuse list or back to the free space).
 *    Lists are in allocation order, so a rewind mark is a list length.
 *  - sessions: a small table of streams that capture now.
 * A block whose graph memory was released is LOOSE: it belongs to no list
 * and its bytes go back to the free space when it is deallocated.
 * With nvtx_annotate, each chunk holds its NVTX heap and each entry says
 * whether its range has an NVTX region (the rules are in the header); every
 * LOOSE block has one.
 */
#ifndef GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_INTERNAL_H_
#define GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_INTERNAL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "stream_ordered/capture_reuse.h"
#include "util/spin_lock.h"
#include "gmr/graph_arena_resource.h"
#include "resources/graph_arena/graph_arena_extents.h"

/* Keeps a slow path out of its fast caller, whose prologue would otherwise
 * save every register the slow path uses (measured: about 20 instructions a
 * call). Only GCC and Clang understand it; elsewhere it is nothing. */
#if defined(__GNUC__)
#define GMR__GA_NOINLINE __attribute__((noinline))
#else
#define GMR__GA_NOINLINE
#endif

enum { GMR__GA_ENTRY_LIVE = 0, GMR__GA_ENTRY_FREED = 1, GMR__GA_ENTRY_MOVED = 2 };

enum { GMR__GA_SCOPE_NONE = 0, GMR__GA_SCOPE_OPEN, GMR__GA_SCOPE_MEMORY, GMR__GA_SCOPE_LOOSE };

#define GMR__GA_NO_SLOT UINT32_MAX

#define GMR__GA_NO_ENTRY SIZE_MAX

/* In a chunk's block_at table: a block started here and was freed (or reset,
 * rewound). Lets a free of that address say DOUBLE_FREE rather than
 * UNKNOWN_POINTER; a block carved here later overwrites it. */
#define GMR__GA_TOMBSTONE UINT32_MAX

typedef struct gmr__ga_entry {
  uintptr_t begin;
  uintptr_t end;
  uint64_t order; /* creation number of the chunk it lies in */
  uint32_t slot;  /* the block while LIVE */
  uint8_t state;
  bool region;    /* nvtx_annotate: an NVTX region starts at `begin` */
} gmr__ga_entry;

typedef struct gmr__ga_entries {
  gmr__ga_entry *items;
  size_t count;
  size_t capacity;
} gmr__ga_entries;

typedef struct gmr__ga_mark {
  uint64_t id;
  size_t height; /* entries in the scope's list when the mark was set */
} gmr__ga_mark;

typedef struct gmr__ga_marks {
  gmr__ga_mark *items;
  size_t count;
  size_t capacity;
} gmr__ga_marks;

/* record_stream streams a block remembers for its capture's free markers. */
#define GMR__GA_USES 4

typedef struct gmr__ga_block {
  uintptr_t addr;
  size_t bytes;        /* as requested */
  size_t carved_bytes; /* rounded to the arena's alignment */
  size_t alignment;    /* as requested (the dispatch made 0 the default): a free must match */
  gmr_stream stream;
  gmr_graph_memory *memory; /* GMR__GA_SCOPE_MEMORY only */
  size_t entry;             /* index in the scope's list; GMR__GA_NO_ENTRY when LOOSE */
  uint64_t order;           /* creation number of its chunk */
  uint32_t generation;      /* part of the id; bumped when the slot is reused */
  uint32_t next_free;       /* free-slot list */
  uint8_t scope;
  bool captured;
  bool recorded; /* used on another stream too (record_stream): see graph_arena_streams.c */
  uint8_t use_count; /* those streams, while they fit (GMR__GA_USES); more: uses_overflow */
  bool uses_overflow;
  gmr_stream uses[GMR__GA_USES];
} gmr__ga_block;

/* Where a chunk came from. Trim keeps INITIAL chunks; sharing with the
 * upstream (UNCAPTURED_FORWARD) gives back GROWN and ADOPTED ones when they
 * are wholly free, and keeps what the caller asked for (INITIAL, RESERVED). */
enum {
  GMR__GA_CHUNK_INITIAL = 0,  /* initial_capacity_bytes, at create */
  GMR__GA_CHUNK_RESERVED = 1, /* gmr_graph_arena_resource_reserve */
  GMR__GA_CHUNK_GROWN = 2,    /* growth for a request that did not fit */
  GMR__GA_CHUNK_ADOPTED = 3   /* a free block of the upstream, at a capture's start */
};

/* Block addresses are multiples of 256: one table entry per 256 bytes. */
#define GMR__GA_GRANULE_SHIFT 8

typedef struct gmr__ga_chunk {
  uintptr_t base;
  size_t bytes;
  uint64_t order;     /* creation number: the search order of the free space */
  uint32_t *block_at; /* per granule: 1 + slot of the live block starting there,
                         GMR__GA_TOMBSTONE where a freed one started, or 0 */
  uint8_t origin;     /* GMR__GA_CHUNK_*: which chunks trim and sharing give back */
  void *nvtx_heap;    /* nvtx_annotate: the chunk's NVTX heap (may be NULL) */
} gmr__ga_chunk;

typedef struct gmr__ga_session gmr__ga_session;

/* A block of a graph memory that was used on other streams (record_stream)
 * and freed while a session appended to the memory: entry `entry` (FREED)
 * waits for the session's end, when the capture has joined those streams. */
typedef struct gmr__ga_deferred {
  size_t entry;
  gmr_stream stream; /* the stream it was freed on: its reuse tag */
  gmr__capture_markers markers; /* capture_id 0: waits for the session's end */
} gmr__ga_deferred;

struct gmr_graph_memory {
  gmr_graph_arena_resource *arena;
  gmr__ga_entries entries;
  gmr__extent_set reuse; /* ORDERED_REUSE: bytes freed in capture, tagged by stream */
  gmr__ga_deferred *deferred; /* frees waiting for the session's end */
  size_t deferred_count;
  size_t deferred_capacity;
  gmr__ga_session *session;   /* the session appending now, or NULL */
  gmr_stream last_stream;
  uint32_t references;
  bool unclaimed; /* an automatic session ended and nobody took the memory */
  size_t held_bytes;
  size_t live_bytes;
  size_t live_count;
  uint64_t allocation_count;
  uint64_t session_count;
};

struct gmr__ga_session {
  gmr_stream stream;
  gmr_graph_memory *memory;
  unsigned long long capture_id; /* automatic sessions; 0 for explicit ones */
  bool explicit_session;
  gmr__extent_pos cursor; /* next-fit position in the free space */
  /* The free range the cursor is in, valid while the free space's version
   * is hint_version: the fast path carves from it without searching. */
  size_t hint;
  uint64_t hint_version;
  gmr__ga_chunk *chunk; /* its chunk, valid with the hint (growth moves chunks) */
  size_t first_entry;
  gmr__ga_marks marks;
  bool refused;
  bool upstream_cannot;   /* the upstream could not allocate during this capture */
  const char *cannot_name; /* the type of the resource that could not (static) */
  size_t shortfall_bytes; /* bytes asked since the first refusal */
};

struct gmr_graph_arena_resource {
  gmr_resource base; /* first: usable as a gmr_resource */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_graph_arena_resource_config cfg;
  gmr__spin_lock lock; /* a few dozen instructions are held under it */

  gmr__ga_chunk *chunks;
  size_t chunk_count;
  size_t chunk_capacity;
  size_t held_bytes;
  size_t peak_held_bytes;
  uint64_t next_chunk_order;

  gmr__extent_set free;

  gmr__ga_block *blocks;
  gmr__capture_walks capture_walks; /* record_stream reuse inside captures */
  uint32_t block_count; /* slots ever used */
  uint32_t block_capacity;
  uint32_t free_slot;
  size_t chunk_hint; /* the chunk the last lookup found */

  gmr__ga_session **sessions;
  size_t session_count;
  size_t session_capacity;
  gmr_graph_memory **memories;
  size_t memory_count;
  size_t memory_capacity;

  gmr__ga_entries open;
  gmr__ga_marks open_marks;
  /* The entry list of the last released memory, kept for the next one so a
   * capture repeated every iteration does not grow a list again each time. */
  gmr__ga_entries spare_entries;
  uint64_t next_mark_id;

  /* Read without the lock on the allocation and free paths. */
  _Atomic size_t explicit_session_count;
  _Atomic size_t open_session_count;
  _Atomic uintptr_t chunks_begin; /* lowest chunk address (UINTPTR_MAX: no chunk) */
  _Atomic uintptr_t chunks_end;   /* end of the highest chunk */

  /* Under the lock. */
  size_t peak_in_use_bytes;
  size_t live_bytes;
  size_t peak_live_bytes;
  size_t live_count;
  uint64_t allocation_count;
  uint64_t capture_allocation_count;
  uint64_t capture_refusal_count;
  size_t capture_shortfall_bytes;

  uint64_t chunk_call_count;        /* upstream calls for chunks */
  uint64_t capture_growth_count;    /* chunks taken through allocate_capturing */
  uint64_t chunk_call_in_session_count; /* of those, for a stream in a session */
  uint64_t adopted_chunk_count;     /* free blocks of the upstream taken (sharing) */
  size_t adopted_bytes;
  uint64_t returned_chunk_count;    /* idle chunks given back (sharing) */
  size_t returned_bytes;

  /* Forwarded traffic (UNCAPTURED_FORWARD), outside the lock: one atomic add
   * per call, on a cache line of its own so that threads forwarding at once
   * do not also contend for the lock's line. live = allocations - frees. */
  _Alignas(64) _Atomic uint64_t forwarded_allocation_count; /* successful */
  _Atomic uint64_t forwarded_free_count;                    /* successful */
  _Atomic uint64_t forwarded_failure_count; /* upstream calls that failed */
  _Atomic uint64_t upstream_call_during_capture_count;
};

typedef struct gmr__ga_carve_request {
  size_t bytes;               /* as asked */
  size_t carved_bytes;        /* rounded to the arena's alignment */
  size_t alignment;           /* at least the arena's alignment */
  size_t requested_alignment; /* as asked (0: the default), for the upstream */
  gmr_stream stream;
} gmr__ga_carve_request;

/* A spin lock: one atomic exchange to take, one store to give back, where a
 * mutex costs two read-modify-writes and the 20 ns budget of an allocation in
 * capture has room for one. Waiters yield the CPU, so a holder that calls the
 * upstream (growth, trim, destroy: never during capture) does not starve them. */
static inline void gmr__ga_lock(gmr_graph_arena_resource *a) { gmr__spin_lock_acquire(&a->lock); }
static inline void gmr__ga_unlock(gmr_graph_arena_resource *a) { gmr__spin_lock_release(&a->lock); }

/* Bytes of the arena's capacity that are not in its free space. */
static inline size_t gmr__ga_in_use_bytes(const gmr_graph_arena_resource *a) {
  return a->held_bytes - a->free.total_bytes;
}

/* ---- graph_arena_resource.c ---- */
/* Grow a dynamic array to hold `need` items of `size` bytes. */
bool gmr__ga_ensure(void **items, size_t *capacity, size_t need, size_t size);
/* Free block `slot` deallocated on `stream`. Lock held. Fails only for lack
 * of host memory, changing nothing. */
gmr_status gmr__ga_free_block(gmr_graph_arena_resource *a, uint32_t slot, gmr_stream stream);

/* ---- graph_arena_chunks.c ---- */
/* The chunk holding `addr` (chunks are sorted by address), or NULL. */
gmr__ga_chunk *gmr__ga_chunk_of(gmr_graph_arena_resource *a, uintptr_t addr);
/* Count an upstream call made with the lock not held (forwarding): only
 * the calls made while a session is open need a count of their own. */
static inline void gmr__ga_count_upstream_call(gmr_graph_arena_resource *a) {
  if (atomic_load_explicit(&a->open_session_count, memory_order_relaxed) > 0) {
    atomic_fetch_add_explicit(&a->upstream_call_during_capture_count, 1, memory_order_relaxed);
  }
}
/* How a chunk is taken from the upstream. */
typedef enum gmr__ga_growth {
  GMR__GA_GROW_PLAIN = 0,     /* gmr_resource_allocate_ex: no capture of ours is open */
  GMR__GA_GROW_CAPTURING = 1, /* gmr_resource_allocate_capturing: a capture is open */
} gmr__ga_growth;
/* Take a chunk of `bytes` from the upstream for use on `stream` and add it to
 * the free space, with `origin` (GMR__GA_CHUNK_*). Lock held. The caller
 * reserved room in `free`; this reserves room in `chunks` before calling the
 * upstream. */
gmr_status gmr__ga_add_chunk(gmr_graph_arena_resource *a, size_t bytes, uint8_t origin,
                             gmr__ga_growth growth, gmr_stream stream, gmr_failure *failure);
/* Bytes and ranges of the free space, and its largest range. Lock held. */
void gmr__ga_describe_free(const gmr_graph_arena_resource *a, size_t *free_bytes,
                           size_t *largest_bytes, size_t *count);
/* Fill the failure record's free figures with the arena's. Lock held. */
void gmr__ga_note_free_info(const gmr_graph_arena_resource *a, gmr_failure *failure);
/* Give chunk `index` back upstream, deallocated on `stream`, if it is wholly
 * free. Lock held. */
gmr_status gmr__ga_release_chunk(gmr_graph_arena_resource *a, size_t index, gmr_stream stream,
                                 bool *released);

/* ---- graph_arena_share.c ---- */
/* The arena shares its upstream's memory: UNCAPTURED_FORWARD (the graph pool),
 * where it serves captures only and the upstream everything else. */
static inline bool gmr__ga_shares_upstream(const gmr_graph_arena_resource *a) {
  return a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
}
/* Before a capture on `stream` starts: take the upstream's free blocks,
 * largest first, as chunks, never making it grow. Does nothing unless the
 * arena shares its upstream, may grow (chunk_bytes > 0), has no session open
 * and `stream` does not capture. Lock held. Returns the chunks taken. */
size_t gmr__ga_adopt_upstream_free(gmr_graph_arena_resource *a, gmr_stream stream);
/* Give every wholly free GROWN or ADOPTED chunk back to the upstream,
 * deallocated on `stream` (NULL: the default stream), when the arena shares
 * its upstream, no session is open and `stream` does not capture. Lock held. */
void gmr__ga_return_idle_chunks(gmr_graph_arena_resource *a, gmr_stream stream);

/* ---- graph_arena_blocks.c ---- */
uint64_t gmr__ga_block_id(const gmr_graph_arena_resource *a, uint32_t slot);
/* Make sure one more slot and one more pointer entry can be had without
 * failing. */
bool gmr__ga_blocks_reserve(gmr_graph_arena_resource *a);
uint32_t gmr__ga_take_slot(gmr_graph_arena_resource *a);
/* The block is gone: forget its pointer, retire its id, update the counts. */
void gmr__ga_drop_block(gmr_graph_arena_resource *a, uint32_t slot);
bool gmr__ga_lookup_ptr(gmr_graph_arena_resource *a, const void *ptr, uint32_t *out_slot);

/* ---- graph_arena_nvtx.c ---- */
/* Describe [addr, addr + bytes), inside a chunk, as a block to the tool. */
void gmr__ga_region_add(gmr_graph_arena_resource *a, uintptr_t addr, size_t bytes);
/* Entry `e` goes to a reuse list: later blocks of the capture may be carved
 * anywhere in its range, rounding included, while the graph's earlier nodes
 * still touch it, so its region grows to the whole range. */
void gmr__ga_region_widen(gmr_graph_arena_resource *a, gmr__ga_entry *e);

/* ---- graph_arena_streams.c ---- */
/* The record_stream slot. */
gmr_status gmr__ga_record_stream(gmr_resource *self, void *ptr, gmr_stream stream);
/* The captured block `b` (entry `entry` of memory `m`), used on other
 * streams, is freed on `stream`: its bytes wait until `stream`'s next work in
 * the capture comes after every use (its free markers), or for the end of
 * the session appending to `m`; with none open they stay with `m` until it
 * is released. Lock held. */
void gmr__ga_defer_free(gmr_graph_arena_resource *a, gmr_graph_memory *m, const gmr__ga_block *b,
                        size_t entry, gmr_stream stream);
/* Deferred frees of `m` on `stream` whose markers come before its next work
 * become reusable (ordered reuse). Lock held. */
void gmr__ga_reuse_joined(gmr_graph_arena_resource *a, gmr_graph_memory *m, gmr_stream stream);
/* The session appending to `m` ends: deferred frees become reusable (ordered
 * reuse) or stay with the memory (monotone). Lock held. */
void gmr__ga_settle_deferred(gmr_graph_arena_resource *a, gmr_graph_memory *m);
/* Free the deferred list's markers (the memory goes). */
void gmr__ga_deferred_free(gmr_graph_memory *m);

/* ---- graph_arena_sessions.c ---- */
gmr__ga_session *gmr__ga_find_session(const gmr_graph_arena_resource *a, gmr_stream stream);
/* Whether `m` is a graph memory of `a` not yet released. Lock held. */
bool gmr__ga_memory_known(const gmr_graph_arena_resource *a, const gmr_graph_memory *m);
/* The extents a memory gives back when it is released: its FREED entries and
 * its reuse list. */
size_t gmr__ga_memory_returnable_count(const gmr_graph_memory *m);
/* Return a released memory's bytes. `scratch` has room for
 * gmr__ga_memory_returnable_count(m) extents and the free space for as many more. */
void gmr__ga_dissolve_memory(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                             gmr__extent *scratch);
/* Hints raised by the calling thread (gmr_graph_arena_resource_thread_hint_enter). */
extern _Thread_local unsigned gmr__ga_thread_hint_count;

/* The allocation and free paths' first test, inline: no session is open and
 * the detection mode would not ask CUDA, so no request can be in a capture
 * the arena serves. Two loads; no lock, no call. */
static inline bool gmr__ga_no_capture_possible(const gmr_graph_arena_resource *a) {
  if (atomic_load_explicit(&((gmr_graph_arena_resource *)a)->open_session_count,
                           memory_order_relaxed) != 0) {
    return false;
  }
  return a->cfg.detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT ||
         (a->cfg.detection == GMR_GRAPH_ARENA_DETECT_HINTED && gmr__ga_thread_hint_count == 0);
}

/* Find the session of `stream`, asking CUDA only when the detection mode
 * says it can matter. On GMR_OK with *out not NULL the lock is held; with
 * *out NULL it is not. On failure the lock is not held. `failure` may be
 * NULL. */
gmr_status gmr__ga_resolve(gmr_graph_arena_resource *a, gmr_stream stream, gmr__ga_session **out,
                           gmr_failure *failure);
/* gmr__ga_resolve() that holds the lock on GMR_OK, session or not. */
gmr_status gmr__ga_resolve_locked(gmr_graph_arena_resource *a, gmr_stream stream,
                                  gmr__ga_session **out, gmr_failure *failure);
/* The chunks moved (growth): no session may use its cached chunk pointer. */
void gmr__ga_forget_hints(gmr_graph_arena_resource *a);

/* ---- graph_arena_carve.c ---- */
/* Record a carved block of memory `m` (NULL: the uncaptured scope) in its
 * list and the block table, with an NVTX region of the bytes asked for when
 * `region`. Lock held; everything it needs was reserved. Returns the slot. */
uint32_t gmr__ga_register_block(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                                gmr__ga_chunk *c, uintptr_t addr, uint64_t order,
                                const gmr__ga_carve_request *rq, bool region);
/* Serve a request in session `s`. Lock held. */
gmr_status gmr__ga_serve_in_session(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                    const gmr__ga_carve_request *rq, void **out_ptr,
                                    uint64_t *out_id, gmr_failure *failure);
/* Serve a request outside sessions from the arena, growing it if needed;
 * `capturing`: its stream captures all the same (allocate_capturing), so
 * growth goes through the upstream's allocate_capturing. Lock held. */
gmr_status gmr__ga_serve_uncaptured(gmr_graph_arena_resource *a, const gmr__ga_carve_request *rq,
                                    bool capturing, void **out_ptr, uint64_t *out_id,
                                    gmr_failure *failure);

/* ---- graph_arena_rewind.c ---- */
/* Put every extent of the uncaptured list back in the free space and drop its
 * live blocks. `scratch` and the free space have room for a->open.count. */
size_t gmr__ga_clear_open_from(gmr_graph_arena_resource *a, size_t height, gmr__extent *scratch);

#endif /* GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_INTERNAL_H_ */
