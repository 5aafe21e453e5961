/*
 * tests/support/check_stack.h: gmr_resource_check() with the text of the
 * first violation, for a failing test's message. The public call returns the
 * status only; this one reaches the same walk inside the library
 * (core/resource_type.h), which also writes what broke.
 */
#ifndef GMR_TESTS_SUPPORT_CHECK_STACK_H_
#define GMR_TESTS_SUPPORT_CHECK_STACK_H_

#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gmr_resource_check(r), with the first violation in err (err_bytes long;
 * "" when the stack is sound). */
gmr_status check_stack(const gmr_resource *r, char *err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_CHECK_STACK_H_ */
