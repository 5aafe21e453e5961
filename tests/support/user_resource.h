/*
 * tests/support/user_resource.h: a resource written the way a user of gmr
 * writes one, in plain C, outside the library, against gmr/resource.h alone.
 *
 * It is a bump arena over a buffer the caller owns: allocations take the next
 * aligned bytes; frees are bookkeeping, and when the last live allocation is
 * freed the arena starts again from the beginning. When the buffer is full it
 * says GMR_ERR_OUT_OF_MEMORY.
 *
 * Thread-safe: no.
 */
#ifndef GMR_TESTS_SUPPORT_USER_RESOURCE_H_
#define GMR_TESTS_SUPPORT_USER_RESOURCE_H_

#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct user_arena user_arena;

/* `buffer` is borrowed; it must outlive the arena. NULL on bad arguments. */
user_arena *user_arena_create(void *buffer, size_t capacity_bytes);
gmr_resource *user_arena_resource(user_arena *a);
size_t user_arena_live_count(const user_arena *a);
size_t user_arena_used_bytes(const user_arena *a);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_USER_RESOURCE_H_ */
