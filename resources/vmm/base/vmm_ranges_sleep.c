/*
 * resources/vmm/base/vmm_ranges_sleep.c (internal): the reserved ranges of
 * a pool as one participant of its sleep and wake (vmm_sleep_run.h,
 * vmm_ranges.h). An item is a run of committed pages of one range (all of a
 * range's runs share its tag, so a range sleeps, is kept or wakes whole);
 * sleep unmaps and releases the pages of the runs not kept and records them
 * in the range with their backups; wake maps fresh pages under them.
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_ranges.h"
#include "resources/vmm/base/vmm_sleep_run.h"

static gmr__vmm_ranges *ranges_of(void *ctx) { return (gmr__vmm_ranges *)ctx; }

static size_t first_page(const gmr__vmm_sleep_item *it) {
  const gmr__vmm_range *r = it->region;
  return (it->addr - r->base) / r->page_bytes;
}

static size_t page_count(const gmr__vmm_sleep_item *it) {
  return it->bytes / ((const gmr__vmm_range *)it->region)->page_bytes;
}

static gmr_status ranges_trim(void *ctx, gmr_failure *failure) {
  (void)ctx;
  (void)failure;
  return GMR_OK;
}

/* Count (list NULL) or list the items. */
static size_t list_items(gmr__vmm_ranges *g, bool asleep, uint64_t tag_mask,
                         gmr__vmm_sleep_item *list) {
  size_t n = 0;
  for (gmr__vmm_range *r = g->first; r != NULL; r = r->next) {
    if (r->asleep != asleep || ((tag_mask >> r->tag) & 1u) == 0) continue;
    if (asleep) {
      for (size_t k = 0; k < r->run_count; ++k, ++n) {
        if (list == NULL) continue;
        const gmr__vmm_range_run *run = &r->runs[k];
        list[n] = (gmr__vmm_sleep_item){r, r->base + run->first * r->page_bytes,
                                        run->count * r->page_bytes, r->tag, false,
                                        run->host, false};
      }
      continue;
    }
    for (size_t i = 0; i < r->page_count;) {
      if (!r->committed[i]) {
        i++;
        continue;
      }
      size_t j = i;
      while (j < r->page_count && r->committed[j]) j++;
      if (list != NULL) {
        list[n] = (gmr__vmm_sleep_item){r, r->base + i * r->page_bytes, (j - i) * r->page_bytes,
                                        r->tag, false, NULL, false};
      }
      n++;
      i = j;
    }
  }
  return n;
}

static gmr_status ranges_select(void *ctx, bool asleep, uint64_t tag_mask,
                                gmr__vmm_sleep_item **items, size_t *count) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  size_t n = list_items(g, asleep, tag_mask, NULL);
  *items = malloc((n + 1) * sizeof **items);
  *count = 0;
  if (*items == NULL) return GMR_ERR_OUT_OF_MEMORY;
  *count = list_items(g, asleep, tag_mask, *items);
  return GMR_OK;
}

/* Free the run lists sleep made for the items' ranges (before recording). */
static void drop_run_lists(gmr__vmm_sleep_item *items, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    gmr__vmm_range *r = items[i].region;
    free(r->runs);
    r->runs = NULL;
    r->run_count = 0;
  }
}

static void ranges_remap(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  for (size_t i = 0; i < count; ++i) {
    if (!items[i].keep) gmr__vmm_range_map_back(g, items[i].region, first_page(&items[i]),
                                                page_count(&items[i]));
  }
  drop_run_lists(items, count);
}

static gmr_status ranges_unmap(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                               gmr_failure *failure) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  /* Room for the runs each range will record, before anything is unmapped. */
  for (size_t i = 0; i < count; ++i) {
    gmr__vmm_range *r = items[i].region;
    if (items[i].keep || r->runs != NULL) continue;
    size_t n = 0;
    for (size_t j = i; j < count; ++j) n += items[j].region == r;
    r->runs = calloc(n, sizeof *r->runs);
    r->run_count = 0;
    if (r->runs == NULL) {
      drop_run_lists(items, count);
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "sleep: host memory ran out");
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    CUresult cu = gmr__vmm_range_unmap(g, items[i].region, first_page(&items[i]),
                                       page_count(&items[i]));
    if (cu != CUDA_SUCCESS) {
      gmr_status st =
          gmr__cu_fail(g->pool->vmm, failure, "cuMemUnmap", cu, "while going to sleep");
      ranges_remap(ctx, items, i);
      drop_run_lists(items, count);
      return st;
    }
  }
  return GMR_OK;
}

static CUresult ranges_release(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                               gmr_vmm_pool_host_kind host) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  CUresult refused = CUDA_SUCCESS;
  for (size_t i = 0; i < count; ++i) {
    if (items[i].keep) continue;
    gmr__vmm_range *r = items[i].region;
    CUresult cu = gmr__vmm_range_release(g, r, first_page(&items[i]), page_count(&items[i]));
    if (refused == CUDA_SUCCESS) refused = cu;
    r->runs[r->run_count++] =
        (gmr__vmm_range_run){first_page(&items[i]), page_count(&items[i]), items[i].host};
    r->asleep = true;
  }
  g->saved_host = host;
  return refused;
}

static void ranges_retry(void *ctx) { (void)gmr__vmm_ranges_retry(ranges_of(ctx), NULL); }

static void ranges_unmap_fresh(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  for (size_t i = count; i-- > 0;) {
    gmr__vmm_range *r = items[i].region;
    size_t first = first_page(&items[i]), n = page_count(&items[i]);
    for (size_t k = first; k < first + n; ++k) {
      (void)g->pool->vmm->unmap((CUdeviceptr)(r->base + k * r->page_bytes), r->page_bytes);
    }
    (void)gmr__vmm_range_release(g, r, first, n);
  }
}

static gmr_status ranges_map(void *ctx, gmr__vmm_sleep_item *items, size_t count,
                             gmr_failure *failure) {
  gmr__vmm_ranges *g = ranges_of(ctx);
  for (size_t i = 0; i < count; ++i) {
    const char *call = "cuMemCreate";
    CUresult cu =
        gmr__vmm_range_map_fresh(g, items[i].region, first_page(&items[i]), page_count(&items[i]),
                                 &call);
    if (cu != CUDA_SUCCESS) {
      ranges_unmap_fresh(ctx, items, i);
      return gmr__cu_fail(g->pool->vmm, failure, call, cu, "while waking a reserved range");
    }
  }
  return GMR_OK;
}

static void ranges_woken(void *ctx, gmr__vmm_sleep_item *items, size_t count) {
  (void)ctx;
  for (size_t i = 0; i < count; ++i) {
    gmr__vmm_range *r = items[i].region;
    r->asleep = false; /* the driver frees or keeps the backups */
  }
  drop_run_lists(items, count);
}

static const gmr__vmm_sleep_ops ranges_ops = {
    .trim = ranges_trim,
    .select = ranges_select,
    .unmap = ranges_unmap,
    .remap = ranges_remap,
    .release = ranges_release,
    .map = ranges_map,
    .unmap_fresh = ranges_unmap_fresh,
    .woken = ranges_woken,
    .retry = ranges_retry,
};

bool gmr__vmm_ranges_sleeper(gmr__vmm_ranges *g, gmr__vmm_sleeper *out) {
  if (g->first == NULL) return false;
  *out = (gmr__vmm_sleeper){&ranges_ops, g, &g->unreleased};
  return true;
}
