/*
 * tests/support/stream_recorder.h: an adaptor that records the stream of
 * every call it forwards (allocate, allocate_capturing, deallocate), for
 * tests of which stream a resource hands its upstream. allocate_capturing is
 * forwarded as a plain allocation (the tests that use it capture nothing for
 * real). The first 64 calls of each kind are kept.
 *
 * Thread-safe: yes (internal mutex).
 */
#ifndef GMR_TESTS_SUPPORT_STREAM_RECORDER_H_
#define GMR_TESTS_SUPPORT_STREAM_RECORDER_H_

#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_stream_recorder gmr_stream_recorder;

typedef enum gmr_stream_recorder_call {
  GMR_STREAM_RECORDER_ALLOCATE = 0,
  GMR_STREAM_RECORDER_ALLOCATE_CAPTURING = 1,
  GMR_STREAM_RECORDER_DEALLOCATE = 2
} gmr_stream_recorder_call;

/* Over `upstream` (borrowed). NULL if the host allocation failed. Destroy
 * with gmr_resource_destroy (never the upstream). */
gmr_stream_recorder *gmr_stream_recorder_create(gmr_resource *upstream);
gmr_resource *gmr_stream_recorder_as_resource(gmr_stream_recorder *r);

/* Calls of `kind` so far, and the stream of the index-th (NULL past the end). */
size_t gmr_stream_recorder_count(gmr_stream_recorder *r, gmr_stream_recorder_call kind);
gmr_stream gmr_stream_recorder_stream(gmr_stream_recorder *r, gmr_stream_recorder_call kind,
                                      size_t index);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_STREAM_RECORDER_H_ */
