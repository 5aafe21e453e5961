/*
 * resources/fixed_block/fixed_block_lists.c: gmr_block_list, many blocks as
 * one allocation (cuCascade's multiple_blocks_allocation): all from the
 * shard of the stream, all or nothing. See gmr/fixed_block_resource.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "core/failure.h"
#include "resources/fixed_block/fixed_block_internal.h"

/* A list as handed out: the public part first. */
typedef struct fb_list {
  gmr_block_list pub;
  gmr__fb_block **records;
  gmr__fb_shard *shard;
} fb_list;

/* Pop the list's blocks from slot `si` (which holds enough). Pre: lock held. */
static void pop_list(gmr__fb_shard *s, uint32_t si, void *ctx) {
  fb_list *l = ctx;
  for (size_t i = 0; i < l->pub.block_count; ++i) {
    gmr__fb_block *b = gmr__fb_pop_free(s, si, s->r->config.block_bytes);
    b->in_list = true;
    l->records[i] = b;
    l->pub.blocks[i] = (void *)b->addr;
  }
}

/* Take `count` blocks for the stream of `key` from shard `s` if its slot has
 * them (other streams' blocks moved in first), all or none. */
static bool take_blocks(gmr__fb_shard *s, gmr__stream_key key, gmr_stream stream, fb_list *l,
                        gmr_status *st) {
  gmr_fixed_block_resource *r = s->r;
  gmr__spin_lock_acquire(&s->lock);
  uint32_t si = gmr__fb_slot_of(s, key);
  bool taken = false;
  *st = si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
  if (*st == GMR_OK) {
    size_t count = l->pub.block_count;
    /* The stream's own blocks whose record_stream uses are done come back
     * first (as in fb_allocate's take). */
    bool processed = false;
    if (gmr__fb_slot_at(s, si)->deferred_count > 0 && r->config.streams.stream_ordered) {
      gmr__fb_process_deferred(s);
      processed = true;
    }
    if (gmr__fb_slot_at(s, si)->count < count && r->config.streams.stream_ordered &&
        !gmr__cuda_stream_is_capturing(r->cuda, (cudaStream_t)stream)) {
      if (s->deferred_count > 0 && !processed) gmr__fb_process_deferred(s);
      gmr__fb_from_other_streams(s, si, count);
    }
    if (gmr__fb_slot_at(s, si)->count >= count) {
      pop_list(s, si, l);
      taken = true;
    }
  }
  gmr__spin_lock_release(&s->lock);
  return taken;
}

gmr_status gmr_fixed_block_resource_allocate_blocks(gmr_fixed_block_resource *r, size_t bytes,
                                                    gmr_stream stream, gmr_block_list **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (r == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (bytes == 0) return GMR_OK;
  if (bytes > GMR_MAX_ALLOCATION_BYTES) return GMR_ERR_OUT_OF_MEMORY;
  size_t count = bytes / r->config.block_bytes + (bytes % r->config.block_bytes != 0);
  gmr__stream_key key;
  gmr_status st = gmr__status_from_cuda(gmr__stream_key_of(r->cuda, r->events_mode, stream, &key));
  if (st != GMR_OK) return st;
  fb_list *list = malloc(sizeof *list);
  void **blocks = malloc(count * sizeof *blocks);
  gmr__fb_block **records = malloc(count * sizeof *records);
  gmr__spin_lock_acquire(&r->books);
  bool room = gmr__u64_map_reserve(&r->lists, r->lists.count + 1);
  gmr__spin_lock_release(&r->books);
  if (list == NULL || blocks == NULL || records == NULL || !room) {
    free(list);
    free(blocks);
    free(records);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  list->pub.block_count = count;
  list->pub.block_bytes = r->config.block_bytes;
  list->pub.requested_bytes = bytes;
  list->pub.blocks = blocks;
  list->records = records;
  gmr__fb_shard *s = gmr__fb_shard_for(r, key);
  list->shard = s;
  bool taken = take_blocks(s, key, stream, list, &st);
  if (!taken && st == GMR_OK) {
    if (r->config.streams.stream_ordered &&
        gmr__cuda_stream_is_capturing(r->cuda, (cudaStream_t)stream)) {
      st = GMR_ERR_CAPTURE_UNSAFE;
    } else {
      /* The growth takes the list's blocks under the same hold of the spin
       * lock that adds the last chunk, so no other thread takes them first. */
      gmr_failure failure = GMR_FAILURE_INIT;
      gmr__failure_reset(&failure);
      pthread_mutex_lock(&s->grow_lock);
      st = gmr__fb_grow(s, key, count, stream, true, pop_list, list, &failure);
      pthread_mutex_unlock(&s->grow_lock);
      taken = st == GMR_OK;
    }
  }
  if (taken) {
    gmr__spin_lock_acquire(&r->books);
    (void)gmr__u64_map_put(&r->lists, (uint64_t)(uintptr_t)list, 1); /* room reserved */
    gmr__spin_lock_release(&r->books);
    *out = &list->pub;
    return GMR_OK;
  }
  free(list);
  free(blocks);
  free(records);
  return st;
}

gmr_status gmr_fixed_block_resource_deallocate_blocks(gmr_fixed_block_resource *r,
                                                      gmr_block_list *list, gmr_stream stream) {
  if (r == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (list == NULL) return GMR_OK;
  fb_list *l = (fb_list *)list; /* the public part is its first member */
  gmr__stream_key key;
  gmr_status st = gmr__status_from_cuda(gmr__stream_key_of(r->cuda, r->events_mode, stream, &key));
  if (st != GMR_OK) return st;
  gmr__spin_lock_acquire(&r->books);
  bool known = gmr__u64_map_get(&r->lists, (uint64_t)(uintptr_t)list, NULL);
  gmr__spin_lock_release(&r->books);
  if (!known) return GMR_ERR_UNKNOWN_POINTER; /* not ours, or given back already */
  gmr__fb_shard *s = l->shard;
  gmr__spin_lock_acquire(&s->lock);
  uint32_t si = gmr__fb_slot_of(s, key);
  if (si == UINT32_MAX) {
    gmr__spin_lock_release(&s->lock);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__spin_lock_acquire(&r->books);
  gmr__u64_map_remove(&r->lists, (uint64_t)(uintptr_t)list, NULL);
  gmr__spin_lock_release(&r->books);
  for (size_t i = 0; i < l->pub.block_count; ++i) gmr__fb_give_back(s, si, l->records[i]);
  if (r->config.streams.stream_ordered) {
    gmr__stream_event_mark_freed(r->cuda, &gmr__fb_slot_at(s, si)->base.ev, false, &r->events);
  }
  gmr__spin_lock_release(&s->lock);
  free(l->pub.blocks);
  free(l->records);
  free(l);
  return GMR_OK;
}
