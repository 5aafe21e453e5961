/*
 * resources/vmm/fine/vmm_fine_sleep.c (internal): a `vmm` shard's steps of
 * sleep and wake (vmm_fine.h); the sequence and its rollbacks are the VMM
 * base's (resources/vmm/base/vmm_sleep_run.c).
 *
 * Sleep: every stream's work is done (the device was synchronised), every
 * handle that no LIVE allocation of a kept tag touches goes back to the
 * device, the other live allocations keep their addresses (ASLEEP), and free
 * memory becomes holes where it is whole pages. A page that an asleep
 * allocation shares with free bytes stays unmapped until wake.
 * Wake: fresh handles over every unmapped page the woken allocations touch;
 * a wake that leaves nothing asleep also maps the unmapped pages free bytes
 * share (before the contents come back, so a refused copy undoes them too);
 * then free bytes on unmapped pages become holes again.
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

static vmf_sleep_ctx *ctx_of(void *ctx) { return (vmf_sleep_ctx *)ctx; }

void gmr__vmf_sleep_ctx_free(vmf_sleep_ctx *c) {
  free(c->unmapped);
  c->unmapped = NULL;
  c->unmapped_count = 0;
}

/* ---- queries -------------------------------------------------------------------- */

void gmr__vmf_tag_stats(vmf_engine *e, uint64_t tag_mask, gmr_vmm_pool_tag_stats *s) {
  gmr__vmf_lock(e);
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (const vmf_region *r = a->first; r != NULL; r = r->next) {
      if ((r->state != VMF_LIVE && r->state != VMF_ASLEEP) || ((tag_mask >> r->tag) & 1u) == 0) {
        continue;
      }
      if (r->state == VMF_LIVE) {
        s->live_bytes += r->node.bytes;
        s->live_count++;
        continue;
      }
      s->asleep_bytes += r->node.bytes;
      s->asleep_count++;
      if (r->extra != NULL && r->extra->saved != NULL) {
        s->saved_bytes += r->node.bytes;
        s->saved_count++;
        s->saved_pinned = e->saved_host == GMR_VMM_POOL_HOST_PINNED;
      }
    }
  }
  gmr__vmf_unlock(e);
}

/* ---- free memory over unmapped pages ----------------------------------------------- */

/* Turn the first run of whole, unmapped pages of the free region r into a
 * hole; what is left of r stays free, shared. Needs two spare headers.
 * Returns whether it found one. */
static bool free_pages_to_hole(vmf_engine *e, vmf_region *r) {
  vmf_arena *a = r->arena;
  uintptr_t lo = gmr__align_up(r->node.addr, e->page_bytes);
  uintptr_t end = (r->node.addr + r->node.bytes) / e->page_bytes * e->page_bytes;
  while (lo < end && a->pages[(lo - a->base) / e->page_bytes] != NULL) lo += e->page_bytes;
  uintptr_t hi = lo;
  while (hi < end && a->pages[(hi - a->base) / e->page_bytes] == NULL) hi += e->page_bytes;
  if (hi <= lo) return false;
  if (r->binned) gmr__vmf_bin_remove(e, r);
  r->slot = VMF_SHARED;
  if (lo > r->node.addr) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, lo - r->node.addr, t);
    gmr__vmf_bin_insert(e, r);
    r = t;
  }
  if (r->node.addr + r->node.bytes > hi) {
    vmf_region *t = gmr__vmf_region_new(e);
    gmr__vmf_split(e, r, hi - r->node.addr, t);
    gmr__vmf_bin_insert(e, t);
  }
  (void)gmr__vmf_make_hole(e, r);
  return true;
}

/* Whole unmapped pages of free regions become holes. false: host memory
 * for region headers ran out (what was done stays: a later call goes on). */
static bool free_pages_to_holes(vmf_engine *e) {
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (vmf_region *r = a->first; r != NULL && !changed; r = r->next) {
        if (r->state != VMF_FREE) continue;
        if (!gmr__vmf_reserve_regions(e, 4)) return false;
        changed = free_pages_to_hole(e, r); /* regions changed: walk again */
      }
    }
  }
  return true;
}

/* Map a page under every unmapped page that free bytes share with something
 * other than one free region (a page wholly inside one becomes a hole). */
static gmr_status map_shared_free_pages(vmf_engine *e, gmr_failure *failure) {
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state != VMF_FREE) continue;
      uintptr_t first = r->node.addr / e->page_bytes * e->page_bytes;
      for (uintptr_t p = first; p < r->node.addr + r->node.bytes; p += e->page_bytes) {
        if (a->pages[(p - a->base) / e->page_bytes] != NULL) continue;
        if (p >= r->node.addr && p + e->page_bytes <= r->node.addr + r->node.bytes) continue;
        gmr_status st = gmr__vmf_map_fresh(e, a, p, e->page_bytes, e->page_bytes, failure);
        if (st != GMR_OK) return st;
      }
    }
  }
  return GMR_OK;
}

/* ---- sleep ------------------------------------------------------------------------ */

static gmr_status fine_trim(void *ctx, gmr_failure *failure) {
  vmf_engine *e = ctx_of(ctx)->e;
  /* Everything ran: every stream's free memory is free for anyone. */
  gmr__vmf_unblock(e, VMF_UNBLOCK_DEVICE_SYNCED, NULL);
  for (size_t i = 1; i < e->slots.count; ++i) gmr__vmf_move_slot(e, (uint32_t)i, VMF_SHARED);
  size_t released = 0;
  return gmr__vmf_native_trim(e, &released, failure);
}

static gmr_status fine_select(void *ctx, bool asleep, uint64_t tag_mask,
                              gmr__vmm_sleep_item **items, size_t *count) {
  vmf_engine *e = ctx_of(ctx)->e;
  *count = 0;
  gmr__vmm_sleep_item *list = malloc((e->live.count + 1) * sizeof *list);
  *items = list;
  if (list == NULL) return GMR_ERR_OUT_OF_MEMORY;
  vmf_state want = asleep ? VMF_ASLEEP : VMF_LIVE;
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    for (vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state != want || ((tag_mask >> r->tag) & 1u) == 0) continue;
      void *host = r->extra != NULL ? r->extra->saved : NULL;
      list[(*count)++] =
          (gmr__vmm_sleep_item){r, r->node.addr, r->node.bytes, r->tag, false, host, false};
    }
  }
  return GMR_OK;
}

/* Whether a LIVE allocation of a kept tag touches handle h. */
static bool handle_kept(vmf_engine *e, const vmf_handle *h, uint64_t keep_tag_mask) {
  if (keep_tag_mask == 0) return false;
  for (vmf_region *r = gmr__vmf_region_at(e, h->va); r != NULL && r->node.addr < h->va + h->bytes;
       r = r->next) {
    if (r->state == VMF_LIVE && ((keep_tag_mask >> r->tag) & 1u) != 0) return true;
  }
  return false;
}

static void fine_remap(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  (void)items;
  (void)count;
  vmf_sleep_ctx *c = ctx_of(ctx);
  vmf_engine *e = c->e;
  for (size_t i = 0; i < c->unmapped_count; ++i) {
    vmf_handle *g = c->unmapped[i];
    if (e->vmm->map((CUdeviceptr)g->va, g->bytes, g->handle) == CUDA_SUCCESS) {
      e->counts.map++;
      (void)gmr__vmf_set_access(e, g->va, g->bytes);
    }
  }
  gmr__vmf_sleep_ctx_free(c);
}

/* Unmap every handle no kept allocation touches (each stays in the page
 * table until release); on a refusal map back what was unmapped. */
static gmr_status fine_unmap(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                             gmr_failure *failure) {
  vmf_sleep_ctx *c = ctx_of(ctx);
  vmf_engine *e = c->e;
  /* Room for the copies' records, before anything is unmapped. */
  for (size_t i = 0; i < count; ++i) {
    if (items[i].host != NULL && gmr__vmf_extra(items[i].region) == NULL) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
    }
  }
  c->unmapped = malloc((e->handle_count + 1) * sizeof *c->unmapped);
  c->unmapped_count = 0;
  if (c->unmapped == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  for (vmf_handle *h = e->handles; h != NULL; h = h->next) {
    if (handle_kept(e, h, c->keep_tag_mask)) continue;
    CUresult cu = e->vmm->unmap((CUdeviceptr)h->va, h->bytes);
    if (cu != CUDA_SUCCESS) {
      gmr_status st = gmr__cu_fail(e->vmm, failure, "cuMemUnmap", cu, "while going to sleep");
      fine_remap(ctx, items, count);
      return st;
    }
    e->counts.unmap++;
    c->unmapped[c->unmapped_count++] = h;
  }
  return GMR_OK;
}

static CUresult fine_release(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                             gmr_vmm_pool_host_kind host) {
  vmf_sleep_ctx *c = ctx_of(ctx);
  vmf_engine *e = c->e;
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = 0; i < c->unmapped_count; ++i) {
    vmf_handle *h = c->unmapped[i];
    vmf_arena *a = gmr__vmf_arena_of(e, h->va);
    for (uintptr_t p = h->va; a != NULL && p < h->va + h->bytes; p += e->page_bytes) {
      a->pages[(p - a->base) / e->page_bytes] = NULL;
    }
    h->va = 0;
    /* Unmapped: released only; a refused one is unreleased (kept). */
    CUresult cu = gmr__vmf_drop_handle(e, h);
    if (refused == CUDA_SUCCESS) refused = cu;
  }
  gmr__vmf_sleep_ctx_free(c);
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    vmf_region *r = items[i].region;
    if (items[i].host != NULL) {
      r->extra->saved = items[i].host; /* the record was made before the unmap */
      e->saved_bytes += r->node.bytes;
    }
    gmr__vmf_set_state(e, r, VMF_ASLEEP);
    e->live_bytes -= r->node.bytes;
    e->live_count--;
    e->asleep_bytes += r->node.bytes;
    e->asleep_count++;
  }
  e->saved_host = host;
  e->slept = true;
  /* Holes where free memory is whole unmapped pages; running out of host
   * memory for the headers leaves them free (wake tidies them). */
  (void)free_pages_to_holes(e);
  e->counts.sleep++;
  return refused;
}

/* ---- wake ------------------------------------------------------------------------- */

/* Drop every handle made since the call began (they precede first_before
 * in e->handles). */
static void drop_new_handles(vmf_sleep_ctx *c) {
  vmf_engine *e = c->e;
  while (e->handles != NULL && e->handles != c->first_before) {
    (void)gmr__vmf_drop_handle(e, e->handles);
  }
}

/* Map fresh handles over every unmapped page the items touch; when they are
 * all that sleeps here, also under the free bytes that share unmapped pages.
 * On failure everything this call mapped goes again. */
static gmr_status fine_map(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                           gmr_failure *failure) {
  vmf_sleep_ctx *c = ctx_of(ctx);
  vmf_engine *e = c->e;
  c->first_before = e->handles;
  size_t limit = (e->live_bytes + e->asleep_bytes) / 64;
  limit = limit < e->page_bytes ? e->page_bytes : gmr__align_up(limit, e->page_bytes);
  gmr_status st = GMR_OK;
  for (size_t i = 0; i < count && st == GMR_OK; ++i) {
    vmf_region *r = items[i].region;
    vmf_arena *a = r->arena;
    uintptr_t p = r->node.addr / e->page_bytes * e->page_bytes;
    uintptr_t end = gmr__align_up(r->node.addr + r->node.bytes, e->page_bytes);
    while (p < end && st == GMR_OK) {
      if (a->pages[(p - a->base) / e->page_bytes] != NULL) {
        p += e->page_bytes;
        continue;
      }
      uintptr_t q = p;
      while (q < end && a->pages[(q - a->base) / e->page_bytes] == NULL) q += e->page_bytes;
      st = gmr__vmf_map_fresh(e, a, p, q - p, limit, failure);
      p = q;
    }
  }
  if (st == GMR_OK && count == e->asleep_count) st = map_shared_free_pages(e, failure);
  if (st == GMR_OK) return GMR_OK;
  if (st == GMR_ERR_OUT_OF_MEMORY) gmr__vmf_fill_free_info(e, failure);
  drop_new_handles(c);
  return st;
}

static void fine_unmap_fresh(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  (void)items;
  (void)count;
  drop_new_handles(ctx_of(ctx));
}

static void fine_woken(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  vmf_engine *e = ctx_of(ctx)->e;
  for (size_t i = 0; i < count; ++i) {
    vmf_region *r = items[i].region;
    if (r->extra != NULL && r->extra->saved != NULL) {
      r->extra->saved = NULL; /* the driver frees the copy */
      e->saved_bytes -= r->node.bytes;
    }
    gmr__vmf_set_state(e, r, VMF_LIVE);
    e->asleep_bytes -= r->node.bytes;
    e->asleep_count--;
    e->live_bytes += r->node.bytes;
    e->live_count++;
  }
  /* Once nothing sleeps every free byte must be mapped or a hole: the
   * shared pages were mapped above; whole pages become holes here. Out of
   * host memory, the engine stays `slept` (and the pool asleep) and the
   * next wake finishes it. */
  if (e->asleep_count == 0 && free_pages_to_holes(e)) e->slept = false;
  e->counts.wake++;
}

static void fine_retry(void *ctx) {
  size_t released = 0;
  (void)gmr__vmf_retry_unreleased(ctx_of(ctx)->e, &released, NULL);
}

const gmr__vmm_sleep_ops gmr__vmf_sleep_ops = {
    .trim = fine_trim,
    .select = fine_select,
    .unmap = fine_unmap,
    .remap = fine_remap,
    .release = fine_release,
    .map = fine_map,
    .unmap_fresh = fine_unmap_fresh,
    .woken = fine_woken,
    .retry = fine_retry,
};
