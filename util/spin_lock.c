/*
 * util/spin_lock.c (internal): the contended path of gmr__spin_lock.
 */
#define _POSIX_C_SOURCE 200809L

#include "util/spin_lock.h"

#include <sched.h>

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void gmr__spin_lock_acquire_slow(gmr__spin_lock *lock) {
  unsigned spins = 0;
  for (;;) {
    /* Read-only spinning keeps the line shared until the holder releases. */
    while (atomic_load_explicit(&lock->locked, memory_order_relaxed) != 0) {
      if (spins < 128) {
        cpu_pause();
        spins++;
      } else {
        sched_yield();
      }
    }
    if (!atomic_exchange_explicit(&lock->locked, 1, memory_order_acquire)) return;
  }
}
