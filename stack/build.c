/*
 * stack/build.c: a gmr_stack built from a spec in a context
 * (gmr_stack_create, gmr_stack_create_in, gmr_stack_check,
 * gmr_stack_create_from_env), and the one place libgmr reads the
 * environment (GMR_STACK).
 *
 * Two passes. The first checks everything it can without creating a layer:
 * component names, order, option names, values and their ranges, options that
 * contradict each other, policies (plugins are loaded here, unless the spec
 * came from the environment, which never loads a library). The second
 * creates the layers bottom-up. A failure in either pass undoes all: created
 * layers are destroyed top-down, policies not yet handed to an adaptor are
 * released, plugins are unloaded.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/policy_internal.h"
#include "gmr/device.h"
#include "gmr/policy.h"
#include "gmr/stack.h"
#include "stack/context.h"
#include "stack/options.h"
#include "stack/registry.h"
#include "stack/spec.h"
#include "stack/stack_internal.h"
#include "stack/value.h"

typedef struct build {
  gmr_context *ctx; /* components and policy names; never NULL */
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
  bool check_only;    /* gmr_stack_check: no device query, no layer created */
  bool allow_plugins; /* false for a spec from the environment */
} build;

static void error_at(build *b, size_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void error_at(build *b, size_t offset, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gmr__spec_error_vat(b->error, b->spec->origin, b->spec->text, offset, fmt, ap);
  va_end(ap);
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

/* ---- policies ------------------------------------------------------------ */

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

static void release_policy(gmr_policy_kind kind, void *policy) {
  if (kind == GMR_POLICY_KIND_OOM) {
    gmr_oom_policy *p = policy;
    if (p->release != NULL) p->release(p->ctx);
    p->release = NULL;
  } else {
    gmr_limit_policy *p = policy;
    if (p->release != NULL) p->release(p->ctx);
    p->release = NULL;
  }
}

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
  if (path == NULL) {
    error_at(b, offset, "out of host memory while loading plugin '%s'", text);
    return GMR_ERR_OUT_OF_MEMORY;
  }
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
    release_policy(kind, out_policy);
    GMR_IGNORE_STATUS(gmr_policy_plugin_unload(h));
    error_at(b, offset, "out of host memory while loading plugin '%s'", text);
  }
  return st;
}

static gmr_status parse_policy(build *b, const gmr__component *comp, const gmr__option_def *def,
                               const char *text, size_t offset, gmr__option_value *v) {
  bool oom = def->type == GMR__OPTION_OOM_POLICY;
  if (is_plugin(text) && !b->allow_plugins) {
    /* The environment may not make the program load and run a library. */
    error_at(b, offset,
             "'%s': a spec from the environment does not load plugins; the program loads the "
             "library (gmr_policy_plugin_load) and registers its policy by name "
             "(gmr_%s_policy_register), and the spec names it",
             text, oom ? "oom" : "limit");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (is_plugin(text)) {
    return load_plugin(b, text, offset, oom ? GMR_POLICY_KIND_OOM : GMR_POLICY_KIND_LIMIT,
                       oom ? (void *)&v->oom : (void *)&v->limit);
  }
  bool found = oom ? gmr__context_find_oom_policy(b->ctx, text, &v->oom)
                   : gmr__context_find_limit_policy(b->ctx, text, &v->limit);
  if (found) return GMR_OK;
  size_t n = 0;
  const char *const *names =
      oom ? gmr__oom_policy_builtin_names(&n) : gmr__limit_policy_builtin_names(&n);
  char list[160];
  gmr__join_names(list, sizeof list, names, n, ", ");
  const char *near = gmr__closest_name(text, names, n);
  char suggestion[64] = "";
  if (near != NULL) snprintf(suggestion, sizeof suggestion, "did you mean '%s'? ", near);
  error_at(b, offset,
           "unknown %s policy '%s' for %s option '%s' (%sbuilt in: %s; or a registered name, or "
           "plugin:PATH:SYMBOL)",
           oom ? "OOM" : "limit", text, comp->name, def->name, suggestion, list);
  return GMR_ERR_INVALID_ARGUMENT;
}

static void release_value_policies(const gmr__component *comp, gmr__option_value *values) {
  for (size_t i = 0; i < comp->option_count; ++i) {
    if (!values[i].given) continue;
    if (comp->options[i].type == GMR__OPTION_OOM_POLICY) {
      release_policy(GMR_POLICY_KIND_OOM, &values[i].oom);
    } else if (comp->options[i].type == GMR__OPTION_LIMIT_POLICY) {
      release_policy(GMR_POLICY_KIND_LIMIT, &values[i].limit);
    }
  }
}

/* ---- first pass: check ---------------------------------------------------- */

/* Parse one value of `def` for layer `comp`; `offset` is where it starts. */
static gmr_status parse_value(build *b, const gmr__component *comp, const gmr__option_def *def,
                              const char *text, size_t offset, gmr__option_value *v) {
  if (def->type == GMR__OPTION_OOM_POLICY || def->type == GMR__OPTION_LIMIT_POLICY) {
    return parse_policy(b, comp, def, text, offset, v);
  }
  gmr__option_env env = {total_memory, b, b->check_only};
  char why[256] = "";
  gmr_status st = gmr__option_parse(def, text, &env, v, why, sizeof why);
  if (st != GMR_OK) {
    error_at(b, offset, "invalid value '%s' for %s option '%s': %s", text, comp->name, def->name,
             why);
  }
  return st;
}

/* The offset to point at for option `k` of layer `i`: its name when given. */
static size_t option_offset(const build *b, size_t i, size_t k) {
  const gmr__spec_layer *layer = &b->spec->layers[i];
  const char *name = b->components[i]->options[k].name;
  for (size_t j = 0; j < layer->option_count; ++j) {
    if (strcmp(layer->options[j].name, name) == 0) return layer->options[j].name_offset;
  }
  return layer->offset;
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
      gmr__join_names(list, sizeof list, names, name_count, ", ");
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
  }
  for (size_t k = 0; k < comp->option_count; ++k) {
    const gmr__option_def *def = &comp->options[k];
    if (def->required && !values[k].given) {
      char help[256];
      gmr__option_help(def, help, sizeof help);
      error_at(b, layer->offset, "missing option '%s' for %s (%s)", def->name, comp->name, help);
      return GMR_ERR_INVALID_ARGUMENT;
    }
  }
  if (comp->check != NULL) {
    size_t blame = SIZE_MAX;
    char why[400] = "";
    gmr_status st = comp->check(values, &blame, why, sizeof why);
    if (st != GMR_OK) {
      error_at(b, blame < comp->option_count ? option_offset(b, i, blame) : layer->offset, "%s",
               why);
      return st;
    }
  }
  return GMR_OK;
}

/* The components of the context that took over `name`
 * (gmr__component.former_names), joined with " or " into `out`; false when
 * none did. */
static bool successors_of(const gmr__component *const *known, size_t n, const char *name,
                          char *out, size_t out_bytes) {
  const char *names[8];
  size_t found = 0;
  for (size_t k = 0; k < n && found < 8; ++k) {
    for (const char *const *f = known[k]->former_names; f != NULL && *f != NULL; ++f) {
      if (strcmp(*f, name) == 0) names[found++] = known[k]->name;
    }
  }
  if (found > 0) gmr__join_names(out, out_bytes, names, found, " or ");
  return found > 0;
}

/* The message for a component the context does not know: the names it
 * knows, the nearest one, and, for a name near none of them, where others
 * come from. libgmr knows no optional library's component names (their
 * libraries register them) and loads no library: it can only say which
 * library has components and is not registered in the context. */
static void unknown_component(build *b, const gmr__spec_layer *layer) {
  const gmr__component *known[64];
  size_t n = gmr__context_list_components(b->ctx, known, 64);
  const char *names[64];
  if (n > 64) n = 64;
  for (size_t k = 0; k < n; ++k) names[k] = known[k]->name;
  char successors[128];
  if (successors_of(known, n, layer->name, successors, sizeof successors)) {
    error_at(b, layer->offset,
             "component '%s' was replaced: name %s instead (gmr_stack_print_components says "
             "what each does)",
             layer->name, successors);
    return;
  }
  char list[400];
  gmr__join_names(list, sizeof list, names, n, ", ");
  const char *near = gmr__closest_name(layer->name, names, n);
  char guess[96] = "";
  if (near != NULL) snprintf(guess, sizeof guess, "did you mean '%s'? ", near);
  char refused[256];
  gmr__context_describe_refusals(b->ctx, refused, sizeof refused);
  const char *hint = near == NULL && !gmr__context_has_library(b->ctx, "libgmr_nccl")
                         ? "; an optional library's components are known once it is loaded: link "
                           "or dlopen libgmr_nccl (NCCL's), and for a context of your own call "
                           "gmr_nccl_register_components()"
                         : "";
  error_at(b, layer->offset, "unknown component '%s' (%sknown: %s)%s%s%s", layer->name, guess,
           list, hint, refused[0] != '\0' ? "; refused: " : "", refused);
}

static gmr_status check_layers(build *b) {
  for (size_t i = 0; i < b->layer_count; ++i) {
    const gmr__spec_layer *layer = &b->spec->layers[i];
    const gmr__component *comp = gmr__context_find_component(b->ctx, layer->name);
    if (comp == NULL) {
      unknown_component(b, layer);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    b->components[i] = comp;
    b->values[i] = calloc(comp->option_count == 0 ? 1 : comp->option_count, sizeof **b->values);
    if (b->values[i] == NULL) {
      error_at(b, layer->offset, "out of host memory while checking %s", comp->name);
      return GMR_ERR_OUT_OF_MEMORY;
    }
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

/* ---- second pass: create ---------------------------------------------------- */

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

/* Put `top`, and the layers its component built under it down to
 * `upstream`, on the stack, bottom first: `limiting(on_oom=...)` is
 * `oom > limiting`. On failure those not on it are destroyed, top first. */
static gmr_status append_built(gmr_stack *stack, gmr_resource *top, gmr_resource *upstream) {
  gmr_resource *built[2] = {top, NULL};
  size_t n = 1;
  gmr_resource *below = gmr_resource_get_upstream(top);
  if (below != upstream && below != NULL && gmr_resource_get_upstream(below) == upstream) {
    built[n++] = below;
  }
  gmr_status st = GMR_OK;
  while (n > 0 && (st = gmr__stack_append(stack, built[n - 1])) == GMR_OK) --n;
  for (size_t k = 0; k < n; ++k) GMR_IGNORE_STATUS(gmr_resource_destroy(built[k]));
  return st;
}

/* Create the layers bottom-up into `stack`. */
static gmr_status create_layers(build *b, gmr_stack *stack) {
  for (size_t i = b->layer_count; i-- > 0;) {
    const gmr__component *comp = b->components[i];
    gmr_resource *upstream = stack->count == 0 ? NULL : stack->layers[stack->count - 1];
    gmr_resource *layer = NULL;
    char message[384] = "";
    b->handed_over[i] = true;
    gmr_status st = comp->create(b->values[i], upstream, &layer, message, sizeof message);
    if (st != GMR_OK && message[0] == '\0') {
      /* The create functions explain what they can; what is left: */
      if (st == GMR_ERR_OUT_OF_MEMORY) {
        snprintf(message, sizeof message, "out of host memory while creating it");
      } else if (st == GMR_ERR_INVALID_ARGUMENT) {
        snprintf(message, sizeof message,
                 "the layer refused options the spec accepted (a gap in the spec's checks: "
                 "please report this spec)");
      }
    }
    if (st == GMR_OK) {
      st = append_built(stack, layer, upstream);
      if (st != GMR_OK) {
        snprintf(message, sizeof message, "out of host memory for the stack's list of layers");
      }
    }
    if (st != GMR_OK) {
      error_at(b, b->spec->layers[i].offset, "cannot create %s: %s%s%s", comp->name,
               gmr_status_name(st), message[0] != '\0' ? ": " : "", message);
      return st;
    }
  }
  return GMR_OK;
}

/* `origin` names where the text came from in messages ("spec", "GMR_STACK"). */
static gmr_status create_from_text(gmr_context *ctx, const char *text, const char *origin,
                                   bool check_only, bool allow_plugins, gmr_stack **out,
                                   gmr_spec_error *error) {
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
  b.ctx = gmr__context_or_default(ctx);
  b.allow_plugins = allow_plugins;
  b.spec = &spec;
  b.error = error;
  b.check_only = check_only;
  b.layer_count = spec.layer_count;
  b.components = calloc(spec.layer_count, sizeof *b.components);
  b.values = calloc(spec.layer_count, sizeof *b.values);
  b.handed_over = calloc(spec.layer_count, sizeof *b.handed_over);
  gmr_stack *stack = check_only ? NULL : calloc(1, sizeof *stack);
  if (b.components == NULL || b.values == NULL || b.handed_over == NULL ||
      (!check_only && stack == NULL)) {
    gmr__spec_error_at(error, origin, NULL, SIZE_MAX, "out of host memory while building");
    st = GMR_ERR_OUT_OF_MEMORY;
  } else {
    st = check_layers(&b);
  }
  if (st == GMR_OK && !check_only) {
    stack->spec = copy_string(text);
    if (stack->spec == NULL) {
      gmr__spec_error_at(error, origin, NULL, SIZE_MAX, "out of host memory for the spec's copy");
      st = GMR_ERR_OUT_OF_MEMORY;
    }
  }
  if (st == GMR_OK && !check_only) st = create_layers(&b, stack);

  if (st == GMR_OK && !check_only) {
    stack->plugins = b.plugins; /* the stack unloads them after its layers */
    stack->plugin_count = b.plugin_count;
    b.plugins = NULL;
    b.plugin_count = 0;
    *out = stack;
    stack = NULL;
  }
  if (st != GMR_OK && error != NULL && error->message[0] == '\0') {
    gmr__spec_error_at(error, origin, NULL, SIZE_MAX, "%s", gmr_status_string(st));
  }
  /* A check, or a failure: nothing was used yet; tear down what exists, top first. */
  while (stack != NULL && stack->count > 0) {
    GMR_IGNORE_STATUS(gmr_resource_destroy(stack->layers[--stack->count]));
  }
  free_build(&b);
  gmr__stack_unload_plugins(b.plugins, b.plugin_count);
  free(b.plugins);
  if (stack != NULL) {
    free(stack->layers);
    free(stack->spec);
    free(stack);
  }
  gmr__spec_free(&spec);
  return st;
}

gmr_status gmr_stack_create(const char *spec, gmr_stack **out, gmr_spec_error *error) {
  return create_from_text(NULL, spec, "spec", false, true, out, error);
}

gmr_status gmr_stack_create_in(gmr_context *ctx, const char *spec, gmr_stack **out,
                               gmr_spec_error *error) {
  return create_from_text(ctx, spec, "spec", false, true, out, error);
}

gmr_status gmr_stack_check(const char *spec, gmr_spec_error *error) {
  return create_from_text(NULL, spec, "spec", true, true, NULL, error);
}

gmr_status gmr__stack_create_from_env(const char *fallback_spec, gmr_stack **out,
                                      gmr_spec_error *error, bool *from_env) {
  /* The only getenv of libgmr (the simulation's GMR_CUDA_SIM is a test
   * library's). A spec from the environment loads no plugin. */
  const char *env = getenv("GMR_STACK");
  bool use_env = env != NULL && env[0] != '\0';
  if (from_env != NULL) *from_env = use_env;
  if (use_env) return create_from_text(NULL, env, "GMR_STACK", false, false, out, error);
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
  return create_from_text(NULL, fallback_spec, "spec", false, true, out, error);
}

gmr_status gmr_stack_create_from_env(const char *fallback_spec, gmr_stack **out,
                                     gmr_spec_error *error) {
  return gmr__stack_create_from_env(fallback_spec, out, error, NULL);
}
