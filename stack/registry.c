/*
 * stack/registry.c: the components a spec can name. Add one line here per
 * component (and its file): the spec parser, the error messages with their
 * suggestions, and gmr_stack_print_components() read this table only.
 */
#include "stack/registry.h"

#include <string.h>

static const gmr__component *const components[] = {
    &gmr__component_chunk_listener,
    &gmr__component_cuda,
    &gmr__component_cumem,
    &gmr__component_fixed_block,
    &gmr__component_graph_arena,
    &gmr__component_host,
    &gmr__component_limiting,
    &gmr__component_log,
    &gmr__component_nvtx_logging,
    &gmr__component_oom,
    &gmr__component_pool,
    &gmr__component_symmetric,
    &gmr__component_tracking,
    &gmr__component_vmm,
    &gmr__component_vmm_pool,
};

size_t gmr__component_count(void) { return sizeof components / sizeof components[0]; }

const gmr__component *gmr__component_at(size_t index) {
  return index < gmr__component_count() ? components[index] : NULL;
}

const gmr__component *gmr__component_find(const char *name) {
  for (size_t i = 0; i < gmr__component_count(); ++i) {
    if (strcmp(components[i]->name, name) == 0) return components[i];
  }
  return NULL;
}
