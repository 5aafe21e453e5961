/*
 * resources/vmm/base/vmm_base_stats.c: what any VMM resource tells about
 * itself (gmr/vmm_pool_resource.h): statistics, the region list, the text
 * dump, and the deprecated invariant check; each through the resource's
 * operations (vmm_base.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_host.h"
#include "resources/vmm/base/vmm_ranges.h"

const char *const gmr__vmm_region_kind_names[5] = {"hole", "free", "live", "zombie", "asleep"};

/* The version-1 stats struct: every field up to wake_count. */
#define STATS_V1_BYTES (offsetof(gmr_vmm_pool_resource_stats, wake_count) + sizeof(uint64_t))

gmr_status gmr_vmm_pool_resource_get_stats(gmr_vmm_pool_resource *pool,
                                           gmr_vmm_pool_resource_stats *out) {
  if (pool == NULL || out == NULL || out->size < STATS_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_resource_stats s;
  memset(&s, 0, sizeof s);
  s.size = out->size;
  s.version = out->version;
  pool->ops->stats(pool, &s);
  s.page_bytes = pool->page_bytes;
  s.granularity_bytes = pool->granularity_bytes;
  /* The host side of sleep and the ranges (version 3), and what the driver
   * refused of theirs in the version-2 fields. */
  pthread_mutex_lock(&pool->lock);
  const gmr__vmm_host *h = pool->host;
  size_t range_saved = 0, range_unfreed = 0;
  gmr__vmm_ranges_stats(pool->ranges, &s, &range_saved, &range_unfreed);
  s.unfreed_host_bytes += range_unfreed + h->unreleased.hosts.bytes;
  s.unfreed_host_count += pool->ranges->unreleased.hosts.count + h->unreleased.hosts.count;
  size_t saved = s.saved_bytes + range_saved;
  s.staging_bytes = h->ring_bytes;
  s.kept_backup_bytes = h->kept_pinned_bytes + h->kept_pageable_bytes;
  s.host_pinned_bytes = (h->kind == GMR_VMM_POOL_HOST_PINNED ? saved : 0) + s.unfreed_host_bytes +
                        h->ring_bytes + h->kept_pinned_bytes;
  s.host_pageable_bytes =
      (h->kind == GMR_VMM_POOL_HOST_PAGEABLE ? saved : 0) + h->kept_pageable_bytes;
  pthread_mutex_unlock(&pool->lock);
  memcpy(out, &s, out->size < sizeof s ? out->size : sizeof s);
  return GMR_OK;
}

gmr_status gmr_vmm_pool_resource_get_regions(gmr_vmm_pool_resource *pool, gmr_vmm_pool_region *out,
                                             size_t capacity, size_t *count) {
  if (pool == NULL || count == NULL || (out == NULL && capacity > 0)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *count = pool->ops->regions(pool, out, capacity);
  return GMR_OK;
}

/* ---- dump ----------------------------------------------------------------- */

void gmr__vmm_put(gmr__vmm_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = t->used < t->bytes ? t->bytes - t->used : 0;
  int n = vsnprintf(room > 0 ? t->buf + t->used : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) t->used += (size_t)n;
}

void gmr__vmm_dump_listed_regions(gmr_vmm_pool_resource *p, gmr__vmm_text *t) {
  size_t n = p->ops->regions(p, NULL, 0);
  /* Room for a few more: regions may split between the two calls. */
  gmr_vmm_pool_region *list = malloc((n + 16) * sizeof *list);
  if (list == NULL) {
    gmr__vmm_put(t, "(no host memory for the region list)\n");
    return;
  }
  size_t got = p->ops->regions(p, list, n + 16);
  size_t chunk = SIZE_MAX;
  for (size_t i = 0; i < got && i < n + 16; ++i) {
    const gmr_vmm_pool_region *d = &list[i];
    if (d->va_chunk_index != chunk) {
      chunk = d->va_chunk_index;
      gmr__vmm_put(t, "VA chunk %zu\n", chunk);
    }
    gmr__vmm_put(t, "  %#zx %12zu %s", (size_t)d->addr, d->bytes,
                 gmr__vmm_region_kind_names[d->kind]);
    if (d->kind == GMR_VMM_POOL_REGION_FREE || d->kind == GMR_VMM_POOL_REGION_LIVE) {
      gmr__vmm_put(t, " stream %p", (void *)d->stream);
    }
    if (d->pending) gmr__vmm_put(t, " pending");
    if (d->kind == GMR_VMM_POOL_REGION_LIVE || d->kind == GMR_VMM_POOL_REGION_ASLEEP) {
      gmr__vmm_put(t, " tag %u", d->tag);
    }
    gmr__vmm_put(t, "\n");
  }
  free(list);
}

gmr_status gmr_vmm_pool_resource_dump(gmr_vmm_pool_resource *pool, char *buf, size_t buf_bytes,
                                      size_t *needed_bytes) {
  if (pool == NULL || (buf == NULL && buf_bytes > 0)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  gmr_status st = gmr_vmm_pool_resource_get_stats(pool, &s);
  if (st != GMR_OK) return st;
  gmr__vmm_text t = {buf, buf_bytes, 0};
  if (buf_bytes > 0) buf[0] = '\0';
  gmr__vmm_put(&t, "%s: device %d, page %zu bytes, granularity %zu bytes\n",
               gmr_resource_get_type_name(&pool->base), pool->device, s.page_bytes,
               s.granularity_bytes);
  gmr__vmm_put(&t, "mapped %zu bytes (peak %zu), reserved %zu bytes in %zu VA chunks\n",
               s.mapped_bytes, s.peak_mapped_bytes, s.reserved_bytes, s.va_chunk_count);
  gmr__vmm_put(&t,
               "live %zu bytes in %zu, small %zu bytes in %zu, free %zu bytes in %zu, holes %zu "
               "bytes in %zu, zombies %zu bytes in %zu, asleep %zu bytes in %zu (%zu saved)\n",
               s.live_bytes, s.live_count, s.small_live_bytes, s.small_live_count, s.free_bytes,
               s.free_region_count, s.hole_bytes, s.hole_count, s.zombie_bytes, s.zombie_count,
               s.asleep_bytes, s.asleep_count, s.saved_bytes);
  if (s.host_pinned_bytes + s.host_pageable_bytes > 0) {
    gmr__vmm_put(&t,
                 "host: %zu pinned bytes (staging ring %zu), %zu pageable bytes, %zu kept for "
                 "the next sleep\n",
                 s.host_pinned_bytes, s.staging_bytes, s.host_pageable_bytes,
                 s.kept_backup_bytes);
  }
  if (s.range_count > 0) {
    gmr__vmm_put(&t, "ranges: %zu, %zu bytes reserved, %zu committed, %zu mapped\n",
                 s.range_count, s.range_reserved_bytes, s.range_committed_bytes,
                 s.range_mapped_bytes);
  }
  if (s.unreleased_handle_count + s.unfreed_host_count > 0) {
    gmr__vmm_put(&t,
                 "unreleased %zu bytes in %zu (cuMemRelease refused), unfreed %zu pinned bytes in "
                 "%zu (cudaFreeHost refused)\n",
                 s.unreleased_bytes, s.unreleased_handle_count, s.unfreed_host_bytes,
                 s.unfreed_host_count);
  }
  pool->ops->dump_regions(pool, &t);
  if (needed_bytes != NULL) *needed_bytes = t.used + 1;
  return GMR_OK;
}
