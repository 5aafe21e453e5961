/*
 * gmr/gmr.h: the umbrella header of libgmr; includes every public header of
 * the core library. The optional libraries have their own folders: memory
 * tiers in gmr/tiers/ (libgmr_tiers), scoped pools in gmr/scoped/
 * (libgmr_scoped), NCCL in gmr/nccl/ (libgmr_nccl); the CUDA simulation
 * for tests in gmr/sim/ (libgmr_testing).
 *
 * Thread-safety rule for the whole library (libuv's wording): unless
 * documented otherwise, an object may be used from several threads at once
 * only if its header says "Thread-safe: yes". Create and destroy are never
 * thread-safe with respect to other use of the same object.
 *
 * Header layout: include/gmr/ holds public declarations only; no public
 * header includes a CUDA header (gmr_stream is `struct CUstream_st *`, the
 * same type as cudaStream_t).
 */
#ifndef GMR_GMR_H_
#define GMR_GMR_H_

#include "gmr/config.h"
#include "gmr/context.h"
#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/events.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "gmr/pool_resource.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/stats_json.h"
#include "gmr/status.h"
#include "gmr/stream_ordered_options.h"
#include "gmr/tracking_adaptor.h"
#include "gmr/version.h"
#include "gmr/vmm_pages_resource.h"
#include "gmr/vmm_pool_range.h"
#include "gmr/vmm_pool_resource.h"
#include "gmr/vmm_pool_sleep.h"
#include "gmr/vmm_resource.h"

#endif /* GMR_GMR_H_ */
