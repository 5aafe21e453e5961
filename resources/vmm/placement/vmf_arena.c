/*
 * resources/vmm/placement/vmf_arena.c (internal): the arenas of a placement
 * engine (vmf.h): an arena joins the engine as one hole (whatever its
 * source mapped under it), leaves it, is found by address; and holes merge.
 */
#include "resources/vmm/placement/vmf.h"

void gmr__vmf_arena_start(vmf_engine *e, vmf_arena *a, uintptr_t base, size_t bytes,
                          vmf_region *hole) {
  a->base = base;
  a->bytes = bytes;
  a->index = e->next_arena_index++;
  a->first = hole;
  hole->node.addr = base;
  hole->node.bytes = bytes;
  hole->arena = a;
  hole->state = VMF_HOLE;
  e->hole_bytes += bytes;
  e->hole_count++;
  a->prev = e->last_arena;
  a->next = NULL;
  if (e->last_arena != NULL) {
    e->last_arena->next = a;
  } else {
    e->arenas = a;
  }
  e->last_arena = a;
  e->arena_count++;
}

void gmr__vmf_arena_unlink(vmf_engine *e, vmf_arena *a) {
  if (a->prev != NULL) a->prev->next = a->next;
  if (a->next != NULL) a->next->prev = a->prev;
  if (e->arenas == a) e->arenas = a->next;
  if (e->last_arena == a) e->last_arena = a->prev;
  e->arena_count--;
}

/* Arenas are few (VA chunks, or chunks of pages): a walk. */
vmf_arena *gmr__vmf_arena_of(const vmf_engine *e, uintptr_t addr) {
  for (vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    if (addr >= a->base && addr - a->base < a->bytes) return a;
  }
  return NULL;
}

/* The region holding addr (slow paths only: walks the arena). */
vmf_region *gmr__vmf_region_at(const vmf_engine *e, uintptr_t addr) {
  vmf_arena *a = gmr__vmf_arena_of(e, addr);
  if (a == NULL) return NULL;
  for (vmf_region *r = a->first; r != NULL; r = r->next) {
    if (addr < r->node.addr + r->node.bytes) return r;
  }
  return NULL;
}

vmf_region *gmr__vmf_make_hole(vmf_engine *e, vmf_region *r) {
  if (r->binned) gmr__vmf_bin_remove(e, r);
  gmr__vmf_set_state(e, r, VMF_HOLE);
  r->slot = VMF_SHARED;
  r->fresh = false;
  if (r->next != NULL && r->next->state == VMF_HOLE) gmr__vmf_absorb_next(e, r);
  if (r->prev != NULL && r->prev->state == VMF_HOLE) {
    r = r->prev;
    gmr__vmf_absorb_next(e, r);
  }
  return r;
}
