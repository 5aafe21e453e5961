/*
 * core/nvtx_headers.h (internal): include the NVTX v3 headers the way every
 * gmr file that calls NVTX needs them.
 *
 *  - GMR_DISABLE_NVTX (a build flag: `bazel build --copt=-DGMR_DISABLE_NVTX`)
 *    defines NVTX_DISABLE, which turns every NVTX call into an empty body.
 *  - NVTX_AS_SYSTEM_HEADER: NVTX's implementation casts dlsym's object pointer
 *    to a function pointer, which -Wpedantic rejects in C11; as a system header
 *    its own code is not held to our warning flags (ours still is).
 *
 * Thread-safe: not applicable (includes only).
 */
#ifndef GMR_CORE_NVTX_HEADERS_H_
#define GMR_CORE_NVTX_HEADERS_H_

#if defined(GMR_DISABLE_NVTX) && !defined(NVTX_DISABLE)
#define NVTX_DISABLE
#endif
#ifndef NVTX_AS_SYSTEM_HEADER
#define NVTX_AS_SYSTEM_HEADER
#endif

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

#endif /* GMR_CORE_NVTX_HEADERS_H_ */
