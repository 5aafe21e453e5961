/*
 * resources/vmm_pool/vmm_pool_sleep.c: trim (give free pages back to the
 * device); PAGES placement's steps of sleep and wake (vmm_sleep_common.h:
 * the sequence and its rollbacks are written once there); and the public
 * entry points of gmr/vmm_pool_sleep.h for both placements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_pool_internal.h"
#include "resources/vmm_pool/vmm_sleep_common.h"

/* ---- trim --------------------------------------------------------------- */

/* Unmap the pages of the free or zombie region r (releasing them for a free
 * region: a zombie's pages live on at their new address) and make it a hole.
 * On a refused call, what was unmapped becomes a hole and the rest stays (a
 * page whose release is refused is unreleased: not counted as released). */
static gmr_status give_back(gmr_vmm_pool_resource *p, vmm_region *r, size_t *released_bytes,
                            gmr_failure *failure) {
  vmm_region *spare = gmr__vmm_region_new();
  if (spare == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory ran out");
  }
  bool release = r->state == VMM_FREE;
  size_t done = 0;
  gmr_status st = gmr__vmm_unmap_pages(p, r->root, r->addr, r->bytes, release, &done,
                                       released_bytes, failure);
  if (done > 0 && done < r->bytes) {
    gmr__vmm_region_split(p, r, done, spare);
    spare = NULL;
  }
  gmr__vmm_region_delete(spare);
  if (done > 0) (void)gmr__vmm_make_hole(p, r);
  return st;
}

gmr_status gmr__vmm_trim_locked(gmr_vmm_pool_resource *p, size_t *released_bytes,
                                gmr_failure *failure) {
  /* What the driver refused before, first; while it still refuses, nothing
   * more is unmapped (it would only be kept as well). */
  gmr_status st = gmr__vmm_retry_unreleased(p, released_bytes, failure);
  if (st != GMR_OK) return st;
  /* Zombies next: their old addresses must go before their pages can. */
  while (p->zombie_list.head != NULL) {
    vmm_region *z = p->zombie_list.head;
    cudaError_t err = gmr__vmm_event_wait_host(p, z->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    st = give_back(p, z, released_bytes, failure);
    if (st != GMR_OK) return st;
  }
  /* Free regions held back by record_stream: wait for their streams too. */
  for (vmm_region *r = p->free_list.head; r != NULL; r = r->list_next) {
    for (uint32_t i = 0; i < r->blocker_count; ++i) {
      cudaError_t err = gmr__vmm_event_wait_host(p, r->blockers[i]);
      if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    }
  }
  gmr__vmm_collect(p, true, NULL); /* unblocks and merges them */
  /* Every free region that has an event (those freed during a capture have
   * none to wait for and stay). */
  vmm_region *next = NULL;
  for (vmm_region *r = p->free_list.head; r != NULL; r = next) {
    next = r->list_next;
    if (r->unordered || gmr__vmm_region_held(r)) continue;
    cudaError_t err = gmr__vmm_event_wait_host(p, r->event);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaEventSynchronize", err);
    st = give_back(p, r, released_bytes, failure);
    if (st != GMR_OK) return st;
    next = p->free_list.head; /* holes merged; the list head is the next candidate */
    while (next != NULL && (next->unordered || gmr__vmm_region_held(next))) next = next->list_next;
  }
  return GMR_OK;
}

/* ---- PAGES placement's steps of sleep and wake ------------------------------- */

typedef struct pages_ctx {
  gmr_vmm_pool_resource *p;
} pages_ctx;

static gmr_status pages_trim(void *ctx, gmr_failure *failure) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  /* Everything ran: regions freed during a capture have nothing pending. */
  gmr__vmm_device_synchronized(p);
  size_t released = 0;
  return gmr__vmm_trim_locked(p, &released, failure);
}

static gmr_status pages_select(void *ctx, bool asleep, uint64_t tag_mask,
                               gmr__vmm_sleep_item **items, size_t *count) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  *count = 0;
  gmr__vmm_sleep_item *list = malloc((p->live.count + 1) * sizeof *list);
  *items = list;
  if (list == NULL) return GMR_ERR_OUT_OF_MEMORY;
  vmm_state want = asleep ? VMM_ASLEEP : VMM_LIVE;
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&p->live, &cursor, &key, &value)) {
    vmm_region *r = (vmm_region *)(uintptr_t)value;
    if (r->state != want || ((tag_mask >> r->tag) & 1u) == 0) continue;
    list[(*count)++] = (gmr__vmm_sleep_item){r, r->addr, r->bytes, r->tag, false, r->saved};
  }
  return GMR_OK;
}

/* Map back the pages of items[0..count) that are not kept, up to `stop`
 * within items[count - 1] (0: whole), and give access. */
static void map_back(gmr_vmm_pool_resource *p, gmr__vmm_sleep_item *items, size_t count,
                     uintptr_t stop) {
  for (size_t j = count; j-- > 0;) {
    if (items[j].keep) continue;
    vmm_region *q = items[j].region;
    uintptr_t end = j + 1 == count && stop != 0 ? stop : q->addr + q->bytes;
    for (uintptr_t b = q->addr; b < end; b += p->page_bytes) {
      if (p->vmm->map((CUdeviceptr)b, p->page_bytes, *gmr__vmm_page_slot(q->root, b)) ==
          CUDA_SUCCESS) {
        p->counts.map++;
      }
    }
    if (end > q->addr) (void)gmr__vmm_set_access(p, q->addr, end - q->addr, NULL);
  }
}

/* Unmap every page of the items not kept, keeping the handles in the page
 * table; on a refusal map back what was unmapped. */
static gmr_status pages_unmap(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                              gmr_failure *failure) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    vmm_region *r = items[i].region;
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->page_bytes) {
      CUresult cu = p->vmm->unmap((CUdeviceptr)a, p->page_bytes);
      if (cu == CUDA_SUCCESS) {
        p->counts.unmap++;
        continue;
      }
      gmr_status st = gmr__cu_fail(p->vmm, failure, "cuMemUnmap", cu, "while going to sleep");
      /* Roll back: items[i] up to `a`, and the items before it whole. */
      if (a > r->addr) {
        map_back(p, items, i + 1, a);
      } else {
        map_back(p, items, i, 0);
      }
      return st;
    }
  }
  return GMR_OK;
}

static void pages_remap(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  map_back(((pages_ctx *)ctx)->p, items, count, 0);
}

static CUresult pages_release(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                              gmr_vmm_pool_host_kind host) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    vmm_region *r = items[i].region;
    /* Unmapped already: a page the driver refuses to release is kept as
     * unreleased (still held) and the allocation sleeps all the same. */
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->page_bytes) {
      CUmemGenericAllocationHandle *slot = gmr__vmm_page_slot(r->root, a);
      CUresult cu = gmr__vmm_release_or_keep(&p->unreleased, *slot, p->page_bytes);
      if (cu == CUDA_SUCCESS) {
        p->counts.page_release++;
      } else if (refused == CUDA_SUCCESS) {
        refused = cu;
      }
      *slot = 0;
      p->mapped_pages--;
    }
    r->saved = items[i].host;
    if (r->saved != NULL) p->saved_bytes += r->bytes;
    r->state = VMM_ASLEEP;
    p->live_bytes -= r->bytes;
    p->live_count--;
    p->asleep_bytes += r->bytes;
    p->asleep_count++;
  }
  p->saved_host = host;
  p->counts.sleep++;
  return refused;
}

static void pages_retry(void *ctx) {
  size_t released = 0;
  (void)gmr__vmm_retry_unreleased(((pages_ctx *)ctx)->p, &released, NULL);
}

static gmr_status pages_map(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                            gmr_failure *failure) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  size_t mapped = 0; /* items[0..mapped) have pages */
  gmr_status st = GMR_OK;
  while (st == GMR_OK && mapped < count) {
    vmm_region *r = items[mapped].region;
    st = gmr__vmm_map_new_pages(p, r->root, r->addr, r->bytes / p->page_bytes, failure);
    if (st == GMR_OK) mapped++;
  }
  if (st == GMR_OK) return GMR_OK;
  if (st == GMR_ERR_OUT_OF_MEMORY) gmr__vmm_fill_free_info(p, failure);
  for (size_t i = mapped; i-- > 0;) {
    vmm_region *r = items[i].region;
    gmr__vmm_undo_map(p, r->root, r->addr, r->bytes, true);
  }
  return st;
}

static void pages_unmap_fresh(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  for (size_t i = count; i-- > 0;) {
    vmm_region *r = items[i].region;
    gmr__vmm_undo_map(p, r->root, r->addr, r->bytes, true);
  }
}

static void pages_woken(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  gmr_vmm_pool_resource *p = ((pages_ctx *)ctx)->p;
  for (size_t i = 0; i < count; ++i) {
    vmm_region *r = items[i].region;
    if (r->saved != NULL) p->saved_bytes -= r->bytes;
    r->saved = NULL; /* the driver frees the copy */
    r->state = VMM_LIVE;
    p->asleep_bytes -= r->bytes;
    p->asleep_count--;
    p->live_bytes += r->bytes;
    p->live_count++;
  }
  p->counts.wake++;
}

static const gmr__vmm_sleep_ops pages_ops = {
    .trim = pages_trim,
    .select = pages_select,
    .unmap = pages_unmap,
    .remap = pages_remap,
    .release = pages_release,
    .map = pages_map,
    .unmap_fresh = pages_unmap_fresh,
    .woken = pages_woken,
    .retry = pages_retry,
};

/* ---- the public entry points (both placements) ----------------------------- */

/* What the allocations of `tag_mask` hold (PAGES placement; lock held). */
static void pages_tag_stats(gmr_vmm_pool_resource *p, uint64_t tag_mask,
                            gmr_vmm_pool_tag_stats *s) {
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&p->live, &cursor, &key, &value)) {
    const vmm_region *r = (const vmm_region *)(uintptr_t)value;
    if (((tag_mask >> r->tag) & 1u) == 0) continue;
    if (r->state == VMM_LIVE) {
      s->live_bytes += r->bytes;
      s->live_count++;
    } else if (r->state == VMM_ASLEEP) {
      s->asleep_bytes += r->bytes;
      s->asleep_count++;
      if (r->saved != NULL) {
        s->saved_bytes += r->bytes;
        s->saved_count++;
        s->saved_pinned = p->saved_host == GMR_VMM_POOL_HOST_PINNED;
      }
    }
  }
}

/* Both placements' figures; the pool's mutex held. */
static void tag_stats_locked(gmr_vmm_pool_resource *p, uint64_t tag_mask,
                             gmr_vmm_pool_tag_stats *s) {
  if (p->fine != NULL) {
    gmr__vmm_shards_tag_stats(p, tag_mask, s);
  } else {
    pages_tag_stats(p, tag_mask, s);
  }
}

static gmr_status vmm_pool_resource_sleep_impl(gmr_vmm_pool_resource *p,
                                               const gmr_vmm_pool_sleep_options *options,
                                               gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (p == NULL) return gmr__vmm_null_pool(failure, "sleep");
  gmr_vmm_pool_sleep_options o;
  gmr_status st = gmr__vmm_sleep_options_read(options, &o, failure);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&p->lock);
  if (atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
    tag_stats_locked(p, UINT64_MAX, &s);
    pthread_mutex_unlock(&p->lock);
    return gmr__vmm_sleep_busy(failure, s.asleep_count, s.asleep_bytes, s.saved_bytes);
  }
  bool asleep = false;
  if (p->fine != NULL) {
    st = gmr__vmm_shards_sleep(p, &o, failure, &asleep);
  } else {
    pages_ctx ctx = {p};
    gmr__vmm_sleeper part = {&pages_ops, &ctx, &p->unreleased};
    st = gmr__vmm_sleep_run(&part, 1, p->cuda, p->device, &o, failure, &asleep);
  }
  /* Also after a refused release: the allocations sleep, the memory is kept. */
  if (asleep) atomic_store_explicit(&p->sleeping, true, memory_order_relaxed);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_sleep(gmr_vmm_pool_resource *pool,
                                       const gmr_vmm_pool_sleep_options *options,
                                       gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_sleep_impl(pool, options, f));
}

static gmr_status vmm_pool_resource_wake_impl(gmr_vmm_pool_resource *p,
                                              const gmr_vmm_pool_wake_options *options,
                                              gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (p == NULL) return gmr__vmm_null_pool(failure, "wake");
  gmr_vmm_pool_wake_options o;
  gmr_status st = gmr__vmm_wake_options_read(options, &o, failure);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&p->lock);
  if (!atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    pthread_mutex_unlock(&p->lock);
    return gmr__vmm_wake_not_asleep(failure);
  }
  bool still_asleep = true, woken = false;
  if (p->fine != NULL) {
    st = gmr__vmm_shards_wake(p, &o, failure, &woken, &still_asleep);
  } else {
    pages_ctx ctx = {p};
    gmr__vmm_sleeper part = {&pages_ops, &ctx, &p->unreleased};
    st = gmr__vmm_wake_run(&part, 1, p->cuda, p->device, p->saved_host, &o, failure, &woken);
    still_asleep = p->asleep_count > 0;
  }
  /* Also after a refused cudaFreeHost: woken, the copy kept. */
  if (woken && !still_asleep) {
    atomic_store_explicit(&p->sleeping, false, memory_order_relaxed);
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_wake(gmr_vmm_pool_resource *pool,
                                      const gmr_vmm_pool_wake_options *options,
                                      gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_wake_impl(pool, options, f));
}

bool gmr_vmm_pool_resource_is_asleep(gmr_vmm_pool_resource *pool) {
  return pool != NULL && atomic_load_explicit(&pool->sleeping, memory_order_relaxed);
}

/* The version-1 tag stats struct: every field up to saved_pinned. */
#define TAG_STATS_V1_BYTES (offsetof(gmr_vmm_pool_tag_stats, saved_pinned) + sizeof(bool))

gmr_status gmr_vmm_pool_resource_get_tag_stats(gmr_vmm_pool_resource *pool, uint64_t tag_mask,
                                               gmr_vmm_pool_tag_stats *out) {
  if (pool == NULL || out == NULL || out->size < TAG_STATS_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
  pthread_mutex_lock(&pool->lock);
  tag_stats_locked(pool, tag_mask, &s);
  pthread_mutex_unlock(&pool->lock);
  size_t n = out->size < sizeof s ? out->size : sizeof s;
  size_t header = offsetof(gmr_vmm_pool_tag_stats, live_bytes);
  memcpy((char *)out + header, (const char *)&s + header, n - header);
  return GMR_OK;
}
