/*
 * core/thread_home.c (internal): see thread_home.h.
 */
#include "core/thread_home.h"

#include <stdatomic.h>

_Thread_local unsigned gmr__thread_home_plus_one;

static atomic_uint next_home;

unsigned gmr__thread_home_assign(void) {
  unsigned h = atomic_fetch_add_explicit(&next_home, 1u, memory_order_relaxed);
  gmr__thread_home_plus_one = h + 1u;
  return h;
}
