/*
 * core/nvtx_mem.c (internal): see core/nvtx_mem.h.
 *
 * Every NVTX memory-extension structure is zero-initialised first, then given
 * extCompatID = NVTX_EXT_COMPATID_MEM and its own structSize: fields a tool
 * reads that we did not mean to set must read as 0 ("unused"), and the size
 * lets a newer tool tell which version of the structure it got.
 */
#include "core/nvtx_mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/nvtx_headers.h"

#ifdef GMR_DISABLE_NVTX

bool gmr__nvtx_mem_compiled_in(void) { return false; }

void gmr__nvtx_start(void) {}

void *gmr__nvtx_mem_heap_register(const void *base, size_t bytes, const char *name) {
  (void)base;
  (void)bytes;
  (void)name;
  return NULL;
}

void gmr__nvtx_mem_heap_reset(void *heap) { (void)heap; }

void gmr__nvtx_mem_heap_unregister(void *heap) { (void)heap; }

void gmr__nvtx_mem_region_register(void *heap, const void *ptr, size_t bytes) {
  (void)heap;
  (void)ptr;
  (void)bytes;
}

void gmr__nvtx_mem_region_unregister(const void *ptr) { (void)ptr; }

#else /* !GMR_DISABLE_NVTX */

/* NVTX starts its memory extension lazily at the first call, with a plain
 * read of its state word that is not safe to race (ThreadSanitizer reports
 * it). The first heap registration of the process therefore runs under this
 * mutex; `ready` publishes the domain and the started extension to all later
 * calls, which every region call follows (it needs a heap first). */
static pthread_mutex_t first_call_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool ready;
static nvtxDomainHandle_t domain; /* written once, before `ready` */

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

static void start_nvtx(void) { nvtxInitialize(NULL); }

bool gmr__nvtx_mem_compiled_in(void) { return true; }

void gmr__nvtx_start(void) { pthread_once(&start_once, start_nvtx); }

/* The NVTX description of the virtual address range [ptr, ptr + bytes). */
static nvtxMemVirtualRangeDesc_t virtual_range(const void *ptr, size_t bytes) {
  nvtxMemVirtualRangeDesc_t range;
  memset(&range, 0, sizeof range);
  range.size = bytes;
  range.ptr = ptr;
  return range;
}

void *gmr__nvtx_mem_heap_register(const void *base, size_t bytes, const char *name) {
  nvtxMemVirtualRangeDesc_t range = virtual_range(base, bytes);

  nvtxMemHeapDesc_t desc;
  memset(&desc, 0, sizeof desc);
  desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  desc.structSize = (uint16_t)sizeof desc;
  desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  desc.typeSpecificDescSize = sizeof range;
  desc.typeSpecificDesc = &range;
  if (name != NULL) {
    desc.messageType = NVTX_MESSAGE_TYPE_ASCII;
    desc.message.ascii = name;
  }

  if (!atomic_load_explicit(&ready, memory_order_acquire)) {
    pthread_mutex_lock(&first_call_mutex);
    if (!atomic_load_explicit(&ready, memory_order_relaxed)) {
      gmr__nvtx_start();
      /* NULL with no tool attached: kept, and passed back as NVTX expects. */
      domain = nvtxDomainCreateA(GMR__NVTX_MEM_DOMAIN_NAME);
      nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain, &desc);
      atomic_store_explicit(&ready, true, memory_order_release);
      pthread_mutex_unlock(&first_call_mutex);
      return heap;
    }
    pthread_mutex_unlock(&first_call_mutex);
  }
  return nvtxMemHeapRegister(domain, &desc);
}

void gmr__nvtx_mem_heap_reset(void *heap) {
  /* A NULL handle means "the whole process" to NVTX: never reset that. */
  if (heap == NULL) return;
  nvtxMemHeapReset(domain, (nvtxMemHeapHandle_t)heap);
}

void gmr__nvtx_mem_heap_unregister(void *heap) {
  if (heap == NULL) return; /* process-wide: not ours, and not supported */
  nvtxMemHeapUnregister(domain, (nvtxMemHeapHandle_t)heap);
}

void gmr__nvtx_mem_region_register(void *heap, const void *ptr, size_t bytes) {
  nvtxMemVirtualRangeDesc_t range = virtual_range(ptr, bytes);

  nvtxMemRegionsRegisterBatch_t batch;
  memset(&batch, 0, sizeof batch);
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = (uint16_t)sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = (nvtxMemHeapHandle_t)heap;
  batch.regionCount = 1;
  batch.regionDescElementSize = sizeof range;
  batch.regionDescElements = &range;
  batch.regionHandleElementsOut = NULL; /* virtual-address regions are named by pointer */
  nvtxMemRegionsRegister(domain, &batch);
}

void gmr__nvtx_mem_region_unregister(const void *ptr) {
  nvtxMemRegionRef_t ref;
  memset(&ref, 0, sizeof ref);
  ref.pointer = ptr;

  nvtxMemRegionsUnregisterBatch_t batch;
  memset(&batch, 0, sizeof batch);
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = (uint16_t)sizeof batch;
  batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  batch.refCount = 1;
  batch.refElementSize = sizeof ref;
  batch.refElements = &ref;
  nvtxMemRegionsUnregister(domain, &batch);
}

#endif /* GMR_DISABLE_NVTX */
