/*
 * resources/vmm/base/vmm_sleep_run.c (internal): sleep and wake, the
 * sequence and its rollbacks, for every VMM resource (vmm_sleep_run.h).
 */
#include "resources/vmm/base/vmm_sleep_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "gmr/device.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_ranges.h"

/* ---- options ------------------------------------------------------------------ */

/* Version 1 of the sleep options ended with save_tag_mask. */
#define SLEEP_OPTIONS_V1_BYTES \
  (offsetof(gmr_vmm_pool_sleep_options, save_tag_mask) + sizeof(uint64_t))
/* Version 2 ended with host. */
#define SLEEP_OPTIONS_V2_BYTES \
  (offsetof(gmr_vmm_pool_sleep_options, host) + sizeof(gmr_vmm_pool_host_kind))

gmr_status gmr__vmm_null_pool(gmr_failure *failure, const char *verb) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "gmr_vmm_pool_resource_%s: pool is NULL; pass the pool that "
                          "gmr_vmm_resource_create or gmr_vmm_pages_resource_create made",
                          verb);
}

/* The messages of the argument checks say what was given, what is needed
 * and how to get it. */
static gmr_status bad_header(gmr_failure *failure, const char *verb, size_t size,
                             uint32_t version, size_t v1_bytes) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "gmr_vmm_pool_resource_%s: options have size %zu and version %u; "
                          "needed: size >= %zu, version >= 1 (start from "
                          "GMR_VMM_POOL_%s_OPTIONS_INIT)",
                          verb, size, (unsigned)version, v1_bytes,
                          verb[0] == 's' ? "SLEEP" : "WAKE");
}

gmr_status gmr__vmm_sleep_options_read(const gmr_vmm_pool_sleep_options *in,
                                       gmr_vmm_pool_sleep_options *out, gmr_failure *failure) {
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  if (in != NULL) {
    if (in->size < SLEEP_OPTIONS_V1_BYTES || in->version < 1) {
      return bad_header(failure, "sleep", in->size, in->version, SLEEP_OPTIONS_V1_BYTES);
    }
    /* Read no more than the caller's struct holds, and no field of a later
     * version than it says. */
    size_t n = in->size < sizeof o ? in->size : sizeof o;
    if (in->version < 2 && n > SLEEP_OPTIONS_V1_BYTES) n = SLEEP_OPTIONS_V1_BYTES;
    if (in->version < 3 && n > SLEEP_OPTIONS_V2_BYTES) n = SLEEP_OPTIONS_V2_BYTES;
    /* Before version 3 the default host kind was pinned. */
    if (in->version < 2) o.host = GMR_VMM_POOL_HOST_PINNED;
    memcpy(&o, in, n);
    o.size = sizeof o;
    o.version = GMR_VMM_POOL_SLEEP_OPTIONS_VERSION;
    if (o.copy_threads > GMR__VMM_MAX_COPY_THREADS) {
      return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                              "gmr_vmm_pool_resource_sleep: copy_threads %u is above the most, "
                              "%u (0: the pool chooses)",
                              (unsigned)o.copy_threads, GMR__VMM_MAX_COPY_THREADS);
    }
    if (o.host != GMR_VMM_POOL_HOST_PINNED && o.host != GMR_VMM_POOL_HOST_PAGEABLE) {
      return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                              "gmr_vmm_pool_resource_sleep: host kind %d is none of "
                              "GMR_VMM_POOL_HOST_PINNED (0) and GMR_VMM_POOL_HOST_PAGEABLE (1)",
                              (int)o.host);
    }
  }
  *out = o;
  return GMR_OK;
}

gmr_status gmr__vmm_wake_options_read(const gmr_vmm_pool_wake_options *in,
                                      gmr_vmm_pool_wake_options *out, gmr_failure *failure) {
  gmr_vmm_pool_wake_options o = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  if (in != NULL) {
    if (in->size < sizeof o || in->version < 1) {
      return bad_header(failure, "wake", in->size, in->version, sizeof o);
    }
    o = *in;
  }
  *out = o;
  return GMR_OK;
}

gmr_status gmr__vmm_sleep_busy(gmr_failure *failure, size_t asleep_count, size_t asleep_bytes,
                               size_t saved_bytes) {
  return gmr__failure_set(failure, GMR_ERR_BUSY,
                          "vmm_pool is asleep already (%zu allocations, %zu bytes asleep, %zu "
                          "saved on the host): wake it before sleeping again",
                          asleep_count, asleep_bytes, saved_bytes);
}

gmr_status gmr__vmm_wake_not_asleep(gmr_failure *failure) {
  return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "gmr_vmm_pool_resource_wake: the pool is not asleep (never slept, or "
                          "woken already); nothing to wake");
}

/* ---- host copies -------------------------------------------------------------- */

/* The items of one participant. */
typedef struct item_set {
  gmr__vmm_sleep_item *items;
  size_t count;
} item_set;

/* Free every item's host copy (a refused one is kept by its participant),
 * or (`undo`, a failed sleep) give back to the kept backups those taken
 * from them. Returns the first refusal, or cudaSuccess. */
static cudaError_t drop_copies(gmr__vmm_host *h, const gmr__vmm_sleeper *parts,
                               gmr_vmm_pool_host_kind kind, item_set *sets, size_t n, bool undo) {
  cudaError_t refused = cudaSuccess;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) {
      gmr__vmm_sleep_item *it = &sets[i].items[j];
      if (it->host == NULL) continue;
      cudaError_t err = cudaSuccess;
      if (undo && it->from_kept) {
        gmr__vmm_backup_untake(h, parts[i].unreleased, kind, it->host, it->bytes);
      } else if (undo) {
        err = gmr__vmm_host_free(parts[i].unreleased, kind, it->host, it->bytes);
      } else {
        err = gmr__vmm_backup_done(h, parts[i].unreleased, kind, it->host, it->bytes);
      }
      if (refused == cudaSuccess) refused = err;
      it->host = NULL;
      it->from_kept = false;
    }
  }
  return refused;
}

static void free_sets(item_set *sets, size_t n) {
  for (size_t i = 0; i < n; ++i) free(sets[i].items);
  free(sets);
}

/* Every item with a host copy as a piece of a copy; *out NULL (and GMR_OK)
 * when there is none. */
static gmr_status pieces_of(const item_set *sets, size_t n, gmr__vmm_piece **out, size_t *count,
                            gmr_failure *failure) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) k += sets[i].items[j].host != NULL;
  }
  *out = NULL;
  *count = 0;
  if (k == 0) return GMR_OK;
  gmr__vmm_piece *p = malloc(k * sizeof *p);
  if (p == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "host memory ran out");
  k = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) {
      const gmr__vmm_sleep_item *it = &sets[i].items[j];
      if (it->host != NULL) p[k++] = (gmr__vmm_piece){(char *)it->addr, it->host, it->bytes};
    }
  }
  *out = p;
  *count = k;
  return GMR_OK;
}

/* Back up the items selected for saving (not kept, of a saved tag) in
 * backups of kind o->host and copy them. On failure no copy is kept (but
 * one cudaFreeHost refuses: its participant keeps it as unfreed); kept
 * backups taken are kept again. */
static gmr_status save_copies(gmr__vmm_host *h, const gmr__vmm_sleeper *parts,
                              const gmr_vmm_pool_sleep_options *o, item_set *sets, size_t n,
                              gmr_failure *failure) {
  gmr_status st = GMR_OK;
  for (size_t i = 0; i < n && st == GMR_OK; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) {
      gmr__vmm_sleep_item *it = &sets[i].items[j];
      bool save = o->save_all || ((o->save_tag_mask >> it->tag) & 1u) != 0;
      if (it->keep || !save || it->bytes == 0) continue;
      cudaError_t err = cudaSuccess;
      if (!gmr__vmm_backup_take(h, parts[i].unreleased, o->host, it->bytes, &it->host,
                                &it->from_kept, &err)) {
        it->host = NULL;
        const char *call = o->host == GMR_VMM_POOL_HOST_PINNED ? "cudaHostAlloc" : "mmap/malloc";
        st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                              "sleep: %s of %zu bytes for the backup of %#zx failed (%s); back "
                              "up fewer tags%s",
                              call, it->bytes, (size_t)it->addr, gmr_cuda_error_name((int)err),
                              o->host == GMR_VMM_POOL_HOST_PINNED ? " or ask for pageable backups"
                                                                  : "");
        if (failure != NULL) failure->cuda_error = (int)err;
        break;
      }
    }
  }
  gmr__vmm_piece *pieces = NULL;
  size_t count = 0;
  if (st == GMR_OK) st = pieces_of(sets, n, &pieces, &count, failure);
  if (st == GMR_OK) {
    st = gmr__vmm_copy(h, true, o->host, pieces, count, o->copy_threads, "sleep", failure);
  }
  free(pieces);
  if (st != GMR_OK) (void)drop_copies(h, parts, o->host, sets, n, true); /* the failure says why */
  return st;
}

/* Copy every item's host copy back to its device address. */
static gmr_status restore_copies(gmr__vmm_host *h, const item_set *sets, size_t n,
                                 gmr_failure *failure) {
  gmr__vmm_piece *pieces = NULL;
  size_t count = 0;
  gmr_status st = pieces_of(sets, n, &pieces, &count, failure);
  if (st == GMR_OK) {
    st = gmr__vmm_copy(h, false, h->kind, pieces, count, h->copy_threads, "wake", failure);
  }
  /* Pageable backups that go now give their pages back in parallel first. */
  if (st == GMR_OK && h->kind == GMR_VMM_POOL_HOST_PAGEABLE && !h->keep_backup) {
    gmr__vmm_discard(h, pieces, count, h->copy_threads);
  }
  free(pieces);
  return st;
}

/* Every participant's items: LIVE ones (sleep) or ASLEEP ones of tag_mask. */
static gmr_status select_all(const gmr__vmm_sleeper *parts, size_t n, bool asleep,
                             uint64_t tag_mask, item_set **out, gmr_failure *failure) {
  item_set *sets = calloc(n + 1, sizeof *sets);
  gmr_status st = sets == NULL ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
  for (size_t i = 0; i < n && st == GMR_OK; ++i) {
    st = parts[i].ops->select(parts[i].ctx, asleep, tag_mask, &sets[i].items, &sets[i].count);
  }
  if (st != GMR_OK) {
    if (sets != NULL) free_sets(sets, n);
    *out = NULL;
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the list of allocations ran out");
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) sets[i].items[j].from_kept = false;
  }
  *out = sets;
  return GMR_OK;
}

/* A refusal after which the call is done all the same, with what every
 * participant keeps. */
static gmr_status kept_fail(const gmr__vmm_sleeper *parts, size_t n, gmr_failure *failure,
                            const char *call, const char *code_name, int code, const char *done) {
  size_t device_bytes = 0, host_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    device_bytes += parts[i].unreleased->handles.bytes;
    host_bytes += parts[i].unreleased->hosts.bytes;
  }
  return gmr__vmm_unreleased_fail(failure, call, code_name, code, done, device_bytes, host_bytes);
}

/* The resource's participants and the ranges' (if any), in a new array. */
static gmr__vmm_sleeper *with_ranges(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                                     size_t n, size_t *count) {
  gmr__vmm_sleeper *all = malloc((n + 1) * sizeof *all);
  if (all == NULL) return NULL;
  if (n > 0) memcpy(all, parts, n * sizeof *all);
  *count = n + (gmr__vmm_ranges_sleeper(pool->ranges, &all[n]) ? 1 : 0);
  return all;
}

/* ---- sleep -------------------------------------------------------------------- */

static gmr_status synchronize(const gmr__cuda_ops *cuda, gmr_failure *failure) {
  cudaError_t err = cuda->device_synchronize();
  if (err == cudaSuccess) return GMR_OK;
  gmr_status st = gmr__cuda_fail(failure, "cudaDeviceSynchronize", err);
  if (st == GMR_ERR_CAPTURE_UNSAFE) {
    (void)gmr__failure_set(failure, st,
                           "sleep during a CUDA graph capture: cudaDeviceSynchronize refused "
                           "(%s); end the capture, then sleep",
                           gmr_cuda_error_name((int)err));
    if (failure != NULL) failure->cuda_error = (int)err;
  }
  return st;
}

/* Whether any item is to be saved. */
static bool any_saved(const gmr_vmm_pool_sleep_options *o, const item_set *sets, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) {
      const gmr__vmm_sleep_item *it = &sets[i].items[j];
      if (!it->keep && it->bytes > 0 && (o->save_all || ((o->save_tag_mask >> it->tag) & 1u)))
        return true;
    }
  }
  return false;
}

static gmr_status sleep_parts(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                              size_t part_count, const gmr_vmm_pool_sleep_options *o,
                              gmr_failure *failure, bool *asleep) {
  gmr__vmm_host *h = pool->host;
  const gmr__cuda_ops *cuda = pool->cuda;
  gmr_status st = synchronize(cuda, failure);
  /* What the driver refused of the host side and of ranges (freed ones
   * too): asked again, best effort. */
  (void)gmr__vmm_unreleased_retry(&h->unreleased, &(size_t){0}, &(size_t){0}, NULL);
  if (st == GMR_OK) (void)gmr__vmm_ranges_retry(pool->ranges, NULL);
  for (size_t i = 0; i < part_count && st == GMR_OK; ++i) {
    st = parts[i].ops->trim(parts[i].ctx, failure);
  }
  item_set *sets = NULL;
  if (st == GMR_OK) st = select_all(parts, part_count, false, UINT64_MAX, &sets, failure);
  for (size_t i = 0; st == GMR_OK && i < part_count; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) {
      sets[i].items[j].keep = ((o->keep_tag_mask >> sets[i].items[j].tag) & 1u) != 0;
      sets[i].items[j].host = NULL;
    }
  }
  gmr__vmm_host_made made;
  memset(&made, 0, sizeof made);
  bool prepared = false;
  if (st == GMR_OK && any_saved(o, sets, part_count)) {
    st = gmr__vmm_host_prepare(h, o->host, o->staging_bytes, &made, failure);
    prepared = st == GMR_OK;
  }
  if (st == GMR_OK) st = save_copies(h, parts, o, sets, part_count, failure);
  size_t unmapped = 0; /* parts[0..unmapped) unmapped */
  while (st == GMR_OK && unmapped < part_count) {
    const gmr__vmm_sleeper *q = &parts[unmapped];
    st = q->ops->unmap(q->ctx, sets[unmapped].items, sets[unmapped].count, failure);
    if (st == GMR_OK) unmapped++;
  }
  if (st != GMR_OK && sets != NULL) {
    for (size_t i = unmapped; i-- > 0;) {
      parts[i].ops->remap(parts[i].ctx, sets[i].items, sets[i].count);
    }
    (void)drop_copies(h, parts, o->host, sets, part_count, true); /* the failure says why */
    if (prepared) gmr__vmm_host_settle(h, &made, false);
  } else if (st == GMR_OK) {
    /* Past the point of return: every participant sleeps; a refused
     * release (the memory is kept) is the answer. */
    CUresult refused = CUDA_SUCCESS;
    const gmr__cuda_vmm_ops *vmm = NULL;
    for (size_t i = 0; i < part_count; ++i) {
      CUresult cu = parts[i].ops->release(parts[i].ctx, sets[i].items, sets[i].count, o->host);
      if (refused == CUDA_SUCCESS && cu != CUDA_SUCCESS) {
        refused = cu;
        vmm = parts[i].unreleased->vmm;
      }
    }
    *asleep = true;
    if (prepared) gmr__vmm_host_settle(h, &made, true);
    (void)gmr__vmm_host_drop_kept(h); /* not reused: the sizes changed */
    h->kind = o->host;
    h->keep_backup = o->keep_backup;
    h->copy_threads = o->copy_threads;
    if (refused != CUDA_SUCCESS) {
      st = kept_fail(parts, part_count, failure, "cuMemRelease", vmm->error_name(refused),
                     (int)refused, "asleep all the same");
    }
  }
  if (sets != NULL) free_sets(sets, part_count);
  return st;
}

gmr_status gmr__vmm_sleep_run(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                              size_t part_count, const gmr_vmm_pool_sleep_options *o,
                              gmr_failure *failure, bool *asleep) {
  *asleep = false;
  size_t n = 0;
  gmr__vmm_sleeper *all = with_ranges(pool, parts, part_count, &n);
  if (all == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "host memory ran out");
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(pool->cuda, pool->device, &saved_device);
  gmr_status st = err == cudaSuccess ? sleep_parts(pool, all, n, o, failure, asleep)
                                     : gmr__cuda_fail(failure, "cudaSetDevice", err);
  if (err == cudaSuccess) gmr__cuda_device_leave(pool->cuda, saved_device);
  free(all);
  return st;
}

/* ---- wake --------------------------------------------------------------------- */

/* Say, after the device refused memory, how much this wake needs. */
static void add_need(gmr_failure *failure, const item_set *sets, size_t n) {
  if (failure == NULL) return;
  size_t need = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < sets[i].count; ++j) need += sets[i].items[j].bytes;
  }
  size_t used = strlen(failure->message);
  if (used + 1 < sizeof failure->message) {
    snprintf(failure->message + used, sizeof failure->message - used,
             "; the allocations to wake take %zu bytes: free device memory, then wake again",
             need);
  }
}

static gmr_status wake_parts(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                             size_t part_count, const gmr_vmm_pool_wake_options *o,
                             gmr_failure *failure, bool *woken) {
  gmr__vmm_host *h = pool->host;
  uint64_t mask = o->wake_all ? UINT64_MAX : o->wake_tag_mask;
  item_set *sets = NULL;
  gmr_status st = select_all(parts, part_count, true, mask, &sets, failure);
  if (st != GMR_OK) return st;
  /* What the driver refused before may go now, and the wake needs room. */
  for (size_t i = 0; i < part_count; ++i) parts[i].ops->retry(parts[i].ctx);
  (void)gmr__vmm_unreleased_retry(&h->unreleased, &(size_t){0}, &(size_t){0}, NULL);
  (void)gmr__vmm_ranges_retry(pool->ranges, NULL);
  size_t mapped = 0; /* parts[0..mapped) mapped */
  while (st == GMR_OK && mapped < part_count) {
    const gmr__vmm_sleeper *q = &parts[mapped];
    st = q->ops->map(q->ctx, sets[mapped].items, sets[mapped].count, failure);
    if (st == GMR_OK) mapped++;
  }
  if (st == GMR_ERR_OUT_OF_MEMORY) add_need(failure, sets, part_count);
  if (st == GMR_OK) st = restore_copies(h, sets, part_count, failure);
  if (st != GMR_OK) {
    /* Nothing of this call stays mapped; every host copy stays. */
    for (size_t i = mapped; i-- > 0;) {
      parts[i].ops->unmap_fresh(parts[i].ctx, sets[i].items, sets[i].count);
    }
  } else {
    for (size_t i = 0; i < part_count; ++i) {
      parts[i].ops->woken(parts[i].ctx, sets[i].items, sets[i].count);
    }
    *woken = true;
    cudaError_t refused = drop_copies(h, parts, h->kind, sets, part_count, false);
    if (refused != cudaSuccess) {
      st = kept_fail(parts, part_count, failure, "cudaFreeHost", gmr_cuda_error_name((int)refused),
                     (int)refused, "woken all the same");
    }
  }
  free_sets(sets, part_count);
  return st;
}

gmr_status gmr__vmm_wake_run(gmr_vmm_pool_resource *pool, const gmr__vmm_sleeper *parts,
                             size_t part_count, const gmr_vmm_pool_wake_options *o,
                             gmr_failure *failure, bool *woken) {
  *woken = false;
  size_t n = 0;
  gmr__vmm_sleeper *all = with_ranges(pool, parts, part_count, &n);
  if (all == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "host memory ran out");
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(pool->cuda, pool->device, &saved_device);
  gmr_status st = err == cudaSuccess ? wake_parts(pool, all, n, o, failure, woken)
                                     : gmr__cuda_fail(failure, "cudaSetDevice", err);
  if (err == cudaSuccess) gmr__cuda_device_leave(pool->cuda, saved_device);
  free(all);
  return st;
}
