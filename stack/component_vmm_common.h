/*
 * stack/component_vmm_common.h (internal): the options both VMM components
 * (`vmm`: component_vmm.c, `vmm_pages`: component_vmm_pages.c) take, first
 * in each component's table and in this order, written once: their
 * definitions, their defaults for the listing, and how they set a
 * gmr_vmm_pool_resource_config (gmr/vmm_pool_resource.h).
 */
#ifndef GMR_STACK_COMPONENT_VMM_COMMON_H_
#define GMR_STACK_COMPONENT_VMM_COMMON_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/vmm_pool_resource.h"
#include "stack/component_stream_ordered.h"
#include "stack/registry.h"

enum {
  GMR__VMM_OPTION_DEVICE,
  GMR__VMM_OPTION_PAGE_SIZE,
  GMR__VMM_OPTION_VA_CHUNK,
  GMR__VMM_OPTION_INITIAL_PAGES,
  GMR__VMM_OPTION_PEER_ACCESS,
  GMR__VMM_OPTION_NCCL_READY,
  GMR__VMM_OPTION_STREAMS_OUTLIVE,
  GMR__VMM_COMMON_OPTIONS /* a component's own options start here */
};

/* The entries of the common options, for a component's option table. */
#define GMR__VMM_COMMON_OPTION_DEFS                                                              \
  [GMR__VMM_OPTION_DEVICE] = {.name = "device",                                                  \
                              .type = GMR__OPTION_DEVICE,                                        \
                              .help = "device ordinal, or current (the calling thread's device " \
                                      "at create)"},                                             \
  [GMR__VMM_OPTION_PAGE_SIZE] = {.name = "page_size",                                            \
                                 .type = GMR__OPTION_SIZE,                                       \
                                 .help = "bytes per physical page, a multiple of the VMM "       \
                                         "granularity; 0: 2 MiB (or the granularity if "         \
                                         "larger)"},                                             \
  [GMR__VMM_OPTION_VA_CHUNK] = {.name = "va_chunk",                                              \
                                .type = GMR__OPTION_SIZE,                                        \
                                .help = "virtual addresses reserved at a time; 0: the device's " \
                                        "memory size"},                                          \
  [GMR__VMM_OPTION_INITIAL_PAGES] = {.name = "initial_pages",                                    \
                                     .type = GMR__OPTION_UINT,                                   \
                                     .help = "pages mapped at create as one free region; at "    \
                                             "most what the device's free memory holds"},        \
  [GMR__VMM_OPTION_PEER_ACCESS] = {.name = "peer_access",                                        \
                                   .type = GMR__OPTION_STRING,                                   \
                                   .max_bytes = 64,                                              \
                                   .help = "devices that may access every page: none, all, or "  \
                                           "ordinals joined by '+' (1+2)"},                      \
  [GMR__VMM_OPTION_NCCL_READY] = {.name = "nccl_ready",                                          \
                                  .type = GMR__OPTION_BOOL,                                      \
                                  .help = "create pages as ncclMemAlloc does (exportable "       \
                                          "handles, GPUDirect RDMA, recommended granularity)"},  \
  [GMR__VMM_OPTION_STREAMS_OUTLIVE] = GMR__SO_OPTION_DEF_STREAMS_OUTLIVE

/* Spec names both VMM components took over: a spec naming one gets an
 * error naming them (gmr__component.former_names). */
extern const char *const gmr__vmm_former_names[];

/* The default of common option `option` in config `c` into `text`; false
 * for an option that is not a common one. */
bool gmr__vmm_describe_common(const gmr_vmm_pool_resource_config *c, size_t option, char *text,
                              size_t text_bytes);

/* Set the common options the spec gives (`v` indexed like the table) on
 * `c`. GMR_ERR_INVALID_ARGUMENT with a sentence in `message` for a value the
 * option table cannot check (peer_access). */
gmr_status gmr__vmm_apply_common(const gmr__option_value *v, gmr_vmm_pool_resource_config *c,
                                 char *message, size_t message_bytes);

/* Create with `create` (gmr_vmm_resource_create or
 * gmr_vmm_pages_resource_create) from config `c`, the failure's sentence
 * into `message`. */
gmr_status gmr__vmm_create_from(gmr_status (*create)(const gmr_vmm_pool_resource_config *,
                                                     gmr_vmm_pool_resource **, gmr_failure *),
                                const gmr_vmm_pool_resource_config *c, gmr_resource **out,
                                char *message, size_t message_bytes);

#endif /* GMR_STACK_COMPONENT_VMM_COMMON_H_ */
