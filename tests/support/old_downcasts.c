/*
 * tests/support/old_downcasts.c: see old_downcasts.h. Like the library's
 * core/deprecated_downcasts.c, it declares the 0.1 prototypes itself and
 * includes no header that defines the inline versions.
 */
#include "tests/support/old_downcasts.h"

#include <string.h>

#define OLD_TYPES(XX)          \
  XX(cuda_resource)            \
  XX(host_resource)            \
  XX(pool_resource)            \
  XX(vmm_pool_resource)        \
  XX(fixed_block_resource)     \
  XX(graph_arena_resource)     \
  XX(limiting_adaptor)         \
  XX(tracking_adaptor)         \
  XX(oom_adaptor)              \
  XX(log_adaptor)              \
  XX(nvtx_logging_adaptor)     \
  XX(memory_space)             \
  XX(numa_host_resource)       \
  XX(cumem_resource)           \
  XX(symmetric_resource)       \
  XX(chunk_listener_adaptor)

#define DECLARE(t)                                      \
  typedef struct gmr_##t gmr_##t;                       \
  gmr_resource *gmr_##t##_as_resource(gmr_##t *handle); \
  gmr_##t *gmr_##t##_from_resource(gmr_resource *r);
OLD_TYPES(DECLARE)
#undef DECLARE

/* libgmr_scoped kept only as_resource (it never had a from_resource). */
typedef struct gmr_scoped_pool gmr_scoped_pool;
gmr_resource *gmr_scoped_pool_as_resource(gmr_scoped_pool *pool);

#define NAME(t) #t,
const char *const old_downcast_type_names[] = {OLD_TYPES(NAME) NULL};
#undef NAME

bool old_downcast(const char *type_name, gmr_resource *r, void **out_from,
                  gmr_resource **out_as) {
#define CALL(t)                                              \
  if (strcmp(type_name, #t) == 0) {                          \
    *out_from = gmr_##t##_from_resource(r);                  \
    *out_as = gmr_##t##_as_resource((gmr_##t *)(void *)r);   \
    return true;                                             \
  }
  OLD_TYPES(CALL)
#undef CALL
  if (strcmp(type_name, "scoped_pool") == 0) {
    *out_from = NULL;
    *out_as = gmr_scoped_pool_as_resource((gmr_scoped_pool *)(void *)r);
    return true;
  }
  return false;
}
