/*
 * resources/vmm/placement/vmf_debug.c (internal): what a placement engine
 * tells about itself (vmf.h): statistics, memory info, the region list and
 * the invariant check (its source checks the books of its memory). Lock
 * held by the caller unless said.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/placement/vmf.h"

/* The bytes of the free region r that lie on mapped pages (all of them in
 * an arena without a page table: its memory came mapped). */
static size_t mapped_part(const vmf_engine *e, const vmf_region *r) {
  const vmf_arena *a = r->arena;
  if (a->pages == NULL) return r->node.bytes;
  size_t n = 0;
  uintptr_t addr = r->node.addr, end = r->node.addr + r->node.bytes;
  for (uintptr_t p = addr / e->page_bytes * e->page_bytes; p < end; p += e->page_bytes) {
    if (a->pages[(p - a->base) / e->page_bytes] == NULL) continue;
    uintptr_t lo = p < addr ? addr : p;
    uintptr_t hi = p + e->page_bytes < end ? p + e->page_bytes : end;
    n += hi - lo;
  }
  return n;
}

static size_t free_total(const vmf_engine *e) {
  size_t n = 0;
  for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    /* After a sleep (until a wake leaves nothing asleep) free regions may
     * lie on pages given back: only their mapped bytes count. */
    if (!e->slept) {
      n += a->free_bytes;
      continue;
    }
    for (const vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state == VMF_FREE) n += mapped_part(e, r);
    }
  }
  return n;
}

static size_t free_count(const vmf_engine *e) {
  size_t n = 0;
  for (uint32_t i = 0; i < e->slots.count; ++i) {
    n += gmr__vmf_slot(e, i)->index.block_count + gmr__vmf_slot(e, i)->fresh.block_count;
  }
  for (const vmf_region *r = e->blocked; r != NULL; r = gmr__vmf_region_of(r->node.free_next)) {
    n++;
  }
  return n;
}

/* The largest free region: the largest of each slot's index (after a
 * sleep: the most mapped bytes of one free region). */
static size_t largest_free(const vmf_engine *e) {
  size_t best = 0;
  if (e->slept) {
    for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) {
      for (const vmf_region *r = a->first; r != NULL; r = r->next) {
        size_t n = r->state == VMF_FREE ? mapped_part(e, r) : 0;
        if (n > best) best = n;
      }
    }
    return best;
  }
  for (uint32_t i = 0; i < e->slots.count; ++i) {
    size_t largest = gmr__free_index_largest(&gmr__vmf_slot(e, i)->index);
    size_t fresh = gmr__free_index_largest(&gmr__vmf_slot(e, i)->fresh);
    if (largest > best) best = largest;
    if (fresh > best) best = fresh;
  }
  return best;
}

void gmr__vmf_fill_free_info(vmf_engine *e, gmr_failure *failure) {
  if (failure == NULL) return;
  failure->free_info_known = true;
  failure->free_bytes = free_total(e);
  failure->largest_free_block_bytes = largest_free(e);
}

void gmr__vmf_fill_stats(vmf_engine *e, gmr_vmm_pool_resource_stats *s) {
  gmr__vmf_lock(e);
  s->mapped_bytes = e->held_bytes + e->unreleased.handles.bytes;
  s->peak_mapped_bytes = e->peak_held_bytes;
  for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) s->reserved_bytes += a->bytes;
  s->va_chunk_count = e->arena_count;
  s->live_bytes = e->live_bytes;
  s->live_count = e->live_count;
  s->free_bytes = free_total(e);
  s->free_region_count = free_count(e);
  s->hole_bytes = e->hole_bytes;
  s->hole_count = e->hole_count;
  s->asleep_bytes = e->asleep_bytes;
  s->asleep_count = e->asleep_count;
  s->saved_bytes = e->saved_bytes;
  s->unreleased_bytes = e->unreleased.handles.bytes;
  s->unreleased_handle_count = e->unreleased.handles.count;
  s->unfreed_host_bytes = e->unreleased.hosts.bytes;
  s->unfreed_host_count = e->unreleased.hosts.count;
  s->page_create_count = e->counts.create;
  s->page_release_count = e->counts.release;
  s->map_count = e->counts.map;
  s->unmap_count = e->counts.unmap;
  s->defrag_count = e->counts.harvest;
  s->remapped_page_count = e->counts.harvested_pages;
  s->extend_count = e->counts.extend;
  s->event_record_count = atomic_load(&e->events.record_count);
  s->event_query_count = atomic_load(&e->events.query_count);
  s->stream_wait_count = atomic_load(&e->events.wait_count);
  s->event_synchronize_count = atomic_load(&e->events.synchronize_count);
  s->sleep_count = e->counts.sleep;
  s->wake_count = e->counts.wake;
  gmr__vmf_unlock(e);
}

void gmr__vmf_memory_info(vmf_engine *e, gmr_memory_info *info) {
  gmr__vmf_lock(e);
  info->held_bytes = e->held_bytes + e->unreleased.handles.bytes;
  info->live_bytes = e->live_bytes;
  info->free_bytes = free_total(e);
  info->largest_free_block_bytes = largest_free(e);
  info->free_block_count = free_count(e);
  gmr__vmf_unlock(e);
}

static void describe(const vmf_engine *e, const vmf_region *r, gmr_vmm_pool_region *out) {
  out->addr = (void *)r->node.addr;
  out->bytes = r->node.bytes;
  out->kind = (gmr_vmm_pool_region_kind)r->state;
  out->stream = r->state == VMF_FREE
                    ? (r->slot == VMF_SHARED ? NULL : e->slots.items[r->slot]->ev.key.stream)
                : r->state == VMF_LIVE ? r->stream
                                       : NULL;
  out->pending = r->state == VMF_FREE && (r->slot != VMF_SHARED || r->blocked);
  out->internal = false;
  out->tag = r->state == VMF_LIVE || r->state == VMF_ASLEEP ? r->tag : 0;
  out->va_chunk_index = r->arena->index;
}

size_t gmr__vmf_regions(vmf_engine *e, gmr_vmm_pool_region *out, size_t capacity) {
  gmr__vmf_lock(e);
  size_t n = 0;
  for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (const vmf_region *r = a->first; r != NULL; r = r->next) {
      if (n < capacity) describe(e, r, &out[n]);
      n++;
    }
  }
  gmr__vmf_unlock(e);
  return n;
}

/* ---- invariants --------------------------------------------------------------- */



typedef struct sums {
  size_t live_bytes, live_count, asleep_bytes, asleep_count, hole_bytes, hole_count;
  size_t live_entries;
  size_t slot_bytes[2][64], slot_count[2][64]; /* [fresh][slot] */
} sums;

static gmr_status check_pages(const vmf_engine *e, const vmf_arena *a, const vmf_region *r,
                              char *err, size_t err_bytes) {
  if (a->pages == NULL) return GMR_OK; /* its memory came mapped: no page table */
  uintptr_t first = r->node.addr / e->page_bytes * e->page_bytes;
  for (uintptr_t p = first; p < r->node.addr + r->node.bytes; p += e->page_bytes) {
    const vmf_handle *h = a->pages[(p - a->base) / e->page_bytes];
    bool must = r->state == VMF_LIVE || (r->state == VMF_FREE && !e->slept);
    if (r->state == VMF_HOLE && h != NULL) {
      return gmr__vmm_violation(err, err_bytes, "hole at %#zx has a page mapped at %#zx",
                                (size_t)r->node.addr, (size_t)p);
    }
    if (must && h == NULL) {
      return gmr__vmm_violation(err, err_bytes, "%s region at %#zx lacks a page at %#zx",
                                gmr__vmm_region_kind_names[r->state], (size_t)r->node.addr,
                                (size_t)p);
    }
    if (h != NULL && (h->va > p || h->va + h->bytes <= p)) {
      return gmr__vmm_violation(err, err_bytes, "page at %#zx points at a handle mapped elsewhere",
                                (size_t)p);
    }
  }
  return GMR_OK;
}

static gmr_status check_region(const vmf_engine *e, const vmf_arena *a, const vmf_region *prev,
                               const vmf_region *r, uintptr_t at, sums *s, char *err,
                               size_t err_bytes) {
  if (r->arena != a || r->prev != prev || r->node.addr != at || r->node.bytes == 0 ||
      r->node.bytes % VMF_UNIT != 0) {
    return gmr__vmm_violation(err, err_bytes, "region at %#zx breaks the tiling of arena %zu",
                              (size_t)r->node.addr, a->index);
  }
  if (r->state == VMF_HOLE &&
      (r->node.addr % e->page_bytes != 0 || r->node.bytes % e->page_bytes != 0 ||
       a->pages == NULL)) {
    return gmr__vmm_violation(err, err_bytes, "hole at %#zx is not whole pages",
                              (size_t)r->node.addr);
  }
  if (prev != NULL && prev->state == VMF_HOLE && r->state == VMF_HOLE) {
    return gmr__vmm_violation(err, err_bytes, "two holes touch at %#zx", (size_t)r->node.addr);
  }
  /* A slot in batched mode keeps fresh and covered regions apart. */
  if (prev != NULL && prev->state == VMF_FREE && r->state == VMF_FREE && !prev->blocked &&
      !r->blocked && prev->slot == r->slot && prev->fresh == r->fresh) {
    return gmr__vmm_violation(err, err_bytes, "free regions of one slot touch unmerged at %#zx",
                              (size_t)r->node.addr);
  }
  if (r->state == VMF_FREE) {
    if (r->binned == r->blocked || r->slot >= e->slots.count) {
      return gmr__vmm_violation(err, err_bytes, "free region at %#zx is %s", (size_t)r->node.addr,
                                r->blocked ? "blocked and filed" : "neither filed nor blocked");
    }
    if (r->binned && r->fresh && r->slot == VMF_SHARED) {
      return gmr__vmm_violation(err, err_bytes, "shared free region at %#zx is fresh",
                                (size_t)r->node.addr);
    }
    if (r->binned && r->slot < 64) {
      s->slot_bytes[r->fresh][r->slot] += r->node.bytes;
      s->slot_count[r->fresh][r->slot]++;
    }
  } else if (r->binned || r->blocked) {
    return gmr__vmm_violation(err, err_bytes, "%s region at %#zx is filed as free",
                              gmr__vmm_region_kind_names[r->state], (size_t)r->node.addr);
  }
  if (r->state == VMF_LIVE || r->state == VMF_ASLEEP) {
    uint64_t v = 0;
    if (!gmr__u64_map_get(&e->live, (uint64_t)r->node.addr, &v) || v != (uint64_t)(uintptr_t)r) {
      return gmr__vmm_violation(err, err_bytes, "live region at %#zx is not in the live map",
                                (size_t)r->node.addr);
    }
    s->live_entries++;
    if (r->state == VMF_LIVE) {
      s->live_bytes += r->node.bytes;
      s->live_count++;
    } else {
      s->asleep_bytes += r->node.bytes;
      s->asleep_count++;
    }
  }
  if (r->state == VMF_HOLE) {
    s->hole_bytes += r->node.bytes;
    s->hole_count++;
  }
  return check_pages(e, a, r, err, err_bytes);
}

typedef struct index_visit {
  uint32_t slot;
  bool fresh;
} index_visit;

/* A node of slot v->slot's covered or fresh index: a FREE region filed there. */
static bool visit_free_region(void *ctx, const gmr__free_node *n) {
  const index_visit *v = ctx;
  const vmf_region *r = (const vmf_region *)(const void *)n; /* its first member */
  return r->state == VMF_FREE && r->binned && !r->blocked && r->slot == v->slot &&
         r->fresh == v->fresh;
}



gmr_status gmr__vmf_check(vmf_engine *e, char *err, size_t err_bytes) {
  sums s;
  memset(&s, 0, sizeof s);
  gmr_status st = GMR_OK;
  size_t index_prev = 0, arenas = 0;
  for (const vmf_arena *a = e->arenas; a != NULL && st == GMR_OK; a = a->next, ++arenas) {
    if (arenas > 0 && a->index <= index_prev) {
      st = gmr__vmm_violation(err, err_bytes, "arenas out of order");
    }
    index_prev = a->index;
    uintptr_t at = a->base;
    size_t free_bytes = 0;
    const vmf_region *prev = NULL;
    for (const vmf_region *r = a->first; r != NULL && st == GMR_OK; prev = r, r = r->next) {
      st = check_region(e, a, prev, r, at, &s, err, err_bytes);
      if (r->state == VMF_FREE) free_bytes += r->node.bytes;
      at += r->node.bytes;
    }
    if (st == GMR_OK && at != a->base + a->bytes) {
      st = gmr__vmm_violation(err, err_bytes, "arena %zu is not tiled to its end", a->index);
    }
    if (st == GMR_OK && free_bytes != a->free_bytes) {
      st = gmr__vmm_violation(err, err_bytes, "arena %zu counts %zu free bytes, has %zu", a->index,
                              a->free_bytes, free_bytes);
    }
  }
  if (st == GMR_OK && arenas != e->arena_count) {
    st = gmr__vmm_violation(err, err_bytes, "arena count");
  }
  for (uint32_t i = 0; st == GMR_OK && i < e->slots.count; ++i) {
    for (int f = 0; f < 2 && st == GMR_OK; ++f) {
      const gmr__free_index *index = f ? &gmr__vmf_slot(e, i)->fresh : &gmr__vmf_slot(e, i)->index;
      index_visit v = {i, f != 0};
      if (!gmr__free_index_check(index, visit_free_region, &v) ||
          (i < 64 &&
           (s.slot_bytes[f][i] != index->bytes || s.slot_count[f][i] != index->block_count))) {
        st = gmr__vmm_violation(err, err_bytes, "slot %u's %s index disagrees with its regions", i,
                                f ? "fresh" : "covered");
      }
    }
  }
  if (st == GMR_OK && (s.live_bytes != e->live_bytes || s.live_count != e->live_count ||
                       s.asleep_bytes != e->asleep_bytes || s.asleep_count != e->asleep_count ||
                       s.hole_bytes != e->hole_bytes || s.hole_count != e->hole_count ||
                       s.live_entries != e->live_count + e->asleep_count)) {
    st = gmr__vmm_violation(err, err_bytes, "counters disagree with the regions");
  }
  if (st == GMR_OK && e->source->check != NULL) st = e->source->check(e, err, err_bytes);
  return st;
}
