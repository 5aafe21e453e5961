/* tests/vmm/host_probe.c: see host_probe.h. */
#include "tests/vmm/host_probe.h"

#include "resources/vmm/base/vmm_host.h"

size_t gmr_test_live_pageable_bytes(void) { return gmr__vmm_host_live_pageable_bytes(); }
