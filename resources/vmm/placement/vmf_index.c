/*
 * resources/vmm/placement/vmf_index.c (internal): regions, filing free
 * regions in their slot's index (stream_ordered/free_index.h), what stream
 * slots hold beyond the table of stream_ordered/stream_slots.h, and
 * merging, for a placement engine (vmf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/placement/vmf.h"

void gmr__vmf_lock(vmf_engine *e) { gmr__spin_lock_acquire(&e->lock); }
void gmr__vmf_unlock(vmf_engine *e) { gmr__spin_lock_release(&e->lock); }

/* ---- region headers --------------------------------------------------------- */

vmf_region *gmr__vmf_region_new(vmf_engine *e) {
  vmf_region *r = e->spare_regions;
  if (r != NULL) {
    e->spare_regions = r->next;
    memset(r, 0, sizeof *r);
    return r;
  }
  return calloc(1, sizeof *r);
}

void gmr__vmf_free_extra(vmf_engine *e, vmf_region *r) {
  vmf_extra *x = r->extra;
  if (x == NULL) return;
  for (uint32_t i = 0; i < x->blocker_count; ++i) (void)e->cuda->event_destroy(x->blockers[i]);
  free(x->blockers);
  free(x->used_streams);
  gmr__capture_markers_release(&x->markers);
  if (x->saved != NULL) (void)e->cuda->free_host(x->saved);
  free(x);
  r->extra = NULL;
}

vmf_extra *gmr__vmf_extra(vmf_region *r) {
  if (r->extra == NULL) r->extra = calloc(1, sizeof *r->extra);
  return r->extra;
}

void gmr__vmf_region_put(vmf_engine *e, vmf_region *r) {
  if (r == NULL) return;
  gmr__vmf_free_extra(e, r);
  r->next = e->spare_regions;
  e->spare_regions = r;
}

bool gmr__vmf_reserve_regions(vmf_engine *e, size_t count) {
  size_t have = 0;
  for (vmf_region *r = e->spare_regions; r != NULL && have < count; r = r->next) have++;
  for (; have < count; ++have) {
    vmf_region *r = calloc(1, sizeof *r);
    if (r == NULL) return false;
    r->next = e->spare_regions;
    e->spare_regions = r;
  }
  return true;
}

/* ---- what a region counts toward ------------------------------------------- */

static void contribute(vmf_engine *e, const vmf_region *r, bool add) {
  if (r->state == VMF_FREE) {
    if (add) {
      r->arena->free_bytes += r->node.bytes;
    } else {
      r->arena->free_bytes -= r->node.bytes;
    }
  } else if (r->state == VMF_HOLE) {
    if (add) {
      e->hole_bytes += r->node.bytes;
      e->hole_count++;
    } else {
      e->hole_bytes -= r->node.bytes;
      e->hole_count--;
    }
  }
}

void gmr__vmf_set_state(vmf_engine *e, vmf_region *r, vmf_state state) {
  contribute(e, r, false);
  r->state = (uint8_t)state;
  contribute(e, r, true);
}

void gmr__vmf_split(vmf_engine *e, vmf_region *r, size_t bytes, vmf_region *tail) {
  contribute(e, r, false);
  memset(tail, 0, sizeof *tail);
  tail->node.addr = r->node.addr + bytes;
  tail->node.bytes = r->node.bytes - bytes;
  tail->state = r->state;
  tail->arena = r->arena;
  tail->slot = r->slot;
  tail->fresh = r->fresh;
  tail->prev = r;
  tail->next = r->next;
  if (r->next != NULL) r->next->prev = tail;
  r->next = tail;
  r->node.bytes = bytes;
  contribute(e, r, true);
  contribute(e, tail, true);
}

vmf_region *gmr__vmf_cut(vmf_engine *e, vmf_region *r, size_t bytes, size_t alignment) {
  /* Regions start on units: a smaller alignment (0 included) needs no cut before. */
  uintptr_t start = alignment > VMF_UNIT ? gmr__align_up(r->node.addr, alignment) : r->node.addr;
  if (start > r->node.addr) {
    vmf_region *tail = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, start - r->node.addr, tail);
    gmr__vmf_bin_insert(e, r);
    r = tail;
  }
  if (r->node.bytes > bytes) {
    vmf_region *tail = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, bytes, tail);
    gmr__vmf_bin_insert(e, tail);
  }
  return r;
}

void gmr__vmf_absorb_next(vmf_engine *e, vmf_region *r) {
  vmf_region *n = r->next;
  contribute(e, r, false);
  contribute(e, n, false);
  r->node.bytes += n->node.bytes;
  r->next = n->next;
  if (n->next != NULL) n->next->prev = r;
  contribute(e, r, true);
  gmr__vmf_region_put(e, n);
}

/* ---- stream slots (the table is stream_ordered/stream_slots.h) ------------------------- */

static gmr__stream_slot *slot_create(void *ctx) {
  (void)ctx;
  vmf_slot *s = calloc(1, sizeof *s); /* event NULL: created on first record */
  if (s == NULL) return NULL;
  gmr__free_index_init(&s->index);
  gmr__free_index_init(&s->fresh);
  return &s->base;
}

/* Whether slot i holds free regions, fresh or covered. */
static bool slot_holds_any(const vmf_engine *e, uint32_t i) {
  const vmf_slot *s = gmr__vmf_slot(e, i);
  return s->index.block_count > 0 || s->fresh.block_count > 0;
}

/* Whether slot i holds nothing (no free region filed or blocked under it),
 * so that it may serve another stream. */
static bool slot_empty(void *ctx, uint32_t i) {
  const vmf_engine *e = ctx;
  if (slot_holds_any(e, i)) return false;
  for (const vmf_region *r = e->blocked; r != NULL; r = gmr__vmf_region_of(r->node.free_next)) {
    if (r->slot == i) return false;
  }
  return true;
}

static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  vmf_engine *e = ctx;
  bool any = slot_holds_any(e, from);
  gmr__vmf_move_slot(e, from, to);
  return any;
}

/* Whether stream slot i records in batches and so keeps its fresh regions
 * in their own index (stream_event.h). Any other slot keeps all its memory
 * in one index, one whole as before batches: covered while its event
 * covers every free filed under it, fresh (all of it) otherwise. */
static bool batched(const vmf_engine *e, uint32_t i) {
  return i != VMF_SHARED && gmr__vmf_slot(e, i)->base.ev.batched;
}

/* A slot not in batches whose memory is fresh, as one whole. */
static bool fresh_whole(const vmf_engine *e, uint32_t i) {
  return i != VMF_SHARED && !batched(e, i) &&
         gmr__stream_event_fresh(&gmr__vmf_slot(e, i)->base.ev);
}

/* The reclaim steps' view (stream_ordered/reclaim.h): a split table, whose
 * holds, take and fits see a slot's covered memory and the three fresh
 * operations its fresh memory. The engine's lock stays held throughout (no
 * lock operations). */
static bool slot_holds(void *ctx, uint32_t i) {
  const vmf_engine *e = ctx;
  return gmr__vmf_slot(e, i)->index.block_count > 0 && !fresh_whole(e, i);
}

static vmf_region *file(vmf_engine *e, vmf_region *r, uint32_t slot, bool apart);
static vmf_region *file_kept(vmf_engine *e, vmf_region *r, uint32_t slot);

/* The regions of `index` to slot `to`: the shared one (their work is done),
 * or a stream that waited for them, as its newest (fresh) memory. */
static void move_index(vmf_engine *e, gmr__free_index *index, uint32_t to) {
  gmr__free_node *n = NULL;
  while ((n = gmr__free_index_any(index)) != NULL) {
    vmf_region *r = gmr__vmf_region_of(n);
    gmr__vmf_bin_remove(e, r);
    r->fresh = batched(e, to);
    (void)file_kept(e, r, to);
  }
}

static void slot_take(void *ctx, uint32_t from, uint32_t to) {
  vmf_engine *e = ctx;
  move_index(e, &gmr__vmf_slot(e, from)->index, to);
}

/* Just the bytes the request needs, cut from the best fitting covered
 * region of `from` (the rest stays there, covered), go to `to`. */
static void slot_take_fit(void *ctx, uint32_t from, uint32_t to, const gmr__reclaim_want *want) {
  vmf_engine *e = ctx;
  vmf_region *r = gmr__vmf_bin_find_covered(e, from, want->amount, want->alignment);
  if (r == NULL) return;
  gmr__vmf_bin_remove(e, r);
  /* Two headers for the cuts, besides the allocation's own (without host
   * memory the whole region goes). */
  if (gmr__vmf_reserve_regions(e, 6)) r = gmr__vmf_cut(e, r, want->amount, want->alignment);
  r->fresh = batched(e, to);
  (void)file_kept(e, r, to);
}

static bool slot_fits(void *ctx, uint32_t i, const gmr__reclaim_want *want) {
  return !fresh_whole(ctx, i) &&
         gmr__vmf_bin_find_covered(ctx, i, want->amount, want->alignment) != NULL;
}

/* Slot i's free bytes no record covers. */
static size_t fresh_bytes(const vmf_engine *e, uint32_t i) {
  const vmf_slot *s = gmr__vmf_slot(e, i);
  return s->fresh.bytes + (fresh_whole(e, i) ? s->index.bytes : 0);
}

static size_t slot_fresh_amount(void *ctx, uint32_t i) { return fresh_bytes(ctx, i); }

bool gmr__vmf_slot_holds_fresh(const vmf_engine *e, uint32_t slot) {
  return fresh_bytes(e, slot) > 0;
}

static bool slot_fresh_fits(void *ctx, uint32_t i, const gmr__reclaim_want *want) {
  vmf_engine *e = ctx;
  const vmf_slot *s = gmr__vmf_slot(e, i);
  return gmr__free_index_find(&s->fresh, want->amount, want->alignment) != NULL ||
         (fresh_whole(e, i) && gmr__free_index_find(&s->index, want->amount, want->alignment));
}

static void slot_covered(void *ctx, uint32_t i) { gmr__vmf_cover_fresh(ctx, i); }

/* Refile every region of index `from` as fresh or not (`fresh`), in place:
 * the regions of a slot not in batches never touch (they merged when
 * filed), so nothing merges. */
static void refile(vmf_engine *e, gmr__free_index *from, bool fresh) {
  gmr__free_node *n = NULL;
  while ((n = gmr__free_index_any(from)) != NULL) {
    vmf_region *r = gmr__vmf_region_of(n);
    gmr__vmf_bin_remove(e, r);
    r->fresh = fresh;
    gmr__vmf_bin_insert(e, r);
  }
}

void gmr__vmf_cover_fresh(vmf_engine *e, uint32_t slot) {
  gmr__free_index *fresh = &gmr__vmf_slot(e, slot)->fresh;
  if (fresh->block_count == 0) return;
  /* Drain the fresh index first (a drained region is no neighbour to
   * merge, so none is absorbed before its turn), then file each region as
   * covered, merged with its covered and shared neighbours. */
  vmf_region *drained = NULL;
  gmr__free_node *n = NULL;
  while ((n = gmr__free_index_any(fresh)) != NULL) {
    vmf_region *r = gmr__vmf_region_of(n);
    gmr__vmf_bin_remove(e, r);
    r->fresh = false;
    r->node.free_next = gmr__vmf_node(drained);
    drained = r;
  }
  while (drained != NULL) {
    vmf_region *r = drained;
    drained = gmr__vmf_region_of(r->node.free_next);
    r->node.free_next = NULL;
    (void)file_kept(e, r, slot);
  }
}

void gmr__vmf_share_settled(vmf_engine *e) {
  for (uint32_t i = 1; i < e->slots.count; ++i) {
    const gmr__stream_event *ev = &gmr__vmf_slot(e, i)->base.ev;
    if (!ev->complete || !slot_holds_any(e, i)) continue;
    /* Covered memory once its record is done; all of it once nothing is
     * fresh (a device synchronisation covered it). */
    if (!gmr__stream_event_fresh(ev)) {
      gmr__vmf_move_slot(e, i, VMF_SHARED);
    } else if (batched(e, i)) {
      slot_take(e, i, VMF_SHARED);
    }
  }
}

/* A device synchronisation completed: blocks a capture held back are over
 * (e->sync_epoch counts completed ones), and settled memory is anyone's. */
static void engine_synchronized(void *ctx, uint64_t epoch) {
  vmf_engine *e = ctx;
  (void)epoch;
  e->sync_epoch++;
  gmr__vmf_share_settled(e);
}

/*
 * When a free records its stream's event. A record is of use only to
 * another stream of this engine (other shards take only memory of the same
 * stream or shared memory): while one stream is served here, on demand
 * (stream_ordered/stream_event.h: a warm pair records nothing, so threads
 * each on a stream and a shard of their own do not meet in the driver's
 * lock, where cudaEventRecord serialises them); from the second stream on,
 * in batches (one record per GMR__STREAM_EVENT_BATCH_FREES frees or
 * GMR__STREAM_EVENT_BATCH_BYTES bytes, and at the stream's next call after
 * another stream found that its fresh memory would have served: issue 32),
 * so that streams trading memory find most of it covered without a record
 * per free. streams_outlive: lazily (the table's mode). A slot starts in
 * the table's mode; the second stream turns every slot serving a stream to
 * batches.
 */
static void in_batches(vmf_engine *e, uint32_t i) {
  vmf_slot *s = gmr__vmf_slot(e, i);
  if (s->base.ev.batched) return;
  gmr__stream_event_record_in_batches(&s->base.ev);
  /* Memory the slot held as one fresh whole goes to its fresh index. */
  if (s->base.ev.batched && gmr__stream_event_fresh(&s->base.ev)) refile(e, &s->index, true);
}

static void slot_started(void *ctx, uint32_t i) {
  vmf_engine *e = ctx;
  if (e->streams_outlive || e->slots.active < 2) return;
  if (e->slots.active > 2) {
    in_batches(e, i);
    return;
  }
  for (uint32_t k = 1; k < e->slots.count; ++k) {
    if (!gmr__vmf_slot(e, k)->base.retired) in_batches(e, k);
  }
}

static const gmr__stream_slots_ops slot_ops = {
    .create = slot_create,
    .empty = slot_empty,
    .move_all = slot_move_all,
    .started = slot_started,
    .holds = slot_holds,
    .take = slot_take,
    .fits = slot_fits,
    .synchronized = engine_synchronized,
    .fresh_amount = slot_fresh_amount,
    .fresh_fits = slot_fresh_fits,
    .covered = slot_covered,
    .take_fit = slot_take_fit,
};

bool gmr__vmf_slots_init(vmf_engine *e) {
  /* On demand while one stream is served (slot_started turns batches on). */
  gmr__stream_events_mode mode =
      e->streams_outlive ? GMR__STREAM_EVENTS_LAZY : GMR__STREAM_EVENTS_ON_DEMAND;
  /* Keyed by handle (no stream_ids); only retired slots go to new streams. */
  return gmr__stream_slots_init(&e->slots, &slot_ops, e, true, mode, false,
                                GMR__STREAM_SLOTS_REUSE_NEVER, e->cuda, &e->events);
}

bool gmr__vmf_find_slot(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  uint32_t i = gmr__stream_slots_for_handle(&e->slots, stream);
  if (i == GMR__STREAM_SLOT_NONE) return false;
  *slot = i;
  return true;
}

bool gmr__vmf_slot_of(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  if (gmr__vmf_find_slot(e, stream, slot)) return true;
  /* Keyed by handle; the id is learned only before a record
   * (gmr__vmf_slot_check), never on a capturing stream. */
  gmr__stream_key key = {stream, 0};
  uint32_t i = gmr__stream_slots_of(&e->slots, key);
  if (i == GMR__STREAM_SLOT_NONE) return false;
  *slot = i;
  return true;
}

bool gmr__vmf_slot_check(vmf_engine *e, gmr_stream stream, uint32_t *slot, bool *not_capturing) {
  if (not_capturing != NULL) *not_capturing = false;
  if (gmr__vmf_slot(e, *slot)->base.ev.lazy) return true; /* the handle is the key */
  gmr__stream_key key = {stream, 0};
  if (gmr__stream_key_learn(e->cuda, stream, &key) != cudaSuccess) return false;
  /* cudaStreamPerThread's key is made up without asking the capture. */
  if (not_capturing != NULL) {
    *not_capturing =
        stream != (gmr_stream)cudaStreamPerThread && (key.id & GMR__STREAM_ID_CAPTURE) == 0;
  }
  /* The slot's id, or the id adopted; another id: the slot's stream was
   * destroyed and its handle reused, so what it freed is not this stream's
   * to reuse in stream order: the slot is retired (or, empty, changes
   * hands) and *slot becomes this stream's. */
  uint32_t i = gmr__stream_slots_of(&e->slots, key);
  if (i == GMR__STREAM_SLOT_NONE) return false;
  *slot = i;
  return true;
}

/* ---- filing and merging ------------------------------------------------------- */

/* May the FREE neighbour n merge into a region of `slot` (fresh or not)?
 * Only a filed one (a region drained from an index, and not filed yet, is
 * no neighbour to merge). `apart`: a fresh region takes in a covered or
 * shared neighbour only if it is no larger than the region being filed
 * (`own_bytes`): the memory it makes fresh again is at most what was
 * freed, while a large covered region, what other streams take, stays
 * covered (a warm-up stream's memory for a capture that follows). Merging
 * everything (before batches) made most of such a stream's memory fresh by
 * its last frees; merging nothing left the regions of a stream that works
 * alone in pieces, which moved memory on the bundled llm_multigraph
 * trace. */
static bool joins(const vmf_region *n, uint32_t slot, bool fresh, bool apart, size_t own_bytes) {
  if (n == NULL || n->state != VMF_FREE || n->blocked || !n->binned) return false;
  bool small = n->node.bytes <= own_bytes;
  if (n->slot == slot) return !apart || n->fresh == fresh || (fresh && small);
  return n->slot == VMF_SHARED && (!apart || !fresh || small);
}

/* File r under `slot`, merging with the neighbours joins() allows; a region
 * merged with fresh memory is fresh (no record covers all of it). */
static vmf_region *file(vmf_engine *e, vmf_region *r, uint32_t slot, bool apart) {
  bool fresh = slot != VMF_SHARED && r->fresh;
  r->slot = slot;
  size_t own_bytes = r->node.bytes;
  while (joins(r->next, slot, fresh, apart, own_bytes)) {
    if (r->next->binned) gmr__vmf_bin_remove(e, r->next);
    fresh = fresh || (r->next->slot == slot && r->next->fresh);
    gmr__vmf_absorb_next(e, r);
  }
  while (joins(r->prev, slot, fresh, apart, own_bytes)) {
    vmf_region *p = r->prev;
    if (p->binned) gmr__vmf_bin_remove(e, p);
    fresh = fresh || (p->slot == slot && p->fresh);
    p->slot = slot;
    gmr__vmf_absorb_next(e, p);
    r = p;
  }
  r->fresh = fresh;
  gmr__vmf_bin_insert(e, r);
  return r;
}

vmf_region *gmr__vmf_file_free(vmf_engine *e, vmf_region *r, uint32_t slot) {
  /* A growth's window (free memory of the slot, fresh or not, shared
   * memory and new memory) becomes one region. */
  return file(e, r, slot, false);
}

/* File r (its `fresh` set) under `slot`, kept apart if the slot keeps
 * fresh memory apart. */
/* File r (its `fresh` set) under `slot`, keeping fresh and covered memory
 * apart in a slot in batches: its covered memory is what other streams
 * take, which a new free must not make fresh again. */
static vmf_region *file_kept(vmf_engine *e, vmf_region *r, uint32_t slot) {
  return file(e, r, slot, batched(e, slot));
}

vmf_region *gmr__vmf_file_freed(vmf_engine *e, vmf_region *r, uint32_t slot) {
  r->fresh = batched(e, slot) && gmr__stream_event_fresh(&gmr__vmf_slot(e, slot)->base.ev);
  return file_kept(e, r, slot);
}

bool gmr__vmf_slot_batched(const vmf_engine *e, uint32_t slot) { return batched(e, slot); }

void gmr__vmf_move_slot(vmf_engine *e, uint32_t slot, uint32_t to) {
  move_index(e, &gmr__vmf_slot(e, slot)->fresh, to);
  move_index(e, &gmr__vmf_slot(e, slot)->index, to);
}
