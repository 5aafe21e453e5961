/*
 * tests/lanes_probe.h: util/lanes.h behind plain functions, for the C++ test
 * (the header's inline functions use C11 atomics, which C++ cannot include).
 */
#ifndef GMR_TESTS_LANES_PROBE_H_
#define GMR_TESTS_LANES_PROBE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lanes_probe lanes_probe;

size_t lanes_probe_lane_count(void);
size_t lanes_probe_thread_lane(void);
lanes_probe *lanes_probe_create(int64_t batch_bytes, int64_t batch_count);
void lanes_probe_destroy(lanes_probe *p);
void lanes_probe_add(lanes_probe *p, size_t lane, int64_t bytes);
void lanes_probe_grow(lanes_probe *p, size_t lane, int64_t bytes);
void lanes_probe_sub(lanes_probe *p, size_t lane, int64_t bytes, bool undo);
void lanes_probe_value(const lanes_probe *p, int64_t *bytes, int64_t *count);
void lanes_probe_total(const lanes_probe *p, int64_t *bytes, int64_t *count);
void lanes_probe_peak(const lanes_probe *p, int64_t *bytes, int64_t *count);
void lanes_probe_drain(lanes_probe *p, int64_t *bytes, int64_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_LANES_PROBE_H_ */
