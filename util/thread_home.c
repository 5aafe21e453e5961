/*
 * util/thread_home.c (internal): see thread_home.h.
 */
#include "util/thread_home.h"

#include <stdatomic.h>

_Thread_local uint64_t gmr__thread_serial_value;
static _Atomic uint64_t last_serial;

uint64_t gmr__thread_serial_assign(void) {
  uint64_t s = atomic_fetch_add_explicit(&last_serial, 1u, memory_order_relaxed) + 1u;
  gmr__thread_serial_value = s;
  return s;
}
