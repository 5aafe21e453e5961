/*
 * util/thread_home.h (internal): gmr's one thread identity. Each thread gets
 * a serial number (1, 2, 3, ... in the order threads first ask; never 0,
 * never reused) at its first call:
 *  - the pools, fixed_block and vmm pick a thread's home arena or shard
 *    from it (gmr__thread_home() % count), so the threads of a program spread
 *    over the arenas of every pool the same way;
 *  - the stream key of cudaStreamPerThread (stream_ordered/stream_event.c) is the
 *    serial with the device, as that stream lives as long as its thread;
 *  - tracking's per-thread owners are named by it.
 * Two related things are not this: lanes (util/lanes.h) are slots a thread
 * gives back when it exits, so counters stay small; the log adaptor writes
 * the operating system's thread id (gettid), which profilers and debuggers
 * show.
 *
 * Thread-safe: yes (an atomic counter; the number itself is thread-local).
 */
#ifndef GMR_UTIL_THREAD_HOME_H_
#define GMR_UTIL_THREAD_HOME_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The calling thread's serial; 0 until it is assigned. */
extern _Thread_local uint64_t gmr__thread_serial_value;

/* Assign the calling thread its serial (thread_home.c). */
uint64_t gmr__thread_serial_assign(void);

static inline uint64_t gmr__thread_serial(void) {
  uint64_t s = gmr__thread_serial_value;
  return s != 0 ? s : gmr__thread_serial_assign();
}

/* The calling thread's home number: its serial minus one. */
static inline unsigned gmr__thread_home(void) { return (unsigned)(gmr__thread_serial() - 1u); }

#ifdef __cplusplus
}
#endif

#endif /* GMR_UTIL_THREAD_HOME_H_ */
