/*
 * gmr/stats_json.h: the counters of a whole stack as one JSON object, for
 * programs that read them from another language (gmr.torch.stats() and
 * gmr.cupy.stats() in Python parse it) or log them.
 *
 * Thread-safe: yes, as the getters it calls (counters read one by one, so a
 * snapshot taken while other threads allocate may mix moments).
 */
#ifndef GMR_STATS_JSON_H_
#define GMR_STATS_JSON_H_

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Write the counters of the stack headed by `top` into `buffer` as JSON:
 *
 *   {"held_bytes": N, "peak_held_bytes": N,          (gmr_resource_get_footprint; null if none)
 *    "memory": {"held_bytes": N, "live_bytes": N, "free_bytes": N,
 *               "largest_free_block_bytes": N, "free_block_count": N},   (or null)
 *    "layers": [ {"type": "tracking_adaptor",
 *                 "bytes": {"current": N, "peak": N, "total": N},
 *                 "allocations": {"current": N, "peak": N, "total": N},
 *                 "deallocation_count": N, "upstream_failure_count": N,
 *                 "unknown_pointer_count": N, "double_free_count": N,
 *                 "size_mismatch_count": N, "stream_mismatch_count": N,
 *                 "owners": {"0x7f..": {"bytes": {...}, "allocations": {...}}, ...}},
 *                {"type": "limiting_adaptor", "limit_bytes": N (or null: none),
 *                 "used_bytes": N, "peak_used_bytes": N, "refused_count": N,
 *                 "upstream_failure_count": N},
 *                {"type": "pool_resource"}, ... ]}        (top first)
 *
 * A tracking layer's owners are streams (per=stream, keyed by the stream's
 * address, "0x0" the default stream) or threads (per=thread, keyed by the
 * thread's id, as gmr_tracking_adaptor_get_owner_stats names it). Layers of
 * other types give their type only.
 *
 * Units: bytes; counts. Ownership: `buffer` is the caller's.
 * Thread-safe: as reading each layer's stats is (yes for gmr's layers);
 *   counters read while other threads allocate may be from slightly
 *   different moments.
 * Stream/device: no CUDA call, never synchronises.
 * Returns GMR_OK with *out_bytes set to the length of the whole text (without
 * its NUL), like snprintf: at most buffer_bytes - 1 characters and a NUL are
 * written, so the text is complete only when *out_bytes < buffer_bytes (call
 * again with a larger buffer otherwise; buffer may be NULL when buffer_bytes
 * is 0). GMR_ERR_INVALID_ARGUMENT when `top` is not a valid resource, its
 * upstream links loop back up the stack, or out_bytes is NULL (nothing
 * written); GMR_ERR_OUT_OF_MEMORY when host memory
 * for listing a tracking layer's owners ran out.
 * Source: this library's stats structs (gmr_tracking_adaptor_stats,
 *   gmr_limiting_adaptor_stats, gmr_memory_info) in one document.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_write_stats_json(gmr_resource *top, char *buffer,
                                                               size_t buffer_bytes,
                                                               size_t *out_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STATS_JSON_H_ */
