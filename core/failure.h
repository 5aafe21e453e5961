/*
 * core/failure.h (internal): the failure record and request checks of the
 * dispatch, shared by every entry point that takes an allocation request:
 * gmr_resource_allocate_ex(), the adaptors that forward without the dispatch
 * (core/forward.h), and resources with entry points of their own
 * (gmr_graph_arena_resource_allocate). One place, so the contract of gmr/resource.h
 * ("the record names the deepest resource that failed") cannot drift.
 *
 * Thread-safe: yes (the record belongs to the calling thread).
 */
#ifndef GMR_CORE_FAILURE_H_
#define GMR_CORE_FAILURE_H_

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/extension.h"
#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline bool gmr__is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Round `x` up to a multiple of `power_of_two` (no overflow check). */
static inline size_t gmr__align_up(size_t x, size_t power_of_two) {
  return (x + power_of_two - 1) & ~(power_of_two - 1);
}

/* A fresh record at the start of a request. */
static inline void gmr__failure_reset(gmr_failure *f) {
  f->where = NULL;
  f->cuda_error = 0;
  f->attempt = 0;
  f->message[0] = '\0';
  f->free_info_known = false;
  f->free_bytes = 0;
  f->largest_free_block_bytes = 0;
}

/* Bytes of gmr_failure's header (size, version), which the library never writes. */
#define GMR__FAILURE_HEADER_BYTES offsetof(gmr_failure, status)

/*
 * The record a public entry point that takes a caller's `gmr_failure *` works
 * in (gmr/resource.h: the library never writes past the caller's `size`):
 * the caller's own when it is a whole record of this version, else `local`,
 * given a header of its own. Every public entry point calls it first and
 * gmr__failure_end() last, so resources, listeners and policies only ever see
 * whole records.
 */
static inline gmr_failure *gmr__failure_begin(gmr_failure *caller, gmr_failure *local) {
  if (caller != NULL && caller->size >= sizeof(gmr_failure)) return caller;
  local->size = sizeof *local;
  local->version = GMR_FAILURE_VERSION;
  return local;
}

/* Copy what fits of `used` (from gmr__failure_begin) into the caller's record:
 * nothing when the caller gave none, passed its own, or has a `size` smaller
 * than the header; else the fields up to min(size, sizeof(gmr_failure)).
 * Returns `status`, so an entry point can end with
 * `return gmr__failure_end(failure, f, st);`. */
static inline gmr_status gmr__failure_end(gmr_failure *caller, const gmr_failure *used,
                                          gmr_status status) {
  if (caller == NULL || caller == used || caller->size <= GMR__FAILURE_HEADER_BYTES) {
    return status;
  }
  size_t end = caller->size < sizeof(gmr_failure) ? caller->size : sizeof(gmr_failure);
  memcpy((char *)caller + GMR__FAILURE_HEADER_BYTES, (const char *)used + GMR__FAILURE_HEADER_BYTES,
         end - GMR__FAILURE_HEADER_BYTES);
  return status;
}

/* Fill the record for a failure that no deeper resource described, naming
 * `where`; a record a deeper resource filled is kept. Returns `status`. */
static inline gmr_status gmr__failure_record(gmr_failure *f, gmr_status status,
                                             const gmr_resource *where, size_t bytes,
                                             size_t alignment, gmr_stream stream) {
  if (f->where == NULL) {
    f->status = status;
    f->bytes = bytes;
    f->alignment = alignment;
    f->stream = stream;
    f->where = where;
  }
  return status;
}

/* A failure of the calling resource itself, with a printf-style message: an
 * upstream failure met on the way is not the cause, so the record is
 * cleared for the dispatch to fill. Returns `status`. */
GMR_EXTENSION_API
gmr_status gmr__failure_set(gmr_failure *f, gmr_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/*
 * The dispatch's checks of an allocation request to `r` (which the caller
 * has checked for NULL if it needs to): out_ptr non-NULL (then *out_ptr is
 * cleared), alignment 0 (made 256) or a power of two, bytes at most
 * GMR_MAX_ALLOCATION_BYTES. `failure` has been reset. Returns GMR_OK when the
 * request must go on to the resource, and sets *done with the status to
 * return otherwise: GMR_OK for bytes == 0 (nothing to allocate), or the
 * failure, with the record filled.
 */
bool gmr__request_check(const gmr_resource *r, size_t bytes, size_t *alignment, gmr_stream stream,
                        void **out_ptr, gmr_failure *failure, gmr_status *done);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_FAILURE_H_ */
