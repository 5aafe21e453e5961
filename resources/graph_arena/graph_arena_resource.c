/*
 * resources/graph_arena/graph_arena_resource.c: the graph arena. See
 * gmr/graph_arena_resource.h for the model.
 *
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
/* sched_yield() is POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include "gmr/graph_arena_resource.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_extents.h"

/* ---- types --------------------------------------------------------------- */

enum { ENTRY_LIVE = 0, ENTRY_FREED = 1, ENTRY_MOVED = 2 };
enum { SCOPE_NONE = 0, SCOPE_OPEN, SCOPE_MEMORY, SCOPE_LOOSE };

#define NO_SLOT UINT32_MAX
#define NO_ENTRY SIZE_MAX

typedef struct ga_entry {
  uintptr_t begin;
  uintptr_t end;
  uint64_t order; /* creation number of the chunk it lies in */
  uint32_t slot;  /* the block while LIVE */
  uint8_t state;
  bool region;    /* nvtx_annotate: an NVTX region starts at `begin` */
} ga_entry;

typedef struct ga_entries {
  ga_entry *items;
  size_t count;
  size_t capacity;
} ga_entries;

typedef struct ga_mark {
  uint64_t id;
  size_t height; /* entries in the scope's list when the mark was set */
} ga_mark;

typedef struct ga_marks {
  ga_mark *items;
  size_t count;
  size_t capacity;
} ga_marks;

typedef struct ga_block {
  uintptr_t addr;
  size_t bytes;        /* as requested */
  size_t carved_bytes; /* rounded to the arena's alignment */
  gmr_stream stream;
  gmr_graph_memory *memory; /* SCOPE_MEMORY only */
  size_t entry;             /* index in the scope's list; NO_ENTRY when LOOSE */
  uint64_t order;           /* creation number of its chunk */
  uint32_t generation;      /* part of the id; bumped when the slot is reused */
  uint32_t next_free;       /* free-slot list */
  uint8_t scope;
  bool captured;
} ga_block;

/* Block addresses are multiples of 256: one table entry per 256 bytes. */
#define GRANULE_SHIFT 8

typedef struct ga_chunk {
  uintptr_t base;
  size_t bytes;
  uint64_t order;     /* creation number: the search order of the free space */
  uint32_t *block_at; /* per granule: 1 + slot of the live block starting there, or 0 */
  bool initial;       /* taken at create: trim keeps it */
  void *nvtx_heap;    /* nvtx_annotate: the chunk's NVTX heap (may be NULL) */
} ga_chunk;

typedef struct ga_session ga_session;

struct gmr_graph_memory {
  gmr_graph_arena_resource *arena;
  ga_entries entries;
  gmr__extent_set reuse; /* ORDERED_REUSE: bytes freed in capture, tagged by stream */
  ga_session *session;   /* the session appending now, or NULL */
  gmr_stream last_stream;
  uint32_t references;
  bool unclaimed; /* an automatic session ended and nobody took the memory */
  size_t held_bytes;
  size_t live_bytes;
  size_t live_count;
  uint64_t allocation_count;
  uint64_t session_count;
};

struct ga_session {
  gmr_stream stream;
  gmr_graph_memory *memory;
  unsigned long long capture_id; /* automatic sessions; 0 for explicit ones */
  bool explicit_session;
  gmr__extent_pos cursor; /* next-fit position in the free space */
  /* The free range the cursor is in, valid while the free space's version
   * is hint_version: the fast path carves from it without searching. */
  size_t hint;
  uint64_t hint_version;
  ga_chunk *chunk; /* its chunk (chunks do not move while a session is open) */
  size_t first_entry;
  ga_marks marks;
  bool refused;
  size_t shortfall_bytes; /* bytes asked since the first refusal */
};

struct gmr_graph_arena_resource {
  gmr_resource base; /* first: usable as a gmr_resource */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_graph_arena_config cfg;
  atomic_flag busy; /* the lock: a few dozen instructions are held under it */

  ga_chunk *chunks;
  size_t chunk_count;
  size_t chunk_capacity;
  size_t capacity_bytes;
  size_t peak_capacity_bytes;
  uint64_t next_chunk_order;

  gmr__extent_set free;

  ga_block *blocks;
  uint32_t block_count; /* slots ever used */
  uint32_t block_capacity;
  uint32_t free_slot;
  size_t chunk_hint; /* the chunk the last lookup found */

  ga_session **sessions;
  size_t session_count;
  size_t session_capacity;
  gmr_graph_memory **memories;
  size_t memory_count;
  size_t memory_capacity;

  ga_entries open;
  ga_marks open_marks;
  /* The entry list of the last released memory, kept for the next one so a
   * capture repeated every iteration does not grow a list again each time. */
  ga_entries spare_entries;
  uint64_t next_mark_id;

  /* Read without the lock on the allocation path. */
  _Atomic size_t explicit_session_count;
  _Atomic size_t open_session_count;

  /* Under the lock. */
  size_t peak_in_use_bytes;
  size_t live_bytes;
  size_t peak_live_bytes;
  size_t live_count;
  uint64_t allocation_count;
  uint64_t capture_allocation_count;
  uint64_t capture_refusal_count;
  size_t capture_shortfall_bytes;

  /* Upstream traffic, partly outside the lock. */
  _Atomic uint64_t forwarded_allocation_count;
  _Atomic size_t forwarded_live_count;
  _Atomic uint64_t upstream_call_count;
  _Atomic uint64_t upstream_calls_during_capture;
};

static const gmr_resource_vtbl graph_arena_vtbl;

/* A spin lock: one atomic exchange to take, one store to give back, where a
 * mutex costs two read-modify-writes and the 20 ns budget of an allocation in
 * capture has room for one. Waiters yield the CPU, so a holder that calls the
 * upstream (growth, trim, destroy: never during capture) does not starve them. */
static void lock(gmr_graph_arena_resource *a) {
  while (atomic_flag_test_and_set_explicit(&a->busy, memory_order_acquire)) {
    sched_yield();
  }
}

static void unlock(gmr_graph_arena_resource *a) {
  atomic_flag_clear_explicit(&a->busy, memory_order_release);
}

/* ---- small helpers ------------------------------------------------------- */

/* Grow a dynamic array to hold `need` items of `size` bytes. */
static bool ensure(void **items, size_t *capacity, size_t need, size_t size) {
  if (need <= *capacity) return true;
  size_t cap = *capacity < 8 ? 8 : *capacity;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return false;
    cap *= 2;
  }
  if (cap > SIZE_MAX / size) return false;
  void *p = realloc(*items, cap * size);
  if (p == NULL) return false;
  *items = p;
  *capacity = cap;
  return true;
}

static bool entries_reserve(ga_entries *e, size_t extra) {
  return ensure((void **)&e->items, &e->capacity, e->count + extra, sizeof *e->items);
}

static bool marks_reserve(ga_marks *m) {
  return ensure((void **)&m->items, &m->capacity, m->count + 1, sizeof *m->items);
}

/* "12.0 MiB", "3.5 KiB", "100 bytes": for messages people read. */
static void format_bytes(char *buf, size_t len, size_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%zu bytes", bytes);
    return;
  }
  double v = (double)bytes / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* The chunk holding `addr` (chunks are sorted by address), or NULL. */
static ga_chunk *chunk_of(gmr_graph_arena_resource *a, uintptr_t addr) {
  if (a->chunk_hint < a->chunk_count) {
    ga_chunk *c = &a->chunks[a->chunk_hint];
    if (addr >= c->base && addr - c->base < c->bytes) return c;
  }
  size_t lo = 0, hi = a->chunk_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->chunks[mid].base + a->chunks[mid].bytes <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < a->chunk_count && addr >= a->chunks[lo].base) {
    a->chunk_hint = lo;
    return &a->chunks[lo];
  }
  return NULL;
}

/* ---- NVTX regions (nvtx_annotate only; the rules are in the header) ------- */

/* Describe [addr, addr + bytes), inside a chunk, as a block to the tool. */
static void region_add(gmr_graph_arena_resource *a, uintptr_t addr, size_t bytes) {
  gmr__nvtx_mem_region_register(chunk_of(a, addr)->nvtx_heap, (void *)addr, bytes);
}

/* Entry `e` goes to a reuse list: later blocks of the capture may be carved
 * anywhere in its range, rounding included, while the graph's earlier nodes
 * still touch it, so its region grows to the whole range. */
static void region_widen(gmr_graph_arena_resource *a, ga_entry *e) {
  if (!e->region) return;
  gmr__nvtx_mem_region_unregister((void *)e->begin);
  region_add(a, e->begin, e->end - e->begin);
}

static size_t in_use_bytes(const gmr_graph_arena_resource *a) {
  return a->capacity_bytes - a->free.total_bytes;
}

static void note_in_use(gmr_graph_arena_resource *a) {
  size_t now = in_use_bytes(a);
  if (now > a->peak_in_use_bytes) a->peak_in_use_bytes = now;
}

static void count_upstream_call(gmr_graph_arena_resource *a) {
  atomic_fetch_add_explicit(&a->upstream_call_count, 1, memory_order_relaxed);
  if (atomic_load_explicit(&a->open_session_count, memory_order_relaxed) > 0) {
    atomic_fetch_add_explicit(&a->upstream_calls_during_capture, 1, memory_order_relaxed);
  }
}

/* ---- blocks --------------------------------------------------------------- */

static uint64_t block_id(const gmr_graph_arena_resource *a, uint32_t slot) {
  return ((uint64_t)a->blocks[slot].generation << 32) | slot;
}

/* Make sure one more slot and one more pointer entry can be had without
 * failing. */
static bool blocks_reserve(gmr_graph_arena_resource *a) {
  if (a->free_slot == NO_SLOT && a->block_count == a->block_capacity) {
    if (a->block_capacity >= NO_SLOT / 2) return false;
    uint32_t cap = a->block_capacity < 64 ? 64 : a->block_capacity * 2;
    ga_block *b = realloc(a->blocks, (size_t)cap * sizeof *b);
    if (b == NULL) return false;
    a->blocks = b;
    a->block_capacity = cap;
  }
  return true;
}

static uint32_t take_slot(gmr_graph_arena_resource *a) {
  uint32_t slot;
  if (a->free_slot != NO_SLOT) {
    slot = a->free_slot;
    a->free_slot = a->blocks[slot].next_free;
  } else {
    slot = a->block_count++;
    a->blocks[slot].generation = 1;
  }
  return slot;
}

/* The block is gone: forget its pointer, retire its id, update the counts. */
static void drop_block(gmr_graph_arena_resource *a, uint32_t slot) {
  ga_block *b = &a->blocks[slot];
  ga_chunk *c = chunk_of(a, b->addr);
  c->block_at[(b->addr - c->base) >> GRANULE_SHIFT] = 0;
  a->live_bytes -= b->carved_bytes;
  a->live_count--;
  if (b->scope == SCOPE_MEMORY) {
    b->memory->live_bytes -= b->carved_bytes;
    b->memory->live_count--;
  }
  b->scope = SCOPE_NONE;
  b->memory = NULL;
  b->generation = b->generation == UINT32_MAX ? 1 : b->generation + 1;
  b->next_free = a->free_slot;
  a->free_slot = slot;
}

static bool lookup_id(const gmr_graph_arena_resource *a, uint64_t id, uint32_t *out_slot) {
  uint32_t slot = (uint32_t)(id & 0xffffffffu);
  uint32_t generation = (uint32_t)(id >> 32);
  if (generation == 0 || slot >= a->block_count) return false;
  const ga_block *b = &a->blocks[slot];
  if (b->scope == SCOPE_NONE || b->generation != generation) return false;
  *out_slot = slot;
  return true;
}

static bool lookup_ptr(gmr_graph_arena_resource *a, const void *ptr, uint32_t *out_slot) {
  uintptr_t addr = (uintptr_t)ptr;
  ga_chunk *c = chunk_of(a, addr);
  if (c == NULL || ((addr - c->base) & ((1u << GRANULE_SHIFT) - 1)) != 0) return false;
  uint32_t v = c->block_at[(addr - c->base) >> GRANULE_SHIFT];
  if (v == 0 || a->blocks[v - 1].addr != addr) return false;
  *out_slot = v - 1;
  return true;
}

static void fill_block_info(const gmr_graph_arena_resource *a, uint32_t slot,
                            gmr_graph_arena_block_info *out) {
  const ga_block *b = &a->blocks[slot];
  out->id = block_id(a, slot);
  out->ptr = (void *)b->addr;
  out->bytes = b->bytes;
  out->carved_bytes = b->carved_bytes;
  out->stream = b->stream;
  out->memory = b->scope == SCOPE_MEMORY ? b->memory : NULL;
  out->captured = b->captured;
}

/* ---- chunks ---------------------------------------------------------------- */

/* The NVTX heap name of a chunk, for the tool's reports. */
#define CHUNK_NAME "graph_arena_resource chunk"

/* Take a chunk of `bytes` from the upstream and add it to the free space.
 * Called with the lock held, outside any session. The caller reserved room
 * in `free`; this reserves room in `chunks` before calling the upstream. */
static gmr_status add_chunk(gmr_graph_arena_resource *a, size_t bytes, bool initial,
                            gmr_failure *failure) {
  size_t granules = (bytes >> GRANULE_SHIFT) + 1;
  uint32_t *block_at = NULL;
  if (!ensure((void **)&a->chunks, &a->chunk_capacity, a->chunk_count + 1, sizeof *a->chunks) ||
      (block_at = calloc(granules, sizeof *block_at)) == NULL) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  void *p = NULL;
  count_upstream_call(a);
  /* Default alignment: a cuda upstream gives 256 and refuses more; larger
   * request alignments are met inside the chunk. */
  gmr_status st = gmr_allocate_ex(a->upstream, bytes, 0, NULL, &p, failure);
  if (st != GMR_OK) {
    free(block_at);
    return st;
  }
  uintptr_t base = (uintptr_t)p;
  size_t i = a->chunk_count;
  while (i > 0 && a->chunks[i - 1].base > base) {
    a->chunks[i] = a->chunks[i - 1];
    i--;
  }
  uint64_t order = a->next_chunk_order++;
  void *heap = NULL;
  if (a->cfg.nvtx_annotate) heap = gmr__nvtx_mem_heap_register(p, bytes, CHUNK_NAME);
  a->chunks[i] = (ga_chunk){base, bytes, order, block_at, initial, heap};
  a->chunk_count++;
  a->capacity_bytes += bytes;
  if (a->capacity_bytes > a->peak_capacity_bytes) a->peak_capacity_bytes = a->capacity_bytes;
  gmr__extent_set_add(&a->free, (gmr__extent){base, base + bytes, 0, order});
  return GMR_OK;
}

/* Give chunk `index` back upstream if it is wholly free. */
static gmr_status release_chunk(gmr_graph_arena_resource *a, size_t index, bool *released) {
  ga_chunk c = a->chunks[index];
  *released = false;
  size_t e = gmr__extent_set_find_exact(&a->free, (gmr__extent){c.base, c.base + c.bytes, 0, c.order});
  if (e == SIZE_MAX) return GMR_OK;
  count_upstream_call(a);
  /* The heap goes before the memory: whoever gets the range next may
   * register it. A wholly free chunk has no region to keep. */
  if (a->cfg.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c.nvtx_heap);
  gmr_status st = gmr_deallocate(a->upstream, (void *)c.base, c.bytes, 0, NULL);
  if (st != GMR_OK) {
    /* It stays ours, still free, and is described again. */
    if (a->cfg.nvtx_annotate) {
      a->chunks[index].nvtx_heap = gmr__nvtx_mem_heap_register((void *)c.base, c.bytes, CHUNK_NAME);
    }
    return st;
  }
  gmr__extent_set_remove(&a->free, e);
  free(c.block_at);
  memmove(&a->chunks[index], &a->chunks[index + 1], (a->chunk_count - index - 1) * sizeof c);
  a->chunk_count--;
  a->capacity_bytes -= c.bytes;
  *released = true;
  return GMR_OK;
}

/* ---- graph memories and sessions ------------------------------------------- */

static bool memory_known(const gmr_graph_arena_resource *a, const gmr_graph_memory *m) {
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i] == m) return true;
  }
  return false;
}

static ga_session *find_session(const gmr_graph_arena_resource *a, gmr_stream stream) {
  for (size_t i = 0; i < a->session_count; ++i) {
    if (a->sessions[i]->stream == stream) return a->sessions[i];
  }
  return NULL;
}

/* Room for one more session and one more memory, so that opening a session
 * cannot fail half-way. */
static bool sessions_reserve(gmr_graph_arena_resource *a) {
  return ensure((void **)&a->sessions, &a->session_capacity, a->session_count + 1,
                sizeof *a->sessions) &&
         ensure((void **)&a->memories, &a->memory_capacity, a->memory_count + 1,
                sizeof *a->memories);
}

/* Open a session on `stream` appending to `share`, or to a new memory. */
static gmr_status open_session(gmr_graph_arena_resource *a, gmr_stream stream,
                               gmr_graph_memory *share, bool explicit_session,
                               unsigned long long capture_id, ga_session **out) {
  if (!sessions_reserve(a)) return GMR_ERR_OUT_OF_MEMORY;
  ga_session *s = calloc(1, sizeof *s);
  gmr_graph_memory *m = share;
  if (s == NULL || (m == NULL && (m = calloc(1, sizeof *m)) == NULL)) {
    free(s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (share == NULL) {
    m->arena = a;
    m->entries = a->spare_entries;
    a->spare_entries = (ga_entries){NULL, 0, 0};
    a->memories[a->memory_count++] = m;
  }
  m->session = s;
  m->last_stream = stream;
  m->session_count++;
  s->stream = stream;
  s->memory = m;
  s->capture_id = capture_id;
  s->explicit_session = explicit_session;
  s->first_entry = m->entries.count;
  a->sessions[a->session_count++] = s;
  atomic_fetch_add_explicit(&a->open_session_count, 1, memory_order_relaxed);
  if (explicit_session) atomic_fetch_add_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
  *out = s;
  return GMR_OK;
}

static void close_session(gmr_graph_arena_resource *a, ga_session *s) {
  for (size_t i = 0; i < a->session_count; ++i) {
    if (a->sessions[i] == s) {
      a->sessions[i] = a->sessions[--a->session_count];
      break;
    }
  }
  atomic_fetch_sub_explicit(&a->open_session_count, 1, memory_order_relaxed);
  if (s->explicit_session) {
    atomic_fetch_sub_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
  }
  s->memory->session = NULL;
  free(s->marks.items);
  free(s);
}

/* An automatic session whose capture is over: its memory waits to be claimed. */
static void end_automatic_session(gmr_graph_arena_resource *a, ga_session *s) {
  gmr_graph_memory *m = s->memory;
  close_session(a, s);
  if (m->references == 0) m->unclaimed = true;
}

/* The extents a memory gives back when it is released: its FREED entries and
 * its reuse list. */
static size_t memory_returnable_count(const gmr_graph_memory *m) {
  size_t n = m->reuse.count;
  for (size_t i = 0; i < m->entries.count; ++i) {
    if (m->entries.items[i].state == ENTRY_FREED) n++;
  }
  return n;
}

/* Return a released memory's bytes. `scratch` has room for
 * memory_returnable_count(m) extents and the free space for as many more. */
static void dissolve_memory(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                            gmr__extent *scratch) {
  size_t n = 0;
  /* The regions of bytes the memory gives back go first: a live block carved
   * from a reuse list lies inside them, and gets its own region below. */
  for (size_t i = 0; i < m->entries.count; ++i) {
    ga_entry *e = &m->entries.items[i];
    if (e->state != ENTRY_LIVE && e->region) {
      gmr__nvtx_mem_region_unregister((void *)e->begin);
      e->region = false;
    }
  }
  for (size_t i = 0; i < m->entries.count; ++i) {
    ga_entry *e = &m->entries.items[i];
    if (e->state == ENTRY_FREED) {
      scratch[n++] = (gmr__extent){e->begin, e->end, 0, e->order};
    } else if (e->state == ENTRY_LIVE) {
      /* Still allocated: its bytes come back when it is deallocated. */
      ga_block *b = &a->blocks[e->slot];
      b->scope = SCOPE_LOOSE;
      b->memory = NULL;
      b->entry = NO_ENTRY;
      if (a->cfg.nvtx_annotate && !e->region) region_add(a, b->addr, b->bytes);
    }
  }
  for (size_t i = 0; i < m->reuse.count; ++i) {
    scratch[n++] = m->reuse.items[i];
    scratch[n - 1].tag = 0;
  }
  gmr__extent_set_add_many(&a->free, scratch, n);
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i] == m) {
      memmove(&a->memories[i], &a->memories[i + 1], (a->memory_count - i - 1) * sizeof m);
      a->memory_count--;
      break;
    }
  }
  if (a->spare_entries.capacity < m->entries.capacity) {
    free(a->spare_entries.items);
    a->spare_entries = (ga_entries){m->entries.items, 0, m->entries.capacity};
  } else {
    free(m->entries.items);
  }
  gmr__extent_set_clear(&m->reuse);
  free(m);
}

/* Release `m` (no reference, no session) after reserving what it needs.
 * Returns GMR_ERR_OUT_OF_MEMORY, changing nothing, if host memory is short. */
static gmr_status release_memory_locked(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  size_t n = memory_returnable_count(m);
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  dissolve_memory(a, m, scratch);
  free(scratch);
  return GMR_OK;
}

/* ---- carving ------------------------------------------------------------------ */

typedef struct carve_request {
  size_t bytes;               /* as asked */
  size_t carved_bytes;        /* rounded to the arena's alignment */
  size_t alignment;           /* at least the arena's alignment */
  size_t requested_alignment; /* as asked (0: the default), for the upstream */
  gmr_stream stream;
} carve_request;

/* Bytes a fresh range must have for the request: chunks are only 256-byte
 * aligned, so a larger alignment may cost a gap in front. */
static size_t fresh_bytes_needed(const carve_request *rq) {
  return rq->carved_bytes + (rq->alignment - GMR_DEFAULT_ALIGNMENT);
}

/* Record a carved block in its scope and the block table, with an NVTX
 * region of the bytes asked for when `region`. Everything it needs was
 * reserved before. */
static uint32_t register_block(gmr_graph_arena_resource *a, ga_session *s, ga_chunk *c,
                               uintptr_t addr, uint64_t order, const carve_request *rq,
                               bool region) {
  uint32_t slot = take_slot(a);
  ga_block *b = &a->blocks[slot];
  ga_entries *list = s != NULL ? &s->memory->entries : &a->open;
  b->addr = addr;
  b->bytes = rq->bytes;
  b->carved_bytes = rq->carved_bytes;
  b->stream = rq->stream;
  b->captured = s != NULL;
  b->scope = s != NULL ? SCOPE_MEMORY : SCOPE_OPEN;
  b->memory = s != NULL ? s->memory : NULL;
  b->entry = list->count;
  b->order = order;
  list->items[list->count++] =
      (ga_entry){addr, addr + rq->carved_bytes, order, slot, ENTRY_LIVE, region};
  c->block_at[(addr - c->base) >> GRANULE_SHIFT] = slot + 1;
  if (region) gmr__nvtx_mem_region_register(c->nvtx_heap, (void *)addr, rq->bytes);
  a->live_bytes += rq->carved_bytes;
  a->live_count++;
  if (a->live_bytes > a->peak_live_bytes) a->peak_live_bytes = a->live_bytes;
  a->allocation_count++;
  if (s != NULL) {
    gmr_graph_memory *m = s->memory;
    m->live_bytes += rq->carved_bytes;
    m->live_count++;
    m->held_bytes += rq->carved_bytes;
    m->allocation_count++;
    a->capture_allocation_count++;
  }
  note_in_use(a);
  return slot;
}

/* Refuse a request in a session: nothing changes but the advice. */
static gmr_status refuse_in_session(gmr_graph_arena_resource *a, ga_session *s,
                                    const carve_request *rq, gmr_failure *failure) {
  /* From the first refusal on, every request of the capture would have to
   * come from new memory in a retry: their sum bounds what to reserve. */
  if (!s->refused) {
    s->refused = true;
    s->shortfall_bytes = 0;
  }
  size_t need = fresh_bytes_needed(rq);
  s->shortfall_bytes = s->shortfall_bytes > SIZE_MAX - need ? SIZE_MAX : s->shortfall_bytes + need;
  if (s->shortfall_bytes > a->capture_shortfall_bytes) {
    a->capture_shortfall_bytes = s->shortfall_bytes;
  }
  a->capture_refusal_count++;
  char more[32];
  format_bytes(more, sizeof more, s->shortfall_bytes);
  size_t total = a->capacity_bytes > SIZE_MAX - s->shortfall_bytes
                     ? SIZE_MAX
                     : a->capacity_bytes + s->shortfall_bytes;
  snprintf(failure->message, sizeof failure->message,
           "graph_arena: capture needs %s more; create the arena with "
           "initial_capacity_bytes >= %zu or call gmr_graph_arena_reserve(arena, %zu) before "
           "capture",
           more, total, total);
  return GMR_ERR_CAPTURE_UNSAFE;
}

/* The common case of a capture: the next bytes of the range the session is
 * in, at its front, with room left after. No search, nothing to reserve.
 * Returns false to take the general path. Lock held. */
static bool serve_fast(gmr_graph_arena_resource *a, ga_session *s, const carve_request *rq,
                       void **out_ptr, uint64_t *out_id) {
  gmr_graph_memory *m = s->memory;
  if (s->hint_version != a->free.version || s->hint >= a->free.count || s->refused ||
      m->entries.count == m->entries.capacity ||
      (a->free_slot == NO_SLOT && a->block_count == a->block_capacity)) {
    return false;
  }
  gmr__extent *e = &a->free.items[s->hint];
  if (e->order != s->cursor.order || e->begin < s->cursor.addr ||
      (e->begin & (rq->alignment - 1)) != 0 || e->end - e->begin <= rq->carved_bytes) {
    return false;
  }
  uintptr_t addr = e->begin;
  e->begin += rq->carved_bytes;
  a->free.total_bytes -= rq->carved_bytes;
  s->cursor.addr = e->begin;
  uint32_t slot = register_block(a, s, s->chunk, addr, e->order, rq, a->cfg.nvtx_annotate);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = block_id(a, slot);
  return true;
}

/* Serve a request in session `s`. Lock held. */
static gmr_status serve_in_session(gmr_graph_arena_resource *a, ga_session *s,
                                   const carve_request *rq, void **out_ptr, uint64_t *out_id,
                                   gmr_failure *failure) {
  gmr_graph_memory *m = s->memory;
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  /* Ordered reuse looks at the freed blocks first, so no fast path while it
   * has some. */
  if ((!reuse || m->reuse.count == 0) && serve_fast(a, s, rq, out_ptr, out_id)) return GMR_OK;
  if (!entries_reserve(&m->entries, 1) || !blocks_reserve(a) ||
      !gmr__extent_set_reserve(&a->free, 1) || (reuse && !gmr__extent_set_reserve(&m->reuse, 1))) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t index = 0;
  uintptr_t addr = 0;
  uint64_t order = 0;
  bool region = a->cfg.nvtx_annotate;
  /* Ordered reuse: a block freed earlier in this memory on this stream. */
  if (reuse && gmr__extent_set_best_fit(&m->reuse, rq->carved_bytes, rq->alignment,
                                        (uintptr_t)rq->stream, &index, &addr)) {
    region = false; /* inside the widened regions of the blocks it reuses */
    order = m->reuse.items[index].order;
    gmr__extent_set_carve(&m->reuse, index, addr, rq->carved_bytes);
    m->held_bytes -= rq->carved_bytes; /* register_block adds it back */
  } else {
    /* Next fit from the session's cursor: a binary search, then O(1) while
     * the range lasts. */
    if (!gmr__extent_set_next_fit(&a->free, s->cursor, true, rq->carved_bytes, rq->alignment, 0,
                                  &index, &addr)) {
      return refuse_in_session(a, s, rq, failure);
    }
    order = a->free.items[index].order;
    gmr__extent_set_carve(&a->free, index, addr, rq->carved_bytes);
    s->cursor = (gmr__extent_pos){order, addr + rq->carved_bytes};
    /* After the carve the range holding the cursor (if any is left) is
     * the first one ending after it. */
    s->hint = gmr__extent_set_lower_bound(&a->free, s->cursor);
    s->hint_version = a->free.version;
    s->chunk = chunk_of(a, addr);
  }
  if (s->refused) {
    /* A retry would serve this one from the reserved memory too. */
    size_t need = fresh_bytes_needed(rq);
    s->shortfall_bytes = s->shortfall_bytes > SIZE_MAX - need ? SIZE_MAX : s->shortfall_bytes + need;
  }
  uint32_t slot = register_block(a, s, chunk_of(a, addr), addr, order, rq, region);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = block_id(a, slot);
  return GMR_OK;
}

/* Serve an uncaptured request from the arena, growing it if needed. Lock held. */
static gmr_status serve_uncaptured(gmr_graph_arena_resource *a, const carve_request *rq,
                                   void **out_ptr, uint64_t *out_id, gmr_failure *failure) {
  /* Reserve everything first: growth + split may add two free ranges. */
  if (!entries_reserve(&a->open, 1) || !blocks_reserve(a) ||
      !gmr__extent_set_reserve(&a->free, 2)) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  const gmr__extent_pos start = {0, 0};
  size_t index = 0;
  uintptr_t addr = 0;
  if (!gmr__extent_set_next_fit(&a->free, start, false, rq->carved_bytes, rq->alignment, 0, &index,
                                &addr)) {
    size_t need = fresh_bytes_needed(rq);
    char needed[32];
    format_bytes(needed, sizeof needed, need);
    if (a->session_count > 0) {
      /* In CUDA's global capture mode a cudaMalloc from any thread breaks the
       * captures in progress: do not grow while one of ours is open. */
      a->capture_refusal_count++;
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: cannot grow by %s while a capture is open on another stream; call "
               "gmr_graph_arena_reserve() before capture",
               needed);
      return GMR_ERR_CAPTURE_UNSAFE;
    }
    if (a->cfg.chunk_bytes == 0) {
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: %s does not fit and growth is off (chunk_bytes is 0)", needed);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    size_t room = a->cfg.max_capacity_bytes - a->capacity_bytes;
    if (need > room) {
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: %s does not fit under max_capacity_bytes (%zu)", needed,
               a->cfg.max_capacity_bytes);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    size_t chunk = need > a->cfg.chunk_bytes ? need : a->cfg.chunk_bytes;
    if (chunk > room) chunk = room; /* still >= need */
    gmr_status st = add_chunk(a, chunk, false, failure);
    if (st != GMR_OK) return st;
    if (!gmr__extent_set_next_fit(&a->free, start, false, rq->carved_bytes, rq->alignment, 0,
                                  &index, &addr)) {
      return GMR_ERR_INTERNAL; /* a fresh chunk of `need` bytes always fits */
    }
  }
  uint64_t order = a->free.items[index].order;
  gmr__extent_set_carve(&a->free, index, addr, rq->carved_bytes);
  uint32_t slot = register_block(a, NULL, chunk_of(a, addr), addr, order, rq,
                                 a->cfg.nvtx_annotate);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = block_id(a, slot);
  return GMR_OK;
}

/* ---- capture detection ----------------------------------------------------------- */

/* Ask the CUDA layer whether `stream` captures (a capture-safe query). */
static gmr_status query_capture(const gmr_graph_arena_resource *a, gmr_stream stream,
                                bool *capturing, unsigned long long *id, gmr_failure *failure) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  cudaError_t err = a->cuda->stream_get_capture_info((cudaStream_t)stream, &status, &capture_id);
  if (err != cudaSuccess) {
    *capturing = false;
    *id = 0;
    return gmr__cuda_fail(failure, "cudaStreamGetCaptureInfo", err);
  }
  /* An invalidated capture is still a capture: nothing unsafe until it ends. */
  *capturing = status != cudaStreamCaptureStatusNone;
  *id = *capturing ? capture_id : 0;
  return GMR_OK;
}

/* Bring the session table in line with what CUDA said about `stream`; return
 * the session requests on `stream` belong to (NULL: none). Lock held. */
static gmr_status reconcile(gmr_graph_arena_resource *a, gmr_stream stream, bool capturing,
                            unsigned long long id, ga_session **out) {
  ga_session *s = find_session(a, stream);
  *out = NULL;
  if (s != NULL && s->explicit_session) {
    *out = s;
    return GMR_OK;
  }
  if (capturing && s != NULL && s->capture_id == id) {
    *out = s;
    return GMR_OK;
  }
  if (capturing) {
    /* Reserve first, so that ending the stale session cannot be followed by
     * a failure to open the new one. */
    if (!sessions_reserve(a)) return GMR_ERR_OUT_OF_MEMORY;
    if (s != NULL) end_automatic_session(a, s);
    return open_session(a, stream, NULL, false, id, out);
  }
  if (s != NULL) end_automatic_session(a, s);
  return GMR_OK;
}

/* Find the session of `stream`, asking CUDA when needed. On GMR_OK the lock
 * is held and *out is the session or NULL. On failure the lock is not held. */
static gmr_status resolve_locked(gmr_graph_arena_resource *a, gmr_stream stream, ga_session **out,
                                 gmr_failure *failure) {
  *out = NULL;
  if (atomic_load_explicit(&a->explicit_session_count, memory_order_relaxed) > 0 ||
      a->cfg.detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT) {
    lock(a);
    ga_session *s = find_session(a, stream);
    if (s != NULL && s->explicit_session) {
      *out = s;
      return GMR_OK;
    }
    if (a->cfg.detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT) return GMR_OK;
    unlock(a);
  }
  bool capturing = false;
  unsigned long long id = 0;
  gmr_status st = query_capture(a, stream, &capturing, &id, failure);
  if (st != GMR_OK) return st;
  lock(a);
  st = reconcile(a, stream, capturing, id, out);
  if (st != GMR_OK) {
    unlock(a);
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
  }
  return st;
}

/* ---- allocate / deallocate ----------------------------------------------------------- */

static gmr_status forward_allocate(gmr_graph_arena_resource *a, const carve_request *rq,
                                   void **out_ptr, gmr_failure *failure) {
  count_upstream_call(a);
  gmr_status st = gmr_allocate_ex(a->upstream, rq->bytes, rq->requested_alignment, rq->stream,
                                  out_ptr, failure);
  if (st == GMR_OK) {
    atomic_fetch_add_explicit(&a->forwarded_allocation_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->forwarded_live_count, 1, memory_order_relaxed);
  }
  return st;
}

static gmr_status arena_allocate_impl(gmr_graph_arena_resource *a, size_t bytes, size_t alignment,
                                      gmr_stream stream, void **out_ptr, uint64_t *out_id,
                                      gmr_failure *failure) {
  carve_request rq;
  rq.bytes = bytes;
  rq.alignment = alignment > a->cfg.alignment ? alignment : a->cfg.alignment;
  rq.carved_bytes = gmr__align_up(bytes, a->cfg.alignment);
  rq.requested_alignment = alignment;
  rq.stream = stream;
  if (rq.carved_bytes < bytes || rq.alignment > GMR_MAX_ALLOCATION_BYTES) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: request too large");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  ga_session *s = NULL;
  gmr_status st = resolve_locked(a, stream, &s, failure);
  if (st != GMR_OK) return st;
  if (s != NULL) {
    st = serve_in_session(a, s, &rq, out_ptr, out_id, failure);
    unlock(a);
    return st;
  }
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    unlock(a);
    if (out_id != NULL) *out_id = 0;
    return forward_allocate(a, &rq, out_ptr, failure);
  }
  st = serve_uncaptured(a, &rq, out_ptr, out_id, failure);
  unlock(a);
  return st;
}

static gmr_status arena_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return arena_allocate_impl((gmr_graph_arena_resource *)self, bytes, alignment, stream, out_ptr,
                             NULL, failure);
}

/* Free block `slot` deallocated on `stream`. Lock held. Fails only for lack
 * of host memory, changing nothing. */
static gmr_status free_block(gmr_graph_arena_resource *a, uint32_t slot, gmr_stream stream) {
  ga_block *b = &a->blocks[slot];
  if (b->scope == SCOPE_OPEN) {
    ga_entry *e = &a->open.items[b->entry];
    e->state = ENTRY_FREED; /* kept until reset or rewind */
    /* Freed in a capture, the block may still be touched by the graph's
     * replays: its region stays until its bytes come back. */
    if (e->region && find_session(a, stream) == NULL) {
      gmr__nvtx_mem_region_unregister((void *)e->begin);
      e->region = false;
    }
    drop_block(a, slot);
    return GMR_OK;
  }
  if (b->scope == SCOPE_LOOSE) {
    if (!gmr__extent_set_reserve(&a->free, 1)) return GMR_ERR_OUT_OF_MEMORY;
    gmr__extent_set_add(&a->free, (gmr__extent){b->addr, b->addr + b->carved_bytes, 0, b->order});
    if (a->cfg.nvtx_annotate) gmr__nvtx_mem_region_unregister((void *)b->addr);
    drop_block(a, slot);
    return GMR_OK;
  }
  /* A captured block: its region stays while the memory holds its bytes. */
  gmr_graph_memory *m = b->memory;
  ga_entry *e = &m->entries.items[b->entry];
  /* Ordered reuse: freed on the stream that is capturing into this memory,
   * the bytes may serve a later request of the same capture. */
  if (a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE && m->session != NULL &&
      m->session->stream == stream && gmr__extent_set_reserve(&m->reuse, 1)) {
    gmr__extent_set_add(&m->reuse, (gmr__extent){e->begin, e->end, (uintptr_t)stream, e->order});
    e->state = ENTRY_MOVED;
    region_widen(a, e);
  } else {
    e->state = ENTRY_FREED; /* kept with the memory until it is released */
  }
  drop_block(a, slot);
  return GMR_OK;
}

static gmr_status forward_deallocate(gmr_graph_arena_resource *a, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream) {
  ga_session *s = NULL;
  gmr_failure ignored;
  gmr_status st = resolve_locked(a, stream, &s, &ignored);
  if (st != GMR_OK) return st;
  unlock(a);
  /* Never call the upstream for a stream that captures: free it after. */
  if (s != NULL) return GMR_ERR_CAPTURE_UNSAFE;
  count_upstream_call(a);
  st = gmr_deallocate(a->upstream, ptr, bytes, alignment, stream);
  if (st == GMR_OK) atomic_fetch_sub_explicit(&a->forwarded_live_count, 1, memory_order_relaxed);
  return st;
}

static gmr_status arena_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  lock(a);
  uint32_t slot = 0;
  if (lookup_ptr(a, ptr, &slot)) {
    gmr_status st = a->blocks[slot].bytes == bytes ? free_block(a, slot, stream)
                                                   : GMR_ERR_INVALID_ARGUMENT;
    unlock(a);
    return st;
  }
  bool forwarded = a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD &&
                   chunk_of(a, (uintptr_t)ptr) == NULL &&
                   atomic_load_explicit(&a->forwarded_live_count, memory_order_relaxed) > 0;
  unlock(a);
  if (!forwarded) return GMR_ERR_INVALID_ARGUMENT; /* not ours, or freed already */
  return forward_deallocate(a, ptr, bytes, alignment, stream);
}

/* ---- destroy, trim, footprint ---------------------------------------------------------- */

/* Put every extent of the uncaptured list back in the free space and drop its
 * live blocks. `scratch` and the free space have room for a->open.count. */
static size_t clear_open_from(gmr_graph_arena_resource *a, size_t height, gmr__extent *scratch) {
  size_t released = 0, n = 0;
  for (size_t i = height; i < a->open.count; ++i) {
    ga_entry *e = &a->open.items[i];
    if (e->state == ENTRY_LIVE) {
      drop_block(a, e->slot);
      released++;
    }
    if (e->region) gmr__nvtx_mem_region_unregister((void *)e->begin);
    scratch[n++] = (gmr__extent){e->begin, e->end, 0, e->order};
  }
  gmr__extent_set_add_many(&a->free, scratch, n);
  a->open.count = height;
  return released;
}

static gmr_status arena_destroy(gmr_resource *self) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  lock(a);
  if (a->session_count > 0 || a->memory_count > 0 || a->live_count > 0 ||
      atomic_load(&a->forwarded_live_count) > 0) {
    unlock(a);
    return GMR_ERR_BUSY;
  }
  /* Freed uncaptured blocks go back first, so every chunk is wholly free. */
  if (a->open.count > 0) {
    gmr__extent *scratch = malloc(a->open.count * sizeof *scratch);
    if (scratch == NULL || !gmr__extent_set_reserve(&a->free, a->open.count)) {
      free(scratch);
      unlock(a);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    clear_open_from(a, 0, scratch);
    free(scratch);
    a->open_marks.count = 0;
  }
  while (a->chunk_count > 0) {
    bool released = false;
    gmr_status st = release_chunk(a, a->chunk_count - 1, &released);
    if (st != GMR_OK || !released) {
      /* The arena stays valid with the chunks it still has. */
      unlock(a);
      return st != GMR_OK ? st : GMR_ERR_INTERNAL;
    }
  }
  unlock(a);
  free(a->chunks);
  gmr__extent_set_clear(&a->free);
  free(a->blocks);
  free(a->sessions);
  free(a->memories);
  free(a->open.items);
  free(a->open_marks.items);
  free(a->spare_entries.items);
  free(a);
  return GMR_OK;
}

static gmr_resource *arena_get_upstream(const gmr_resource *self) {
  return ((const gmr_graph_arena_resource *)self)->upstream;
}

static gmr_status arena_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  *released_bytes = 0;
  lock(a);
  /* Giving memory back is an upstream call: never during a capture. */
  if (a->session_count > 0) {
    unlock(a);
    return GMR_OK;
  }
  gmr_status st = GMR_OK;
  for (size_t i = a->chunk_count; i-- > 0;) {
    if (a->chunks[i].initial) continue;
    size_t bytes = a->chunks[i].bytes;
    bool released = false;
    st = release_chunk(a, i, &released);
    if (st != GMR_OK) break;
    if (released) *released_bytes += bytes;
  }
  unlock(a);
  return st;
}

static gmr_status arena_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)(uintptr_t)self;
  /* Forwarding, the arena is a part of what its upstream holds: the stack's
   * footprint is the upstream's, when it can say. */
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD &&
      gmr_resource_get_footprint(a->upstream, out) == GMR_OK) {
    return GMR_OK;
  }
  lock(a);
  out->held_bytes = a->capacity_bytes;
  out->peak_held_bytes = a->peak_capacity_bytes;
  unlock(a);
  return GMR_OK;
}

static const gmr_resource_vtbl graph_arena_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "graph_arena_resource",
    .allocate = arena_allocate,
    .deallocate = arena_deallocate,
    .destroy = arena_destroy,
    .get_upstream = arena_get_upstream,
    .trim = arena_trim,
    .get_footprint = arena_get_footprint,
};

/* ---- public API ------------------------------------------------------------------------------ */

gmr_status gmr_graph_arena_resource_create(gmr_resource *upstream,
                                           const gmr_graph_arena_config *config,
                                           gmr_graph_arena_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr_resource_check(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_graph_arena_config cfg = GMR_GRAPH_ARENA_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (!gmr__is_power_of_two(cfg.alignment) || cfg.alignment < GMR_DEFAULT_ALIGNMENT ||
      cfg.alignment > GMR_MAX_ALLOCATION_BYTES ||
      cfg.initial_capacity_bytes > cfg.max_capacity_bytes ||
      cfg.initial_capacity_bytes > GMR_MAX_ALLOCATION_BYTES ||
      (cfg.capture_policy != GMR_GRAPH_ARENA_MONOTONE &&
       cfg.capture_policy != GMR_GRAPH_ARENA_ORDERED_REUSE) ||
      (cfg.detection != GMR_GRAPH_ARENA_DETECT_AUTO &&
       cfg.detection != GMR_GRAPH_ARENA_DETECT_EXPLICIT) ||
      (cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_ARENA &&
       cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_FORWARD)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Sizes are whole granules, so every carve stays aligned. */
  cfg.initial_capacity_bytes = gmr__align_up(cfg.initial_capacity_bytes, cfg.alignment);
  cfg.chunk_bytes = cfg.chunk_bytes > GMR_MAX_ALLOCATION_BYTES
                        ? GMR_MAX_ALLOCATION_BYTES
                        : gmr__align_up(cfg.chunk_bytes, cfg.alignment);
  if (cfg.initial_capacity_bytes > cfg.max_capacity_bytes) return GMR_ERR_INVALID_ARGUMENT;

  gmr_graph_arena_resource *a = calloc(1, sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  atomic_flag_clear(&a->busy);
  a->base.vtbl = &graph_arena_vtbl;
  a->upstream = upstream;
  a->cuda = gmr__cuda();
  a->cfg = cfg;
  a->free_slot = NO_SLOT;
  a->next_mark_id = 1;
  if (cfg.initial_capacity_bytes > 0) {
    gmr_failure failure;
    memset(&failure, 0, sizeof failure);
    gmr_status st = gmr__extent_set_reserve(&a->free, 1)
                        ? add_chunk(a, cfg.initial_capacity_bytes, true, &failure)
                        : GMR_ERR_OUT_OF_MEMORY;
    if (st != GMR_OK) {
      free(a->chunks);
      gmr__extent_set_clear(&a->free);
      free(a);
      return st;
    }
  }
  *out = a;
  return GMR_OK;
}

gmr_resource *gmr_graph_arena_resource_as_resource(gmr_graph_arena_resource *arena) {
  return arena == NULL ? NULL : &arena->base;
}

gmr_graph_arena_resource *gmr_graph_arena_resource_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &graph_arena_vtbl) ? (gmr_graph_arena_resource *)r : NULL;
}

gmr_graph_arena_resource *gmr_graph_arena_find_in_stack(gmr_resource *top) {
  for (gmr_resource *r = top; r != NULL; r = gmr_resource_get_upstream(r)) {
    gmr_graph_arena_resource *a = gmr_graph_arena_resource_from_resource(r);
    if (a != NULL) return a;
  }
  return NULL;
}

gmr_status gmr_graph_arena_reserve(gmr_graph_arena_resource *a, size_t capacity_bytes) {
  if (a == NULL || capacity_bytes == 0 || capacity_bytes > GMR_MAX_ALLOCATION_BYTES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  lock(a);
  gmr_status st = GMR_OK;
  if (a->session_count > 0) {
    st = GMR_ERR_CAPTURE_UNSAFE;
  } else if (capacity_bytes > a->capacity_bytes) {
    size_t grow = gmr__align_up(capacity_bytes - a->capacity_bytes, GMR_DEFAULT_ALIGNMENT);
    gmr_failure failure;
    memset(&failure, 0, sizeof failure);
    if (grow > a->cfg.max_capacity_bytes - a->capacity_bytes ||
        !gmr__extent_set_reserve(&a->free, 1)) {
      st = GMR_ERR_OUT_OF_MEMORY;
    } else {
      st = add_chunk(a, grow, false, &failure);
    }
  }
  unlock(a);
  return st;
}

gmr_status gmr_graph_arena_begin_capture(gmr_graph_arena_resource *a, gmr_stream stream,
                                         gmr_graph_memory *share) {
  if (a == NULL || stream == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  gmr_status st = GMR_OK;
  ga_session *s = find_session(a, stream);
  if (share != NULL && (!memory_known(a, share) || share->references == 0)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (s != NULL) {
    if (s->explicit_session || share != NULL) {
      st = GMR_ERR_BUSY;
    } else {
      /* The caller declares the capture the arena already detected. */
      s->explicit_session = true;
      atomic_fetch_add_explicit(&a->explicit_session_count, 1, memory_order_relaxed);
    }
  } else if (share != NULL && share->session != NULL) {
    st = GMR_ERR_BUSY;
  } else {
    st = open_session(a, stream, share, true, 0, &s);
  }
  unlock(a);
  return st;
}

gmr_status gmr_graph_arena_end_capture(gmr_graph_arena_resource *a, gmr_stream stream,
                                       gmr_graph_memory **out_memory) {
  if (out_memory != NULL) *out_memory = NULL;
  if (a == NULL || out_memory == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  gmr_graph_memory *m = NULL;
  ga_session *s = find_session(a, stream);
  if (s != NULL) {
    m = s->memory;
    close_session(a, s);
  } else {
    for (size_t i = a->memory_count; i-- > 0;) {
      gmr_graph_memory *c = a->memories[i];
      if (c->unclaimed && c->last_stream == stream) {
        m = c;
        break;
      }
    }
  }
  if (m != NULL) {
    m->unclaimed = false;
    m->references++;
    *out_memory = m;
  }
  unlock(a);
  return m != NULL ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_graph_arena_release_memory(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  if (a == NULL || m == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  gmr_status st = GMR_OK;
  if (!memory_known(a, m) || m->references == 0) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (m->references == 1 && m->session == NULL) {
    st = release_memory_locked(a, m);
  } else {
    m->references--;
  }
  unlock(a);
  return st;
}

gmr_status gmr_graph_arena_get_memory_info(gmr_graph_arena_resource *a, const gmr_graph_memory *m,
                                           gmr_graph_memory_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || m == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  if (memory_known(a, m)) {
    out->held_bytes = m->held_bytes;
    out->live_bytes = m->live_bytes;
    out->live_count = m->live_count;
    out->allocation_count = m->allocation_count;
    out->session_count = m->session_count;
    out->reference_count = m->references;
    out->capturing = m->session != NULL;
    st = GMR_OK;
  }
  unlock(a);
  return st;
}

gmr_status gmr_graph_arena_reset(gmr_graph_arena_resource *a, size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  if (a->session_count > 0) {
    unlock(a);
    return GMR_ERR_BUSY;
  }
  /* Reserve for everything first: the reset happens entirely or not at all. */
  size_t n = a->open.count;
  for (size_t i = 0; i < a->memory_count; ++i) {
    if (a->memories[i]->unclaimed) n += memory_returnable_count(a->memories[i]);
  }
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    unlock(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t released = clear_open_from(a, 0, scratch);
  a->open_marks.count = 0;
  for (size_t i = a->memory_count; i-- > 0;) {
    gmr_graph_memory *m = a->memories[i];
    if (m->unclaimed) dissolve_memory(a, m, scratch); /* its live blocks become loose */
  }
  free(scratch);
  unlock(a);
  if (out_released_count != NULL) *out_released_count = released;
  return GMR_OK;
}

gmr_status gmr_graph_arena_checkpoint(gmr_graph_arena_resource *a, gmr_stream stream,
                                      uint64_t *out_mark) {
  if (out_mark != NULL) *out_mark = 0;
  if (a == NULL || out_mark == NULL) return GMR_ERR_INVALID_ARGUMENT;
  ga_session *s = NULL;
  gmr_failure failure;
  gmr_status st = resolve_locked(a, stream, &s, &failure);
  if (st != GMR_OK) return st;
  if (s == NULL && a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    ga_marks *marks = s != NULL ? &s->marks : &a->open_marks;
    size_t height = s != NULL ? s->memory->entries.count : a->open.count;
    if (!marks_reserve(marks)) {
      st = GMR_ERR_OUT_OF_MEMORY;
    } else {
      uint64_t id = a->next_mark_id++;
      marks->items[marks->count++] = (ga_mark){id, height};
      *out_mark = id;
    }
  }
  unlock(a);
  return st;
}

/* Rewind a session's memory to `height` as its policy says. Lock held. */
static gmr_status rewind_session(gmr_graph_arena_resource *a, ga_session *s, size_t height,
                                 size_t *released) {
  gmr_graph_memory *m = s->memory;
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  if (reuse) {
    size_t n = 0;
    for (size_t i = height; i < m->entries.count; ++i) {
      if (m->entries.items[i].state != ENTRY_MOVED) n++;
    }
    if (!gmr__extent_set_reserve(&m->reuse, n)) return GMR_ERR_OUT_OF_MEMORY;
  }
  for (size_t i = height; i < m->entries.count; ++i) {
    ga_entry *e = &m->entries.items[i];
    if (e->state == ENTRY_MOVED) continue;
    if (e->state == ENTRY_LIVE) {
      drop_block(a, e->slot);
      (*released)++;
    }
    if (reuse) {
      gmr__extent_set_add(&m->reuse, (gmr__extent){e->begin, e->end, (uintptr_t)s->stream, e->order});
      e->state = ENTRY_MOVED;
      region_widen(a, e);
    } else {
      e->state = ENTRY_FREED; /* monotone: the bytes stay with the memory */
    }
  }
  return GMR_OK;
}

/* Rewind the uncaptured list to `height`. Lock held. */
static gmr_status rewind_open(gmr_graph_arena_resource *a, gmr_stream stream, size_t height,
                              size_t *released) {
  size_t n = a->open.count - height;
  for (size_t i = height; i < a->open.count; ++i) {
    const ga_entry *e = &a->open.items[i];
    if (e->state == ENTRY_LIVE && a->blocks[e->slot].stream != stream) return GMR_ERR_BUSY;
  }
  gmr__extent *scratch = malloc((n == 0 ? 1 : n) * sizeof *scratch);
  if (scratch == NULL || !gmr__extent_set_reserve(&a->free, n)) {
    free(scratch);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *released = clear_open_from(a, height, scratch);
  free(scratch);
  return GMR_OK;
}

gmr_status gmr_graph_arena_rewind(gmr_graph_arena_resource *a, gmr_stream stream, uint64_t mark,
                                  size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  ga_session *s = NULL;
  gmr_failure failure;
  gmr_status st = resolve_locked(a, stream, &s, &failure);
  if (st != GMR_OK) return st;
  size_t released = 0;
  if (s == NULL && a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    ga_marks *marks = s != NULL ? &s->marks : &a->open_marks;
    size_t pos = marks->count;
    while (pos > 0 && marks->items[pos - 1].id != mark) pos--;
    if (pos == 0 || mark == 0) {
      st = GMR_ERR_INVALID_ARGUMENT;
    } else {
      size_t height = marks->items[pos - 1].height;
      st = s != NULL ? rewind_session(a, s, height, &released)
                     : rewind_open(a, stream, height, &released);
      if (st == GMR_OK) marks->count = pos - 1; /* the mark and those after it */
    }
  }
  unlock(a);
  if (st == GMR_OK && out_released_count != NULL) *out_released_count = released;
  return st;
}

gmr_status gmr_graph_arena_allocate(gmr_graph_arena_resource *a, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out_ptr, uint64_t *out_id,
                                    gmr_failure *failure) {
  /* The dispatch's checks and failure record, for the entry point that also
   * returns an id (the vtable slot has no room for one). */
  gmr_failure local;
  if (failure == NULL) failure = &local;
  gmr__failure_reset(failure);
  if (out_id != NULL) *out_id = 0;
  if (out_ptr != NULL) *out_ptr = NULL;
  const gmr_resource *self = a == NULL ? NULL : &a->base;
  if (a == NULL || out_ptr == NULL || out_id == NULL) {
    snprintf(failure->message, sizeof failure->message, "arena, out_ptr or out_id is NULL");
    return gmr__failure_record(failure, GMR_ERR_INVALID_ARGUMENT, self, bytes, alignment, stream);
  }
  gmr_status done = GMR_OK;
  if (!gmr__request_check(self, bytes, &alignment, stream, out_ptr, failure, &done)) return done;
  void *p = NULL;
  gmr_status st = arena_allocate_impl(a, bytes, alignment, stream, &p, out_id, failure);
  if (st != GMR_OK) {
    *out_id = 0;
    return gmr__failure_record(failure, st, self, bytes, alignment, stream);
  }
  *out_ptr = p;
  return GMR_OK;
}

gmr_status gmr_graph_arena_get_block(gmr_graph_arena_resource *a, uint64_t id,
                                     gmr_graph_arena_block_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  uint32_t slot = 0;
  bool found = lookup_id(a, id, &slot);
  if (found) fill_block_info(a, slot, out);
  unlock(a);
  return found ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_graph_arena_find_block(gmr_graph_arena_resource *a, const void *ptr,
                                      gmr_graph_arena_block_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  uint32_t slot = 0;
  bool found = lookup_ptr(a, ptr, &slot);
  if (found) fill_block_info(a, slot, out);
  unlock(a);
  return found ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_graph_arena_return_block(gmr_graph_arena_resource *a, uint64_t id,
                                        gmr_stream stream) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  uint32_t slot = 0;
  gmr_status st = lookup_id(a, id, &slot) ? free_block(a, slot, stream) : GMR_ERR_INVALID_ARGUMENT;
  unlock(a);
  return st;
}

gmr_status gmr_graph_arena_get_stats(gmr_graph_arena_resource *a, gmr_graph_arena_stats *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock(a);
  out->capacity_bytes = a->capacity_bytes;
  out->peak_capacity_bytes = a->peak_capacity_bytes;
  out->chunk_count = a->chunk_count;
  out->in_use_bytes = in_use_bytes(a);
  out->peak_in_use_bytes = a->peak_in_use_bytes;
  out->live_bytes = a->live_bytes;
  out->peak_live_bytes = a->peak_live_bytes;
  out->live_count = a->live_count;
  out->allocation_count = a->allocation_count;
  out->capture_allocation_count = a->capture_allocation_count;
  out->capture_refusal_count = a->capture_refusal_count;
  out->capture_shortfall_bytes = a->capture_shortfall_bytes;
  out->open_session_count = a->session_count;
  out->graph_memory_count = a->memory_count;
  unlock(a);
  out->forwarded_allocation_count = atomic_load(&a->forwarded_allocation_count);
  out->forwarded_live_count = atomic_load(&a->forwarded_live_count);
  out->upstream_call_count = atomic_load(&a->upstream_call_count);
  out->upstream_calls_during_capture = atomic_load(&a->upstream_calls_during_capture);
  return GMR_OK;
}

gmr_graph_arena_config gmr_graph_arena_get_config(const gmr_graph_arena_resource *a) {
  return a->cfg;
}

static const char *const policy_names[] = {"monotone", "ordered_reuse"};

const char *gmr_graph_arena_policy_name(gmr_graph_arena_policy policy) {
  if ((int)policy < 0 || (size_t)policy >= sizeof policy_names / sizeof policy_names[0]) {
    return "unknown";
  }
  return policy_names[policy];
}

gmr_status gmr_graph_arena_policy_from_name(const char *name, gmr_graph_arena_policy *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof policy_names / sizeof policy_names[0]; ++i) {
    if (strcmp(name, policy_names[i]) == 0) {
      *out = (gmr_graph_arena_policy)i;
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}
