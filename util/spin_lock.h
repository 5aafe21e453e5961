/*
 * util/spin_lock.h (internal): a test-and-test-and-set lock for the short
 * critical sections of the pools (a few tens of nanoseconds of bookkeeping).
 *
 * Uncontended it costs one atomic exchange and one release store, about half
 * of a pthread mutex pair. Under contention it spins briefly with a CPU pause
 * and then yields the processor, so a waiting thread does not burn a core that
 * the holder needs (threads may outnumber cores).
 *
 * Thread-safe: yes (that is its purpose).
 */
#ifndef GMR_UTIL_SPIN_LOCK_H_
#define GMR_UTIL_SPIN_LOCK_H_

#include <stdatomic.h>
#include <stdbool.h>

typedef struct gmr__spin_lock {
  atomic_int locked;
} gmr__spin_lock;

#define GMR__SPIN_LOCK_INIT {0}

/* Spin, then yield, until the lock is free and taken (spin_lock.c). */
void gmr__spin_lock_acquire_slow(gmr__spin_lock *lock);

static inline void gmr__spin_lock_acquire(gmr__spin_lock *lock) {
  if (!atomic_exchange_explicit(&lock->locked, 1, memory_order_acquire)) return;
  gmr__spin_lock_acquire_slow(lock);
}

static inline void gmr__spin_lock_release(gmr__spin_lock *lock) {
  atomic_store_explicit(&lock->locked, 0, memory_order_release);
}

#endif /* GMR_UTIL_SPIN_LOCK_H_ */
