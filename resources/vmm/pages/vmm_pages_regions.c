/*
 * resources/vmm/pages/vmm_pages_regions.c (internal): regions, their lists,
 * VA chunks and the reference-counted events of vmm_pages (vmm_pages.h).
 */
#include <stdlib.h>
#include <string.h>

#include "resources/vmm/pages/vmm_pages.h"

/* ---- regions and lists ------------------------------------------------- */

vmm_region *gmr__vmm_region_new(void) { return calloc(1, sizeof(vmm_region)); }

void gmr__vmm_region_delete(vmm_region *r) {
  if (r == NULL) return;
  free(r->blockers);
  free(r->used_streams);
  free(r);
}

void gmr__vmm_list_push(vmm_list *l, vmm_region *r) {
  r->list_prev = NULL;
  r->list_next = l->head;
  if (l->head != NULL) l->head->list_prev = r;
  l->head = r;
  l->count++;
  l->bytes += r->bytes;
}

void gmr__vmm_list_remove(vmm_list *l, vmm_region *r) {
  if (r->list_prev != NULL) {
    r->list_prev->list_next = r->list_next;
  } else {
    l->head = r->list_next;
  }
  if (r->list_next != NULL) r->list_next->list_prev = r->list_prev;
  r->list_prev = r->list_next = NULL;
  l->count--;
  l->bytes -= r->bytes;
}

vmm_list *gmr__vmm_list_of(vmm_pages *p, vmm_state state) {
  switch (state) {
    case VMM_FREE:
      return &p->free_list;
    case VMM_HOLE:
      return &p->hole_list;
    case VMM_ZOMBIE:
      return &p->zombie_list;
    default:
      return NULL;
  }
}

void gmr__vmm_set_state(vmm_pages *p, vmm_region *r, vmm_state state) {
  vmm_list *from = gmr__vmm_list_of(p, r->state);
  if (from != NULL) gmr__vmm_list_remove(from, r);
  r->state = state;
  vmm_list *to = gmr__vmm_list_of(p, state);
  if (to != NULL) gmr__vmm_list_push(to, r);
}

void gmr__vmm_region_split(vmm_pages *p, vmm_region *r, size_t bytes,
                           vmm_region *tail) {
  vmm_list *l = gmr__vmm_list_of(p, r->state);
  if (l != NULL) l->bytes -= r->bytes - bytes; /* the tail brings its own bytes */
  memset(tail, 0, sizeof *tail);
  tail->addr = r->addr + bytes;
  tail->bytes = r->bytes - bytes;
  tail->state = r->state;
  tail->root = r->root;
  tail->stream = r->stream;
  tail->id = r->id;
  tail->unordered = r->unordered;
  tail->event = r->event != NULL ? gmr__vmm_event_ref(r->event) : NULL;
  r->bytes = bytes;
  tail->prev = r;
  tail->next = r->next;
  if (r->next != NULL) r->next->prev = tail;
  r->next = tail;
  if (l != NULL) gmr__vmm_list_push(l, tail);
}

void gmr__vmm_region_absorb_next(vmm_pages *p, vmm_region *r) {
  vmm_region *n = r->next;
  vmm_list *nl = gmr__vmm_list_of(p, n->state);
  if (nl != NULL) gmr__vmm_list_remove(nl, n);
  vmm_list *l = gmr__vmm_list_of(p, r->state);
  if (l != NULL) l->bytes += n->bytes;
  r->bytes += n->bytes;
  r->next = n->next;
  if (n->next != NULL) n->next->prev = r;
  gmr__vmm_region_delete(n);
}

vmm_region *gmr__vmm_make_hole(vmm_pages *p, vmm_region *r) {
  if (r->event != NULL) gmr__vmm_event_unref(p, r->event);
  r->event = NULL;
  gmr__vmm_region_clear_blockers(p, r);
  r->stream = NULL;
  r->unordered = false;
  r->id = 0;
  gmr__vmm_set_state(p, r, VMM_HOLE);
  if (r->next != NULL && r->next->state == VMM_HOLE) gmr__vmm_region_absorb_next(p, r);
  if (r->prev != NULL && r->prev->state == VMM_HOLE) {
    r = r->prev;
    gmr__vmm_region_absorb_next(p, r);
  }
  return r;
}

static bool can_merge(const vmm_region *a, const vmm_region *b) {
  return a != NULL && b != NULL && a->state == VMM_FREE && b->state == VMM_FREE &&
         a->stream == b->stream && !gmr__vmm_region_held(a) && !gmr__vmm_region_held(b) &&
         a->unordered == b->unordered;
}

vmm_region *gmr__vmm_merge_free(vmm_pages *p, vmm_region *r) {
  bool merged = false;
  while (can_merge(r, r->next)) {
    vmm_event *keep = gmr__vmm_event_later(r->event, r->next->event);
    vmm_event *drop = keep == r->event ? r->next->event : r->event;
    r->event = keep;
    r->next->event = NULL;
    if (drop != NULL) gmr__vmm_event_unref(p, drop);
    gmr__vmm_region_absorb_next(p, r);
    merged = true;
  }
  while (can_merge(r->prev, r)) {
    vmm_region *prev = r->prev;
    vmm_event *keep = gmr__vmm_event_later(prev->event, r->event);
    vmm_event *drop = keep == prev->event ? r->event : prev->event;
    prev->event = keep;
    r->event = NULL;
    if (drop != NULL) gmr__vmm_event_unref(p, drop);
    gmr__vmm_region_absorb_next(p, prev);
    r = prev;
    merged = true;
  }
  if (merged) r->id = p->next_id++;
  return r;
}

/* ---- VA chunks ---------------------------------------------------------- */

CUresult gmr__vmm_root_add(vmm_pages *p, size_t bytes, vmm_root **out) {
  *out = NULL;
  vmm_root *root = calloc(1, sizeof *root);
  vmm_region *hole = gmr__vmm_region_new();
  size_t page_count = bytes / p->pool.page_bytes;
  CUmemGenericAllocationHandle *pages = calloc(page_count, sizeof *pages);
  if (root == NULL || hole == NULL || pages == NULL) {
    free(root);
    free(hole);
    free(pages);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr base = 0;
  CUresult st = p->pool.vmm->address_reserve(&base, bytes, p->pool.page_bytes);
  if (st != CUDA_SUCCESS) {
    free(root);
    free(hole);
    free(pages);
    return st;
  }
  root->base = (uintptr_t)base;
  root->bytes = bytes;
  root->pages = pages;
  root->page_bytes = p->pool.page_bytes;
  root->index = p->root_count;
  root->first = hole;
  hole->addr = root->base;
  hole->bytes = bytes;
  hole->state = VMM_HOLE;
  hole->root = root;
  gmr__vmm_list_push(&p->hole_list, hole);
  if (p->last_root != NULL) {
    p->last_root->next = root;
  } else {
    p->roots = root;
  }
  p->last_root = root;
  p->root_count++;
  *out = root;
  return CUDA_SUCCESS;
}

bool gmr__vmm_root_remove_last(vmm_pages *p) {
  vmm_root *root = p->last_root;
  if (p->pool.vmm->address_free((CUdeviceptr)root->base, root->bytes) != CUDA_SUCCESS) return false;
  gmr__vmm_list_remove(&p->hole_list, root->first);
  gmr__vmm_region_delete(root->first);
  vmm_root **link = &p->roots;
  vmm_root *prev = NULL;
  while (*link != root) {
    prev = *link;
    link = &(*link)->next;
  }
  *link = NULL;
  p->last_root = prev;
  p->root_count--;
  free(root->pages);
  free(root);
  return true;
}

CUmemGenericAllocationHandle *gmr__vmm_page_slot(const vmm_root *root, uintptr_t addr) {
  return &root->pages[(addr - root->base) / root->page_bytes];
}

/* ---- events ------------------------------------------------------------- */

vmm_event *gmr__vmm_event_new(vmm_pages *p, cudaError_t *err) {
  *err = cudaSuccess;
  vmm_event *e = calloc(1, sizeof *e);
  if (e == NULL) {
    *err = cudaErrorMemoryAllocation;
    return NULL;
  }
  *err = gmr__event_cache_take(&p->event_cache, p->pool.cuda, &e->event);
  if (*err != cudaSuccess) {
    free(e);
    return NULL;
  }
  e->refs = 1;
  e->complete = true; /* nothing recorded yet */
  return e;
}

vmm_event *gmr__vmm_event_ref(vmm_event *e) {
  e->refs++;
  return e;
}

void gmr__vmm_event_unref(vmm_pages *p, vmm_event *e) {
  if (e == NULL || --e->refs > 0) return;
  (void)gmr__event_cache_give(&p->event_cache, p->pool.cuda, e->event);
  free(e);
}

cudaError_t gmr__vmm_event_record(vmm_pages *p, vmm_event *e, gmr_stream stream) {
  p->counts.event_record++;
  cudaError_t err = p->pool.cuda->event_record(e->event, (cudaStream_t)stream);
  if (err != cudaSuccess) return err;
  e->serial = ++p->next_serial;
  e->complete = false;
  return cudaSuccess;
}

bool gmr__vmm_event_done(vmm_pages *p, vmm_event *e) {
  if (e == NULL || e->complete) return true;
  p->counts.event_query++;
  if (p->pool.cuda->event_query(e->event) != cudaSuccess) return false;
  e->complete = true;
  return true;
}

cudaError_t gmr__vmm_event_wait_host(vmm_pages *p, vmm_event *e) {
  if (e == NULL || e->complete) return cudaSuccess;
  p->counts.event_synchronize++;
  cudaError_t err = p->pool.cuda->event_synchronize(e->event);
  if (err == cudaSuccess) e->complete = true;
  return err;
}

vmm_event *gmr__vmm_event_later(vmm_event *a, vmm_event *b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  return a->serial >= b->serial ? a : b;
}

void gmr__vmm_event_cache_clear(vmm_pages *p) {
  /* At destroy: an event that cannot be destroyed is left behind. */
  while (gmr__event_cache_clear(&p->event_cache, p->pool.cuda) != cudaSuccess) {
    p->event_cache.count--;
  }
}

void gmr__vmm_region_clear_blockers(vmm_pages *p, vmm_region *r) {
  for (uint32_t i = 0; i < r->blocker_count; ++i) gmr__vmm_event_unref(p, r->blockers[i]);
  free(r->blockers);
  r->blockers = NULL;
  r->blocker_count = 0;
  r->capture_wait = false;
  gmr__capture_markers_release(&r->capture_markers);
  free(r->used_streams);
  r->used_streams = NULL;
  r->used_count = 0;
}

void gmr__vmm_device_synchronized(vmm_pages *p) {
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    r->unordered = false;
    if (r->capture_wait) {
      r->capture_wait = false;
      gmr__capture_markers_release(&r->capture_markers);
    }
  }
}
