/*
 * tests/fence_probe.h: util/fence.h driven from C (its inline functions use
 * C11 atomics, which C++ cannot include), for tests/fence_test.cc.
 */
#ifndef GMR_TESTS_FENCE_PROBE_H_
#define GMR_TESTS_FENCE_PROBE_H_

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gmr__fence_asymmetric(). */
bool fence_probe_asymmetric(void);

/* `rounds` rounds of the handshake between two threads, a hot side (store,
 * light fence, load) and a cold side (store, heavy fence, load): the number
 * of rounds in which neither side saw the other's store (must be 0), or -1
 * when no thread could be started. */
int fence_probe_both_missed(bool asymmetric, int rounds);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_FENCE_PROBE_H_ */
