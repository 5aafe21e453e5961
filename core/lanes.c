/*
 * core/lanes.c (internal): see lanes.h. Lanes are handed to threads at their
 * first call and handed back by a thread-exit destructor; the mutex orders a
 * dead thread's last updates before its lane's next owner's first.
 */
#include "core/lanes.h"

#include <pthread.h>
#include <string.h>

_Thread_local size_t gmr__lane_plus_one;

static pthread_mutex_t lanes_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool lane_taken[GMR__LANE_COUNT];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t lane_key;
static bool key_ready;

static void give_back(void *value) {
  size_t lane = (size_t)(uintptr_t)value - 1;
  pthread_mutex_lock(&lanes_mutex);
  if (lane < GMR__LANE_COUNT) lane_taken[lane] = false;
  pthread_mutex_unlock(&lanes_mutex);
}

static void make_key(void) { key_ready = pthread_key_create(&lane_key, give_back) == 0; }

size_t gmr__thread_lane_assign(void) {
  pthread_once(&key_once, make_key);
  size_t lane = GMR__LANE_COUNT;
  pthread_mutex_lock(&lanes_mutex);
  /* Without the key a lane could never be given back: share the spare path. */
  for (size_t i = 0; key_ready && i < GMR__LANE_COUNT && lane == GMR__LANE_COUNT; ++i) {
    if (!lane_taken[i]) {
      lane_taken[i] = true;
      lane = i;
    }
  }
  pthread_mutex_unlock(&lanes_mutex);
  if (lane < GMR__LANE_COUNT && pthread_setspecific(lane_key, (void *)(uintptr_t)(lane + 1)) != 0) {
    give_back((void *)(uintptr_t)(lane + 1));
    lane = GMR__LANE_COUNT;
  }
  gmr__lane_plus_one = lane + 1;
  return lane;
}

void gmr__lane_level_init(gmr__lane_level *c, int64_t batch) {
  memset(c, 0, sizeof *c);
  c->batch = batch;
}

int64_t gmr__lane_level_value(const gmr__lane_level *c) {
  int64_t v = atomic_load_explicit(&c->base, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    v += atomic_load_explicit(&c->lanes[i].delta, memory_order_relaxed);
  }
  return v;
}

int64_t gmr__lane_level_total(const gmr__lane_level *c) {
  int64_t v = atomic_load_explicit(&c->shared_total, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    v += atomic_load_explicit(&c->lanes[i].total, memory_order_relaxed);
  }
  return v;
}

int64_t gmr__lane_level_peak(const gmr__lane_level *c) {
  int64_t peak = atomic_load_explicit(&c->peak, memory_order_relaxed);
  int64_t now = gmr__lane_level_value(c);
  return now > peak ? now : peak;
}

int64_t gmr__lane_level_drain(gmr__lane_level *c) {
  int64_t v = gmr__lane_level_value(c);
  atomic_store_explicit(&c->base, 0, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    atomic_store_explicit(&c->lanes[i].delta, 0, memory_order_relaxed);
  }
  return v;
}
