/*
 * nccl/nccl_components.c: the stack spec's components of libgmr_nccl
 * (cumem, symmetric, chunk_listener), registered with libgmr's component
 * registry when this library is loaded (stack/registry.c), so a spec can
 * name them in any program that links or loads libgmr_nccl.
 */
#include <stddef.h>

#include "stack/registry.h"

extern const gmr__component gmr__component_chunk_listener;
extern const gmr__component gmr__component_cumem;
extern const gmr__component gmr__component_symmetric;

static const gmr__component *const components[] = {
    &gmr__component_chunk_listener,
    &gmr__component_cumem,
    &gmr__component_symmetric,
};

/* Room for 32 components beyond libgmr's: full only if others registered
 * 30, and then a spec naming these says it does not know them. */
__attribute__((constructor)) static void register_components(void) {
  (void)gmr__component_register(components, sizeof components / sizeof components[0]);
}
