/*
 * resources/vmm/pages/vmm_pages_alloc.c (internal): the phases of an
 * allocation of vmm_pages (gmr/vmm_pages_resource.h), in VPMM's terms, and
 * in-place growth. Every function here runs with the pool's lock held; when the
 * caller's stream captures, the calling thread is in relaxed capture mode and
 * `capturing` forbids stream-ordered calls.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"

/* ---- phase 0 ------------------------------------------------------------ */

/* Unmap the zombie z if its event completed; a hole afterwards. A refused
 * unmap leaves what is still mapped a zombie, to be tried again later. */
static void collect_zombie(vmm_pages *p, vmm_region *z) {
  if (!gmr__vmm_event_done(p, z->event)) return;
  vmm_region *spare = gmr__vmm_region_new();
  if (spare == NULL) return; /* try again at the next allocation */
  size_t done = 0;
  (void)gmr__vmm_unmap_pages(p, z->root, z->addr, z->bytes, false, &done, NULL, NULL);
  if (done == 0) {
    gmr__vmm_region_delete(spare);
    return;
  }
  if (done < z->bytes) {
    gmr__vmm_region_split(p, z, done, spare); /* the still-mapped tail stays a zombie */
  } else {
    gmr__vmm_region_delete(spare);
  }
  (void)gmr__vmm_make_hole(p, z);
}

void gmr__vmm_collect(vmm_pages *p, bool may_query, gmr_stream stream) {
  vmm_region *next = NULL;
  for (vmm_region *z = p->zombie_list.head; z != NULL; z = next) {
    next = z->list_next; /* z may be merged away; other zombies stay */
    if (may_query || z->event == NULL || z->event->complete) collect_zombie(p, z);
  }
  if (!may_query) return;
  /* Free regions held back by record_stream events: reusable once all are
   * done. A merge can remove any neighbour, so start over after each. */
  bool changed = true;
  while (changed) {
    changed = false;
    for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
      if (!gmr__vmm_region_held(r)) continue;
      /* Captured uses: back to the freeing stream once it comes after them
       * (PyTorch's graph_capture_record_stream_reuse rule). */
      if (r->capture_wait &&
          (stream == NULL || stream != r->stream ||
           !gmr__capture_markers_precede(p->pool.cuda, &p->capture_walks, &r->capture_markers,
                                         stream))) {
        continue;
      }
      bool done = true;
      for (uint32_t i = 0; i < r->blocker_count && done; ++i) {
        done = gmr__vmm_event_done(p, r->blockers[i]);
      }
      if (!done) continue;
      gmr__vmm_region_clear_blockers(p, r);
      (void)gmr__vmm_merge_free(p, r);
      changed = true;
      break;
    }
  }
}

/* ---- phase 1 ------------------------------------------------------------ */

static bool fits(const vmm_region *r, size_t bytes) {
  return r->bytes >= bytes && !gmr__vmm_region_held(r);
}

/* Smaller first, then older (lower id). */
static bool better(const vmm_region *a, const vmm_region *b) {
  return b == NULL || a->bytes < b->bytes || (a->bytes == b->bytes && a->id < b->id);
}

/* 1a: the smallest free region of `stream` that fits. No CUDA call. */
static vmm_region *fit_same_stream(vmm_pages *p, size_t bytes, gmr_stream stream) {
  vmm_region *best = NULL;
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    if (r->stream == stream && fits(r, bytes) && better(r, best)) best = r;
  }
  return best;
}

/* 1b: the smallest free region of another stream whose event completed,
 * querying candidates from the smallest up (no synchronisation). */
static vmm_region *fit_other_completed(vmm_pages *p, size_t bytes,
                                       gmr_stream stream) {
  uint64_t gen = ++p->query_gen; /* marks the candidates found pending in this search */
  for (;;) {
    vmm_region *best = NULL;
    for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
      if (r->stream != stream && !r->unordered && fits(r, bytes) && r->query_gen != gen &&
          better(r, best)) {
        best = r;
      }
    }
    if (best == NULL || gmr__vmm_event_done(p, best->event)) return best;
    best->query_gen = gen;
  }
}

/* ---- phase 2 ------------------------------------------------------------ */

/* May `r`, just before a hole, be used in place for a request of `stream`? */
static bool usable_in_place(vmm_pages *p, const vmm_region *r, gmr_stream stream,
                            bool capturing) {
  if (r == NULL || r->state != VMM_FREE || gmr__vmm_region_held(r)) return false;
  if (r->stream == stream) return true;
  return !r->unordered && (!capturing || gmr__vmm_event_done(p, r->event));
}

/* May `r` be harvested (double-mapped elsewhere) for `stream`? */
static bool harvestable(vmm_pages *p, const vmm_region *r, gmr_stream stream,
                        bool capturing) {
  if (gmr__vmm_region_held(r) || r->unordered) return false;
  return r->stream == stream || !capturing || gmr__vmm_event_done(p, r->event);
}

typedef struct harvest_item {
  vmm_region *region;
  size_t take_bytes;
} harvest_item;

/* Current stream first, then other streams; oldest first within each. */
static bool harvest_before(const vmm_region *x, const vmm_region *y, gmr_stream stream) {
  bool ox = x->stream != stream, oy = y->stream != stream;
  if (ox != oy) return !ox;
  return x->id < y->id;
}

/* Insertion sort: free regions are few, and qsort has no context argument. */
static void sort_items(harvest_item *items, size_t n, gmr_stream stream) {
  for (size_t i = 1; i < n; ++i) {
    harvest_item it = items[i];
    size_t j = i;
    while (j > 0 && harvest_before(it.region, items[j - 1].region, stream)) {
      items[j] = items[j - 1];
      j--;
    }
    items[j] = it;
  }
}

typedef struct defrag_plan {
  vmm_region *hole;     /* NULL: reserve a new VA chunk */
  size_t new_root_bytes;
  vmm_region *in_place; /* free region before the hole, used where it is */
  size_t need_bytes;    /* what must be placed in the hole */
  harvest_item *items;
  size_t item_count;
  size_t placed_bytes;  /* harvested bytes mapped into the hole */
  size_t new_pages;     /* the shortfall, in pages */
} defrag_plan;

/* Choose the hole that needs the fewest new bytes (its usable free
 * predecessor counts), then the smallest, then the lowest address. */
static void choose_hole(vmm_pages *p, size_t bytes, gmr_stream stream, bool capturing,
                        defrag_plan *plan) {
  plan->hole = NULL;
  plan->new_root_bytes = 0;
  plan->in_place = NULL;
  plan->need_bytes = bytes;
  size_t best_need = SIZE_MAX;
  for (vmm_region *h = p->hole_list.head; h != NULL; h = h->list_next) {
    vmm_region *before = usable_in_place(p, h->prev, stream, capturing) ? h->prev : NULL;
    size_t have = before != NULL ? before->bytes : 0;
    size_t need = have >= bytes ? 0 : bytes - have;
    if (h->bytes < need) continue;
    bool take = need < best_need;
    if (!take && need == best_need) {
      const vmm_region *b = plan->hole;
      take = h->bytes < b->bytes ||
             (h->bytes == b->bytes && (h->root->index < b->root->index ||
                                       (h->root == b->root && h->addr < b->addr)));
    }
    if (take) {
      best_need = need;
      plan->hole = h;
      plan->in_place = before;
      plan->need_bytes = need;
    }
  }
  if (plan->hole == NULL) {
    size_t want = gmr__align_up(bytes, p->pool.page_bytes);
    plan->new_root_bytes = want > p->pool.va_chunk_bytes ? want : p->pool.va_chunk_bytes;
  }
}

/* Pick the free regions whose pages fill the hole, and the shortfall. */
static bool plan_harvest(vmm_pages *p, gmr_stream stream, bool capturing,
                         defrag_plan *plan) {
  plan->items = NULL;
  plan->item_count = 0;
  plan->placed_bytes = 0;
  plan->new_pages = 0;
  size_t need = plan->need_bytes;
  if (need == 0) return true;
  size_t room = plan->hole != NULL ? plan->hole->bytes : plan->new_root_bytes;
  size_t total = 0, n = 0;
  harvest_item *items = malloc((p->free_list.count + 1) * sizeof *items);
  if (items == NULL) return false;
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    if (r == plan->in_place || !harvestable(p, r, stream, capturing)) continue;
    items[n].region = r;
    items[n].take_bytes = 0;
    total += r->bytes;
    n++;
  }
  sort_items(items, n, stream);
  size_t shortfall = need > total ? need - total : 0;
  size_t remaining = need - shortfall;
  size_t used = 0;
  for (size_t i = 0; i < n && remaining > 0; ++i) {
    size_t size = items[i].region->bytes;
    size_t take = size <= remaining ? size : remaining;
    /* Whole regions move when what they would leave is no larger than what
     * moves: a small remnant is a fragment not worth keeping apart. */
    if (take < size && size - remaining <= remaining && used + size + shortfall <= room) {
      take = size;
    }
    items[i].take_bytes = take;
    used += take;
    remaining -= take < remaining ? take : remaining;
    plan->item_count = i + 1;
  }
  plan->items = items;
  plan->placed_bytes = used;
  plan->new_pages = shortfall / p->pool.page_bytes;
  return true;
}

static bool pending_other(vmm_pages *p, const vmm_region *r, gmr_stream stream) {
  return r->stream != stream && !gmr__vmm_event_done(p, r->event);
}

/* The event the filled hole gets. Not capturing: a new one recorded on
 * `stream` after its waits (it covers everything before), when anything was
 * pending. Capturing: the latest pending event of `stream` (other streams'
 * regions were complete). Returns a new reference, or NULL. */
static cudaError_t combined_event(vmm_pages *p, const defrag_plan *plan,
                                  gmr_stream stream, bool capturing, vmm_event **out) {
  *out = NULL;
  vmm_event *latest = NULL;
  bool pending = false;
  for (size_t i = 0; i <= plan->item_count; ++i) {
    const vmm_region *r = i < plan->item_count ? plan->items[i].region : plan->in_place;
    if (r == NULL || gmr__vmm_event_done(p, r->event)) continue;
    pending = true;
    if (r->stream == stream) latest = gmr__vmm_event_later(latest, r->event);
  }
  if (!pending) return cudaSuccess;
  if (capturing) {
    *out = latest != NULL ? gmr__vmm_event_ref(latest) : NULL;
    return cudaSuccess;
  }
  cudaError_t err = cudaSuccess;
  vmm_event *e = gmr__vmm_event_new(p, &err);
  if (e == NULL) return err;
  err = gmr__vmm_event_record(p, e, stream);
  if (err != cudaSuccess) {
    gmr__vmm_event_unref(p, e);
    return err;
  }
  *out = e;
  return cudaSuccess;
}

/* Turn the planned regions and hole into the new free region (no failure
 * possible: host memory was taken up front). */
static vmm_region *commit(vmm_pages *p, defrag_plan *plan, gmr_stream stream,
                          vmm_event *event, vmm_region *spare_item, vmm_region *spare_hole) {
  vmm_region *hole = plan->hole;
  for (size_t i = 0; i < plan->item_count; ++i) {
    vmm_region *r = plan->items[i].region;
    if (plan->items[i].take_bytes < r->bytes) {
      gmr__vmm_region_split(p, r, plan->items[i].take_bytes, spare_item);
      spare_item = NULL;
    }
    /* The old addresses stay mapped until r's event completes. */
    r->stream = NULL;
    r->id = 0;
    gmr__vmm_set_state(p, r, VMM_ZOMBIE);
    p->counts.remapped_pages += plan->items[i].take_bytes / p->pool.page_bytes;
  }
  gmr__vmm_region_delete(spare_item);
  size_t filled = plan->placed_bytes + plan->new_pages * p->pool.page_bytes;
  vmm_region *result = NULL;
  if (filled > 0 && filled < hole->bytes) {
    gmr__vmm_region_split(p, hole, filled, spare_hole);
    spare_hole = NULL;
  }
  gmr__vmm_region_delete(spare_hole);
  if (plan->in_place != NULL) {
    result = plan->in_place;
    vmm_event *old = result->event;
    result->event = event;
    gmr__vmm_event_unref(p, old);
    /* Freed during a capture (same stream only): the grown region stays
     * reusable by this stream alone, like its start. */
    result->stream = stream;
    if (filled > 0) gmr__vmm_region_absorb_next(p, result);
  } else {
    result = hole;
    result->event = event;
    result->stream = stream;
    gmr__vmm_set_state(p, result, VMM_FREE);
  }
  result->id = p->next_id++;
  if (plan->item_count > 0) p->counts.defrag++; /* growth alone is no defragmentation */
  return gmr__vmm_merge_free(p, result);
}

/* Phase 2: fill a hole with harvested and new pages for `bytes` on `stream`.
 * On success *out is a free region of `stream` with at least `bytes`. */
static gmr_status defragment(vmm_pages *p, size_t bytes, gmr_stream stream,
                             bool capturing, vmm_region **out, gmr_failure *failure) {
  *out = NULL;
  defrag_plan plan;
  choose_hole(p, bytes, stream, capturing, &plan);
  vmm_region *spare_item = gmr__vmm_region_new();
  vmm_region *spare_hole = gmr__vmm_region_new();
  if (spare_item == NULL || spare_hole == NULL || !plan_harvest(p, stream, capturing, &plan)) {
    gmr__vmm_region_delete(spare_item);
    gmr__vmm_region_delete(spare_hole);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  gmr_status st = GMR_OK;
  bool new_root = plan.hole == NULL;
  if (new_root) {
    vmm_root *root = NULL;
    CUresult cu = gmr__vmm_root_add(p, plan.new_root_bytes, &root);
    if (cu != CUDA_SUCCESS) {
      char detail[96];
      snprintf(detail, sizeof detail, "reserving %zu more bytes of device addresses",
               plan.new_root_bytes);
      st = gmr__cu_fail(p->pool.vmm, failure, "cuMemAddressReserve", cu, detail);
    } else {
      plan.hole = root->first;
    }
  }
  vmm_root *root = plan.hole != NULL ? plan.hole->root : NULL;
  uintptr_t dst = plan.hole != NULL ? plan.hole->addr : 0;
  size_t mapped = 0;
  for (size_t i = 0; st == GMR_OK && i < plan.item_count; ++i) {
    const harvest_item *it = &plan.items[i];
    st = gmr__vmm_map_again(p, it->region, it->region->addr, it->take_bytes, root, dst + mapped,
                            failure);
    if (st == GMR_OK) mapped += it->take_bytes;
  }
  bool new_mapped = false;
  if (st == GMR_OK) {
    st = gmr__vmm_map_new_pages(p, root, dst + mapped, plan.new_pages, failure);
    new_mapped = st == GMR_OK;
  }
  /* GPU-side waits for pending regions of other streams (never while
   * capturing: those were not planned). */
  for (size_t i = 0; st == GMR_OK && i <= plan.item_count; ++i) {
    const vmm_region *r = i < plan.item_count ? plan.items[i].region : plan.in_place;
    if (r == NULL || !pending_other(p, r, stream)) continue;
    p->counts.stream_wait++;
    cudaError_t err = p->pool.cuda->stream_wait_event((cudaStream_t)stream, r->event->event);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaStreamWaitEvent", err);
  }
  vmm_event *event = NULL;
  if (st == GMR_OK) {
    cudaError_t err = combined_event(p, &plan, stream, capturing, &event);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaEventRecord", err);
  }
  if (st != GMR_OK) {
    /* Undo in reverse: new pages, second mappings, the new VA chunk. */
    if (new_mapped) {
      gmr__vmm_undo_map(p, root, dst + mapped, plan.new_pages * p->pool.page_bytes, true);
    }
    gmr__vmm_undo_map(p, root, dst, mapped, false);
    if (new_root && plan.hole != NULL) (void)gmr__vmm_root_remove_last(p);
    free(plan.items);
    gmr__vmm_region_delete(spare_item);
    gmr__vmm_region_delete(spare_hole);
    return st;
  }
  *out = commit(p, &plan, stream, event, spare_item, spare_hole);
  free(plan.items);
  /* Zombies whose events are already complete go at once. */
  gmr__vmm_collect(p, false, NULL);
  return GMR_OK;
}

/* ---- allocation --------------------------------------------------------- */

/* Hand out the first `bytes` of the free region r as a LIVE region. */
static void take(vmm_pages *p, vmm_region *r, size_t bytes, gmr_stream stream,
                 vmm_region *spare) {
  if (r->bytes > bytes) {
    gmr__vmm_region_split(p, r, bytes, spare); /* the tail stays free, same stream and event */
  } else {
    gmr__vmm_region_delete(spare);
  }
  gmr__vmm_event_unref(p, r->event);
  r->event = NULL;
  r->unordered = false;
  r->id = 0;
  r->stream = stream;
  r->requested_bytes = bytes;
  r->tag = p->default_tag;
  r->internal = false;
  gmr__vmm_set_state(p, r, VMM_LIVE);
  (void)gmr__u64_map_put(&p->live, (uint64_t)r->addr, (uint64_t)(uintptr_t)r); /* reserved */
  (void)gmr__u64_map_remove(&p->freed, (uint64_t)r->addr, NULL);
  p->live_bytes += r->bytes;
  p->live_count++;
}

gmr_status gmr__vmm_allocate_pages(vmm_pages *p, size_t bytes, gmr_stream stream,
                                   bool capturing, bool fast_only, vmm_region **out,
                                   gmr_failure *failure) {
  *out = NULL;
  if (fast_only && p->zombie_list.count > 0) return GMR_OK; /* phase 0 has work: not fast */
  vmm_region *r = fast_only ? fit_same_stream(p, bytes, stream) : NULL;
  if (fast_only && r == NULL) return GMR_OK;
  vmm_region *spare = gmr__vmm_region_new();
  if (spare == NULL || !gmr__u64_map_reserve(&p->live, p->live.count + 1)) {
    gmr__vmm_region_delete(spare);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  if (fast_only) {
    take(p, r, bytes, stream, spare);
    *out = r;
    return GMR_OK;
  }
  gmr__vmm_collect(p, true, stream);
  r = fit_same_stream(p, bytes, stream);
  if (r == NULL) r = fit_other_completed(p, bytes, stream);
  if (r == NULL) {
    gmr_status st = defragment(p, bytes, stream, capturing, &r, failure);
    if (st != GMR_OK) {
      gmr__vmm_region_delete(spare);
      return st;
    }
  }
  take(p, r, bytes, stream, spare);
  *out = r;
  return GMR_OK;
}

void gmr__vmm_fill_free_info(vmm_pages *p, gmr_failure *failure) {
  failure->free_info_known = true;
  failure->free_bytes = p->free_list.bytes;
  /* Defragmentation joins any free pages into one block. */
  failure->largest_free_block_bytes = p->free_list.bytes;
}

/* ---- extend ------------------------------------------------------------- */

gmr_status gmr__vmm_extend_region(vmm_pages *p, vmm_region *r, size_t grow_bytes,
                                  gmr_stream stream, bool capturing, gmr_failure *failure) {
  vmm_region *next = r->next;
  vmm_region *free_next = usable_in_place(p, next, stream, capturing) ? next : NULL;
  size_t from_free = free_next != NULL ? (free_next->bytes < grow_bytes ? free_next->bytes
                                                                        : grow_bytes)
                                       : 0;
  size_t rest = grow_bytes - from_free;
  vmm_region *hole = NULL;
  if (rest > 0) {
    hole = free_next != NULL ? free_next->next : next;
    if (hole == NULL || hole->state != VMM_HOLE || hole->bytes < rest) {
      return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                              "vmm_pool: the %zu bytes after the allocation are not free "
                              "(extend grows in place only)",
                              grow_bytes);
    }
  }
  vmm_region *spare_free = gmr__vmm_region_new();
  vmm_region *spare_hole = gmr__vmm_region_new();
  if (spare_free == NULL || spare_hole == NULL) {
    gmr__vmm_region_delete(spare_free);
    gmr__vmm_region_delete(spare_hole);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  gmr_status st = GMR_OK;
  if (rest > 0) {
    st = gmr__vmm_map_new_pages(p, hole->root, hole->addr, rest / p->pool.page_bytes, failure);
  }
  if (st == GMR_OK && free_next != NULL && from_free > 0 && pending_other(p, free_next, stream)) {
    p->counts.stream_wait++;
    cudaError_t err =
        p->pool.cuda->stream_wait_event((cudaStream_t)stream, free_next->event->event);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaStreamWaitEvent", err);
      if (rest > 0) gmr__vmm_undo_map(p, hole->root, hole->addr, rest, true);
    }
  }
  if (st != GMR_OK) {
    gmr__vmm_region_delete(spare_free);
    gmr__vmm_region_delete(spare_hole);
    return st;
  }
  /* Commit: the free part, then the hole part, join r. */
  if (from_free > 0) {
    if (from_free < free_next->bytes) {
      gmr__vmm_region_split(p, free_next, from_free, spare_free);
      spare_free = NULL;
    }
    gmr__vmm_event_unref(p, free_next->event);
    free_next->event = NULL;
    gmr__vmm_region_absorb_next(p, r);
  }
  if (rest > 0) {
    if (rest < hole->bytes) {
      gmr__vmm_region_split(p, hole, rest, spare_hole);
      spare_hole = NULL;
    }
    gmr__vmm_region_absorb_next(p, r);
  }
  gmr__vmm_region_delete(spare_free);
  gmr__vmm_region_delete(spare_hole);
  p->live_bytes += grow_bytes;
  p->counts.extend++;
  return GMR_OK;
}
