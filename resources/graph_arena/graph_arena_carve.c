/*
 * resources/graph_arena/graph_arena_carve.c (internal): carving a request: the fast path
 * of a capture (the front of the session's range), next fit in the free
 * space, ordered reuse of a memory's freed blocks, growth outside capture,
 * and the refusal that says how much to reserve.
 */
#include <stdio.h>
#include <string.h>

#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_internal.h"

static bool entries_reserve(gmr__ga_entries *e, size_t extra) {
  return gmr__ga_ensure((void **)&e->items, &e->capacity, e->count + extra, sizeof *e->items);
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

static void note_in_use(gmr_graph_arena_resource *a) {
  size_t now = gmr__ga_in_use_bytes(a);
  if (now > a->peak_in_use_bytes) a->peak_in_use_bytes = now;
}

/* Bytes a fresh range must have for the request: chunks are only 256-byte
 * aligned, so a larger alignment may cost a gap in front. */
static size_t fresh_bytes_needed(const gmr__ga_carve_request *rq) {
  return rq->carved_bytes + (rq->alignment - GMR_DEFAULT_ALIGNMENT);
}

uint32_t gmr__ga_register_block(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                                gmr__ga_chunk *c, uintptr_t addr, uint64_t order,
                                const gmr__ga_carve_request *rq, bool region) {
  uint32_t slot = gmr__ga_take_slot(a);
  gmr__ga_block *b = &a->blocks[slot];
  gmr__ga_entries *list = m != NULL ? &m->entries : &a->open;
  b->addr = addr;
  b->bytes = rq->bytes;
  b->carved_bytes = rq->carved_bytes;
  b->alignment = rq->requested_alignment;
  b->stream = rq->stream;
  b->captured = m != NULL;
  b->recorded = false;
  b->use_count = 0;
  b->uses_overflow = false;
  b->scope = m != NULL ? GMR__GA_SCOPE_MEMORY : GMR__GA_SCOPE_OPEN;
  b->memory = m;
  b->entry = list->count;
  b->order = order;
  list->items[list->count++] =
      (gmr__ga_entry){addr, addr + rq->carved_bytes, order, slot, GMR__GA_ENTRY_LIVE, region};
  c->block_at[(addr - c->base) >> GMR__GA_GRANULE_SHIFT] = slot + 1;
  if (region) gmr__nvtx_mem_region_register(c->nvtx_heap, (void *)addr, rq->bytes);
  a->live_bytes += rq->carved_bytes;
  a->live_count++;
  if (a->live_bytes > a->peak_live_bytes) a->peak_live_bytes = a->live_bytes;
  a->allocation_count++;
  if (m != NULL) {
    m->live_bytes += rq->carved_bytes;
    m->live_count++;
    m->held_bytes += rq->carved_bytes;
    m->allocation_count++;
    a->capture_allocation_count++;
  }
  note_in_use(a);
  return slot;
}

/* Refuse a request in a session: nothing changes but the advice. `below`
 * names the upstream when it could not grow the arena in capture (NULL: growth
 * is off). */
static gmr_status refuse_in_session(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                    const gmr__ga_carve_request *rq, const char *below,
                                    gmr_failure *failure) {
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
  size_t total =
      a->held_bytes > SIZE_MAX - s->shortfall_bytes ? SIZE_MAX : a->held_bytes + s->shortfall_bytes;
  /* The upstream's refusal is not the cause to report: the arena is. */
  gmr__failure_reset(failure);
  if (below == NULL) {
    snprintf(failure->message, sizeof failure->message,
             "graph_arena: capture needs %s more; create the arena with "
             "initial_capacity_bytes >= %zu or call gmr_graph_arena_resource_reserve(arena, %zu) "
             "before capture",
             more, total, total);
  } else {
    snprintf(failure->message, sizeof failure->message,
             "graph_arena: capture needs %s more and %s cannot allocate during capture: call "
             "gmr_graph_arena_resource_reserve(arena, %zu) before it",
             more, below, total);
  }
  gmr__ga_note_free_info(a, failure);
  return GMR_ERR_CAPTURE_UNSAFE;
}

/* Grow the arena during the capture of session `s` by a chunk that fits the
 * request, through the upstream's allocate_capturing (which neither breaks
 * nor joins the capture). Returns GMR_ERR_CAPTURE_UNSAFE, with nothing
 * changed, when the arena may not grow (chunk_bytes 0) or nothing below can
 * allocate during capture (*out_below then names the upstream); other
 * failures are the upstream's, or the maximum capacity's. Lock held. */
static gmr_status grow_in_capture(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                  const gmr__ga_carve_request *rq, const char **out_below,
                                  gmr_failure *failure) {
  *out_below = NULL;
  if (a->cfg.chunk_bytes == 0) return GMR_ERR_CAPTURE_UNSAFE;
  if (s->upstream_cannot) {
    /* It said so earlier in this capture: do not ask again for every request. */
    *out_below = s->cannot_name;
    return GMR_ERR_CAPTURE_UNSAFE;
  }
  size_t need = fresh_bytes_needed(rq);
  size_t room = a->cfg.max_capacity_bytes - a->held_bytes;
  if (need > room) {
    char needed[32];
    format_bytes(needed, sizeof needed, need);
    snprintf(failure->message, sizeof failure->message,
             "graph_arena: %s does not fit under max_capacity_bytes (%zu)", needed,
             a->cfg.max_capacity_bytes);
    gmr__ga_note_free_info(a, failure);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t chunk = need > a->cfg.chunk_bytes ? need : a->cfg.chunk_bytes;
  if (chunk > room) chunk = room; /* still >= need */
  /* The new range, and the split of the carve from it. */
  if (!gmr__extent_set_reserve(&a->free, 2)) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  failure->where = NULL;
  gmr_status st =
      gmr__ga_add_chunk(a, chunk, GMR__GA_CHUNK_GROWN, GMR__GA_GROW_CAPTURING, s->stream, failure);
  if (st == GMR_ERR_CAPTURE_UNSAFE) {
    /* Name the resource that could not: the deepest one the record names. */
    s->upstream_cannot = true;
    s->cannot_name =
        gmr_resource_get_type_name(failure->where != NULL ? failure->where : a->upstream);
    *out_below = s->cannot_name;
  }
  return st;
}

/* The session's next-fit position is now `addr` in chunk `order`: the free
 * range holding it (if any is left) is the first one ending after it, which
 * the fast path carves from. Lock held. */
static void move_cursor(gmr_graph_arena_resource *a, gmr__ga_session *s, uint64_t order,
                        uintptr_t addr) {
  s->cursor = (gmr__extent_pos){order, addr};
  s->hint = gmr__extent_set_lower_bound(&a->free, s->cursor);
  s->hint_version = a->free.version;
  s->chunk = gmr__ga_chunk_of(a, addr - 1);
}

/* Ordered reuse (PyTorch's private pools): the request is carved, best fit,
 * from the bytes this memory freed on the request's stream and the free space
 * together, a freed block and the free space it touches counting as one
 * range (so the bytes a capture freed at the end of its range still serve a
 * request larger than they are). Growth when nothing fits. With NVTX
 * annotation the two are not joined: a block carved from freed bytes lies in
 * their widened regions, and one from the free space needs its own, and
 * regions never overlap. Sets *region false for a block wholly from freed
 * bytes. Lock held; the caller reserved one range in each set. */
static gmr_status carve_reusing(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                const gmr__ga_carve_request *rq, uintptr_t *out_addr,
                                uint64_t *out_order, bool *region, gmr_failure *failure) {
  gmr_graph_memory *m = s->memory;
  bool join = !a->cfg.nvtx_annotate;
  uintptr_t tag = (uintptr_t)rq->stream;
  if (!gmr__extent_sets_joined_best_fit(&a->free, 0, &m->reuse, tag, join, rq->carved_bytes,
                                        rq->alignment, out_order, out_addr)) {
    const char *below = NULL;
    gmr_status st = grow_in_capture(a, s, rq, &below, failure);
    if (st == GMR_ERR_CAPTURE_UNSAFE) return refuse_in_session(a, s, rq, below, failure);
    if (st != GMR_OK) return st;
    if (!gmr__extent_sets_joined_best_fit(&a->free, 0, &m->reuse, tag, join, rq->carved_bytes,
                                          rq->alignment, out_order, out_addr)) {
      return GMR_ERR_INTERNAL; /* a fresh chunk of the bytes needed always fits */
    }
  }
  uintptr_t end = *out_addr + rq->carved_bytes;
  size_t reused = gmr__extent_set_take_span(&m->reuse, *out_order, *out_addr, end, tag);
  size_t fresh = gmr__extent_set_take_span(&a->free, *out_order, *out_addr, end, 0);
  if (reused + fresh != rq->carved_bytes) return GMR_ERR_INTERNAL; /* the run held it all */
  m->held_bytes -= reused; /* register_block adds the whole block */
  if (reused == rq->carved_bytes) {
    *region = false; /* inside the widened regions of the blocks it reuses */
  } else {
    move_cursor(a, s, *out_order, end);
  }
  return GMR_OK;
}

/* The common case of a capture: the next bytes of the range the session is
 * in, at its front, with room left after. No search, nothing to reserve.
 * Returns false to take the general path. Lock held. */
static bool serve_fast(gmr_graph_arena_resource *a, gmr__ga_session *s,
                       const gmr__ga_carve_request *rq, void **out_ptr, uint64_t *out_id) {
  gmr_graph_memory *m = s->memory;
  if (s->hint_version != a->free.version || s->hint >= a->free.count || s->refused ||
      m->entries.count == m->entries.capacity ||
      (a->free_slot == GMR__GA_NO_SLOT && a->block_count == a->block_capacity)) {
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
  uint32_t slot =
      gmr__ga_register_block(a, m, s->chunk, addr, e->order, rq, a->cfg.nvtx_annotate);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = gmr__ga_block_id(a, slot);
  return true;
}

/* Serve a request in session `s`. Lock held. */
gmr_status gmr__ga_serve_in_session(gmr_graph_arena_resource *a, gmr__ga_session *s,
                                    const gmr__ga_carve_request *rq, void **out_ptr,
                                    uint64_t *out_id, gmr_failure *failure) {
  gmr_graph_memory *m = s->memory;
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  /* Blocks freed with record_stream uses whose streams have joined back. */
  if (reuse && m->deferred_count > 0) gmr__ga_reuse_joined(a, m, rq->stream);
  /* Ordered reuse looks at the freed blocks first, so no fast path while it
   * has some. */
  if ((!reuse || m->reuse.count == 0) && serve_fast(a, s, rq, out_ptr, out_id)) return GMR_OK;
  if (!entries_reserve(&m->entries, 1) || !gmr__ga_blocks_reserve(a) ||
      !gmr__extent_set_reserve(&a->free, 1) || (reuse && !gmr__extent_set_reserve(&m->reuse, 1))) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  uintptr_t addr = 0;
  uint64_t order = 0;
  bool region = a->cfg.nvtx_annotate;
  if (reuse) {
    gmr_status st = carve_reusing(a, s, rq, &addr, &order, &region, failure);
    if (st != GMR_OK) return st;
  } else {
    /* Monotone: next fit from the session's cursor, a binary search, then
     * O(1) while the range lasts. */
    size_t index = 0;
    if (!gmr__extent_set_next_fit(&a->free, s->cursor, true, rq->carved_bytes, rq->alignment, 0,
                                  &index, &addr)) {
      const char *below = NULL;
      gmr_status st = grow_in_capture(a, s, rq, &below, failure);
      if (st == GMR_ERR_CAPTURE_UNSAFE) return refuse_in_session(a, s, rq, below, failure);
      if (st != GMR_OK) return st;
      if (!gmr__extent_set_next_fit(&a->free, s->cursor, true, rq->carved_bytes, rq->alignment, 0,
                                    &index, &addr)) {
        return GMR_ERR_INTERNAL; /* a fresh chunk of the bytes needed always fits */
      }
    }
    order = a->free.items[index].order;
    gmr__extent_set_carve(&a->free, index, addr, rq->carved_bytes);
    move_cursor(a, s, order, addr + rq->carved_bytes);
  }
  if (s->refused) {
    /* A retry would serve this one from the reserved memory too. */
    size_t need = fresh_bytes_needed(rq);
    s->shortfall_bytes =
        s->shortfall_bytes > SIZE_MAX - need ? SIZE_MAX : s->shortfall_bytes + need;
  }
  uint32_t slot = gmr__ga_register_block(a, m, gmr__ga_chunk_of(a, addr), addr, order, rq, region);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = gmr__ga_block_id(a, slot);
  return GMR_OK;
}

/* Serve a request outside sessions from the arena, growing it if needed;
 * `capturing`: its stream captures all the same (allocate_capturing), so
 * growth goes through the upstream's allocate_capturing. Lock held. */
gmr_status gmr__ga_serve_uncaptured(gmr_graph_arena_resource *a, const gmr__ga_carve_request *rq,
                                    bool capturing, void **out_ptr, uint64_t *out_id,
                                    gmr_failure *failure) {
  /* Reserve everything first: growth + split may add two free ranges. */
  if (!entries_reserve(&a->open, 1) || !gmr__ga_blocks_reserve(a) ||
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
    if (a->cfg.chunk_bytes == 0) {
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: %s does not fit and growth is off (chunk_bytes is 0)", needed);
      gmr__ga_note_free_info(a, failure);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    size_t room = a->cfg.max_capacity_bytes - a->held_bytes;
    if (need > room) {
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: %s does not fit under max_capacity_bytes (%zu)", needed,
               a->cfg.max_capacity_bytes);
      gmr__ga_note_free_info(a, failure);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    size_t chunk = need > a->cfg.chunk_bytes ? need : a->cfg.chunk_bytes;
    if (chunk > room) chunk = room; /* still >= need */
    /* In CUDA's global capture mode a cudaMalloc from any thread breaks the
     * captures in progress: while one of ours is open, grow only through a
     * call that cannot break it. */
    gmr__ga_growth growth =
        capturing || a->session_count > 0 ? GMR__GA_GROW_CAPTURING : GMR__GA_GROW_PLAIN;
    /* On the request's stream: a stream-ordered upstream (cuda(kind=async),
     * a pool) orders the new chunk where it is first used, and the legacy
     * default stream, which would serialise with every blocking stream and
     * not at all with non-blocking ones, stays out of it. */
    gmr_status st =
        gmr__ga_add_chunk(a, chunk, GMR__GA_CHUNK_GROWN, growth, rq->stream, failure);
    if (st == GMR_ERR_CAPTURE_UNSAFE && growth == GMR__GA_GROW_CAPTURING) {
      const char *below =
          gmr_resource_get_type_name(failure->where != NULL ? failure->where : a->upstream);
      a->capture_refusal_count++;
      gmr__failure_reset(failure);
      snprintf(failure->message, sizeof failure->message,
               "graph_arena: cannot grow by %s while a capture is open (%s cannot allocate "
               "during capture); call gmr_graph_arena_resource_reserve() before capture",
               needed, below);
      gmr__ga_note_free_info(a, failure);
      return GMR_ERR_CAPTURE_UNSAFE;
    }
    if (st != GMR_OK) return st;
    if (!gmr__extent_set_next_fit(&a->free, start, false, rq->carved_bytes, rq->alignment, 0,
                                  &index, &addr)) {
      return GMR_ERR_INTERNAL; /* a fresh chunk of `need` bytes always fits */
    }
  }
  uint64_t order = a->free.items[index].order;
  gmr__extent_set_carve(&a->free, index, addr, rq->carved_bytes);
  uint32_t slot = gmr__ga_register_block(a, NULL, gmr__ga_chunk_of(a, addr), addr, order, rq,
                                         a->cfg.nvtx_annotate);
  *out_ptr = (void *)addr;
  if (out_id != NULL) *out_id = gmr__ga_block_id(a, slot);
  return GMR_OK;
}
