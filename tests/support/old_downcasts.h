/*
 * tests/support/old_downcasts.h: calls of the exported 0.1 symbols of the
 * per-type *_as_resource() and *_from_resource() functions, which the headers
 * now define inline (core/deprecated_downcasts.c and the optional libraries'
 * copies keep the symbols for programs built against 0.1). The calls live in
 * old_downcasts.c, which includes no header with the inline definitions, so
 * they reach the exported functions, as a 0.1 program's calls do.
 */
#ifndef GMR_TESTS_SUPPORT_OLD_DOWNCASTS_H_
#define GMR_TESTS_SUPPORT_OLD_DOWNCASTS_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The type names with an exported from_resource (scoped_pool has only
 * as_resource), NULL-terminated. */
extern const char *const old_downcast_type_names[];

/* For `type_name`: *out_from = gmr_<type>_from_resource(r) and *out_as =
 * gmr_<type>_as_resource((gmr_<type> *)r), through the exported symbols.
 * Returns false (outputs untouched) for a name it does not know. */
bool old_downcast(const char *type_name, gmr_resource *r, void **out_from,
                  gmr_resource **out_as);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_OLD_DOWNCASTS_H_ */
