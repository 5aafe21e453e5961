/*
 * stack/component_stream_ordered.h (internal): the spec options of
 * gmr_stream_ordered_options (gmr/stream_ordered_options.h), written once
 * and bound to the config's `streams` (gmr__options_apply sets them):
 * pool and fixed_block take all five, together, at the end of their
 * tables; vmm and vmm_pages take streams_outlive, the one field the VMM
 * resources read (component_vmm_common.h). Names and defaults:
 * docs/stack_spec.md.
 */
#ifndef GMR_STACK_COMPONENT_STREAM_ORDERED_H_
#define GMR_STACK_COMPONENT_STREAM_ORDERED_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/stream_ordered_options.h"
#include "stack/registry.h"

#define GMR__SO_OPTIONS 5
/* One of them, bound to field `member` of `config`'s `streams`. */
#define GMR__SO_BOOL(config, member, option_name, option_help)           \
  {.name = option_name, .type = GMR__OPTION_BOOL, .help = option_help, \
   GMR__FIELD(config, streams.member)}
#define GMR__SO_OPTION_DEF_STREAMS_OUTLIVE(config) \
  GMR__SO_BOOL(config, streams_outlive_resource, "streams_outlive", gmr__help_streams_outlive)

/* The five, at [first, first + GMR__SO_OPTIONS) of a component's table, in
 * the struct's order, bound to the `streams` field of the component's C
 * config type `config`. */
#define GMR__SO_OPTION_DEFS(first, config)                                                       \
  [(first) + 0] = GMR__SO_BOOL(config, stream_ordered, "stream_ordered",                         \
                               "false: ignore streams (host memory, single-stream programs): "  \
                               "freed memory is anyone's at once, no CUDA call"),              \
  [(first) + 1] = GMR__SO_BOOL(config, nvtx_annotate, "nvtx_annotate", gmr__help_nvtx_annotate), \
  [(first) + 2] = GMR__SO_OPTION_DEF_STREAMS_OUTLIVE(config),                                    \
  [(first) + 3] = GMR__SO_BOOL(config, record_at_every_free, "record_every_free",                \
                               gmr__help_record_every_free),                                     \
  [(first) + 4] = GMR__SO_BOOL(config, stream_ids, "stream_ids", gmr__help_stream_ids)

#endif /* GMR_STACK_COMPONENT_STREAM_ORDERED_H_ */
