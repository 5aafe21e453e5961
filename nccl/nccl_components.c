/*
 * nccl/nccl_components.c: the stack spec's components of libgmr_nccl
 * (cumem, symmetric, chunk_listener). The library registers them itself
 * (gmr__extension_register, the extension interface of core/extension.h):
 * in the default context when it is loaded, and in another context when the
 * program asks (gmr_nccl_register_components). libgmr names none of them
 * and never loads this library.
 */
#include <stddef.h>

#include "gmr/nccl/nccl.h"
#include "stack/registry.h"

extern const gmr__component gmr__component_chunk_listener;
extern const gmr__component gmr__component_cumem;
extern const gmr__component gmr__component_symmetric;

static const gmr__component *const components[] = {
    &gmr__component_chunk_listener,
    &gmr__component_cumem,
    &gmr__component_symmetric,
};

static const gmr__extension extension = {
    GMR_EXTENSION_VERSION,
    "libgmr_nccl",
    components,
    sizeof components / sizeof components[0],
};

gmr_status gmr_nccl_register_components(gmr_context *ctx) {
  return gmr__extension_register(ctx, &extension);
}

/* Loading the library is how a program asks for its components in the
 * default context. A refusal (another extension version) is remembered by
 * the context and told when a spec names one of them. */
__attribute__((constructor)) static void register_in_default_context(void) {
  GMR_IGNORE_STATUS(gmr__extension_register(NULL, &extension));
}
