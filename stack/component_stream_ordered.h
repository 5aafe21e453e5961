/*
 * stack/component_stream_ordered.h (internal): the spec options of
 * gmr_stream_ordered_options (gmr/stream_ordered_options.h), written once:
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
#define GMR__SO_BOOL(option_name, option_help) \
  {.name = option_name, .type = GMR__OPTION_BOOL, .help = option_help}
#define GMR__SO_OPTION_DEF_STREAMS_OUTLIVE \
  GMR__SO_BOOL("streams_outlive", gmr__help_streams_outlive)

/* The five, at [first, first + GMR__SO_OPTIONS) of a component's table, in
 * the struct's order. */
#define GMR__SO_OPTION_DEFS(first)                                                              \
  [(first) + 0] = GMR__SO_BOOL("stream_ordered",                                                \
                               "false: ignore streams (host memory, single-stream programs): " \
                               "freed memory is anyone's at once, no CUDA call"),             \
  [(first) + 1] = GMR__SO_BOOL("nvtx_annotate", gmr__help_nvtx_annotate),                       \
  [(first) + 2] = GMR__SO_OPTION_DEF_STREAMS_OUTLIVE,                                           \
  [(first) + 3] = GMR__SO_BOOL("record_every_free", gmr__help_record_every_free),               \
  [(first) + 4] = GMR__SO_BOOL("stream_ids", gmr__help_stream_ids)

/* The fields of `o`, in the table's order. */
#define GMR__SO_FIELDS(o)                                                             \
  {&(o)->stream_ordered, &(o)->nvtx_annotate, &(o)->streams_outlive_resource,        \
   &(o)->record_at_every_free, &(o)->stream_ids}

/* Set on `o` what the spec gives of the five, v[0..GMR__SO_OPTIONS). */
static inline void gmr__so_options_apply(const gmr__option_value *v,
                                         gmr_stream_ordered_options *o) {
  bool *fields[GMR__SO_OPTIONS] = GMR__SO_FIELDS(o);
  for (size_t i = 0; i < GMR__SO_OPTIONS; ++i) {
    if (v[i].given) *fields[i] = v[i].boolean;
  }
}

/* The default of the five's option `which` as `o` has it, into `text`;
 * false for another number. */
static inline bool gmr__so_option_describe(size_t which, const gmr_stream_ordered_options *o,
                                           char *text, size_t text_bytes) {
  const bool *fields[GMR__SO_OPTIONS] = GMR__SO_FIELDS(o);
  return which < GMR__SO_OPTIONS && gmr__describe_bool(*fields[which], text, text_bytes);
}

#endif /* GMR_STACK_COMPONENT_STREAM_ORDERED_H_ */
