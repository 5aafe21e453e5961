/*
 * tests/vmm/host_probe.h: what the VMM base's host side (vmm_host.h, C11
 * atomics) tells a C++ test: the pageable host bytes every pool's backups
 * hold in this process, counted where they are mapped and unmapped (not
 * from the pools' books), so a test can check the books against it.
 */
#ifndef GMR_TESTS_VMM_HOST_PROBE_H_
#define GMR_TESTS_VMM_HOST_PROBE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pageable backup bytes allocated and not freed, every pool together. */
size_t gmr_test_live_pageable_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_VMM_HOST_PROBE_H_ */
