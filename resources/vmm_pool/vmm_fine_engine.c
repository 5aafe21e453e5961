/*
 * resources/vmm_pool/vmm_fine_engine.c (internal): the life of a fine
 * placement engine (vmm_fine.h): set-up, trim, destroy, host memory.
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_fine.h"

bool gmr__vmf_init(vmf_engine *e) {
  atomic_init(&e->lock.locked, 0);
  e->live = (gmr__u64_map)GMR__U64_MAP_INIT;
  e->next_arena_index = 0;
  /* Slot 0: the shared one. */
  e->slots = calloc(8, sizeof *e->slots);
  e->slot_streams = calloc(8, sizeof *e->slot_streams);
  vmf_slot *shared = calloc(1, sizeof *shared);
  if (e->slots == NULL || e->slot_streams == NULL || shared == NULL) {
    free(e->slots);
    free(e->slot_streams);
    free(shared);
    e->slots = NULL;
    e->slot_streams = NULL;
    return false;
  }
  gmr__stream_event_init(&shared->ev, (gmr__stream_key){NULL, 0}, GMR__STREAM_EVENTS_LAZY);
  e->slots[0] = shared;
  e->slot_count = 1;
  e->slot_capacity = 8;
  return true;
}

void gmr__vmf_free_host(vmf_engine *e) {
  for (size_t i = 0; i < e->slot_count; ++i) {
    (void)gmr__stream_event_deinit(e->cuda, &e->slots[i]->ev, &e->events);
    free(e->slots[i]);
  }
  free(e->slots);
  free(e->slot_streams);
  e->slots = NULL;
  e->slot_streams = NULL;
  e->slot_count = e->slot_capacity = 0;
  while (e->spare_regions != NULL) {
    vmf_region *r = e->spare_regions;
    e->spare_regions = r->next;
    free(r);
  }
  gmr__u64_map_clear(&e->live);
}

/* Wait for every stream's frees and make them shared (host waits). Frees
 * no record covers (on demand: a stream nobody asked for its memory, or one
 * destroyed since) are covered by one device synchronisation, which names
 * no stream; the snapshot says which frees it covers. */
static gmr_status synchronize_slots(vmf_engine *e, gmr_failure *failure) {
  gmr__vmf_unblock(e, true);
  if (gmr__vmf_fresh_bytes(e, VMF_SHARED) > 0) (void)gmr__vmf_synchronize_fresh(e);
  for (size_t i = 1; i < e->slot_count; ++i) {
    vmf_slot *s = e->slots[i];
    if (s->free_count == 0) continue;
    /* A stream that captures, or whose event cannot be recorded, keeps its
     * memory until a later trim. */
    if (gmr__stream_event_synchronize(e->cuda, &s->ev, &e->events) != cudaSuccess) continue;
    gmr__vmf_move_slot(e, (uint32_t)i, VMF_SHARED);
  }
  (void)failure;
  return GMR_OK;
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
    st = synchronize_slots(e, failure);
    if (st == GMR_OK) {
      st = e->chunked ? gmr__vmf_chunk_trim(e, released_bytes)
                      : gmr__vmf_native_trim(e, released_bytes, failure);
    }
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
  gmr__vmf_unblock(e, true);
  for (size_t i = 1; i < e->slot_count; ++i) gmr__vmf_move_slot(e, (uint32_t)i, VMF_SHARED);
  gmr_status st = GMR_OK;
  if (e->chunked) {
    size_t released = 0;
    st = gmr__vmf_chunk_trim(e, &released);
    if (st == GMR_OK && e->arenas != NULL) st = GMR_ERR_INTERNAL;
  } else {
    st = gmr__vmf_native_destroy(e);
  }
  gmr__cuda_device_leave(e->cuda, saved);
  gmr__vmf_unlock(e);
  return st;
}
