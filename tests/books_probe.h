/*
 * tests/books_probe.h: what util/books_inline.h keeps about a shard's bias,
 * behind plain functions for the C++ test (the inline header uses C11
 * atomics, which C++ cannot include).
 */
#ifndef GMR_TESTS_BOOKS_PROBE_H_
#define GMR_TESTS_BOOKS_PROBE_H_

#include <stdbool.h>

#include "util/books.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum books_probe_bias {
  BOOKS_PROBE_NONE_YET = 0, /* no thread has used the shard */
  BOOKS_PROBE_MINE,         /* biased to the calling thread */
  BOOKS_PROBE_OTHER,        /* biased to another thread */
  BOOKS_PROBE_LOCKED        /* bias ended: every thread takes the lock */
} books_probe_bias;

/* The bias of the shard that holds `ptr`. */
books_probe_bias books_probe_bias_of(const gmr__books *b, const void *ptr);

/* Whether shards can be biased in this process (membarrier registered). */
bool books_probe_asymmetric(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_BOOKS_PROBE_H_ */
