/*
 * nccl/component_chunk_listener.c: `chunk_listener` in specs,
 * gmr_chunk_listener_adaptor (no options): the layer below a pool through
 * which gmr_nccl_register_pool() follows the pool's chunks.
 */
#include "gmr/nccl/chunk_listener_adaptor.h"
#include "stack/registry.h"

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)values;
  (void)message;
  (void)message_bytes;
  gmr_chunk_listener_adaptor *a = NULL;
  gmr_status st = gmr_chunk_listener_adaptor_create(upstream, &a);
  *out = gmr_chunk_listener_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_chunk_listener = {
    .name = "chunk_listener",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "tells listeners about every chunk between a pool and its upstream; put it below a "
            "pool to register the pool with NCCL (gmr/nccl/chunk_listener_adaptor.h, gmr/nccl/nccl.h)",
    .options = NULL,
    .option_count = 0,
    .create = create,
};
