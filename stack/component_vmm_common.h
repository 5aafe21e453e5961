/*
 * stack/component_vmm_common.h (internal): the options both VMM components
 * (`vmm`: component_vmm.c, `vmm_pages`: component_vmm_pages.c) take, first
 * in each component's table and in this order, written once: their
 * definitions, bound to a gmr_vmm_pool_resource_config's fields
 * (gmr/vmm_pool_resource.h) where they have one, and the two that need
 * code of their own (peer_access).
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
#define GMR__VMM_COMMON_OPTION_DEFS                                                               \
  [GMR__VMM_OPTION_DEVICE] = {GMR__FIELD(gmr_vmm_pool_resource_config, device), .name = "device", \
                              .type = GMR__OPTION_DEVICE,                                         \
                              .help =                                                             \
                                  "device ordinal, or current (the calling thread's device "      \
                                  "at create)"},                                                  \
  [GMR__VMM_OPTION_PAGE_SIZE] = {GMR__FIELD(gmr_vmm_pool_resource_config, page_bytes),            \
                                 .name = "page_size", .type = GMR__OPTION_SIZE,                   \
                                 .help =                                                          \
                                     "bytes per physical page, a multiple of the VMM "            \
                                     "granularity; 0: 2 MiB (or the granularity if "              \
                                     "larger)"},                                                  \
  [GMR__VMM_OPTION_VA_CHUNK] = {GMR__FIELD(gmr_vmm_pool_resource_config, va_chunk_bytes),         \
                                .name = "va_chunk", .type = GMR__OPTION_SIZE,                     \
                                .help =                                                           \
                                    "virtual addresses reserved at a time; 0: the device's "      \
                                    "memory size"},                                               \
  [GMR__VMM_OPTION_INITIAL_PAGES] = {GMR__FIELD(gmr_vmm_pool_resource_config, initial_pages),     \
                                     .name = "initial_pages", .type = GMR__OPTION_UINT,           \
                                     .help =                                                      \
                                         "pages mapped at create as one free region; at "         \
                                         "most what the device's free memory holds"},             \
  [GMR__VMM_OPTION_PEER_ACCESS] = {.name = "peer_access",                                         \
                                   .type = GMR__OPTION_STRING,                                    \
                                   .max_bytes = 64,                                               \
                                   .help =                                                        \
                                       "devices that may access every page: none, all, or "       \
                                       "ordinals joined by '+' (1+2)"},                           \
  [GMR__VMM_OPTION_NCCL_READY] = {GMR__FIELD(gmr_vmm_pool_resource_config, nccl_ready),           \
                                  .name = "nccl_ready", .type = GMR__OPTION_BOOL,                 \
                                  .help =                                                         \
                                      "create pages as ncclMemAlloc does (exportable "            \
                                      "handles, GPUDirect RDMA, recommended granularity)"},       \
  [GMR__VMM_OPTION_STREAMS_OUTLIVE] =                                                             \
      GMR__SO_OPTION_DEF_STREAMS_OUTLIVE(gmr_vmm_pool_resource_config)

/* Spec names both VMM components took over: a spec naming one gets an
 * error naming them (gmr__component.former_names). */
extern const char *const gmr__vmm_former_names[];

/* The C default both components start from (their config_default). */
extern const gmr_vmm_pool_resource_config gmr__vmm_config_default;

/* The default of the common option without a field (peer_access) into
 * `text`; false for any other option. */
bool gmr__vmm_describe_common(size_t option, char *text, size_t text_bytes);

/* Set the common options without a field the spec gives (`v` indexed like
 * the table: peer_access) on `c`; gmr__options_apply sets the rest.
 * GMR_ERR_INVALID_ARGUMENT with a sentence in `message` for a value the
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
