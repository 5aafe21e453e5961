/*
 * tests/support/check_stack.c: see check_stack.h.
 */
#include "tests/support/check_stack.h"

#include "core/resource_type.h"

gmr_status check_stack(const gmr_resource *r, char *err, size_t err_bytes) {
  return gmr__resource_check_deep(r, err, err_bytes);
}
