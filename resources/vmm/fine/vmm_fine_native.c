/*
 * resources/vmm/fine/vmm_fine_native.c (internal): where a `vmm` shard's
 * memory comes from (vmm_fine.h, the placement engine's source): the slow
 * path, which maps memory where a request goes, and in-place growth; the
 * driver calls themselves are in vmm_fine_handles.c.
 *
 * Slow path for `bytes` on stream T: among runs of regions that T may use
 * (its free regions, shared ones, holes), the window that needs the fewest
 * pages mapped (then the tightest, then the lowest address); its holes get
 * physical memory:
 *  - moved: when holding more would pass remap_permille (thousandths) above
 *    the peak of live bytes (or the device is out of memory), whole handles
 *    whose VA is wholly inside shared free memory (their streams' work is
 *    done) are unmapped there and mapped here, largest first;
 *  - new: the rest in new handles of at most held / handle_divisor each (so
 *    that later moves have pieces to work with), plus growth_percent of what
 *    is held as a free tail after the request (fewer, larger growths), never
 *    past the remap threshold; when the live peak has not grown since memory
 *    last moved, up to steady_percent more may be held instead of moving
 *    again, and moves made all the same raise steady_percent (a repeating
 *    program settles).
 * One cuMemMap per handle and one cuMemSetAccess per hole. A failure gives
 * back what this call created or moved (unmapped and released) and leaves
 * every region as it was, except that moved handles' old places are holes.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

/* ---- mapping memory over a window's holes -------------------------------------------- */

/* The most that may be held before free handles move instead of new ones
 * being made: remap_permille per thousand above the peak of live bytes (this request
 * included), plus the steady-state slack. SIZE_MAX when moving is off. */
static size_t cap_bytes(const vmf_engine *e, size_t more_live) {
  if (e->remap_permille == UINT32_MAX) return SIZE_MAX;
  size_t peak = e->live_bytes + more_live;
  if (peak < e->peak_live_bytes) peak = e->peak_live_bytes;
  size_t pm = e->remap_permille;
  return gmr__align_up(peak + peak / 1000 * pm + peak % 1000 * pm / 1000, e->page_bytes) +
         e->steady_extra_bytes;
}

/* Whether mapping `bytes` more would pass the cap. */
static bool past_cap(const vmf_engine *e, size_t bytes) {
  size_t cap = cap_bytes(e, bytes);
  return cap != SIZE_MAX && e->held_bytes + gmr__align_up(bytes, e->page_bytes) > cap;
}

/* Free bytes filed under streams (not shared): reusable by their own stream,
 * movable only once their work is known done. */
static size_t unsettled_free_bytes(vmf_engine *e) {
  size_t bytes = 0;
  for (size_t i = 1; i < e->slots.count; ++i) bytes += gmr__vmf_slot_free_bytes(e, (uint32_t)i);
  return bytes;
}

/* Handles wholly inside shared free regions, largest first. */
static vmf_handle **movable_handles(vmf_engine *e, size_t *count) {
  *count = 0;
  const gmr__free_index *shared = &gmr__vmf_slot(e, VMF_SHARED)->index;
  size_t cap = 0;
  vmf_handle **out = NULL;
  for (gmr__free_node *n = gmr__free_index_next(shared, NULL); n != NULL;
       n = gmr__free_index_next(shared, n)) {
    const vmf_region *r = gmr__vmf_region_of(n);
    vmf_arena *a = r->arena;
    uintptr_t at = gmr__align_up(r->node.addr, e->page_bytes);
    while (at + e->page_bytes <= r->node.addr + r->node.bytes) {
      vmf_handle *h = a->pages[(at - a->base) / e->page_bytes];
      if (h == NULL || h->va != at) {
        at += e->page_bytes;
        continue;
      }
      if (h->va + h->bytes <= r->node.addr + r->node.bytes) {
        if (*count == cap) {
          cap = cap == 0 ? 64 : cap * 2;
          vmf_handle **grown = realloc(out, cap * sizeof *grown);
          if (grown == NULL) return out; /* fewer candidates: still correct */
          out = grown;
        }
        out[(*count)++] = h;
      }
      at += h->bytes;
    }
  }
  /* Largest first (insertion sort: candidates are few). */
  for (size_t i = 1; i < *count; ++i) {
    vmf_handle *h = out[i];
    size_t j = i;
    while (j > 0 && out[j - 1]->bytes < h->bytes) {
      out[j] = out[j - 1];
      j--;
    }
    out[j] = h;
  }
  return out;
}

/* Move free handles into the fills, largest first, until `target` bytes
 * came (or nothing more fits). */
static CUresult harvest(vmf_engine *e, vmf_plan *p, vmf_handle **cands, size_t count, uintptr_t avoid,
                        size_t avoid_bytes, size_t target) {
  CUresult cu = CUDA_SUCCESS;
  for (size_t f = 0; f < p->fill_count && cu == CUDA_SUCCESS && target > 0; ++f) {
    vmf_fill *x = &p->fills[f];
    for (size_t i = 0; i < count && x->mapped_bytes < x->need_bytes && target > 0; ++i) {
      vmf_handle *h = cands[i];
      vmf_region *r = NULL;
      if (h == NULL || h->bytes > x->room_bytes - x->mapped_bytes) continue;
      if (!gmr__vmf_movable(e, h, avoid, avoid_bytes, &r)) continue;
      if (!gmr__vmf_plan_room(p, 1) || !gmr__vmf_reserve_regions(e, 4)) break;
      cu = gmr__vmf_carve(e, r, h);
      if (cu != CUDA_SUCCESS) break;
      cands[i] = NULL;
      p->moved[p->moved_count++] = h;
      h->target = x->addr + x->mapped_bytes; /* mapped there by map_all */
      x->mapped_bytes += h->bytes;
      target = target > h->bytes ? target - h->bytes : 0;
      e->counts.harvested_pages += h->bytes / e->page_bytes;
    }
  }
  return cu;
}

/* Would harvest() bring `target` bytes into these fills? (The same greedy
 * choice, without moving anything.) */
static bool harvest_fits(const vmf_engine *e, const vmf_plan *p, vmf_handle **cands, size_t count,
                         uintptr_t avoid, size_t avoid_bytes, size_t target) {
  bool *used = calloc(count + 1, sizeof *used);
  if (used == NULL) return false;
  for (size_t f = 0; f < p->fill_count && target > 0; ++f) {
    const vmf_fill *x = &p->fills[f];
    size_t mapped = x->mapped_bytes;
    for (size_t i = 0; i < count && mapped < x->need_bytes && target > 0; ++i) {
      const vmf_handle *h = cands[i];
      if (used[i] || h->bytes > x->room_bytes - mapped) continue;
      if (h->va <= avoid + avoid_bytes && avoid <= h->va + h->bytes) continue;
      used[i] = true;
      mapped += h->bytes;
      target = target > h->bytes ? target - h->bytes : 0;
    }
  }
  free(used);
  (void)e;
  return target == 0;
}

/* Map every moved and made handle at its place (h->va), then give access
 * per fill. */
static gmr_status map_all(vmf_engine *e, vmf_plan *p, gmr_failure *failure) {
  vmf_handle **lists[2] = {p->moved, p->made};
  size_t counts[2] = {p->moved_count, p->made_count};
  for (int l = 0; l < 2; ++l) {
    for (size_t i = 0; i < counts[l]; ++i) {
      vmf_handle *h = lists[l][i];
      CUresult cu = gmr__vmf_map_handle(e, gmr__vmf_arena_of(e, h->target), h, h->target);
      if (cu != CUDA_SUCCESS) return gmr__cu_fail(e->vmm, failure, "cuMemMap", cu, NULL);
    }
  }
  for (size_t f = 0; f < p->fill_count; ++f) {
    vmf_fill *x = &p->fills[f];
    if (x->mapped_bytes == 0) continue;
    CUresult cu = gmr__vmf_set_access(e, x->addr, x->mapped_bytes);
    if (cu != CUDA_SUCCESS) {
      char detail[96];
      snprintf(detail, sizeof detail, "giving %zu device(s) access to %zu bytes", e->access_count,
               x->mapped_bytes);
      return gmr__cu_fail(e->vmm, failure, "cuMemSetAccess", cu, detail);
    }
  }
  return GMR_OK;
}

/* Turn the mapped part of each fill's hole into a free region of `slot`,
 * merged with the window's free regions. Returns the merged region (filed). */
static vmf_region *commit(vmf_engine *e, vmf_plan *p, vmf_region *first, uint32_t slot) {
  if (p->fill_count == 0) {
    if (first->binned) gmr__vmf_bin_remove(e, first);
    return gmr__vmf_file_free(e, first, slot);
  }
  vmf_region *last = NULL;
  for (size_t f = 0; f < p->fill_count; ++f) {
    vmf_fill *x = &p->fills[f];
    vmf_region *h = x->hole;
    if (x->mapped_bytes < h->node.bytes) {
      vmf_region *t = gmr__vmf_region_new(e);
      gmr__vmf_split(e, h, x->mapped_bytes, t);
    }
    gmr__vmf_set_state(e, h, VMF_FREE);
    h->slot = slot;
    last = gmr__vmf_file_free(e, h, slot);
  }
  return last;
}

/* Fill the holes of the window that starts at `first` so that `bytes` from
 * its start are mapped; then the window is one free region of `slot`,
 * returned unfiled in *out. `force_move`: move free handles whatever the
 * threshold (the device is out of memory). */
/* What fill_window returns when moving free memory would not reach the
 * threshold in this window and `try_elsewhere` was set: nothing changed. */
#define FILL_ELSEWHERE GMR_ERR_BUSY

static gmr_status fill_window(vmf_engine *e, vmf_region *first, size_t bytes, uint32_t slot,
                              bool force_move, bool try_elsewhere, vmf_region **out,
                              gmr_failure *failure) {
  vmf_plan p = {0};
  size_t covered = 0, holes = 0;
  for (vmf_region *r = first; r != NULL && covered < bytes; r = r->next) {
    holes += r->state == VMF_HOLE;
    covered += r->node.bytes;
  }
  p.fills = calloc(holes > 0 ? holes : 1, sizeof *p.fills);
  if (p.fills == NULL || !gmr__vmf_reserve_regions(e, 2 * holes + 4)) {
    free(p.fills);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  covered = 0;
  size_t need_total = 0;
  for (vmf_region *r = first; r != NULL && covered < bytes; r = r->next) {
    if (r->state == VMF_HOLE) {
      vmf_fill *x = &p.fills[p.fill_count++];
      size_t left = bytes - covered;
      x->hole = r;
      x->addr = r->node.addr;
      x->room_bytes = r->node.bytes;
      x->need_bytes = gmr__align_up(left < r->node.bytes ? left : r->node.bytes, e->page_bytes);
      need_total += x->need_bytes;
    }
    covered += r->node.bytes;
  }
  size_t cap = cap_bytes(e, bytes);
  if (need_total > 0 && !force_move && e->held_bytes + need_total > cap && e->counts.harvest > 0 &&
      e->peak_live_bytes <= e->peak_live_at_harvest) {
    /* The live peak has not grown since memory last moved: moving again
     * would repeat every time the program repeats. Hold a little more
     * instead, up to steady_percent above the peak. */
    size_t most = e->peak_live_bytes / 100 * e->steady_percent;
    size_t want = e->held_bytes + need_total - cap;
    if (e->steady_extra_bytes + want <= most) {
      e->steady_extra_bytes += want;
      cap += want;
    }
  }
  gmr_status st = GMR_OK;
  if (need_total > 0 && (force_move || e->held_bytes + need_total > cap)) {
    size_t target = force_move ? need_total : e->held_bytes + need_total - cap;
    size_t count = 0;
    vmf_handle **cands = movable_handles(e, &count);
    if (try_elsewhere && !harvest_fits(e, &p, cands, count, first->node.addr, covered, target)) {
      free(cands);
      gmr__vmf_plan_free(&p);
      return FILL_ELSEWHERE;
    }
    size_t before = e->counts.harvested_pages;
    CUresult cu = harvest(e, &p, cands, count, first->node.addr, covered, target);
    free(cands);
    if (e->counts.harvested_pages != before) {
      /* Moving again and again with no new live peak: the program repeats,
       * and would pay for moves every time it does. Every VMF_STEADY_MOVES
       * such moves double the slack it may hold instead (up to
       * VMF_MAX_STEADY_PERCENT), so it settles at the slack its pattern needs;
       * a few moves (a program finding its steady state) change nothing. */
      bool steady = e->counts.harvest > 0 && e->peak_live_bytes <= e->peak_live_at_harvest;
      e->steady_harvest_count = steady ? e->steady_harvest_count + 1 : 0;
      /* A new live peak is a new phase: the slack held for the last one is
       * not carried over (it would add to every later phase's cap). */
      if (!steady) e->steady_extra_bytes = 0;
      if (e->steady_harvest_count >= VMF_STEADY_MOVES) {
        e->steady_harvest_count = 0;
        e->steady_percent = e->steady_percent * 2 > VMF_MAX_STEADY_PERCENT
                                ? VMF_MAX_STEADY_PERCENT
                                : e->steady_percent * 2;
      }
      e->counts.harvest++;
      e->peak_live_at_harvest = e->peak_live_bytes;
    }
    if (cu != CUDA_SUCCESS) st = gmr__cu_fail(e->vmm, failure, "cuMemUnmap", cu, NULL);
  }
  if (st == GMR_OK) {
    CUresult cu = gmr__vmf_create_rest(e, &p, cap);
    if (cu != CUDA_SUCCESS) {
      char detail[96];
      snprintf(detail, sizeof detail, "new physical memory for %zu bytes", bytes);
      st = gmr__cu_fail(e->vmm, failure, "cuMemCreate", cu, detail);
    }
  }
  if (st == GMR_OK) st = map_all(e, &p, failure);
  if (st != GMR_OK) {
    gmr__vmf_plan_undo(e, &p);
    gmr__vmf_plan_free(&p);
    return st;
  }
  vmf_region *r = commit(e, &p, first, slot);
  gmr__vmf_plan_free(&p);
  gmr__vmf_bin_remove(e, r);
  *out = r;
  return GMR_OK;
}

/* ---- choosing a window ---------------------------------------------------------------- */

static bool usable(const vmf_region *r, uint32_t slot) {
  return r->state == VMF_HOLE ||
         (r->state == VMF_FREE && !r->blocked && (r->slot == slot || r->slot == VMF_SHARED));
}

typedef struct window {
  vmf_region *first;
  size_t cost_bytes; /* pages to map */
  size_t span_bytes; /* bytes of the regions it spans */
} window;

/* Cost of the window from `first` for `bytes`; false if the run ends first. */
static bool window_cost(const vmf_engine *e, vmf_region *first, size_t bytes, uint32_t slot,
                        window *w) {
  size_t covered = 0, cost = 0;
  vmf_region *r = first;
  for (; r != NULL && usable(r, slot) && covered < bytes; r = r->next) {
    if (r->state == VMF_HOLE) {
      size_t left = bytes - covered;
      cost += gmr__align_up(left < r->node.bytes ? left : r->node.bytes, e->page_bytes);
    }
    covered += r->node.bytes;
  }
  if (covered < bytes) return false;
  w->first = first;
  w->cost_bytes = cost;
  w->span_bytes = covered;
  return true;
}

static bool window_better(const window *a, const window *b) {
  if (b->first == NULL) return true;
  if (a->cost_bytes != b->cost_bytes) return a->cost_bytes < b->cost_bytes;
  if (a->span_bytes != b->span_bytes) return a->span_bytes < b->span_bytes;
  if (a->first->arena != b->first->arena) return a->first->arena->index < b->first->arena->index;
  return a->first->node.addr < b->first->node.addr;
}

static window choose_window(vmf_engine *e, size_t bytes, uint32_t slot) {
  window best = {0};
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    if (a->free_bytes + e->hole_bytes < bytes) continue;
    for (vmf_region *r = a->first; r != NULL; r = r->next) {
      if (!usable(r, slot)) continue;
      window w;
      if (window_cost(e, r, bytes, slot, &w) && window_better(&w, &best)) best = w;
    }
  }
  return best;
}

/* The window at the top of the last VA chunk: its last hole (and the usable
 * free region before it), or NULL. */
static vmf_region *top_window(vmf_engine *e, uint32_t slot) {
  vmf_arena *a = e->last_arena;
  if (a == NULL) return NULL;
  vmf_region *last = a->first;
  while (last->next != NULL) last = last->next;
  if (last->state != VMF_HOLE) return NULL;
  return last->prev != NULL && usable(last->prev, slot) ? last->prev : last;
}

/* The source's grow (vmf.h). */
static gmr_status native_grow(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                              uint32_t slot, bool capturing, vmf_region **out,
                              gmr_failure *failure) {
  (void)stream;
  *out = NULL;
  /* Streams whose work is done give their free regions to everyone, so
   * that their handles may move (during a capture: no records). */
  (void)gmr__reclaim_collect(&e->slots, VMF_SHARED, NULL,
                             capturing ? GMR__RECLAIM_QUERY : GMR__RECLAIM_SETTLE);
  size_t need = alignment > VMF_UNIT ? bytes + alignment - VMF_UNIT : bytes;
  if (!capturing && past_cap(e, need) && unsettled_free_bytes(e) >= e->page_bytes) {
    /* Moving memory needs its streams' work done, and a program's host code
     * runs ahead of the GPU: what it freed is mostly still pending when a
     * growth would pass the remap threshold, so nothing could move and the
     * pool would grow instead. One device synchronisation makes all of it
     * shared and movable (PyTorch's expandable segments synchronise before
     * unmapping too); steady programs stay below the threshold and never
     * come here. */
    (void)gmr__reclaim_device_synchronize(&e->slots);
  }
  window w = choose_window(e, need, slot);
  if (w.first == NULL) {
    size_t va = gmr__align_up(need, e->page_bytes) + e->page_bytes;
    vmf_arena *a = NULL;
    CUresult cu = gmr__vmf_arena_add(e, va > e->va_chunk_bytes ? va : e->va_chunk_bytes, &a);
    if (cu != CUDA_SUCCESS) {
      char detail[96];
      snprintf(detail, sizeof detail, "reserving more device addresses for %zu bytes", bytes);
      return gmr__cu_fail(e->vmm, failure, "cuMemAddressReserve", cu, detail);
    }
    w.first = a->first;
  }
  gmr_status st = fill_window(e, w.first, need, slot, false, true, out, failure);
  if (st == FILL_ELSEWHERE) {
    /* Free memory cannot move into this window's holes (too small for the
     * handles): the top of the last VA chunk takes any handle. */
    vmf_region *top = top_window(e, slot);
    st = top != NULL ? fill_window(e, top, need, slot, false, true, out, failure) : FILL_ELSEWHERE;
    if (st == FILL_ELSEWHERE) st = fill_window(e, w.first, need, slot, false, false, out, failure);
  }
  if (st == GMR_ERR_OUT_OF_MEMORY && failure != NULL && failure->cuda_error != 0) {
    /* The device is out of memory: move whatever free memory can move. */
    w = choose_window(e, need, slot);
    if (w.first != NULL) st = fill_window(e, w.first, need, slot, true, false, out, failure);
  }
  return st;
}

/* The source's extend (vmf.h): the holes after r get memory. */
static gmr_status native_extend(vmf_engine *e, vmf_region *r, size_t grow_bytes,
                                gmr_stream stream, uint32_t slot, bool capturing,
                                gmr_failure *failure) {
  (void)stream;
  (void)capturing;
  vmf_region *n = r->next;
  window w;
  if (n == NULL || !usable(n, slot) || !window_cost(e, n, grow_bytes, slot, &w)) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool: the %zu bytes after the allocation at %#zx are not free "
                            "(extend grows in place only)",
                            grow_bytes, (size_t)r->node.addr);
  }
  vmf_region *f = NULL;
  gmr_status st = fill_window(e, n, grow_bytes, slot, false, false, &f, failure);
  if (st != GMR_OK) return st;
  /* f starts right after r (r is live: nothing merged across it). */
  assert(f == r->next);
  gmr__vmf_grow_into_next(e, r, grow_bytes);
  return GMR_OK;
}

const vmf_source gmr__vmm_fine_source = {
    .grow = native_grow,
    .extend = native_extend,
    .trim = gmr__vmf_native_trim,
    .destroy = gmr__vmf_native_destroy,
    .check = gmr__vmf_native_check,
};
