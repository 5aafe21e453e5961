/*
 * tests/fence_probe.c: see fence_probe.h. Two threads meet at a spinning
 * barrier before and after each round, so their stores and loads overlap
 * (the only way a reordering can show); the last to arrive before a round
 * clears the flags.
 */
#include "tests/fence_probe.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "util/fence.h"

typedef struct rounds {
  bool asymmetric;
  int count;
  _Atomic unsigned hot_flag;
  _Atomic bool cold_flag;
  _Atomic int arrived;     /* threads at the barrier */
  _Atomic int barrier_no;  /* barriers passed */
  bool hot_saw, cold_saw;  /* written before the second barrier of a round */
  int both_missed;
} rounds;

/* The `n`th barrier: the second thread to arrive clears the flags (before a
 * round) and lets both go. Spins, then gives the core away. */
static void meet(rounds *p, int n, bool before_round) {
  if (atomic_fetch_add_explicit(&p->arrived, 1, memory_order_acq_rel) == 1) {
    if (before_round) {
      atomic_store_explicit(&p->hot_flag, 0u, memory_order_relaxed);
      atomic_store_explicit(&p->cold_flag, false, memory_order_relaxed);
    }
    atomic_store_explicit(&p->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&p->barrier_no, n + 1, memory_order_release);
    return;
  }
  for (unsigned spins = 0; atomic_load_explicit(&p->barrier_no, memory_order_acquire) <= n;) {
    if (++spins > 4096) sched_yield();
  }
}

static void *hot_side(void *arg) {
  rounds *p = arg;
  for (int r = 0; r < p->count; ++r) {
    meet(p, 2 * r, true);
    gmr__fence_light_store(&p->hot_flag, 1u, p->asymmetric);
    p->hot_saw = gmr__fence_light_load(&p->cold_flag, p->asymmetric);
    meet(p, 2 * r + 1, false);
    if (!p->hot_saw && !p->cold_saw) p->both_missed++;
  }
  return NULL;
}

static void *cold_side(void *arg) {
  rounds *p = arg;
  for (int r = 0; r < p->count; ++r) {
    meet(p, 2 * r, true);
    atomic_store_explicit(&p->cold_flag, true, memory_order_seq_cst);
    gmr__fence_heavy(p->asymmetric);
    p->cold_saw = atomic_load_explicit(&p->hot_flag, memory_order_seq_cst) != 0;
    meet(p, 2 * r + 1, false);
  }
  return NULL;
}

bool fence_probe_asymmetric(void) { return gmr__fence_asymmetric(); }

int fence_probe_both_missed(bool asymmetric, int count) {
  static rounds p; /* one probe at a time */
  p.asymmetric = asymmetric;
  p.count = count;
  p.both_missed = 0;
  p.hot_saw = p.cold_saw = false;
  atomic_init(&p.hot_flag, 0u);
  atomic_init(&p.cold_flag, false);
  atomic_init(&p.arrived, 0);
  atomic_init(&p.barrier_no, 0);
  pthread_t hot, cold;
  if (pthread_create(&hot, NULL, hot_side, &p) != 0) return -1;
  bool cold_started = pthread_create(&cold, NULL, cold_side, &p) == 0;
  if (!cold_started) (void)cold_side(&p); /* the hot side waits for a partner */
  pthread_join(hot, NULL);
  if (cold_started) pthread_join(cold, NULL);
  return p.both_missed;
}
