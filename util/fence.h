/*
 * util/fence.h (internal): the two sides of an asymmetric Dekker handshake:
 * a hot side that runs on every call, a cold side that runs once in a long
 * while (the limiting adaptor's one switch from counting to enforcing).
 *
 * Each side stores its flag and then loads the other's; a full fence must
 * separate the two, or the load may pass the store and both sides miss each
 * other. On the hot side that fence is a locked instruction on every call.
 * With Linux's membarrier system call (MEMBARRIER_CMD_PRIVATE_EXPEDITED,
 * Linux 4.14) the cold side makes every running thread of the process
 * execute a full fence instead, so the hot side needs only a compiler
 * barrier: the scheme of liburcu's urcu-memb flavour and folly's
 * asymmetricHeavyBarrier. Without membarrier (an older kernel, a seccomp
 * filter that refuses it) both sides fence themselves.
 *
 * Thread-safe: yes.
 */
#ifndef GMR_UTIL_FENCE_H_
#define GMR_UTIL_FENCE_H_

#include <stdatomic.h>
#include <stdbool.h>

/* Whether the cold side fences every thread (membarrier is registered for
 * the process: the first call tries, once). A user stores the answer when it
 * is created and passes it to both sides for its whole life. */
bool gmr__fence_asymmetric(void);

/* The hot side's store of its flag, then the fence before its load. */
static inline void gmr__fence_light_store(_Atomic unsigned *flag, unsigned value,
                                          bool asymmetric) {
  if (asymmetric) {
    atomic_store_explicit(flag, value, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
  } else {
    atomic_store_explicit(flag, value, memory_order_seq_cst);
  }
}

/* The hot side's load of the other side's flag. */
static inline bool gmr__fence_light_load(_Atomic bool *flag, bool asymmetric) {
  return atomic_load_explicit(flag, asymmetric ? memory_order_relaxed : memory_order_seq_cst);
}

/* The cold side, after its sequentially consistent store and before its
 * sequentially consistent loads: a full fence in every running thread of
 * the process (membarrier) when asymmetric; nothing more otherwise. */
void gmr__fence_heavy(bool asymmetric);

#endif /* GMR_UTIL_FENCE_H_ */
