/*
 * util/lanes.c (internal): see lanes.h. Lanes are handed to threads at their
 * first call and handed back by a thread-exit destructor; the mutex orders a
 * dead thread's last updates before its lane's next owner's first.
 */
#include "util/lanes.h"

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

void gmr__lane_counts_init(gmr__lane_counts *c, int64_t batch_bytes, int64_t batch_count) {
  memset(c, 0, sizeof *c);
  c->batch_bytes = batch_bytes;
  c->batch_count = batch_count;
}

void gmr__lane_counts_value(const gmr__lane_counts *c, int64_t *bytes, int64_t *count) {
  int64_t b = atomic_load_explicit(&c->base_bytes, memory_order_relaxed);
  int64_t n = atomic_load_explicit(&c->base_count, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    b += atomic_load_explicit(&c->lanes[i].bytes, memory_order_relaxed);
    n += atomic_load_explicit(&c->lanes[i].count, memory_order_relaxed);
  }
  if (bytes != NULL) *bytes = b;
  if (count != NULL) *count = n;
}

void gmr__lane_counts_total(const gmr__lane_counts *c, int64_t *bytes, int64_t *count) {
  int64_t b = atomic_load_explicit(&c->shared_total_bytes, memory_order_relaxed);
  int64_t n = atomic_load_explicit(&c->shared_total_count, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    b += atomic_load_explicit(&c->lanes[i].total_bytes, memory_order_relaxed);
    n += atomic_load_explicit(&c->lanes[i].total_count, memory_order_relaxed);
  }
  if (bytes != NULL) *bytes = b;
  if (count != NULL) *count = n;
}

void gmr__lane_counts_peak(const gmr__lane_counts *c, int64_t *bytes, int64_t *count) {
  int64_t now_bytes = 0, now_count = 0;
  gmr__lane_counts_value(c, &now_bytes, &now_count);
  int64_t b = atomic_load_explicit(&c->peak_bytes, memory_order_relaxed);
  int64_t n = atomic_load_explicit(&c->peak_count, memory_order_relaxed);
  if (bytes != NULL) *bytes = now_bytes > b ? now_bytes : b;
  if (count != NULL) *count = now_count > n ? now_count : n;
}

void gmr__lane_counts_drain(gmr__lane_counts *c, int64_t *bytes, int64_t *count) {
  gmr__lane_counts_value(c, bytes, count);
  atomic_store_explicit(&c->base_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&c->base_count, 0, memory_order_relaxed);
  for (size_t i = 0; i < GMR__LANE_COUNT; ++i) {
    atomic_store_explicit(&c->lanes[i].bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&c->lanes[i].count, 0, memory_order_relaxed);
  }
}
