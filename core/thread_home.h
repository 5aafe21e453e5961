/*
 * core/thread_home.h (internal): a small number per thread, given out
 * round-robin in the order threads first ask, that the pools use to pick a
 * thread's home arena or shard (number % count).
 *
 * One counter for the whole process, so the threads of a program spread over
 * the arenas of every pool the same way.
 *
 * Thread-safe: yes (an atomic counter; the number itself is thread-local).
 */
#ifndef GMR_CORE_THREAD_HOME_H_
#define GMR_CORE_THREAD_HOME_H_

/* The calling thread's number plus one; 0 until it is assigned. */
extern _Thread_local unsigned gmr__thread_home_plus_one;

/* Assign the calling thread its number (thread_home.c). */
unsigned gmr__thread_home_assign(void);

static inline unsigned gmr__thread_home(void) {
  unsigned h = gmr__thread_home_plus_one;
  return h != 0 ? h - 1u : gmr__thread_home_assign();
}

#endif /* GMR_CORE_THREAD_HOME_H_ */
