/*
 * resources/vmm/placement/vmf_engine.c (internal): the life of a placement
 * engine (vmf.h): set-up, trim and destroy (the memory itself through its
 * source), host memory.
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/placement/vmf.h"

vmf_engine *gmr__vmf_new(gmr_vmm_pool_resource *p, const vmf_source *source,
                         void *source_ctx) {
  /* Cache-line aligned (sizeof is a multiple of the line): one shard's
   * writes never touch a line another shard's lock or counters sit on. */
  vmf_engine *e = aligned_alloc(_Alignof(vmf_engine), sizeof *e);
  if (e == NULL) return NULL;
  memset(e, 0, sizeof *e);
  atomic_init(&e->lock.locked, 0);
  e->source = source;
  e->source_ctx = source_ctx;
  e->cuda = p->cuda;
  e->vmm = p->vmm;
  gmr__vmm_unreleased_init(&e->unreleased, p->cuda, p->vmm);
  e->device = p->device;
  e->access_devices = p->access_devices;
  e->access_count = p->access_count;
  e->pool = p;
  e->page_bytes = p->page_bytes;
  e->streams_outlive = p->config.streams.streams_outlive_resource;
  e->min_growth_bytes = p->page_bytes;
  e->live = (gmr__u64_map)GMR__U64_MAP_INIT;
  e->next_arena_index = 0;
  if (!gmr__vmf_slots_init(e)) { /* slot 0: the shared one */
    free(e);
    return NULL;
  }
  return e;
}

void gmr__vmf_delete(vmf_engine *e) {
  for (uint32_t i = 0; i < e->slots.count; ++i) {
    (void)gmr__stream_event_deinit(e->cuda, &e->slots.items[i]->ev, &e->events);
  }
  gmr__stream_slots_deinit(&e->slots);
  gmr__vmm_unreleased_deinit(&e->unreleased);
  while (e->spare_regions != NULL) {
    vmf_region *r = e->spare_regions;
    e->spare_regions = r->next;
    free(r);
  }
  gmr__u64_map_clear(&e->live);
  gmr__capture_walks_free(&e->capture_walks);
  free(e);
}

/* Wait for every stream's frees and make them shared (the reclaim steps'
 * settle_all: host waits, or one device synchronisation for frees no record
 * covers). Regions a capture held back need the device too. */
static void synchronize_slots(vmf_engine *e) {
  gmr__vmf_unblock(e, VMF_UNBLOCK_HOST_WAIT, NULL);
  uint64_t synced = e->sync_epoch;
  gmr__reclaim_settle_all(&e->slots, e->blocked != NULL);
  if (e->sync_epoch != synced && e->blocked != NULL) {
    gmr__vmf_unblock(e, VMF_UNBLOCK_HOST_WAIT, NULL);
  }
  /* A stream that captures, or whose event cannot be recorded, keeps its
   * memory until a later trim. */
  gmr__vmf_share_settled(e);
}

gmr_status gmr__vmf_trim(vmf_engine *e, size_t *released_bytes, gmr_failure *failure) {
  *released_bytes = 0;
  gmr__vmf_lock(e);
  int saved = -1;
  gmr_status st = GMR_OK;
  cudaError_t err = gmr__cuda_device_enter(e->cuda, e->device, &saved);
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, "cudaSetDevice", err);
  } else {
    synchronize_slots(e);
    st = e->source->trim(e, released_bytes, failure);
    gmr__cuda_device_leave(e->cuda, saved);
  }
  gmr__vmf_unlock(e);
  return st;
}

gmr_status gmr__vmf_destroy(vmf_engine *e) {
  gmr__vmf_lock(e);
  if (e->live_count + e->asleep_count > 0) {
    gmr__vmf_unlock(e);
    return GMR_ERR_BUSY;
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(e->cuda, e->device, &saved);
  if (err != cudaSuccess) {
    gmr__vmf_unlock(e);
    return GMR_ERR_CUDA;
  }
  /* The caller synchronised the device: every event has completed, also
   * those a capture kept from being recorded. */
  gmr__vmf_unblock(e, VMF_UNBLOCK_DEVICE_SYNCED, NULL);
  for (uint32_t i = 1; i < e->slots.count; ++i) gmr__vmf_move_slot(e, i, VMF_SHARED);
  gmr_status st = e->source->destroy(e);
  /* The streams' events last: an event the driver keeps fails the destroy
   * (a later one goes on), it is not left behind. */
  if (st == GMR_OK && gmr__stream_slots_destroy_events(&e->slots, NULL) != cudaSuccess) {
    st = GMR_ERR_CUDA;
  }
  gmr__cuda_device_leave(e->cuda, saved);
  gmr__vmf_unlock(e);
  return st;
}
