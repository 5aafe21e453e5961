/*
 * core/cuda_sim/sim_ops.c (internal): the simulation's gmr__cuda_ops table: one
 * slot per CUDA call the library makes (core/cuda_layer.h).
 */
#include "core/cuda_sim/sim_internal.h"
#include "core/cuda_vmm.h"

const gmr__cuda_ops gmr__cuda_sim_ops = {
    .name = "simulation",
    .simulated = true,
    .vmm = &gmr__cuda_vmm_sim_ops,
    .get_device_count = gmr__sim_get_device_count,
    .get_device = gmr__sim_get_device,
    .set_device = gmr__sim_set_device,
    .device_get_attribute = gmr__sim_device_get_attribute,
    .mem_get_info = gmr__sim_mem_get_info,
    .device_synchronize = gmr__sim_device_synchronize,
    .malloc = gmr__sim_malloc,
    .free = gmr__sim_free,
    .malloc_managed = gmr__sim_malloc_managed,
    .host_alloc = gmr__sim_host_alloc,
    .free_host = gmr__sim_free_host,
    .mem_pool_create = gmr__sim_mem_pool_create,
    .mem_pool_destroy = gmr__sim_mem_pool_destroy,
    .mem_pool_set_attribute = gmr__sim_mem_pool_set_attribute,
    .mem_pool_get_attribute = gmr__sim_mem_pool_get_attribute,
    .mem_pool_trim_to = gmr__sim_mem_pool_trim_to,
    .malloc_from_pool_async = gmr__sim_malloc_from_pool_async,
    .free_async = gmr__sim_free_async,
    .stream_create = gmr__sim_stream_create,
    .stream_destroy = gmr__sim_stream_destroy,
    .stream_synchronize = gmr__sim_stream_synchronize,
    .stream_wait_event = gmr__sim_stream_wait_event,
    .stream_get_capture_info = gmr__sim_stream_get_capture_info,
    .stream_begin_capture = gmr__sim_stream_begin_capture,
    .stream_end_capture = gmr__sim_stream_end_capture,
    .graph_destroy = gmr__sim_graph_destroy,
    .thread_exchange_capture_mode = gmr__sim_thread_exchange_capture_mode,
    .event_create = gmr__sim_event_create,
    .event_destroy = gmr__sim_event_destroy,
    .event_record = gmr__sim_event_record,
    .event_query = gmr__sim_event_query,
    .event_synchronize = gmr__sim_event_synchronize,
    .memset_async = gmr__sim_memset_async,
    .memcpy_async = gmr__sim_memcpy_async,
    .host_register = gmr__sim_host_register,
    .host_unregister = gmr__sim_host_unregister,
    .stream_get_id = gmr__sim_stream_get_id,
};
