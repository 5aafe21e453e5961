/*
 * core/deprecated_downcasts.c: the exported symbols of the per-type
 * *_as_resource() and *_from_resource() functions of gmr 0.1, for programs
 * built against its headers; removed in 0.3.0 (CHANGELOG.md).
 *
 * Since 0.2.0 each header defines these as static inline functions: a cast
 * (every handle has its gmr_resource first) and a call of
 * gmr_resource_downcast(). A program compiled against 0.1's headers still
 * calls the exported functions, so libgmr keeps them for one minor version.
 * This file includes no header that defines the inline versions: it declares
 * the 0.1 prototypes itself. tests/deprecated_downcast_symbols.c calls each.
 * No header declares them, so tests/install_test.sh reads the names it
 * allows libgmr to export beyond its headers from this file.
 *
 * Thread-safe: yes (as the functions they replace).
 */

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/resource.h"

/* The handle types, opaque here as in their headers. */
typedef struct gmr_cuda_resource gmr_cuda_resource;
typedef struct gmr_host_resource gmr_host_resource;
typedef struct gmr_pool_resource gmr_pool_resource;
typedef struct gmr_vmm_pool_resource gmr_vmm_pool_resource;
typedef struct gmr_fixed_block_resource gmr_fixed_block_resource;
typedef struct gmr_graph_arena_resource gmr_graph_arena_resource;
typedef struct gmr_limiting_adaptor gmr_limiting_adaptor;
typedef struct gmr_tracking_adaptor gmr_tracking_adaptor;
typedef struct gmr_oom_adaptor gmr_oom_adaptor;
typedef struct gmr_log_adaptor gmr_log_adaptor;
typedef struct gmr_nvtx_logging_adaptor gmr_nvtx_logging_adaptor;

/* The prototypes the headers of 0.1 declared; no header declares them now. */
GMR_API gmr_resource *gmr_cuda_resource_as_resource(gmr_cuda_resource *h);
GMR_API gmr_cuda_resource *gmr_cuda_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_host_resource_as_resource(gmr_host_resource *h);
GMR_API gmr_host_resource *gmr_host_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_pool_resource_as_resource(gmr_pool_resource *h);
GMR_API gmr_pool_resource *gmr_pool_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_vmm_pool_resource_as_resource(gmr_vmm_pool_resource *h);
GMR_API gmr_vmm_pool_resource *gmr_vmm_pool_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_fixed_block_resource_as_resource(gmr_fixed_block_resource *h);
GMR_API gmr_fixed_block_resource *gmr_fixed_block_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_graph_arena_resource_as_resource(gmr_graph_arena_resource *h);
GMR_API gmr_graph_arena_resource *gmr_graph_arena_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_limiting_adaptor_as_resource(gmr_limiting_adaptor *h);
GMR_API gmr_limiting_adaptor *gmr_limiting_adaptor_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_tracking_adaptor_as_resource(gmr_tracking_adaptor *h);
GMR_API gmr_tracking_adaptor *gmr_tracking_adaptor_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_oom_adaptor_as_resource(gmr_oom_adaptor *h);
GMR_API gmr_oom_adaptor *gmr_oom_adaptor_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_log_adaptor_as_resource(gmr_log_adaptor *h);
GMR_API gmr_log_adaptor *gmr_log_adaptor_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_nvtx_logging_adaptor_as_resource(gmr_nvtx_logging_adaptor *h);
GMR_API gmr_nvtx_logging_adaptor *gmr_nvtx_logging_adaptor_from_resource(gmr_resource *r);

gmr_resource *gmr_cuda_resource_as_resource(gmr_cuda_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_cuda_resource *gmr_cuda_resource_from_resource(gmr_resource *r) {
  return (gmr_cuda_resource *)gmr_resource_downcast(r, "cuda_resource");
}

gmr_resource *gmr_host_resource_as_resource(gmr_host_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_host_resource *gmr_host_resource_from_resource(gmr_resource *r) {
  return (gmr_host_resource *)gmr_resource_downcast(r, "host_resource");
}

gmr_resource *gmr_pool_resource_as_resource(gmr_pool_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_pool_resource *gmr_pool_resource_from_resource(gmr_resource *r) {
  return (gmr_pool_resource *)gmr_resource_downcast(r, "pool_resource");
}

gmr_resource *gmr_vmm_pool_resource_as_resource(gmr_vmm_pool_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_vmm_pool_resource *gmr_vmm_pool_resource_from_resource(gmr_resource *r) {
  return (gmr_vmm_pool_resource *)gmr_resource_downcast(r, "vmm_pool_resource");
}

gmr_resource *gmr_fixed_block_resource_as_resource(gmr_fixed_block_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_fixed_block_resource *gmr_fixed_block_resource_from_resource(gmr_resource *r) {
  return (gmr_fixed_block_resource *)gmr_resource_downcast(r, "fixed_block_resource");
}

gmr_resource *gmr_graph_arena_resource_as_resource(gmr_graph_arena_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_graph_arena_resource *gmr_graph_arena_resource_from_resource(gmr_resource *r) {
  return (gmr_graph_arena_resource *)gmr_resource_downcast(r, "graph_arena_resource");
}

gmr_resource *gmr_limiting_adaptor_as_resource(gmr_limiting_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_limiting_adaptor *gmr_limiting_adaptor_from_resource(gmr_resource *r) {
  return (gmr_limiting_adaptor *)gmr_resource_downcast(r, "limiting_adaptor");
}

gmr_resource *gmr_tracking_adaptor_as_resource(gmr_tracking_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_tracking_adaptor *gmr_tracking_adaptor_from_resource(gmr_resource *r) {
  return (gmr_tracking_adaptor *)gmr_resource_downcast(r, "tracking_adaptor");
}

gmr_resource *gmr_oom_adaptor_as_resource(gmr_oom_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_oom_adaptor *gmr_oom_adaptor_from_resource(gmr_resource *r) {
  return (gmr_oom_adaptor *)gmr_resource_downcast(r, "oom_adaptor");
}

gmr_resource *gmr_log_adaptor_as_resource(gmr_log_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_log_adaptor *gmr_log_adaptor_from_resource(gmr_resource *r) {
  return (gmr_log_adaptor *)gmr_resource_downcast(r, "log_adaptor");
}

gmr_resource *gmr_nvtx_logging_adaptor_as_resource(gmr_nvtx_logging_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_nvtx_logging_adaptor *gmr_nvtx_logging_adaptor_from_resource(gmr_resource *r) {
  return (gmr_nvtx_logging_adaptor *)gmr_resource_downcast(r, "nvtx_logging_adaptor");
}
