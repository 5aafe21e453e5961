/*
 * stack/stack.c: gmr_stack (gmr/stack.h): owning chains, built by hand or
 * from a spec.
 *
 * Building from a spec happens in two passes. The first checks everything it
 * can without creating a layer: component names, order, option names and
 * values, policies (plugins are loaded here). The second creates the layers
 * bottom-up. A failure in either pass undoes all: created layers are destroyed
 * top-down, policies not yet handed to an adaptor are released, plugins are
 * unloaded.
 */
#include "gmr/stack.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/policy.h"
#include "stack/registry.h"
#include "stack/spec.h"
#include "stack/value.h"

struct gmr_stack {
  gmr_resource **layers; /* bottom first */
  size_t count;
  size_t capacity;
  gmr_policy_plugin **plugins;
  size_t plugin_count;
  char *spec; /* NULL for a stack built by hand */
};

/* ---- stacks built by hand ----------------------------------------------- */

gmr_status gmr_stack_create_empty(gmr_stack **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = calloc(1, sizeof **out);
  return *out == NULL ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
}

static gmr_status append_layer(gmr_stack *s, gmr_resource *layer) {
  if (s->count == s->capacity) {
    size_t cap = s->capacity == 0 ? 4 : s->capacity * 2;
    gmr_resource **grown = realloc(s->layers, cap * sizeof *grown);
    if (grown == NULL) return GMR_ERR_OUT_OF_MEMORY;
    s->layers = grown;
    s->capacity = cap;
  }
  s->layers[s->count++] = layer;
  return GMR_OK;
}

gmr_status gmr_stack_push(gmr_stack *stack, gmr_resource *layer) {
  if (stack == NULL || gmr_resource_check(layer) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  if (stack->count > 0 && gmr_resource_get_upstream(layer) != stack->layers[stack->count - 1]) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < stack->count; ++i) {
    if (stack->layers[i] == layer) return GMR_ERR_INVALID_ARGUMENT;
  }
  return append_layer(stack, layer);
}

gmr_resource *gmr_stack_as_resource(gmr_stack *stack) {
  return stack == NULL || stack->count == 0 ? NULL : stack->layers[stack->count - 1];
}

size_t gmr_stack_get_depth(const gmr_stack *stack) { return stack == NULL ? 0 : stack->count; }

gmr_resource *gmr_stack_get_layer(const gmr_stack *stack, size_t index) {
  if (stack == NULL || index >= stack->count) return NULL;
  return stack->layers[stack->count - 1 - index];
}

gmr_resource *gmr_stack_find(const gmr_stack *stack, const char *type_name) {
  if (stack == NULL || type_name == NULL) return NULL;
  for (size_t i = stack->count; i-- > 0;) {
    if (strcmp(gmr_resource_type_name(stack->layers[i]), type_name) == 0) return stack->layers[i];
  }
  return NULL;
}

const char *gmr_stack_get_spec(const gmr_stack *stack) {
  return stack == NULL ? NULL : stack->spec;
}

static void unload_plugins(gmr_policy_plugin **plugins, size_t count) {
  for (size_t i = count; i-- > 0;) (void)gmr_policy_plugin_unload(plugins[i]);
}

gmr_status gmr_stack_destroy(gmr_stack *stack) {
  if (stack == NULL) return GMR_OK;
  while (stack->count > 0) {
    gmr_status st = gmr_resource_destroy(stack->layers[stack->count - 1]);
    if (st != GMR_OK) return st; /* the layer refused: it and those below stay */
    stack->count--;
  }
  unload_plugins(stack->plugins, stack->plugin_count);
  free(stack->plugins);
  free(stack->layers);
  free(stack->spec);
  free(stack);
  return GMR_OK;
}

/* ---- building from a spec ----------------------------------------------- */

typedef struct build {
  const gmr__spec *spec;
  gmr_spec_error *error;
  size_t layer_count;
  const gmr__component **components; /* per layer */
  gmr__option_value **values;        /* per layer, one per option of its component */
  bool *handed_over;                 /* per layer: its policies went to its create function */
  gmr_policy_plugin **plugins;
  size_t plugin_count;
  size_t plugin_capacity;
  bool have_total;
  size_t total_bytes;
  gmr_status total_status;
  bool check_only; /* gmr_stack_check: no device query, no layer created */
} build;

static void error_at(build *b, size_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void error_at(build *b, size_t offset, const char *fmt, ...) {
  char what[GMR_SPEC_ERROR_MESSAGE_BYTES - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  gmr__spec_error_at(b->error, b->spec->origin, b->spec->text, offset, "%s", what);
}

static gmr_status total_memory(void *ctx, size_t *total) {
  build *b = ctx;
  if (b->check_only) {
    *total = (size_t)1 << 40; /* any size: only the form of the value is checked */
    return GMR_OK;
  }
  if (!b->have_total) {
    size_t free_bytes = 0;
    b->total_status = gmr_device_get_memory_info(&free_bytes, &b->total_bytes);
    b->have_total = true;
  }
  *total = b->total_bytes;
  return b->total_status;
}

/* "a, b, c or d" into buf. */
static void join_names(char *buf, size_t n, const char *const *names, size_t count,
                       const char *last_sep) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < count && used < n; ++i) {
    const char *sep = i == 0 ? "" : (i + 1 == count ? last_sep : ", ");
    int w = snprintf(buf + used, n - used, "%s%s", sep, names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static size_t component_names(const char **names, size_t cap) {
  size_t n = gmr__component_count();
  for (size_t i = 0; i < n && i < cap; ++i) names[i] = gmr__component_at(i)->name;
  return n < cap ? n : cap;
}

static gmr_status remember_plugin(build *b, gmr_policy_plugin *h) {
  if (b->plugin_count == b->plugin_capacity) {
    size_t cap = b->plugin_capacity == 0 ? 4 : b->plugin_capacity * 2;
    gmr_policy_plugin **grown = realloc(b->plugins, cap * sizeof *grown);
    if (grown == NULL) return GMR_ERR_OUT_OF_MEMORY;
    b->plugins = grown;
    b->plugin_capacity = cap;
  }
  b->plugins[b->plugin_count++] = h;
  return GMR_OK;
}

/* plugin:PATH:SYMBOL. Returns true if `text` is a plugin reference at all. */
static bool is_plugin(const char *text) { return strncmp(text, "plugin:", 7) == 0; }

static gmr_status load_plugin(build *b, const char *text, size_t offset, gmr_policy_kind kind,
                              void *out_policy) {
  const char *rest = text + 7;
  const char *colon = strrchr(rest, ':');
  if (colon == NULL || colon == rest || colon[1] == '\0') {
    error_at(b, offset, "invalid plugin reference '%s': expected plugin:PATH:SYMBOL", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t path_len = (size_t)(colon - rest);
  char *path = malloc(path_len + 1);
  if (path == NULL) return GMR_ERR_OUT_OF_MEMORY;
  memcpy(path, rest, path_len);
  path[path_len] = '\0';
  char message[GMR_POLICY_PLUGIN_MESSAGE_BYTES];
  gmr_policy_plugin *h = NULL;
  gmr_status st = gmr_policy_plugin_load(path, colon + 1, kind, out_policy, &h, message);
  free(path);
  if (st != GMR_OK) {
    error_at(b, offset, "%s", message);
    return st;
  }
  st = remember_plugin(b, h);
  if (st != GMR_OK) {
    /* Give back what the plugin made before unloading it. */
    if (kind == GMR_POLICY_KIND_OOM) {
      gmr_oom_policy *p = out_policy;
      if (p->release != NULL) p->release(p->ctx);
    } else {
      gmr_limit_policy *p = out_policy;
      if (p->release != NULL) p->release(p->ctx);
    }
    (void)gmr_policy_plugin_unload(h);
  }
  return st;
}

static const char *const oom_builtins[] = {"fail", "retry", "trim_retry", "wait"};
static const char *const limit_builtins[] = {"fail", "ignore", "increase"};

/* Parse one value of `def` for layer `comp`; `offset` is where it starts. */
static gmr_status parse_value(build *b, const gmr__component *comp, const gmr__option_def *def,
                              const char *text, size_t offset, gmr__option_value *v) {
  char why[256] = "";
  gmr_status st = GMR_OK;
  switch (def->type) {
    case GMR__OPTION_SIZE:
      st = gmr__parse_size(text, def->allow_unlimited ? &v->unlimited : NULL, total_memory, b,
                           &v->size, why, sizeof why);
      break;
    case GMR__OPTION_UINT:
      st = gmr__parse_uint(text, &v->uint, why, sizeof why);
      break;
    case GMR__OPTION_FACTOR:
      st = gmr__parse_factor(text, &v->factor, why, sizeof why);
      break;
    case GMR__OPTION_BOOL:
      st = gmr__parse_bool(text, &v->boolean, why, sizeof why);
      break;
    case GMR__OPTION_DEVICE: {
      uint64_t d = 0;
      if (strcmp(text, "current") == 0) {
        v->device = -1;
      } else if (gmr__parse_uint(text, &d, why, sizeof why) == GMR_OK && d < 4096) {
        v->device = (int)d;
      } else {
        snprintf(why, sizeof why, "expected a device ordinal or 'current'");
        st = GMR_ERR_INVALID_ARGUMENT;
      }
      break;
    }
    case GMR__OPTION_CHOICE: {
      size_t n = 0;
      while (def->choices[n] != NULL) n++;
      st = GMR_ERR_INVALID_ARGUMENT;
      for (size_t i = 0; i < n; ++i) {
        if (strcmp(text, def->choices[i]) == 0) {
          v->choice = (int)i;
          st = GMR_OK;
        }
      }
      if (st != GMR_OK) {
        char list[160];
        join_names(list, sizeof list, def->choices, n, " or ");
        const char *near = gmr__closest_name(text, def->choices, n);
        if (near != NULL) {
          snprintf(why, sizeof why, "expected %s (did you mean '%s'?)", list, near);
        } else {
          snprintf(why, sizeof why, "expected %s", list);
        }
      }
      break;
    }
    case GMR__OPTION_STRING: {
      size_t len = strlen(text);
      if (len == 0) {
        snprintf(why, sizeof why, "expected a non-empty text");
        st = GMR_ERR_INVALID_ARGUMENT;
      } else if (def->max_bytes != 0 && len > def->max_bytes) {
        snprintf(why, sizeof why, "%zu bytes of text, at most %zu allowed", len, def->max_bytes);
        st = GMR_ERR_INVALID_ARGUMENT;
      } else {
        v->string = text; /* borrowed: the spec outlives the create functions */
      }
      break;
    }
    case GMR__OPTION_OOM_POLICY:
    case GMR__OPTION_LIMIT_POLICY: {
      bool oom = def->type == GMR__OPTION_OOM_POLICY;
      if (is_plugin(text)) {
        return load_plugin(b, text, offset, oom ? GMR_POLICY_KIND_OOM : GMR_POLICY_KIND_LIMIT,
                           oom ? (void *)&v->oom : (void *)&v->limit);
      }
      st = oom ? gmr_oom_policy_from_name(text, &v->oom)
               : gmr_limit_policy_from_name(text, &v->limit);
      if (st != GMR_OK) {
        const char *const *names = oom ? oom_builtins : limit_builtins;
        size_t n = oom ? sizeof oom_builtins / sizeof *oom_builtins
                       : sizeof limit_builtins / sizeof *limit_builtins;
        char list[160];
        join_names(list, sizeof list, names, n, ", ");
        const char *near = gmr__closest_name(text, names, n);
        if (near != NULL) {
          error_at(b, offset,
                   "unknown %s policy '%s' for %s option '%s' (did you mean '%s'? built in: %s; "
                   "or a registered name, or plugin:PATH:SYMBOL)",
                   oom ? "OOM" : "limit", text, comp->name, def->name, near, list);
        } else {
          error_at(b, offset,
                   "unknown %s policy '%s' for %s option '%s' (built in: %s; or a registered "
                   "name, or plugin:PATH:SYMBOL)",
                   oom ? "OOM" : "limit", text, comp->name, def->name, list);
        }
        return GMR_ERR_INVALID_ARGUMENT;
      }
      return GMR_OK;
    }
  }
  if (st != GMR_OK) {
    error_at(b, offset, "invalid value '%s' for %s option '%s': %s", text, comp->name, def->name,
             why);
  }
  return st;
}

static void release_value_policies(const gmr__component *comp, gmr__option_value *values) {
  for (size_t i = 0; i < comp->option_count; ++i) {
    gmr__option_value *v = &values[i];
    if (!v->has_value) continue;
    if (comp->options[i].type == GMR__OPTION_OOM_POLICY && v->oom.release != NULL) {
      v->oom.release(v->oom.ctx);
      v->oom.release = NULL;
    } else if (comp->options[i].type == GMR__OPTION_LIMIT_POLICY && v->limit.release != NULL) {
      v->limit.release(v->limit.ctx);
      v->limit.release = NULL;
    }
  }
}

/* Check the options of layer `i` and fill its values. */
static gmr_status check_options(build *b, size_t i) {
  const gmr__spec_layer *layer = &b->spec->layers[i];
  const gmr__component *comp = b->components[i];
  gmr__option_value *values = b->values[i];
  const char *names[32];
  size_t name_count = comp->option_count < 32 ? comp->option_count : 32;
  for (size_t k = 0; k < name_count; ++k) names[k] = comp->options[k].name;

  for (size_t j = 0; j < layer->option_count; ++j) {
    const gmr__spec_option *opt = &layer->options[j];
    size_t k = 0;
    while (k < comp->option_count && strcmp(comp->options[k].name, opt->name) != 0) k++;
    if (k == comp->option_count) {
      const char *near = gmr__closest_name(opt->name, names, name_count);
      char list[400];
      join_names(list, sizeof list, names, name_count, ", ");
      if (comp->option_count == 0) {
        error_at(b, opt->name_offset, "unknown option '%s' for %s (%s takes no options)",
                 opt->name, comp->name, comp->name);
      } else if (near != NULL) {
        error_at(b, opt->name_offset, "unknown option '%s' for %s (did you mean '%s'?)",
                 opt->name, comp->name, near);
      } else {
        error_at(b, opt->name_offset, "unknown option '%s' for %s (options: %s)", opt->name,
                 comp->name, list);
      }
      return GMR_ERR_INVALID_ARGUMENT;
    }
    if (values[k].given) {
      error_at(b, opt->name_offset, "option '%s' given twice for %s", opt->name, comp->name);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    gmr_status st = parse_value(b, comp, &comp->options[k], opt->value, opt->value_offset,
                                &values[k]);
    if (st != GMR_OK) return st;
    values[k].given = true;
    values[k].has_value = true;
  }
  for (size_t k = 0; k < comp->option_count; ++k) {
    const gmr__option_def *def = &comp->options[k];
    if (values[k].given) continue;
    if (def->required) {
      error_at(b, layer->offset, "missing option '%s' for %s (%s)", def->name, comp->name,
               def->help);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    if (def->default_text == NULL) continue;
    gmr_status st = parse_value(b, comp, def, def->default_text, layer->offset, &values[k]);
    if (st != GMR_OK) return st; /* only a `%` default could fail: none exists */
    values[k].has_value = true;
  }
  return GMR_OK;
}

static gmr_status check_layers(build *b) {
  for (size_t i = 0; i < b->layer_count; ++i) {
    const gmr__spec_layer *layer = &b->spec->layers[i];
    const gmr__component *comp = gmr__component_find(layer->name);
    if (comp == NULL) {
      const char *names[64];
      size_t n = component_names(names, 64);
      char list[400];
      join_names(list, sizeof list, names, n, ", ");
      const char *near = gmr__closest_name(layer->name, names, n);
      if (near != NULL) {
        error_at(b, layer->offset, "unknown component '%s' (did you mean '%s'? known: %s)",
                 layer->name, near, list);
      } else {
        error_at(b, layer->offset, "unknown component '%s' (known: %s)", layer->name, list);
      }
      return GMR_ERR_INVALID_ARGUMENT;
    }
    b->components[i] = comp;
    b->values[i] = calloc(comp->option_count == 0 ? 1 : comp->option_count, sizeof **b->values);
    if (b->values[i] == NULL) return GMR_ERR_OUT_OF_MEMORY;
    gmr_status st = check_options(b, i);
    if (st != GMR_OK) return st;
  }
  /* Order: adaptors on top of exactly one resource at the bottom. */
  for (size_t i = 0; i < b->layer_count; ++i) {
    const gmr__component *comp = b->components[i];
    bool last = i + 1 == b->layer_count;
    if (last && comp->kind == GMR__COMPONENT_ADAPTOR) {
      error_at(b, b->spec->layers[i].offset,
               "%s is an adaptor and needs a layer below it: end the spec with a resource, "
               "e.g. '> cuda(kind=async)' or '> host'",
               comp->name);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    if (!last && comp->kind == GMR__COMPONENT_RESOURCE) {
      error_at(b, b->spec->layers[i].offset,
               "%s is a resource and takes no upstream: it must be the last layer", comp->name);
      return GMR_ERR_INVALID_ARGUMENT;
    }
  }
  return GMR_OK;
}

static void free_build(build *b) {
  for (size_t i = 0; i < b->layer_count; ++i) {
    if (b->values != NULL && b->values[i] != NULL && !b->handed_over[i]) {
      release_value_policies(b->components[i], b->values[i]);
    }
    if (b->values != NULL) free(b->values[i]);
  }
  free(b->values);
  free(b->components);
  free(b->handed_over);
}

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

static gmr_status create_from_text(const char *text, const char *origin, bool check_only,
                                   gmr_stack **out, gmr_spec_error *error) {
  if (error != NULL) memset(error, 0, sizeof *error);
  if (out != NULL) *out = NULL;
  if (text == NULL || (out == NULL && !check_only)) {
    gmr__spec_error_at(error, origin, NULL, SIZE_MAX, "%s",
                       text == NULL ? "no spec given (NULL)" : "out is NULL");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__spec spec;
  gmr_status st = gmr__spec_parse(text, origin, &spec, error);
  if (st != GMR_OK) return st;

  build b;
  memset(&b, 0, sizeof b);
  b.spec = &spec;
  b.error = error;
  b.check_only = check_only;
  b.layer_count = spec.layer_count;
  b.components = calloc(spec.layer_count, sizeof *b.components);
  b.values = calloc(spec.layer_count, sizeof *b.values);
  b.handed_over = calloc(spec.layer_count, sizeof *b.handed_over);
  gmr_stack *stack = calloc(1, sizeof *stack);
  if (b.components == NULL || b.values == NULL || b.handed_over == NULL || stack == NULL) {
    st = GMR_ERR_OUT_OF_MEMORY;
  } else {
    st = check_layers(&b);
  }
  if (st == GMR_OK && check_only) {
    /* Checked: undo what the check loaded, as a failure would. */
    free_build(&b);
    unload_plugins(b.plugins, b.plugin_count);
    free(b.plugins);
    free(stack);
    gmr__spec_free(&spec);
    return GMR_OK;
  }
  if (st == GMR_OK) {
    stack->spec = copy_string(text);
    if (stack->spec == NULL) st = GMR_ERR_OUT_OF_MEMORY;
  }

  /* Second pass: create bottom-up. */
  for (size_t i = b.layer_count; st == GMR_OK && i-- > 0;) {
    const gmr__component *comp = b.components[i];
    gmr_resource *upstream = stack->count == 0 ? NULL : stack->layers[stack->count - 1];
    gmr_resource *layer = NULL;
    char message[256] = "";
    b.handed_over[i] = true;
    st = comp->create(b.values[i], upstream, &layer, message, sizeof message);
    if (st == GMR_OK) {
      st = append_layer(stack, layer);
      if (st != GMR_OK) (void)gmr_resource_destroy(layer);
    }
    if (st != GMR_OK) {
      error_at(&b, spec.layers[i].offset, "cannot create %s: %s%s%s", comp->name,
               gmr_status_name(st), message[0] != '\0' ? ": " : "", message);
    }
  }

  if (st != GMR_OK) {
    if (error != NULL && error->message[0] == '\0') {
      gmr__spec_error_at(error, origin, NULL, SIZE_MAX, "%s", gmr_status_string(st));
    }
    /* Nothing was used yet: tear down what exists, top first. */
    while (stack != NULL && stack->count > 0) {
      (void)gmr_resource_destroy(stack->layers[--stack->count]);
    }
    free_build(&b);
    unload_plugins(b.plugins, b.plugin_count);
    free(b.plugins);
    if (stack != NULL) {
      free(stack->layers);
      free(stack->spec);
      free(stack);
    }
    gmr__spec_free(&spec);
    return st;
  }
  stack->plugins = b.plugins;
  stack->plugin_count = b.plugin_count;
  free_build(&b);
  gmr__spec_free(&spec);
  *out = stack;
  return GMR_OK;
}

gmr_status gmr_stack_create(const char *spec, gmr_stack **out, gmr_spec_error *error) {
  return create_from_text(spec, "spec", false, out, error);
}

gmr_status gmr_stack_check(const char *spec, gmr_spec_error *error) {
  return create_from_text(spec, "spec", true, NULL, error);
}

gmr_status gmr_stack_create_from_env(const char *fallback_spec, gmr_stack **out,
                                     gmr_spec_error *error) {
  const char *env = getenv("GMR_STACK");
  if (env != NULL && env[0] != '\0') return create_from_text(env, "GMR_STACK", false, out, error);
  if (fallback_spec == NULL) {
    if (out != NULL) *out = NULL;
    if (error != NULL) {
      memset(error, 0, sizeof *error);
      gmr__spec_error_at(error, "GMR_STACK", NULL, SIZE_MAX, "%s",
                         "the environment variable GMR_STACK is not set and there is no fallback "
                         "spec");
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return create_from_text(fallback_spec, "spec", false, out, error);
}

/* ---- listing ------------------------------------------------------------ */

static const char *type_text(const gmr__option_def *def) {
  switch (def->type) {
    case GMR__OPTION_SIZE:
      return def->allow_unlimited ? "size|none" : "size";
    case GMR__OPTION_UINT:
      return "integer";
    case GMR__OPTION_FACTOR:
      return "number";
    case GMR__OPTION_BOOL:
      return "bool";
    case GMR__OPTION_CHOICE:
      return "choice";
    case GMR__OPTION_DEVICE:
      return "device";
    case GMR__OPTION_OOM_POLICY:
      return "oom policy";
    case GMR__OPTION_LIMIT_POLICY:
      return "limit policy";
    case GMR__OPTION_STRING:
      return "text";
  }
  return "?";
}

gmr_status gmr_stack_print_components(FILE *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < gmr__component_count(); ++i) {
    const gmr__component *c = gmr__component_at(i);
    fprintf(out, "%s (%s): %s\n", c->name,
            c->kind == GMR__COMPONENT_RESOURCE ? "resource, last layer" : "adaptor", c->help);
    for (size_t k = 0; k < c->option_count; ++k) {
      const gmr__option_def *d = &c->options[k];
      fprintf(out, "  %s=<%s>", d->name, type_text(d));
      if (d->required) {
        fprintf(out, " (required)");
      } else if (d->default_text != NULL) {
        fprintf(out, " (default %s)", d->default_text);
      }
      fprintf(out, ": %s\n", d->help);
    }
  }
  fprintf(out, "OOM policies: fail, retry, trim_retry, wait, registered names, plugin:PATH:SYMBOL\n");
  fprintf(out, "limit policies: fail, ignore, increase, registered names, plugin:PATH:SYMBOL\n");
  return GMR_OK;
}
