/*
 * resources/vmm/pages/vmm_pages_sleep.c (internal): what the tags, sleep and
 * wake of gmr/vmm_pool_sleep.h do in vmm_pages (the VMM base's operations,
 * vmm/base/vmm_base.h): its steps of sleep and wake (the sequence and its
 * rollbacks are written once, vmm/base/vmm_sleep_run.h), the tags and what
 * they hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"
#include "resources/vmm/base/vmm_sleep_run.h"

/* ---- the steps of sleep and wake ------------------------------------------- */

typedef struct pages_ctx {
  vmm_pages *p;
} pages_ctx;

static gmr_status pages_trim(void *ctx, gmr_failure *failure) {
  vmm_pages *p = ((pages_ctx *)ctx)->p;
  /* Everything ran: regions freed during a capture have nothing pending. */
  gmr__vmm_device_synchronized(p);
  size_t released = 0;
  return gmr__vmm_trim_locked(p, &released, failure);
}

static gmr_status pages_select(void *ctx, bool asleep, uint64_t tag_mask,
                               gmr__vmm_sleep_item **items, size_t *count) {
  vmm_pages *p = ((pages_ctx *)ctx)->p;
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
    list[(*count)++] = (gmr__vmm_sleep_item){r, r->addr, r->bytes, r->tag, false, r->saved, false};
  }
  return GMR_OK;
}

/* Map back the pages of items[0..count) that are not kept, up to `stop`
 * within items[count - 1] (0: whole), and give access. */
static void map_back(vmm_pages *p, gmr__vmm_sleep_item *items, size_t count,
                     uintptr_t stop) {
  for (size_t j = count; j-- > 0;) {
    if (items[j].keep) continue;
    vmm_region *q = items[j].region;
    uintptr_t end = j + 1 == count && stop != 0 ? stop : q->addr + q->bytes;
    for (uintptr_t b = q->addr; b < end; b += p->pool.page_bytes) {
      if (p->pool.vmm->map((CUdeviceptr)b, p->pool.page_bytes, *gmr__vmm_page_slot(q->root, b)) ==
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
  vmm_pages *p = ((pages_ctx *)ctx)->p;
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    vmm_region *r = items[i].region;
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->pool.page_bytes) {
      CUresult cu = p->pool.vmm->unmap((CUdeviceptr)a, p->pool.page_bytes);
      if (cu == CUDA_SUCCESS) {
        p->counts.unmap++;
        continue;
      }
      gmr_status st = gmr__cu_fail(p->pool.vmm, failure, "cuMemUnmap", cu, "while going to sleep");
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
  vmm_pages *p = ((pages_ctx *)ctx)->p;
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    vmm_region *r = items[i].region;
    /* Unmapped already: a page the driver refuses to release is kept as
     * unreleased (still held) and the allocation sleeps all the same. */
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->pool.page_bytes) {
      CUmemGenericAllocationHandle *slot = gmr__vmm_page_slot(r->root, a);
      CUresult cu = gmr__vmm_release_or_keep(&p->unreleased, *slot, p->pool.page_bytes);
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
  vmm_pages *p = ((pages_ctx *)ctx)->p;
  size_t mapped = 0; /* items[0..mapped) have pages */
  gmr_status st = GMR_OK;
  while (st == GMR_OK && mapped < count) {
    vmm_region *r = items[mapped].region;
    st = gmr__vmm_map_new_pages(p, r->root, r->addr, r->bytes / p->pool.page_bytes, failure);
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
  vmm_pages *p = ((pages_ctx *)ctx)->p;
  for (size_t i = count; i-- > 0;) {
    vmm_region *r = items[i].region;
    gmr__vmm_undo_map(p, r->root, r->addr, r->bytes, true);
  }
}

static void pages_woken(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  vmm_pages *p = ((pages_ctx *)ctx)->p;
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

/* ---- the base's operations ---------------------------------------------- */

gmr_status gmr__vmm_pages_sleep(gmr_vmm_pool_resource *pool, const gmr_vmm_pool_sleep_options *o,
                                gmr_failure *failure, bool *asleep) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pages_ctx ctx = {p};
  gmr__vmm_sleeper part = {&pages_ops, &ctx, &p->unreleased};
  return gmr__vmm_sleep_run(pool, &part, 1, o, failure, asleep);
}

gmr_status gmr__vmm_pages_wake(gmr_vmm_pool_resource *pool, const gmr_vmm_pool_wake_options *o,
                               gmr_failure *failure, bool *woken, bool *still_asleep) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pages_ctx ctx = {p};
  gmr__vmm_sleeper part = {&pages_ops, &ctx, &p->unreleased};
  gmr_status st = gmr__vmm_wake_run(pool, &part, 1, o, failure, woken);
  *still_asleep = p->asleep_count > 0;
  return st;
}

void gmr__vmm_pages_set_default_tag(gmr_vmm_pool_resource *pool, uint32_t tag) {
  pthread_mutex_lock(&pool->lock);
  gmr__vmm_pages_of(pool)->default_tag = tag;
  pthread_mutex_unlock(&pool->lock);
}

gmr_status gmr__vmm_pages_set_tag(gmr_vmm_pool_resource *pool, void *ptr, uint32_t tag) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pthread_mutex_lock(&pool->lock);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  gmr_status st = r == NULL || r->internal ? GMR_ERR_UNKNOWN_POINTER : GMR_OK;
  if (st == GMR_OK) r->tag = tag;
  pthread_mutex_unlock(&pool->lock);
  return st;
}

void gmr__vmm_pages_tag_stats(gmr_vmm_pool_resource *pool, uint64_t tag_mask,
                              gmr_vmm_pool_tag_stats *s) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
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
