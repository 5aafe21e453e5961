/*
 * stack/stack.c: gmr_stack (gmr/stack.h), the owning chain: built by hand
 * with gmr_stack_push, read, and destroyed top-down. Building one from a spec
 * is build.c's.
 */
#include "gmr/stack.h"

#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "stack/stack_internal.h"

gmr_status gmr_stack_create_empty(gmr_stack **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = calloc(1, sizeof **out);
  return *out == NULL ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
}

gmr_status gmr__stack_append(gmr_stack *s, gmr_resource *layer) {
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
  if (stack == NULL || gmr__resource_check_vtbl(layer) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  if (stack->count > 0 && gmr_resource_get_upstream(layer) != stack->layers[stack->count - 1]) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < stack->count; ++i) {
    if (stack->layers[i] == layer) return GMR_ERR_INVALID_ARGUMENT;
  }
  return gmr__stack_append(stack, layer);
}

gmr_resource *gmr_stack_as_resource(gmr_stack *stack) {
  return stack == NULL || stack->count == 0 ? NULL : stack->layers[stack->count - 1];
}

size_t gmr_stack_get_depth(const gmr_stack *stack) { return stack == NULL ? 0 : stack->count; }

gmr_resource *gmr_stack_get_layer(const gmr_stack *stack, size_t index) {
  if (stack == NULL || index >= stack->count) return NULL;
  return stack->layers[stack->count - 1 - index];
}

const char *gmr_stack_get_spec(const gmr_stack *stack) {
  return stack == NULL ? NULL : stack->spec;
}

void gmr__stack_unload_plugins(gmr_policy_plugin **plugins, size_t count) {
  for (size_t i = count; i-- > 0;) GMR_IGNORE_STATUS(gmr_policy_plugin_unload(plugins[i]));
}

gmr_status gmr_stack_destroy(gmr_stack *stack) {
  if (stack == NULL) return GMR_OK;
  while (stack->count > 0) {
    gmr_status st = gmr_resource_destroy(stack->layers[stack->count - 1]);
    if (st != GMR_OK) return st; /* the layer refused: it and those below stay */
    stack->count--;
  }
  gmr__stack_unload_plugins(stack->plugins, stack->plugin_count);
  free(stack->plugins);
  free(stack->layers);
  free(stack->spec);
  free(stack);
  return GMR_OK;
}
