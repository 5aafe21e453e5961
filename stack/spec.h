/*
 * stack/spec.h (internal): the parser of stack specs (grammar in
 * gmr/stack.h). It only builds the syntax tree; stack.c checks names and
 * values against the registry.
 */
#ifndef GMR_STACK_SPEC_H_
#define GMR_STACK_SPEC_H_

#include <stdarg.h>
#include <stddef.h>

#include "gmr/stack.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__spec_option {
  char *name;   /* owned, NUL-terminated */
  char *value;  /* owned, unquoted */
  size_t name_offset;
  size_t value_offset;
} gmr__spec_option;

typedef struct gmr__spec_layer {
  char *name; /* owned */
  size_t offset;
  gmr__spec_option *options;
  size_t option_count;
} gmr__spec_layer;

typedef struct gmr__spec {
  const char *text;   /* the parsed text (borrowed) */
  const char *origin; /* "spec" or "GMR_STACK", for messages */
  gmr__spec_layer *layers; /* top first */
  size_t layer_count;
} gmr__spec;

/* Parse `text`. On failure fill `error` (may be NULL) and leave *out empty.
 * Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT (malformed, or more than
 * GMR_STACK_MAX_DEPTH layers), GMR_ERR_OUT_OF_MEMORY. */
gmr_status gmr__spec_parse(const char *text, const char *origin, gmr__spec *out,
                           gmr_spec_error *error);

void gmr__spec_free(gmr__spec *spec);

/* Fill `error` with "origin:line:col: message" for byte `offset` of the text
 * (offset SIZE_MAX: no position, "origin: message"). printf-style. */
void gmr__spec_error_at(gmr_spec_error *error, const char *origin, const char *text,
                        size_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* The same with a va_list, for the error helpers of the parser and the builder. */
void gmr__spec_error_vat(gmr_spec_error *error, const char *origin, const char *text,
                         size_t offset, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 0)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_SPEC_H_ */
