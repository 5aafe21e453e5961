/*
 * util/fence.c (internal): see fence.h.
 */
#define _GNU_SOURCE

#include "util/fence.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool registered;

static void register_membarrier(void) {
#if defined(__linux__) && defined(SYS_membarrier)
  long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  registered = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
#endif
}

bool gmr__fence_asymmetric(void) {
  pthread_once(&once, register_membarrier);
  return registered;
}

void gmr__fence_heavy(bool asymmetric) {
#if defined(__linux__) && defined(SYS_membarrier)
  /* Registered before `asymmetric` could be true, so it cannot fail; were
   * it to, the hot sides would not be fenced: fail loudly rather than
   * silently race. */
  if (asymmetric && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0) abort();
#else
  (void)asymmetric;
#endif
}
