/*
 * resources/vmm/placement/vmf_index.c (internal): regions, filing free
 * regions in their slot's index (stream_ordered/free_index.h), what stream
 * slots hold beyond the table of stream_ordered/stream_slots.h, and
 * merging, for a placement engine (vmf.h).
 */
#include <stdlib.h>
#include <string.h>

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
  tail->prev = r;
  tail->next = r->next;
  if (r->next != NULL) r->next->prev = tail;
  r->next = tail;
  r->node.bytes = bytes;
  contribute(e, r, true);
  contribute(e, tail, true);
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
  return &s->base;
}

/* Whether slot i holds nothing (no free region filed or blocked under it),
 * so that it may serve another stream. */
static bool slot_empty(void *ctx, uint32_t i) {
  const vmf_engine *e = ctx;
  if (gmr__vmf_slot(e, i)->index.block_count > 0) return false;
  for (const vmf_region *r = e->blocked; r != NULL; r = gmr__vmf_region_of(r->node.free_next)) {
    if (r->slot == i) return false;
  }
  return true;
}

static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  vmf_engine *e = ctx;
  bool any = gmr__vmf_slot(e, from)->index.block_count > 0;
  gmr__vmf_move_slot(e, from, to);
  return any;
}

/* The reclaim steps' view (stream_ordered/reclaim.h): a slot's index. The
 * engine's lock stays held throughout (no lock operations). */
static bool slot_holds(void *ctx, uint32_t i) {
  return gmr__vmf_slot((vmf_engine *)ctx, i)->index.block_count > 0;
}

static void slot_take(void *ctx, uint32_t from, uint32_t to) { gmr__vmf_move_slot(ctx, from, to); }

static bool slot_fits(void *ctx, uint32_t i, const gmr__reclaim_want *want) {
  return gmr__vmf_bin_find(ctx, i, want->amount, want->alignment) != NULL;
}

void gmr__vmf_share_settled(vmf_engine *e) {
  for (uint32_t i = 1; i < e->slots.count; ++i) {
    vmf_slot *s = gmr__vmf_slot(e, i);
    if (s->index.block_count > 0 && gmr__stream_event_settled(&s->base.ev)) {
      gmr__vmf_move_slot(e, i, VMF_SHARED);
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
 * (stream_ordered/stream_event.h: a warm pair records nothing, so threads each on a
 * stream and a shard of their own do not meet in the driver's lock, where
 * cudaEventRecord serialises them); from the second stream on, at every
 * free (RMM's rule), so that streams trading memory find it complete as
 * soon as its work is done. streams_outlive: lazily (the table's mode).
 * A slot starts in the table's mode; the second stream turns every slot
 * serving a stream to recording at every free.
 */
static void slot_started(void *ctx, uint32_t i) {
  vmf_engine *e = ctx;
  if (e->streams_outlive || e->slots.active < 2) return;
  if (e->slots.active > 2) {
    gmr__stream_event_record_every_free(&gmr__vmf_slot(e, i)->base.ev);
    return;
  }
  for (uint32_t k = 1; k < e->slots.count; ++k) {
    vmf_slot *s = gmr__vmf_slot(e, k);
    if (!s->base.retired) gmr__stream_event_record_every_free(&s->base.ev);
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
};

bool gmr__vmf_slots_init(vmf_engine *e) {
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

bool gmr__vmf_slot_check(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  if (gmr__vmf_slot(e, *slot)->base.ev.lazy) return true; /* the handle is the key */
  gmr__stream_key key = {stream, 0};
  if (gmr__stream_key_learn(e->cuda, stream, &key) != cudaSuccess) return false;
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

/* May the FREE neighbour n merge into a region of `slot`? */
static bool joins(const vmf_region *n, uint32_t slot) {
  return n != NULL && n->state == VMF_FREE && !n->blocked &&
         (n->slot == slot || n->slot == VMF_SHARED);
}

vmf_region *gmr__vmf_file_free(vmf_engine *e, vmf_region *r, uint32_t slot) {
  r->slot = slot;
  while (joins(r->next, slot)) {
    if (r->next->binned) gmr__vmf_bin_remove(e, r->next);
    gmr__vmf_absorb_next(e, r);
  }
  while (joins(r->prev, slot)) {
    vmf_region *p = r->prev;
    if (p->binned) gmr__vmf_bin_remove(e, p);
    p->slot = slot;
    gmr__vmf_absorb_next(e, p);
    r = p;
  }
  gmr__vmf_bin_insert(e, r);
  return r;
}

void gmr__vmf_move_slot(vmf_engine *e, uint32_t slot, uint32_t to) {
  vmf_region *r = NULL;
  while ((r = gmr__vmf_bin_any(e, slot)) != NULL) {
    gmr__vmf_bin_remove(e, r);
    (void)gmr__vmf_file_free(e, r, to);
  }
}
