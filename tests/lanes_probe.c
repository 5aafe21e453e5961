/*
 * tests/lanes_probe.c: see lanes_probe.h.
 */
#include "tests/lanes_probe.h"

#include <stdlib.h>

#include "util/lanes.h"

struct lanes_probe {
  gmr__lane_counts counts;
};

size_t lanes_probe_lane_count(void) { return GMR__LANE_COUNT; }
size_t lanes_probe_thread_lane(void) { return gmr__thread_lane(); }

lanes_probe *lanes_probe_create(int64_t batch_bytes, int64_t batch_count) {
  lanes_probe *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
  if (p != NULL) gmr__lane_counts_init(&p->counts, batch_bytes, batch_count);
  return p;
}

void lanes_probe_destroy(lanes_probe *p) { free(p); }

void lanes_probe_add(lanes_probe *p, size_t lane, int64_t bytes) {
  gmr__lane_counts_add(&p->counts, lane, bytes);
}

void lanes_probe_grow(lanes_probe *p, size_t lane, int64_t bytes) {
  gmr__lane_counts_grow(&p->counts, lane, bytes);
}

void lanes_probe_sub(lanes_probe *p, size_t lane, int64_t bytes, bool undo) {
  gmr__lane_counts_sub(&p->counts, lane, bytes, undo);
}

void lanes_probe_value(const lanes_probe *p, int64_t *bytes, int64_t *count) {
  gmr__lane_counts_value(&p->counts, bytes, count);
}

void lanes_probe_total(const lanes_probe *p, int64_t *bytes, int64_t *count) {
  gmr__lane_counts_total(&p->counts, bytes, count);
}

void lanes_probe_peak(const lanes_probe *p, int64_t *bytes, int64_t *count) {
  gmr__lane_counts_peak(&p->counts, bytes, count);
}

void lanes_probe_drain(lanes_probe *p, int64_t *bytes, int64_t *count) {
  gmr__lane_counts_drain(&p->counts, bytes, count);
}
