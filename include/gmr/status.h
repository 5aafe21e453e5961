/*
 * gmr/status.h: the status codes every gmr function returns.
 *
 * One X-macro, GMR_STATUS_MAP, generates the enum, gmr_status_name() and
 * gmr_status_string(), so the three never drift apart. Codes are only ever
 * appended; a program must treat an unknown code as a failure.
 *
 * Thread-safe: yes (pure functions over static strings).
 */
#ifndef GMR_STATUS_H_
#define GMR_STATUS_H_

#include "gmr/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(NAME, value, sentence). NAME becomes GMR_<NAME>. */
#define GMR_STATUS_MAP(XX)                                                                      \
  XX(OK, 0, "The operation succeeded.")                                                        \
  XX(ERR_INVALID_ARGUMENT, 1,                                                                   \
     "An argument was invalid (a NULL pointer, an alignment that is not a power of two, a "    \
     "size that does not match, an unknown name); nothing was changed.")                       \
  XX(ERR_OUT_OF_MEMORY, 2, "The upstream memory source has no memory left for this request.")  \
  XX(ERR_LIMIT_EXCEEDED, 3, "A limit policy refused the request; memory may still be free.")  \
  XX(ERR_UNSUPPORTED, 4, "The resource does not support this operation or argument.")         \
  XX(ERR_BUSY, 5, "The object is still in use (live allocations, sessions or dependents).")   \
  XX(ERR_CUDA, 6,                                                                               \
     "A CUDA call failed for a reason other than lack of memory; the failure record keeps "    \
     "the CUDA error code.")                                                                   \
  XX(ERR_CAPTURE_UNSAFE, 7,                                                                     \
     "The operation would break a CUDA graph capture in progress on the stream, so it was "    \
     "not attempted.")                                                                         \
  XX(ERR_INTERNAL, 8, "An internal invariant of gmr was violated; this is a bug in gmr.")     \
  XX(ERR_UNKNOWN_POINTER, 9,                                                                    \
     "The pointer given to deallocate was never allocated through this resource; nothing was " \
     "released.")                                                                              \
  XX(ERR_DOUBLE_FREE, 10,                                                                       \
     "The pointer given to deallocate was already freed through this resource; nothing was "   \
     "released.")                                                                              \
  XX(ERR_FREE_MISMATCH, 11,                                                                     \
     "The size, alignment or stream given to deallocate differs from the allocation's; "       \
     "nothing was released.")                                                                  \
  XX(ERR_TIMEOUT, 12,                                                                           \
     "A blocking call waited as long as it was allowed to and gave up; nothing was changed.")  \
  XX(ERR_SHUTDOWN, 13,                                                                          \
     "The object is shutting down: the request was refused, or its waiter woken, and nothing " \
     "was changed.")                                                                           \
  XX(ERR_NO_RESERVATION, 14,                                                                    \
     "The memory space requires a reservation bound to the request's stream and the stream "   \
     "has none; nothing was allocated.")                                                       \
  XX(ERR_WRONG_DEVICE, 15,                                                                      \
     "The object belongs to another CUDA device than the one current in the calling thread; "  \
     "nothing was changed.")                                                                   \
  XX(ERR_NCCL, 16,                                                                              \
     "An NCCL call failed (or NCCL could not be loaded); the message names the call and "      \
     "NCCL's error; nothing was changed.")

typedef enum gmr_status {
#define GMR_STATUS_ENUM_(name, value, sentence) GMR_##name = value,
  GMR_STATUS_MAP(GMR_STATUS_ENUM_)
#undef GMR_STATUS_ENUM_
} gmr_status;

/**
 * Return a sentence that explains `status`, for people reading logs.
 * Units: none. Ownership: the string is static; never free it.
 * Thread-safe: yes. Returns "Unknown gmr status." for a value outside the enum.
 */
GMR_API const char *gmr_status_string(gmr_status status);

/**
 * Return the enumerator's full name ("GMR_ERR_OUT_OF_MEMORY").
 * Ownership: the string is static; never free it.
 * Thread-safe: yes. Returns "UNKNOWN" for a value outside the enum.
 */
GMR_API const char *gmr_status_name(gmr_status status);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STATUS_H_ */
