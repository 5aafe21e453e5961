/*
 * core/resource_type.h (internal): the table of gmr's own resource types,
 * behind gmr_resource_downcast() (gmr/resource.h).
 *
 * Each of gmr's resources and adaptors describes its type once, as a static
 * gmr__resource_type (its vtable, and the check of its books where it keeps
 * some), and registers it in its create function before it hands the first
 * instance out. A vtable that was never registered is not one of gmr's: a
 * user's resource never downcasts to a gmr type, whatever its type_name says
 * (the vtable's identity decides, as the per-type checks `r->vtbl ==
 * &pool_vtbl` did before one function did them all).
 *
 * Types register at their first create rather than from one list in the
 * core, so the core names no resource (it sits below them all) and the
 * optional libraries (tiers, scoped, nccl) register theirs the same way: a
 * type that has no instance yet needs no entry, since nothing can be
 * downcast to it.
 *
 * Thread-safe: yes (a lock-free table; registering again is a few loads).
 */
#ifndef GMR_CORE_RESOURCE_TYPE_H_
#define GMR_CORE_RESOURCE_TYPE_H_

#include <stddef.h>

#include "core/extension.h"
#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check the books of `r` (an instance of the type): write the first
 * violation into err (err_bytes long, may be 0) and return
 * GMR_ERR_INTERNAL, or return GMR_OK. */
typedef gmr_status gmr__resource_check_books_fn(gmr_resource *r, char *err, size_t err_bytes);

typedef struct gmr__resource_type {
  const gmr_resource_vtbl *vtbl;             /* the type's one vtable */
  gmr__resource_check_books_fn *check_books; /* NULL: no books to check */
} gmr__resource_type;

/* At most this many types are registered (gmr has 17). */
#define GMR__RESOURCE_TYPE_MAX 64

/* Register `type` (static storage); idempotent. Call it before an instance
 * of the type is handed out. */
GMR_EXTENSION_API
void gmr__resource_type_register(const gmr__resource_type *type);

/* A registered type that belongs to a family: types with a type name of
 * their own whose instances share one handle and its functions (the VMM
 * resources "vmm_resource" and "vmm_pages_resource" are both a
 * gmr_vmm_pool_resource). gmr_resource_downcast() and gmr_resource_find()
 * by the family's name reach the instances of every member. */
typedef struct gmr__resource_member {
  const gmr__resource_type *type;
  const char *family; /* the family's name, e.g. "vmm_pool_resource" */
} gmr__resource_member;

/* Register member->type (as gmr__resource_type_register does) and its
 * family (static storage); idempotent. */
void gmr__resource_member_register(const gmr__resource_member *member);

/* The registered type whose vtable `r` has, or NULL (a user's resource, an
 * invalid one, or NULL). */
const gmr__resource_type *gmr__resource_type_of(const gmr_resource *r);

/* GMR_OK when `r` can be called: non-NULL, a vtable of version >= 1 with a
 * type name and the three required slots; else GMR_ERR_INVALID_ARGUMENT.
 * O(1): what the dispatch and the create functions check (on `r` alone),
 * where gmr_resource_check() also checks the books of the whole stack. */
GMR_EXTENSION_API
gmr_status gmr__resource_check_vtbl(const gmr_resource *r);

/* Whether the upstream links from `top` come back to a layer already passed
 * (a user's get_upstream returning its own layer or one above): every walk
 * down a stack asks first and refuses such a stack, so none runs forever.
 * O(layers) get_upstream calls, no memory (Floyd's cycle detection). */
bool gmr__resource_links_loop(const gmr_resource *top);

/* gmr_resource_check() with the first violation written into err (err_bytes
 * long, may be 0; "" when everything holds): the vtable of `r` and of every
 * layer below it, and the books of each layer whose type has a check. */
gmr_status gmr__resource_check_deep(const gmr_resource *r, char *err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_RESOURCE_TYPE_H_ */
