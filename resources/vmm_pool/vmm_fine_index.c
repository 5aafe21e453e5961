/*
 * resources/vmm_pool/vmm_fine_index.c (internal): regions, stream slots and
 * the two-level segregated-fit (TLSF) index of free regions of the fine
 * placement engine (vmm_fine.h).
 */
#include <stdlib.h>
#include <string.h>

#include "resources/vmm_pool/vmm_fine.h"

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
      r->arena->free_bytes += r->bytes;
    } else {
      r->arena->free_bytes -= r->bytes;
    }
  } else if (r->state == VMF_HOLE) {
    if (add) {
      e->hole_bytes += r->bytes;
      e->hole_count++;
    } else {
      e->hole_bytes -= r->bytes;
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
  tail->addr = r->addr + bytes;
  tail->bytes = r->bytes - bytes;
  tail->state = r->state;
  tail->arena = r->arena;
  tail->slot = r->slot;
  tail->prev = r;
  tail->next = r->next;
  if (r->next != NULL) r->next->prev = tail;
  r->next = tail;
  r->bytes = bytes;
  contribute(e, r, true);
  contribute(e, tail, true);
}

void gmr__vmf_absorb_next(vmf_engine *e, vmf_region *r) {
  vmf_region *n = r->next;
  contribute(e, r, false);
  contribute(e, n, false);
  r->bytes += n->bytes;
  r->next = n->next;
  if (n->next != NULL) n->next->prev = r;
  contribute(e, r, true);
  gmr__vmf_region_put(e, n);
}

/* ---- stream slots ------------------------------------------------------------ */

bool gmr__vmf_find_slot(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  size_t last = e->last_slot;
  if (last != VMF_SHARED && last < e->slot_count && e->slot_streams[last] == stream &&
      !e->slots[last]->retired) {
    *slot = (uint32_t)last;
    return true;
  }
  for (size_t i = 1; i < e->slot_count; ++i) {
    if (e->slot_streams[i] == stream && !e->slots[i]->retired) {
      e->last_slot = i;
      *slot = (uint32_t)i;
      return true;
    }
  }
  return false;
}

/* Whether retired slot i holds nothing (no free region filed or blocked
 * under it), so that it may serve another stream. */
static bool slot_reusable(const vmf_engine *e, size_t i) {
  const vmf_slot *s = e->slots[i];
  if (!s->retired || s->free_count > 0) return false;
  for (const vmf_region *r = e->blocked; r != NULL; r = r->bin_next) {
    if (r->slot == i) return false;
  }
  return true;
}

/*
 * When a free records its stream's event. A record is of use only to
 * another stream of this engine (other shards take only memory of the same
 * stream or shared memory): while one stream is served here, on demand
 * (core/stream_event.h: a warm pair records nothing, so threads each on a
 * stream and a shard of their own do not meet in the driver's lock, where
 * cudaEventRecord serialises them); from the second stream on, at every
 * free (RMM's rule), so that streams trading memory find it complete as
 * soon as its work is done. streams_outlive: lazily.
 */
static gmr__stream_events_mode slot_mode(const vmf_engine *e) {
  if (e->streams_outlive) return GMR__STREAM_EVENTS_LAZY;
  return e->stream_slot_count >= 2 ? GMR__STREAM_EVENTS_EVERY_FREE : GMR__STREAM_EVENTS_ON_DEMAND;
}

/* A slot now serves `stream`: counted; the second stream turns every slot
 * to recording at every free. */
static void slot_started(vmf_engine *e, size_t i, gmr_stream stream) {
  e->stream_slot_count++;
  gmr__stream_event_init(&e->slots[i]->ev, (gmr__stream_key){stream, 0}, slot_mode(e));
  e->slots[i]->retired = false;
  e->slot_streams[i] = stream;
  e->last_slot = i;
  if (e->stream_slot_count != 2 || e->streams_outlive) return;
  for (size_t k = 1; k < e->slot_count; ++k) {
    vmf_slot *s = e->slots[k];
    if (!s->retired) gmr__stream_event_record_every_free(&s->ev);
  }
}

bool gmr__vmf_slot_of(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  if (gmr__vmf_find_slot(e, stream, slot)) return true;
  /* Keyed by handle; the id is learned only before a record
   * (gmr__vmf_slot_check), never on a capturing stream. */
  for (size_t i = 1; i < e->slot_count; ++i) {
    if (!slot_reusable(e, i)) continue;
    slot_started(e, i, stream);
    *slot = (uint32_t)i;
    return true;
  }
  if (e->slot_count == e->slot_capacity) {
    size_t n = e->slot_capacity == 0 ? 8 : e->slot_capacity * 2;
    vmf_slot **s = realloc(e->slots, n * sizeof *s);
    if (s == NULL) return false;
    e->slots = s;
    gmr_stream *st = realloc(e->slot_streams, n * sizeof *st);
    if (st == NULL) return false;
    e->slot_streams = st;
    e->slot_capacity = n;
  }
  vmf_slot *s = calloc(1, sizeof *s);
  if (s == NULL) return false;
  size_t i = e->slot_count++;
  e->slots[i] = s;
  slot_started(e, i, stream);
  *slot = (uint32_t)i;
  return true;
}

bool gmr__vmf_slot_check(vmf_engine *e, gmr_stream stream, uint32_t *slot) {
  vmf_slot *s = e->slots[*slot];
  if (s->ev.lazy) return true; /* the handle is the key */
  gmr__stream_key key = {stream, 0};
  if (gmr__stream_key_learn(e->cuda, stream, &key) != cudaSuccess) return false;
  switch (gmr__stream_key_compare(false, s->ev.key, key)) {
    case GMR__STREAM_KEY_SAME:
      return true;
    case GMR__STREAM_KEY_ADOPT:
      s->ev.key.id = key.id;
      return true;
    case GMR__STREAM_KEY_OTHER:
      break;
  }
  /* The slot's stream was destroyed and its handle reused: what it freed is
   * not this stream's to reuse in stream order. */
  s->retired = true;
  e->stream_slot_count--;
  if (!gmr__vmf_slot_of(e, stream, slot)) return false;
  e->slots[*slot]->ev.key = key;
  return true;
}

/* ---- TLSF ---------------------------------------------------------------------- */

static unsigned msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* The bin of a size, in units: exact below 32 units, then 32 bins per power
 * of two. */
static void bin_of(size_t bytes, unsigned *fl, unsigned *sl) {
  uint64_t u = bytes / VMF_UNIT;
  if (u < VMF_SL_COUNT) {
    *fl = 0;
    *sl = (unsigned)u;
    return;
  }
  unsigned m = msb64(u);
  *fl = m - VMF_SL_BITS + 1;
  *sl = (unsigned)((u >> (m - VMF_SL_BITS)) & (VMF_SL_COUNT - 1));
}

void gmr__vmf_bin_insert(vmf_engine *e, vmf_region *r) {
  vmf_slot *s = e->slots[r->slot];
  unsigned fl, sl;
  bin_of(r->bytes, &fl, &sl);
  vmf_region *head = s->bins[fl][sl];
  r->bin_prev = NULL;
  r->bin_next = head;
  if (head != NULL) head->bin_prev = r;
  s->bins[fl][sl] = r;
  s->fl_bitmap |= (uint64_t)1 << fl;
  s->sl_bitmap[fl] |= 1u << sl;
  s->free_bytes += r->bytes;
  s->free_count++;
  r->binned = true;
}

void gmr__vmf_bin_remove(vmf_engine *e, vmf_region *r) {
  vmf_slot *s = e->slots[r->slot];
  unsigned fl, sl;
  bin_of(r->bytes, &fl, &sl);
  if (r->bin_prev != NULL) {
    r->bin_prev->bin_next = r->bin_next;
  } else {
    s->bins[fl][sl] = r->bin_next;
    if (r->bin_next == NULL) {
      s->sl_bitmap[fl] &= ~(1u << sl);
      if (s->sl_bitmap[fl] == 0) s->fl_bitmap &= ~((uint64_t)1 << fl);
    }
  }
  if (r->bin_next != NULL) r->bin_next->bin_prev = r->bin_prev;
  r->bin_prev = r->bin_next = NULL;
  s->free_bytes -= r->bytes;
  s->free_count--;
  r->binned = false;
}

/* Most regions of one bin looked at for the best fit. */
#define BIN_SCAN_MAX 32

static bool fits(const vmf_region *r, size_t bytes, size_t alignment) {
  if (alignment <= VMF_UNIT) return r->bytes >= bytes;
  uintptr_t start = (r->addr + alignment - 1) & ~(uintptr_t)(alignment - 1);
  return start - r->addr <= r->bytes && r->bytes - (start - r->addr) >= bytes;
}

/* Smaller first, then lower address (keeps placement compact). */
static bool better(const vmf_region *a, const vmf_region *b) {
  return b == NULL || a->bytes < b->bytes || (a->bytes == b->bytes && a->addr < b->addr);
}

static vmf_region *scan_bin(vmf_region *head, size_t bytes, size_t alignment) {
  vmf_region *best = NULL;
  unsigned n = 0;
  for (vmf_region *r = head; r != NULL && n < BIN_SCAN_MAX; r = r->bin_next, ++n) {
    if (fits(r, bytes, alignment) && better(r, best)) {
      best = r;
      if (r->bytes == bytes && alignment <= VMF_UNIT) break; /* exact */
    }
  }
  return best;
}

vmf_region *gmr__vmf_bin_find(vmf_engine *e, uint32_t slot, size_t bytes, size_t alignment) {
  vmf_slot *s = e->slots[slot];
  if (s->fl_bitmap == 0) return NULL;
  unsigned fl, sl;
  bin_of(bytes, &fl, &sl);
  /* The request's own bin holds sizes on both sides of it. */
  vmf_region *best = NULL;
  if ((s->sl_bitmap[fl] >> sl) & 1u) best = scan_bin(s->bins[fl][sl], bytes, alignment);
  if (best != NULL) return best;
  /* Any later bin fits (alignment aside): its first non-empty one. */
  for (;;) {
    uint32_t sl_map = sl + 1 < VMF_SL_COUNT ? s->sl_bitmap[fl] & (~0u << (sl + 1)) : 0;
    if (sl_map == 0) {
      uint64_t fl_map = fl + 1 < 64 ? s->fl_bitmap & (~(uint64_t)0 << (fl + 1)) : 0;
      if (fl_map == 0) return NULL;
      fl = (unsigned)__builtin_ctzll(fl_map);
      sl_map = s->sl_bitmap[fl];
    }
    sl = (unsigned)__builtin_ctz(sl_map);
    best = scan_bin(s->bins[fl][sl], bytes, alignment);
    if (best != NULL) return best;
  }
}

vmf_region *gmr__vmf_bin_any(vmf_engine *e, uint32_t slot) {
  vmf_slot *s = e->slots[slot];
  if (s->fl_bitmap == 0) return NULL;
  unsigned fl = (unsigned)__builtin_ctzll(s->fl_bitmap);
  unsigned sl = (unsigned)__builtin_ctz(s->sl_bitmap[fl]);
  return s->bins[fl][sl];
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
