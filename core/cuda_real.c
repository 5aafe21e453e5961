/*
 * core/cuda_real.c (internal): the CUDA layer's real implementation, one CUDA
 * runtime call per slot.
 */
#include <cuda_runtime_api.h>

#include "core/cuda_counts.h"
#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"

static cudaError_t real_get_device_count(int *count) { return cudaGetDeviceCount(count); }
static cudaError_t real_get_device(int *device) { return cudaGetDevice(device); }
static cudaError_t real_set_device(int device) { return cudaSetDevice(device); }
static cudaError_t real_device_get_attribute(int *value, enum cudaDeviceAttr attr, int device) {
  return cudaDeviceGetAttribute(value, attr, device);
}
static cudaError_t real_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  return cudaMemGetInfo(free_bytes, total_bytes);
}
static cudaError_t real_device_synchronize(void) {
  gmr__cuda_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  return cudaDeviceSynchronize();
}

static cudaError_t real_malloc(void **ptr, size_t bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_MALLOC);
  return cudaMalloc(ptr, bytes);
}
static cudaError_t real_free(void *ptr) {
  gmr__cuda_count(GMR_CUDA_CALL_FREE);
  return cudaFree(ptr);
}
static cudaError_t real_malloc_managed(void **ptr, size_t bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_MALLOC_MANAGED);
  return cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal);
}
static cudaError_t real_host_alloc(void **ptr, size_t bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_HOST_ALLOC);
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}
static cudaError_t real_free_host(void *ptr) {
  gmr__cuda_count(GMR_CUDA_CALL_FREE_HOST);
  return cudaFreeHost(ptr);
}

static cudaError_t real_mem_pool_create(cudaMemPool_t *pool, int device) {
  struct cudaMemPoolProps props = {0};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  return cudaMemPoolCreate(pool, &props);
}
static cudaError_t real_mem_pool_destroy(cudaMemPool_t pool) { return cudaMemPoolDestroy(pool); }
static cudaError_t real_mem_pool_set_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                               uint64_t value) {
  /* Every attribute gmr sets is a cuuint64_t (thresholds, high-water resets). */
  return cudaMemPoolSetAttribute(pool, attr, &value);
}
static cudaError_t real_mem_pool_get_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                               uint64_t *value) {
  return cudaMemPoolGetAttribute(pool, attr, value);
}
static cudaError_t real_mem_pool_trim_to(cudaMemPool_t pool, size_t keep) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_POOL_TRIM_TO);
  return cudaMemPoolTrimTo(pool, keep);
}
static cudaError_t real_malloc_from_pool_async(void **ptr, size_t bytes, cudaMemPool_t pool,
                                               cudaStream_t stream) {
  gmr__cuda_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC);
  return cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
}
static cudaError_t real_free_async(void *ptr, cudaStream_t stream) {
  gmr__cuda_count(GMR_CUDA_CALL_FREE_ASYNC);
  return cudaFreeAsync(ptr, stream);
}

static cudaError_t real_stream_create(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
}
static cudaError_t real_stream_destroy(cudaStream_t stream) { return cudaStreamDestroy(stream); }
static cudaError_t real_stream_synchronize(cudaStream_t stream) {
  gmr__cuda_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE);
  return cudaStreamSynchronize(stream);
}
static cudaError_t real_stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  gmr__cuda_count(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
  return cudaStreamWaitEvent(stream, event, 0);
}
static cudaError_t real_stream_get_capture_info(cudaStream_t stream,
                                                enum cudaStreamCaptureStatus *status,
                                                unsigned long long *capture_id) {
  /* CUDA 13 signature: stream, status, id, graph, dependencies, edge data, count. */
  return cudaStreamGetCaptureInfo(stream, status, capture_id, NULL, NULL, NULL, NULL);
}
static cudaError_t real_stream_get_capture_frontier(cudaStream_t stream,
                                                    enum cudaStreamCaptureStatus *status,
                                                    unsigned long long *capture_id,
                                                    const cudaGraphNode_t **nodes, size_t *count) {
  *nodes = NULL;
  *count = 0;
  return cudaStreamGetCaptureInfo(stream, status, capture_id, NULL, nodes, NULL, count);
}
static cudaError_t real_graph_node_get_dependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                                    size_t *count) {
  return cudaGraphNodeGetDependencies(node, deps, NULL, count);
}
static cudaError_t real_stream_begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return cudaStreamBeginCapture(stream, mode);
}
static cudaError_t real_stream_end_capture(cudaStream_t stream, cudaGraph_t *graph) {
  return cudaStreamEndCapture(stream, graph);
}
static cudaError_t real_graph_destroy(cudaGraph_t graph) { return cudaGraphDestroy(graph); }
static cudaError_t real_thread_exchange_capture_mode(enum cudaStreamCaptureMode *mode) {
  return cudaThreadExchangeStreamCaptureMode(mode);
}

static cudaError_t real_event_create(cudaEvent_t *event) {
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_CREATE);
  return cudaEventCreateWithFlags(event, cudaEventDisableTiming);
}
static cudaError_t real_event_destroy(cudaEvent_t event) {
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_DESTROY);
  return cudaEventDestroy(event);
}
static cudaError_t real_event_record(cudaEvent_t event, cudaStream_t stream) {
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_RECORD);
  return cudaEventRecord(event, stream);
}
static cudaError_t real_event_query(cudaEvent_t event) {
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_QUERY);
  return cudaEventQuery(event);
}
static cudaError_t real_event_synchronize(cudaEvent_t event) {
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE);
  return cudaEventSynchronize(event);
}

static cudaError_t real_stream_get_id(cudaStream_t stream, unsigned long long *id) {
  return cudaStreamGetId(stream, id);
}

static cudaError_t real_memset_async(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  return cudaMemsetAsync(ptr, value, bytes, stream);
}

static cudaError_t real_memcpy_async(void *dst, const void *src, size_t bytes,
                                     cudaStream_t stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
}
static cudaError_t real_host_register(void *ptr, size_t bytes) {
  return cudaHostRegister(ptr, bytes, cudaHostRegisterPortable); /* pinned for every device */
}
static cudaError_t real_host_unregister(void *ptr) { return cudaHostUnregister(ptr); }

const gmr__cuda_ops gmr__cuda_real_ops = {
    .name = "cuda",
    .simulated = false,
    .vmm = &gmr__cuda_vmm_real_ops,
    .get_device_count = real_get_device_count,
    .get_device = real_get_device,
    .set_device = real_set_device,
    .device_get_attribute = real_device_get_attribute,
    .mem_get_info = real_mem_get_info,
    .device_synchronize = real_device_synchronize,
    .malloc = real_malloc,
    .free = real_free,
    .malloc_managed = real_malloc_managed,
    .host_alloc = real_host_alloc,
    .free_host = real_free_host,
    .mem_pool_create = real_mem_pool_create,
    .mem_pool_destroy = real_mem_pool_destroy,
    .mem_pool_set_attribute = real_mem_pool_set_attribute,
    .mem_pool_get_attribute = real_mem_pool_get_attribute,
    .mem_pool_trim_to = real_mem_pool_trim_to,
    .malloc_from_pool_async = real_malloc_from_pool_async,
    .free_async = real_free_async,
    .stream_create = real_stream_create,
    .stream_destroy = real_stream_destroy,
    .stream_synchronize = real_stream_synchronize,
    .stream_wait_event = real_stream_wait_event,
    .stream_get_capture_info = real_stream_get_capture_info,
    .stream_get_capture_frontier = real_stream_get_capture_frontier,
    .graph_node_get_dependencies = real_graph_node_get_dependencies,
    .stream_begin_capture = real_stream_begin_capture,
    .stream_end_capture = real_stream_end_capture,
    .graph_destroy = real_graph_destroy,
    .thread_exchange_capture_mode = real_thread_exchange_capture_mode,
    .event_create = real_event_create,
    .event_destroy = real_event_destroy,
    .event_record = real_event_record,
    .event_query = real_event_query,
    .event_synchronize = real_event_synchronize,
    .memset_async = real_memset_async,
    .memcpy_async = real_memcpy_async,
    .host_register = real_host_register,
    .host_unregister = real_host_unregister,
    .stream_get_id = real_stream_get_id,
};
