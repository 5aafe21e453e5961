/*
 * tests/support/user_resource.c: a user-written resource; see user_resource.h.
 * It includes nothing of gmr but the public header, as a user's code would.
 */
#include "tests/support/user_resource.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct user_arena {
  gmr_resource base; /* first, so a user_arena * is a gmr_resource * */
  unsigned char *buffer;
  size_t capacity_bytes;
  size_t offset_bytes;
  size_t live_count;
  size_t peak_bytes;
};

static gmr_status arena_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)stream;
  user_arena *a = (user_arena *)self;
  uintptr_t base = (uintptr_t)a->buffer;
  uintptr_t start = (base + a->offset_bytes + alignment - 1) & ~(uintptr_t)(alignment - 1);
  size_t end = (size_t)(start - base) + bytes;
  if (end > a->capacity_bytes) {
    snprintf(failure->message, sizeof failure->message, "user arena full: %zu of %zu bytes used",
             a->offset_bytes, a->capacity_bytes);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  a->offset_bytes = end;
  if (end > a->peak_bytes) a->peak_bytes = end;
  a->live_count++;
  *out_ptr = (void *)start;
  return GMR_OK;
}

static gmr_status arena_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  (void)bytes;
  (void)alignment;
  (void)stream;
  user_arena *a = (user_arena *)self;
  unsigned char *p = ptr;
  if (p < a->buffer || p >= a->buffer + a->capacity_bytes || a->live_count == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (--a->live_count == 0) a->offset_bytes = 0;
  return GMR_OK;
}

static gmr_status arena_destroy(gmr_resource *self) {
  user_arena *a = (user_arena *)self;
  if (a->live_count != 0) return GMR_ERR_BUSY;
  free(a);
  return GMR_OK;
}

static gmr_status arena_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const user_arena *a = (const user_arena *)self;
  out->held_bytes = a->capacity_bytes;
  out->peak_held_bytes = a->capacity_bytes;
  return GMR_OK;
}

/* Version 1 vtable; the optional upstream and trim slots are left NULL. */
static const gmr_resource_vtbl arena_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "user_arena",
    .allocate = arena_allocate,
    .deallocate = arena_deallocate,
    .destroy = arena_destroy,
    .get_footprint = arena_get_footprint,
};

user_arena *user_arena_create(void *buffer, size_t capacity_bytes) {
  if (buffer == NULL || capacity_bytes == 0) return NULL;
  user_arena *a = calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  a->base.vtbl = &arena_vtbl;
  a->buffer = buffer;
  a->capacity_bytes = capacity_bytes;
  return a;
}

gmr_resource *user_arena_resource(user_arena *a) { return &a->base; }
size_t user_arena_live_count(const user_arena *a) { return a->live_count; }
size_t user_arena_used_bytes(const user_arena *a) { return a->offset_bytes; }
