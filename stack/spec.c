/*
 * stack/spec.c: a recursive-descent parser over characters for the spec
 * grammar of gmr/stack.h. Errors name the first offending byte.
 */
#include "stack/spec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  const char *text;
  size_t pos;
  const char *origin;
  gmr_spec_error *error;
  gmr_status status; /* first failure */
} parser;

void gmr__spec_error_vat(gmr_spec_error *error, const char *origin, const char *text,
                         size_t offset, const char *fmt, va_list ap) {
  if (error == NULL) return;
  int line = 0, column = 0;
  if (offset != SIZE_MAX && text != NULL) {
    line = 1;
    column = 1;
    for (size_t i = 0; i < offset && text[i] != '\0'; ++i) {
      if (text[i] == '\n') {
        line++;
        column = 1;
      } else {
        column++;
      }
    }
  }
  error->line = line;
  error->column = column;
  char what[GMR_SPEC_ERROR_MESSAGE_BYTES - 64]; /* room for "origin:line:col: " */
  vsnprintf(what, sizeof what, fmt, ap);
  if (line > 0) {
    snprintf(error->message, sizeof error->message, "%.20s:%d:%d: %s", origin, line, column, what);
  } else {
    snprintf(error->message, sizeof error->message, "%.20s: %s", origin, what);
  }
}

void gmr__spec_error_at(gmr_spec_error *error, const char *origin, const char *text,
                        size_t offset, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gmr__spec_error_vat(error, origin, text, offset, fmt, ap);
  va_end(ap);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static bool is_bare_char(char c) {
  return c != '\0' && !is_space(c) && c != ',' && c != '(' && c != ')' && c != '>' && c != '=' &&
         c != '"';
}

static char peek(const parser *p) { return p->text[p->pos]; }

static void skip_space(parser *p) {
  while (is_space(peek(p))) p->pos++;
}

/* Describe what is at the current position, for "found ..." messages. */
static void describe_here(const parser *p, char *buf, size_t n) {
  char c = peek(p);
  if (c == '\0') {
    snprintf(buf, n, "end of spec");
  } else if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) {
    snprintf(buf, n, "byte 0x%02x", (unsigned)(unsigned char)c);
  } else {
    snprintf(buf, n, "'%c'", c);
  }
}

static void fail(parser *p, size_t offset, gmr_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Record the first failure only: later ones follow from it. */
static void fail(parser *p, size_t offset, gmr_status st, const char *fmt, ...) {
  if (p->status != GMR_OK) return;
  p->status = st;
  va_list ap;
  va_start(ap, fmt);
  gmr__spec_error_vat(p->error, p->origin, p->text, offset, fmt, ap);
  va_end(ap);
}

static void fail_out_of_memory(parser *p) {
  fail(p, SIZE_MAX, GMR_ERR_OUT_OF_MEMORY, "out of host memory while parsing the spec");
}

static void fail_found(parser *p, const char *expected) {
  char found[32];
  describe_here(p, found, sizeof found);
  fail(p, p->pos, GMR_ERR_INVALID_ARGUMENT, "expected %s, found %s", expected, found);
}

static char *copy_range(parser *p, size_t begin, size_t end) {
  char *s = malloc(end - begin + 1);
  if (s == NULL) {
    fail_out_of_memory(p);
    return NULL;
  }
  memcpy(s, p->text + begin, end - begin);
  s[end - begin] = '\0';
  return s;
}

static char *parse_name(parser *p, const char *what) {
  if (!is_name_start(peek(p))) {
    fail_found(p, what);
    return NULL;
  }
  size_t begin = p->pos;
  while (is_name_char(peek(p))) p->pos++;
  return copy_range(p, begin, p->pos);
}

static char *parse_quoted(parser *p) {
  size_t open = p->pos;
  p->pos++; /* the opening quote */
  size_t cap = 16, n = 0;
  char *s = malloc(cap);
  if (s == NULL) {
    fail_out_of_memory(p);
    return NULL;
  }
  for (;;) {
    char c = peek(p);
    if (c == '\0') {
      free(s);
      fail(p, open, GMR_ERR_INVALID_ARGUMENT, "unterminated quoted value");
      return NULL;
    }
    p->pos++;
    if (c == '"') break;
    if (c == '\\') {
      c = peek(p);
      if (c == '\0') continue; /* reported as unterminated next round */
      p->pos++;
    }
    if (n + 1 >= cap) {
      char *grown = realloc(s, cap * 2);
      if (grown == NULL) {
        free(s);
        fail_out_of_memory(p);
        return NULL;
      }
      s = grown;
      cap *= 2;
    }
    s[n++] = c;
  }
  s[n] = '\0';
  return s;
}

static bool parse_option(parser *p, gmr__spec_option *opt) {
  opt->name_offset = p->pos;
  opt->name = parse_name(p, "an option name");
  if (opt->name == NULL) return false;
  skip_space(p);
  if (peek(p) != '=') {
    char found[32];
    describe_here(p, found, sizeof found);
    fail(p, p->pos, GMR_ERR_INVALID_ARGUMENT, "expected '=' after option name '%s', found %s",
         opt->name, found);
    return false;
  }
  p->pos++;
  skip_space(p);
  opt->value_offset = p->pos;
  if (peek(p) == '"') {
    opt->value = parse_quoted(p);
  } else if (is_bare_char(peek(p))) {
    size_t begin = p->pos;
    while (is_bare_char(peek(p))) p->pos++;
    opt->value = copy_range(p, begin, p->pos);
  } else {
    char found[32];
    describe_here(p, found, sizeof found);
    fail(p, p->pos, GMR_ERR_INVALID_ARGUMENT, "expected a value for option '%s', found %s",
         opt->name, found);
  }
  return opt->value != NULL;
}

static bool parse_layer(parser *p, gmr__spec_layer *layer) {
  layer->offset = p->pos;
  layer->name = parse_name(p, "a component name");
  if (layer->name == NULL) return false;
  skip_space(p);
  if (peek(p) != '(') return true;
  p->pos++;
  skip_space(p);
  if (peek(p) == ')') {
    p->pos++;
    return true;
  }
  size_t capacity = 0;
  for (;;) {
    skip_space(p);
    if (layer->option_count == capacity) {
      /* Doubling: a spec of many options costs linear time, not quadratic. */
      capacity = capacity == 0 ? 4 : capacity * 2;
      gmr__spec_option *grown = realloc(layer->options, capacity * sizeof *layer->options);
      if (grown == NULL) {
        fail_out_of_memory(p);
        return false;
      }
      layer->options = grown;
    }
    gmr__spec_option *opt = &layer->options[layer->option_count++];
    memset(opt, 0, sizeof *opt);
    if (!parse_option(p, opt)) return false;
    skip_space(p);
    if (peek(p) == ',') {
      p->pos++;
      continue;
    }
    if (peek(p) == ')') {
      p->pos++;
      return true;
    }
    char found[32];
    describe_here(p, found, sizeof found);
    fail(p, p->pos, GMR_ERR_INVALID_ARGUMENT,
         "expected ',' or ')' after the value of option '%s', found %s", opt->name, found);
    return false;
  }
}

void gmr__spec_free(gmr__spec *spec) {
  for (size_t i = 0; i < spec->layer_count; ++i) {
    gmr__spec_layer *l = &spec->layers[i];
    for (size_t j = 0; j < l->option_count; ++j) {
      free(l->options[j].name);
      free(l->options[j].value);
    }
    free(l->options);
    free(l->name);
  }
  free(spec->layers);
  spec->layers = NULL;
  spec->layer_count = 0;
}

gmr_status gmr__spec_parse(const char *text, const char *origin, gmr__spec *out,
                           gmr_spec_error *error) {
  memset(out, 0, sizeof *out);
  out->text = text;
  out->origin = origin;
  parser p = {text, 0, origin, error, GMR_OK};
  skip_space(&p);
  if (peek(&p) == '\0') {
    fail(&p, SIZE_MAX, GMR_ERR_INVALID_ARGUMENT,
         "the spec is empty: name at least one resource, e.g. 'cuda(kind=async)'");
    return p.status;
  }
  for (;;) {
    if (out->layer_count == GMR_STACK_MAX_DEPTH) {
      /* Refused before parsing on: a huge spec costs no more than 64 layers. */
      fail(&p, p.pos, GMR_ERR_INVALID_ARGUMENT,
           "too many layers: a spec may have at most %d (GMR_STACK_MAX_DEPTH); this is layer %d",
           GMR_STACK_MAX_DEPTH, GMR_STACK_MAX_DEPTH + 1);
      break;
    }
    gmr__spec_layer *grown = realloc(out->layers, (out->layer_count + 1) * sizeof *out->layers);
    if (grown == NULL) {
      fail_out_of_memory(&p);
      break;
    }
    out->layers = grown;
    gmr__spec_layer *layer = &out->layers[out->layer_count++];
    memset(layer, 0, sizeof *layer);
    if (!parse_layer(&p, layer)) break;
    skip_space(&p);
    if (peek(&p) == '\0') break;
    if (peek(&p) != '>') {
      fail_found(&p, "'>' or the end of the spec");
      break;
    }
    p.pos++;
    skip_space(&p);
  }
  if (p.status != GMR_OK) gmr__spec_free(out);
  return p.status;
}
