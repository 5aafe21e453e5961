/*
 * core/resource.c: the dispatch functions of gmr/resource.h.
 *
 * Argument checks live here once, so no resource repeats them and every
 * resource sees only valid requests: bytes in 1..GMR_MAX_ALLOCATION_BYTES, a
 * power-of-two alignment, a non-NULL out pointer.
 */
#include "gmr/resource.h"

#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/failure.h"
#include "core/resource_type.h"

/* Slots appended after version 1 will need `vtbl->version >= N` as well. */
static bool has_v1_slots(const gmr_resource_vtbl *vtbl) { return vtbl->version >= 1u; }
static bool has_v2_slots(const gmr_resource_vtbl *vtbl) { return vtbl->version >= 2u; }
static bool has_v3_slots(const gmr_resource_vtbl *vtbl) { return vtbl->version >= 3u; }

gmr_status gmr__resource_check_vtbl(const gmr_resource *r) {
  if (r == NULL || r->vtbl == NULL) return GMR_ERR_INVALID_ARGUMENT;
  const gmr_resource_vtbl *v = r->vtbl;
  if (v->version < 1u || v->type_name == NULL || v->allocate == NULL || v->deallocate == NULL ||
      v->destroy == NULL) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

gmr_status gmr__failure_set(gmr_failure *f, gmr_status status, const char *fmt, ...) {
  f->where = NULL;
  f->cuda_error = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
  return status;
}

bool gmr__request_check(const gmr_resource *r, size_t bytes, size_t *alignment, gmr_stream stream,
                        void **out_ptr, gmr_failure *failure, gmr_status *done) {
  const char *why = NULL;
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  if (out_ptr == NULL) {
    why = "out_ptr is NULL";
  } else {
    *out_ptr = NULL;
    if (*alignment == 0) *alignment = GMR_DEFAULT_ALIGNMENT;
    if (!gmr__is_power_of_two(*alignment)) {
      snprintf(failure->message, sizeof failure->message, "alignment %zu is not a power of two",
               *alignment);
    } else if (bytes == 0) {
      *done = GMR_OK;
      return false;
    } else if (bytes > GMR_MAX_ALLOCATION_BYTES) {
      snprintf(failure->message, sizeof failure->message,
               "request of %zu bytes is larger than any memory gmr can manage", bytes);
      st = GMR_ERR_OUT_OF_MEMORY;
    } else {
      return true;
    }
  }
  if (why != NULL) snprintf(failure->message, sizeof failure->message, "%s", why);
  *done = gmr__failure_record(failure, st, r, bytes, *alignment, stream);
  return false;
}

/* The request every resource may assume: a usable resource, an out pointer,
 * 1..GMR_MAX_ALLOCATION_BYTES bytes, an alignment that is 0 or a power of
 * two. One test of each, inline: the checks of the whole stack are these. */
static inline bool request_is_plain(const gmr_resource *r, size_t bytes, size_t alignment,
                                    void *const *out_ptr) {
  return out_ptr != NULL && r != NULL && r->vtbl != NULL && r->vtbl->allocate != NULL &&
         bytes - 1 < GMR_MAX_ALLOCATION_BYTES && (alignment & (alignment - 1)) == 0;
}

/* Everything else: a bad argument, zero bytes, or an impossible size. */
static gmr_status allocate_unusual(gmr_resource *r, size_t bytes, size_t alignment,
                                   gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_status done = GMR_OK;
  if (out_ptr != NULL && (r == NULL || r->vtbl == NULL || r->vtbl->allocate == NULL)) {
    *out_ptr = NULL;
    snprintf(failure->message, sizeof failure->message, "resource is NULL or has no vtable");
    return gmr__failure_record(failure, GMR_ERR_INVALID_ARGUMENT, r, bytes, alignment, stream);
  }
  (void)gmr__request_check(r, bytes, &alignment, stream, out_ptr, failure, &done);
  return done; /* the check never lets an unusual request through */
}

static inline gmr_status allocate_ex(gmr_resource *r, size_t bytes, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (!request_is_plain(r, bytes, alignment, out_ptr)) {
    return allocate_unusual(r, bytes, alignment, stream, out_ptr, failure);
  }
  if (alignment == 0) alignment = GMR_DEFAULT_ALIGNMENT;
  gmr_status st = r->vtbl->allocate(r, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) {
    *out_ptr = NULL;
    return gmr__failure_record(failure, st, r, bytes, alignment, stream);
  }
  /* A resource that breaks its contract is a bug; catch it in debug builds. */
  assert(*out_ptr != NULL);
  assert(((uintptr_t)*out_ptr & (alignment - 1)) == 0);
  return GMR_OK;
}

gmr_status gmr_resource_allocate_ex(gmr_resource *r, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, allocate_ex(r, bytes, alignment, stream, out_ptr, f));
}

/* gmr_resource_allocate_ex(..., NULL) without its copy-out: the record is
 * this frame's own (the most common call of the library). */
gmr_status gmr_resource_allocate(gmr_resource *r, size_t bytes, size_t alignment, gmr_stream stream,
                                 void **out_ptr) {
  gmr_failure local;
  local.size = sizeof local;
  local.version = GMR_FAILURE_VERSION;
  return allocate_ex(r, bytes, alignment, stream, out_ptr, &local);
}

gmr_status gmr_resource_deallocate(gmr_resource *r, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  if (r == NULL || r->vtbl == NULL || r->vtbl->deallocate == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (ptr == NULL) return GMR_OK;
  /* No allocation of 0 bytes ever returned a non-NULL pointer. */
  if (bytes - 1 >= GMR_MAX_ALLOCATION_BYTES || (alignment & (alignment - 1)) != 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (alignment == 0) alignment = GMR_DEFAULT_ALIGNMENT;
  return r->vtbl->deallocate(r, ptr, bytes, alignment, stream);
}

gmr_status gmr_resource_destroy(gmr_resource *r) {
  if (r == NULL) return GMR_OK;
  if (gmr__resource_check_vtbl(r) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  return r->vtbl->destroy(r);
}

gmr_resource *gmr_resource_get_upstream(const gmr_resource *r) {
  if (r == NULL || r->vtbl == NULL || !has_v1_slots(r->vtbl) || r->vtbl->get_upstream == NULL) {
    return NULL;
  }
  return r->vtbl->get_upstream(r);
}

const char *gmr_resource_get_type_name(const gmr_resource *r) {
  if (r == NULL || r->vtbl == NULL || r->vtbl->type_name == NULL) return "invalid";
  return r->vtbl->type_name;
}

/* ---- gmr's own types (core/resource_type.h) ------------------------------ */

/* Filled front to back and never emptied: a reader stops at the first NULL. */
static _Atomic(const gmr__resource_type *) known_types[GMR__RESOURCE_TYPE_MAX];

void gmr__resource_type_register(const gmr__resource_type *type) {
  for (size_t i = 0; i < GMR__RESOURCE_TYPE_MAX; ++i) {
    const gmr__resource_type *seen = atomic_load_explicit(&known_types[i], memory_order_acquire);
    if (seen == NULL) {
      const gmr__resource_type *expected = NULL;
      if (atomic_compare_exchange_strong_explicit(&known_types[i], &expected, type,
                                                  memory_order_acq_rel, memory_order_acquire)) {
        return;
      }
      seen = expected; /* another thread took the slot: look at what it wrote */
    }
    if (seen == type || seen->vtbl == type->vtbl) return;
  }
  assert(!"more gmr resource types than GMR__RESOURCE_TYPE_MAX");
}

/* The slot of the registered type with vtable `vtbl`; GMR__RESOURCE_TYPE_MAX
 * if none. */
static size_t type_slot(const gmr_resource_vtbl *vtbl) {
  for (size_t i = 0; i < GMR__RESOURCE_TYPE_MAX; ++i) {
    const gmr__resource_type *t = atomic_load_explicit(&known_types[i], memory_order_acquire);
    if (t == NULL) break;
    if (t->vtbl == vtbl) return i;
  }
  return GMR__RESOURCE_TYPE_MAX;
}

const gmr__resource_type *gmr__resource_type_of(const gmr_resource *r) {
  if (r == NULL || r->vtbl == NULL) return NULL;
  size_t i = type_slot(r->vtbl);
  return i == GMR__RESOURCE_TYPE_MAX ? NULL
                                     : atomic_load_explicit(&known_types[i], memory_order_acquire);
}

/* The family of the type in known_types[i] (NULL: none), beside it. */
static _Atomic(const char *) known_families[GMR__RESOURCE_TYPE_MAX];

void gmr__resource_member_register(const gmr__resource_member *member) {
  gmr__resource_type_register(member->type);
  size_t i = type_slot(member->type->vtbl);
  if (i != GMR__RESOURCE_TYPE_MAX) {
    atomic_store_explicit(&known_families[i], member->family, memory_order_release);
  }
}

/* The family of the registered type with vtable `vtbl`, or NULL. */
static const char *family_of(const gmr_resource_vtbl *vtbl) {
  size_t i = type_slot(vtbl);
  return i == GMR__RESOURCE_TYPE_MAX
             ? NULL
             : atomic_load_explicit(&known_families[i], memory_order_acquire);
}

/* Whether a gmr type's instance (vtable `vtbl`) answers to `name`: its own
 * type name, or its family's. */
static bool answers_to(const gmr_resource_vtbl *vtbl, const char *name) {
  if (strcmp(vtbl->type_name, name) == 0) return true;
  const char *family = family_of(vtbl);
  return family != NULL && strcmp(family, name) == 0;
}

void *gmr_resource_downcast(gmr_resource *r, const char *type_name) {
  if (type_name == NULL || gmr__resource_type_of(r) == NULL) return NULL;
  return answers_to(r->vtbl, type_name) ? r : NULL;
}

/* Whether a registered (gmr) type or family has this name. */
static bool is_gmr_type_name(const char *type_name) {
  for (size_t i = 0; i < GMR__RESOURCE_TYPE_MAX; ++i) {
    const gmr__resource_type *t = atomic_load_explicit(&known_types[i], memory_order_acquire);
    if (t == NULL) break;
    const char *family = atomic_load_explicit(&known_families[i], memory_order_acquire);
    if (strcmp(t->vtbl->type_name, type_name) == 0) return true;
    if (family != NULL && strcmp(family, type_name) == 0) return true;
  }
  return false;
}

/* ---- walks down a stack ------------------------------------------------- */

/* Whether the upstream links from `top` come back to a layer already passed
 * (a user's get_upstream can return its own layer, or one above it): every
 * walk below asks first, so none runs forever. Floyd's cycle detection: two
 * cursors, one a layer at a time and one two, meet only on a loop; O(layers)
 * get_upstream calls, no memory, no depth limit. On a loop, *last is the
 * depth (0: the top) of the layer whose upstream goes back, and *first the
 * depth it goes back to. */
static bool stack_loops(const gmr_resource *top, size_t *last, size_t *first) {
  const gmr_resource *slow = top;
  const gmr_resource *fast = top;
  for (;;) {
    if (fast == NULL || (fast = gmr_resource_get_upstream(fast)) == NULL) return false;
    fast = gmr_resource_get_upstream(fast);
    slow = gmr_resource_get_upstream(slow);
    if (fast == NULL) return false;
    if (fast == slow) break;
  }
  /* From the top and from the meeting point, in step: they meet where the
   * loop begins. Then once around it for its length. */
  size_t start = 0;
  for (slow = top; slow != fast; ++start) {
    slow = gmr_resource_get_upstream(slow);
    fast = gmr_resource_get_upstream(fast);
  }
  size_t length = 1;
  for (fast = gmr_resource_get_upstream(slow); fast != slow; ++length) {
    fast = gmr_resource_get_upstream(fast);
  }
  *first = start;
  *last = start + length - 1;
  return true;
}

bool gmr__resource_links_loop(const gmr_resource *top) {
  size_t last = 0, first = 0;
  return stack_loops(top, &last, &first);
}

gmr_resource *gmr_resource_find(gmr_resource *top, const char *type_name) {
  if (type_name == NULL) return NULL;
  if (gmr__resource_links_loop(top)) return NULL;
  /* A layer named after a gmr type but not one of gmr's (a user's vtable
   * borrowing the name) is passed over, so the result always downcasts. */
  bool gmr_type = is_gmr_type_name(type_name);
  for (gmr_resource *r = top; r != NULL; r = gmr_resource_get_upstream(r)) {
    bool match = gmr_type ? gmr__resource_type_of(r) != NULL && answers_to(r->vtbl, type_name)
                          : strcmp(gmr_resource_get_type_name(r), type_name) == 0;
    if (match) return r;
  }
  return NULL;
}

gmr_status gmr__resource_check_deep(const gmr_resource *r, char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (r == NULL) {
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "the resource is NULL");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t last = 0, first = 0;
  if (stack_loops(r, &last, &first)) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes,
               "layer %zu (0: the top) has layer %zu as its upstream: the stack loops back on "
               "itself (check that layer's get_upstream)",
               last, first);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t depth = 0;
  for (const gmr_resource *layer = r; layer != NULL; layer = gmr_resource_get_upstream(layer)) {
    if (gmr__resource_check_vtbl(layer) != GMR_OK) {
      if (err != NULL && err_bytes > 0) {
        snprintf(err, err_bytes,
                 "layer %zu (0: the top) has no vtable, or one without its required slots", depth);
      }
      return GMR_ERR_INVALID_ARGUMENT;
    }
    const gmr__resource_type *type = gmr__resource_type_of(layer);
    if (type != NULL && type->check_books != NULL) {
      /* The books are guarded by the resource's own locks, which the check
       * takes: a const resource is only read. */
      gmr_status st = type->check_books((gmr_resource *)(uintptr_t)layer, err, err_bytes);
      if (st != GMR_OK) return st;
    }
    ++depth;
  }
  return GMR_OK;
}

gmr_status gmr_resource_check(const gmr_resource *r) {
  return gmr__resource_check_deep(r, NULL, 0);
}

gmr_status gmr_resource_trim(gmr_resource *r, size_t *released_bytes) {
  if (released_bytes != NULL) *released_bytes = 0;
  if (gmr__resource_check_vtbl(r) != GMR_OK || gmr__resource_links_loop(r)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Walk down the whole stack: every layer that caches memory gives it back
   * to the layer below, top first, so the lower layers can pass it on. */
  for (gmr_resource *cur = r; cur != NULL; cur = gmr_resource_get_upstream(cur)) {
    if (!has_v1_slots(cur->vtbl) || cur->vtbl->trim == NULL) continue;
    size_t released = 0;
    gmr_status st = cur->vtbl->trim(cur, &released);
    if (released_bytes != NULL) *released_bytes += released;
    if (st != GMR_OK) return st;
  }
  return GMR_OK;
}

gmr_status gmr_resource_get_footprint(const gmr_resource *r, gmr_footprint *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  if (gmr__resource_check_vtbl(r) != GMR_OK || gmr__resource_links_loop(r)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  for (const gmr_resource *cur = r; cur != NULL; cur = gmr_resource_get_upstream(cur)) {
    if (has_v1_slots(cur->vtbl) && cur->vtbl->get_footprint != NULL) {
      return cur->vtbl->get_footprint(cur, out);
    }
  }
  return GMR_ERR_UNSUPPORTED;
}

/* The version-1 gmr_memory_info: every field up to free_block_count. */
#define MEMORY_INFO_V1_BYTES (offsetof(gmr_memory_info, free_block_count) + sizeof(size_t))

gmr_status gmr_resource_get_memory_info(const gmr_resource *r, gmr_memory_info *out) {
  if (out == NULL || out->size < MEMORY_INFO_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Zero what follows the header, as far as the caller's struct reaches. */
  size_t header = offsetof(gmr_memory_info, held_bytes);
  size_t known = out->size < sizeof *out ? out->size : sizeof *out;
  memset((char *)out + header, 0, known - header);
  if (gmr__resource_check_vtbl(r) != GMR_OK || gmr__resource_links_loop(r)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  for (const gmr_resource *cur = r; cur != NULL; cur = gmr_resource_get_upstream(cur)) {
    if (has_v2_slots(cur->vtbl) && cur->vtbl->get_memory_info != NULL) {
      return cur->vtbl->get_memory_info(cur, out);
    }
  }
  return GMR_ERR_UNSUPPORTED;
}

gmr_status gmr_resource_record_stream(gmr_resource *r, void *ptr, gmr_stream stream) {
  if (gmr__resource_check_vtbl(r) != GMR_OK || ptr == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (!has_v2_slots(r->vtbl) || r->vtbl->record_stream == NULL) return GMR_ERR_UNSUPPORTED;
  return r->vtbl->record_stream(r, ptr, stream);
}

static gmr_status allocate_capturing(gmr_resource *r, size_t bytes, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr__failure_reset(failure);
  gmr_status done = GMR_OK;
  if (out_ptr != NULL && gmr__resource_check_vtbl(r) != GMR_OK) {
    *out_ptr = NULL;
    snprintf(failure->message, sizeof failure->message, "resource is NULL or has no vtable");
    return gmr__failure_record(failure, GMR_ERR_INVALID_ARGUMENT, r, bytes, alignment, stream);
  }
  if (!gmr__request_check(r, bytes, &alignment, stream, out_ptr, failure, &done)) return done;
  if (!has_v2_slots(r->vtbl) || r->vtbl->allocate_capturing == NULL) {
    snprintf(failure->message, sizeof failure->message,
             "%s cannot allocate while a stream captures a CUDA graph",
             gmr_resource_get_type_name(r));
    return gmr__failure_record(failure, GMR_ERR_CAPTURE_UNSAFE, r, bytes, alignment, stream);
  }
  gmr_status st = r->vtbl->allocate_capturing(r, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) {
    *out_ptr = NULL;
    return gmr__failure_record(failure, st, r, bytes, alignment, stream);
  }
  assert(*out_ptr != NULL);
  assert(((uintptr_t)*out_ptr & (alignment - 1)) == 0);
  return GMR_OK;
}

gmr_status gmr_resource_allocate_capturing(gmr_resource *r, size_t bytes, size_t alignment,
                                           gmr_stream stream, void **out_ptr,
                                           gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, allocate_capturing(r, bytes, alignment, stream, out_ptr, f));
}

static gmr_status extend(gmr_resource *r, void *ptr, size_t bytes, size_t new_bytes,
                         size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (alignment == 0) alignment = GMR_DEFAULT_ALIGNMENT;
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  if (gmr__resource_check_vtbl(r) != GMR_OK) {
    snprintf(failure->message, sizeof failure->message, "resource is NULL or has no vtable");
  } else if (ptr == NULL) {
    snprintf(failure->message, sizeof failure->message, "ptr is NULL: nothing to extend");
  } else if (!gmr__is_power_of_two(alignment)) {
    snprintf(failure->message, sizeof failure->message, "alignment %zu is not a power of two",
             alignment);
  } else if (bytes == 0 || bytes > GMR_MAX_ALLOCATION_BYTES || new_bytes < bytes) {
    snprintf(failure->message, sizeof failure->message,
             "cannot extend an allocation of %zu bytes to %zu bytes (only growth of a live "
             "allocation is possible)",
             bytes, new_bytes);
  } else if (new_bytes > GMR_MAX_ALLOCATION_BYTES) {
    snprintf(failure->message, sizeof failure->message,
             "request of %zu bytes is larger than any memory gmr can manage", new_bytes);
    st = GMR_ERR_OUT_OF_MEMORY;
  } else if (new_bytes == bytes) {
    return GMR_OK;
  } else if (!has_v3_slots(r->vtbl) || r->vtbl->extend == NULL) {
    snprintf(failure->message, sizeof failure->message, "%s cannot grow an allocation in place",
             gmr_resource_get_type_name(r));
    st = GMR_ERR_UNSUPPORTED;
  } else {
    st = r->vtbl->extend(r, ptr, bytes, new_bytes, alignment, stream, failure);
    if (st == GMR_OK) return GMR_OK;
  }
  return gmr__failure_record(failure, st, r, new_bytes, alignment, stream);
}

gmr_status gmr_resource_extend(gmr_resource *r, void *ptr, size_t bytes, size_t new_bytes,
                               size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, extend(r, ptr, bytes, new_bytes, alignment, stream, f));
}
