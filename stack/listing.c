/*
 * stack/listing.c: gmr_stack_print_components(), every component a spec can
 * name in the default context with its options, their types, defaults (read from the C default
 * configs) and ranges, and the policy names.
 */
#include <stdio.h>

#include "adaptors/policy_internal.h"
#include "gmr/stack.h"
#include "stack/context.h"
#include "stack/options.h"
#include "stack/registry.h"

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

static void print_policy_names(FILE *out, const char *kind, const char *const *names, size_t n) {
  char list[160];
  gmr__join_names(list, sizeof list, names, n, ", ");
  fprintf(out, "%s policies: %s, registered names, plugin:PATH:SYMBOL\n", kind, list);
}

gmr_status gmr_stack_print_components(FILE *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  const gmr__component *all[64];
  size_t count = gmr__context_list_components(NULL, all, 64);
  for (size_t i = 0; i < count && i < 64; ++i) {
    const gmr__component *c = all[i];
    fprintf(out, "%s (%s): %s\n", c->name,
            c->kind == GMR__COMPONENT_RESOURCE ? "resource, last layer" : "adaptor", c->help);
    for (size_t k = 0; k < c->option_count; ++k) {
      const gmr__option_def *d = &c->options[k];
      char default_text[64] = "", range[96] = "", help[256];
      if (!d->required) (void)gmr__option_describe_default(c, k, default_text, sizeof default_text);
      gmr__option_describe_range(d, range, sizeof range);
      gmr__option_help(d, help, sizeof help);
      fprintf(out, "  %s=<%s>", d->name, type_text(d));
      if (d->required) {
        fprintf(out, " (required%s%s)", range[0] != '\0' ? ", " : "", range);
      } else if (default_text[0] != '\0' || range[0] != '\0') {
        fprintf(out, " (%s%s%s%s)", default_text[0] != '\0' ? "default " : "", default_text,
                default_text[0] != '\0' && range[0] != '\0' ? ", " : "", range);
      }
      fprintf(out, ": %s\n", help);
    }
  }
  size_t n = 0;
  const char *const *names = gmr__oom_policy_builtin_names(&n);
  print_policy_names(out, "OOM", names, n);
  names = gmr__limit_policy_builtin_names(&n);
  print_policy_names(out, "limit", names, n);
  return GMR_OK;
}
