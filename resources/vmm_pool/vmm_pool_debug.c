/*
 * resources/vmm_pool/vmm_pool_debug.c: observability of the VMM pool:
 * statistics, the region list, the text dump and the invariant check.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_pool_internal.h"

/* The version-1 stats struct: every field up to wake_count. */
#define STATS_V1_BYTES (offsetof(gmr_vmm_pool_resource_stats, wake_count) + sizeof(uint64_t))

gmr_status gmr_vmm_pool_resource_get_stats(gmr_vmm_pool_resource *pool,
                                           gmr_vmm_pool_resource_stats *out) {
  if (pool == NULL || out == NULL || out->size < STATS_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_resource *p = pool;
  gmr_vmm_pool_resource_stats s;
  memset(&s, 0, sizeof s);
  s.size = out->size;
  s.version = out->version;
  s.page_bytes = p->page_bytes;
  s.granularity_bytes = p->granularity_bytes;
  if (p->fine != NULL) {
    gmr__vmm_shards_stats(p, &s);
    memcpy(out, &s, out->size < sizeof s ? out->size : sizeof s);
    return GMR_OK;
  }
  vmf_engine *sp = gmr__vmm_small(p, false);
  if (sp != NULL) gmr__vmf_fill_stats(sp, &s); /* the small_live_ fields */
  pthread_mutex_lock(&p->lock);
  s.page_bytes = p->page_bytes;
  s.granularity_bytes = p->granularity_bytes;
  s.mapped_bytes = gmr__vmm_held_bytes(p);
  s.peak_mapped_bytes = p->peak_held_pages * p->page_bytes;
  for (const vmm_root *r = p->roots; r != NULL; r = r->next) s.reserved_bytes += r->bytes;
  s.va_chunk_count = p->root_count;
  s.live_bytes = p->live_bytes;
  s.live_count = p->live_count;
  s.free_bytes = p->free_list.bytes;
  s.free_region_count = p->free_list.count;
  s.hole_bytes = p->hole_list.bytes;
  s.hole_count = p->hole_list.count;
  s.zombie_bytes = p->zombie_list.bytes;
  s.zombie_count = p->zombie_list.count;
  s.asleep_bytes = p->asleep_bytes;
  s.asleep_count = p->asleep_count;
  s.saved_bytes = p->saved_bytes;
  s.unreleased_bytes = p->unreleased.handles.bytes;
  s.unreleased_handle_count = p->unreleased.handles.count;
  s.unfreed_host_bytes = p->unreleased.hosts.bytes;
  s.unfreed_host_count = p->unreleased.hosts.count;
  s.page_create_count = p->counts.page_create;
  s.page_release_count = p->counts.page_release;
  s.map_count = p->counts.map;
  s.unmap_count = p->counts.unmap;
  s.defrag_count = p->counts.defrag;
  s.remapped_page_count = p->counts.remapped_pages;
  s.extend_count = p->counts.extend;
  s.event_record_count = p->counts.event_record;
  s.event_query_count = p->counts.event_query;
  s.stream_wait_count = p->counts.stream_wait;
  s.event_synchronize_count = p->counts.event_synchronize;
  s.sleep_count = p->counts.sleep;
  s.wake_count = p->counts.wake;
  pthread_mutex_unlock(&p->lock);
  memcpy(out, &s, out->size < sizeof s ? out->size : sizeof s);
  return GMR_OK;
}

static void describe(const vmm_region *r, gmr_vmm_pool_region *out) {
  out->addr = (void *)r->addr;
  out->bytes = r->bytes;
  out->kind = (gmr_vmm_pool_region_kind)r->state;
  out->stream = r->state == VMM_FREE || r->state == VMM_LIVE ? r->stream : NULL;
  out->pending = (r->state == VMM_FREE || r->state == VMM_ZOMBIE) &&
                 ((r->event != NULL && !r->event->complete) || r->unordered ||
                  gmr__vmm_region_held(r));
  out->internal = r->internal;
  out->tag = r->state == VMM_LIVE || r->state == VMM_ASLEEP ? r->tag : 0;
  out->va_chunk_index = r->root->index;
}

gmr_status gmr_vmm_pool_resource_get_regions(gmr_vmm_pool_resource *pool, gmr_vmm_pool_region *out,
                                             size_t capacity, size_t *count) {
  if (pool == NULL || count == NULL || (out == NULL && capacity > 0)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (pool->fine != NULL) {
    *count = gmr__vmm_shards_regions(pool, out, capacity);
    return GMR_OK;
  }
  pthread_mutex_lock(&pool->lock);
  size_t n = 0;
  for (const vmm_root *root = pool->roots; root != NULL; root = root->next) {
    for (const vmm_region *r = root->first; r != NULL; r = r->next) {
      if (n < capacity) describe(r, &out[n]);
      n++;
    }
  }
  pthread_mutex_unlock(&pool->lock);
  *count = n;
  return GMR_OK;
}

/* ---- dump ----------------------------------------------------------------- */

typedef struct text {
  char *buf;
  size_t bytes;
  size_t used; /* what the whole text needs, NUL excluded */
} text;

static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = t->used < t->bytes ? t->bytes - t->used : 0;
  int n = vsnprintf(room > 0 ? t->buf + t->used : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) t->used += (size_t)n;
}

static const char *const state_names[] = {"hole", "free", "live", "zombie", "asleep"};

/* FINE placement: every region, from the region list. */
static void dump_fine(gmr_vmm_pool_resource *pool, text *t) {
  size_t n = 0;
  if (gmr_vmm_pool_resource_get_regions(pool, NULL, 0, &n) != GMR_OK) return;
  gmr_vmm_pool_region *list = malloc((n + 16) * sizeof *list);
  if (list == NULL) {
    put(t, "(no host memory for the region list)\n");
    return;
  }
  size_t got = 0;
  if (gmr_vmm_pool_resource_get_regions(pool, list, n + 16, &got) == GMR_OK) {
    size_t chunk = SIZE_MAX;
    for (size_t i = 0; i < got && i < n + 16; ++i) {
      const gmr_vmm_pool_region *d = &list[i];
      if (d->va_chunk_index != chunk) {
        chunk = d->va_chunk_index;
        put(t, "VA chunk %zu\n", chunk);
      }
      put(t, "  %#zx %12zu %s", (size_t)d->addr, d->bytes, state_names[d->kind]);
      if (d->kind == GMR_VMM_POOL_REGION_FREE || d->kind == GMR_VMM_POOL_REGION_LIVE) {
        put(t, " stream %p", (void *)d->stream);
      }
      if (d->pending) put(t, " pending");
      if (d->kind == GMR_VMM_POOL_REGION_LIVE || d->kind == GMR_VMM_POOL_REGION_ASLEEP) {
        put(t, " tag %u", d->tag);
      }
      put(t, "\n");
    }
  }
  free(list);
}

gmr_status gmr_vmm_pool_resource_dump(gmr_vmm_pool_resource *pool, char *buf, size_t buf_bytes,
                                      size_t *needed_bytes) {
  if (pool == NULL || (buf == NULL && buf_bytes > 0)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  gmr_status st = gmr_vmm_pool_resource_get_stats(pool, &s);
  if (st != GMR_OK) return st;
  text t = {buf, buf_bytes, 0};
  if (buf_bytes > 0) buf[0] = '\0';
  put(&t, "vmm_pool: device %d, page %zu bytes, granularity %zu bytes\n", pool->device,
      s.page_bytes, s.granularity_bytes);
  put(&t, "mapped %zu bytes (peak %zu), reserved %zu bytes in %zu VA chunks\n", s.mapped_bytes,
      s.peak_mapped_bytes, s.reserved_bytes, s.va_chunk_count);
  put(&t,
      "live %zu bytes in %zu, small %zu bytes in %zu, free %zu bytes in %zu, holes %zu bytes in "
      "%zu, zombies %zu bytes in %zu, asleep %zu bytes in %zu (%zu saved)\n",
      s.live_bytes, s.live_count, s.small_live_bytes, s.small_live_count, s.free_bytes,
      s.free_region_count, s.hole_bytes, s.hole_count, s.zombie_bytes, s.zombie_count,
      s.asleep_bytes, s.asleep_count, s.saved_bytes);
  if (s.unreleased_handle_count + s.unfreed_host_count > 0) {
    put(&t, "unreleased %zu bytes in %zu (cuMemRelease refused), unfreed %zu pinned bytes in %zu "
        "(cudaFreeHost refused)\n", s.unreleased_bytes, s.unreleased_handle_count,
        s.unfreed_host_bytes, s.unfreed_host_count);
  }
  if (pool->fine != NULL) {
    dump_fine(pool, &t);
    if (needed_bytes != NULL) *needed_bytes = t.used + 1;
    return GMR_OK;
  }
  pthread_mutex_lock(&pool->lock);
  for (const vmm_root *root = pool->roots; root != NULL; root = root->next) {
    put(&t, "VA chunk %zu at %#zx, %zu bytes\n", root->index, (size_t)root->base, root->bytes);
    for (const vmm_region *r = root->first; r != NULL; r = r->next) {
      gmr_vmm_pool_region d;
      describe(r, &d);
      put(&t, "  %#zx %12zu %s", (size_t)r->addr, r->bytes, state_names[r->state]);
      if (r->state == VMM_FREE || r->state == VMM_LIVE) put(&t, " stream %p", (void *)d.stream);
      if (d.pending) put(&t, " pending");
      if (r->state == VMM_LIVE || r->state == VMM_ASLEEP) {
        put(&t, " tag %u%s%s", r->tag, r->internal ? " small-pool chunk" : "",
            r->saved != NULL ? " saved" : "");
      }
      put(&t, "\n");
    }
  }
  pthread_mutex_unlock(&pool->lock);
  if (needed_bytes != NULL) *needed_bytes = t.used + 1;
  return GMR_OK;
}

/* ---- invariants ------------------------------------------------------------- */

static bool mapped_state(vmm_state s) { return s == VMM_FREE || s == VMM_LIVE || s == VMM_ZOMBIE; }

/* Walk one root; adds what it finds to the sums. `owners` collects the
 * handles of free and live pages (each physical page once). */
static gmr_status check_root(const gmr_vmm_pool_resource *p, const vmm_root *root,
                             gmr__u64_map *owners, size_t sums[5][2], size_t *live_map_hits,
                             char *err, size_t err_bytes) {
  uintptr_t at = root->base;
  const vmm_region *prev = NULL;
  for (const vmm_region *r = root->first; r != NULL; prev = r, r = r->next) {
    if (r->root != root || r->prev != prev || r->addr != at || r->bytes == 0 ||
        r->bytes % p->page_bytes != 0) {
      return gmr__vmm_violation(err, err_bytes, "region at %#zx breaks the tiling of VA chunk %zu",
                                (size_t)r->addr, root->index);
    }
    if (prev != NULL && prev->state == VMM_HOLE && r->state == VMM_HOLE) {
      return gmr__vmm_violation(err, err_bytes, "two holes touch at %#zx", (size_t)r->addr);
    }
    if (prev != NULL && prev->state == VMM_FREE && r->state == VMM_FREE &&
        prev->stream == r->stream && !gmr__vmm_region_held(prev) && !gmr__vmm_region_held(r) &&
        prev->unordered == r->unordered) {
      return gmr__vmm_violation(err, err_bytes, "free regions of one stream touch unmerged at %#zx",
                                (size_t)r->addr);
    }
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->page_bytes) {
      CUmemGenericAllocationHandle h = *gmr__vmm_page_slot(root, a);
      if (mapped_state(r->state) != (h != 0)) {
        return gmr__vmm_violation(err, err_bytes, "%s region at %#zx %s a page at %#zx",
                                  state_names[r->state], (size_t)r->addr, h != 0 ? "has" : "lacks",
                                  (size_t)a);
      }
      if (h == 0 || r->state == VMM_ZOMBIE) continue;
      if (gmr__u64_map_get(owners, (uint64_t)h, NULL)) {
        return gmr__vmm_violation(
            err, err_bytes, "physical page mapped at %#zx is also owned elsewhere", (size_t)a);
      }
      if (!gmr__u64_map_put(owners, (uint64_t)h, (uint64_t)a)) {
        return gmr__vmm_violation(err, err_bytes, "host memory ran out during the check");
      }
    }
    if (r->state == VMM_LIVE || r->state == VMM_ASLEEP) {
      uint64_t v = 0;
      if (!gmr__u64_map_get(&p->live, (uint64_t)r->addr, &v) || v != (uint64_t)(uintptr_t)r) {
        return gmr__vmm_violation(err, err_bytes, "live region at %#zx is not in the live map",
                                  (size_t)r->addr);
      }
      (*live_map_hits)++;
    }
    sums[r->state][0]++;
    sums[r->state][1] += r->bytes;
    at += r->bytes;
  }
  if (at != root->base + root->bytes) {
    return gmr__vmm_violation(err, err_bytes, "VA chunk %zu is not tiled to its end", root->index);
  }
  return GMR_OK;
}

static gmr_status check_list(const vmm_list *l, vmm_state state, size_t sums[5][2],
                             char *err, size_t err_bytes) {
  size_t n = 0, bytes = 0;
  for (const vmm_region *r = l->head; r != NULL; r = r->list_next) {
    if (r->state != state) {
      return gmr__vmm_violation(err, err_bytes, "a %s region is on the %s list",
                                state_names[r->state], state_names[state]);
    }
    n++;
    bytes += r->bytes;
  }
  if (n != l->count || bytes != l->bytes || n != sums[state][0] || bytes != sums[state][1]) {
    return gmr__vmm_violation(err, err_bytes, "the %s list disagrees with the regions",
                              state_names[state]);
  }
  return GMR_OK;
}

/* Every zombie page must double-map a page some free or live region owns. */
static gmr_status check_zombies(const gmr_vmm_pool_resource *p, const gmr__u64_map *owners,
                                char *err, size_t err_bytes) {
  for (const vmm_region *z = p->zombie_list.head; z != NULL; z = z->list_next) {
    for (uintptr_t a = z->addr; a < z->addr + z->bytes; a += p->page_bytes) {
      if (!gmr__u64_map_get(owners, (uint64_t)*gmr__vmm_page_slot(z->root, a), NULL)) {
        return gmr__vmm_violation(err, err_bytes, "zombie page at %#zx maps no page of the pool",
                                  (size_t)a);
      }
    }
  }
  return GMR_OK;
}

/* Every page and pinned copy alive has its slot among the unreleased, so
 * that a refused release or free can keep it (vmm_unreleased.h). */
static gmr_status check_unreleased(const gmr_vmm_pool_resource *p, char *err, size_t err_bytes) {
  const gmr__vmm_unreleased *u = &p->unreleased;
  size_t pinned = 0;
  size_t cursor = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&p->live, &cursor, &key, &value)) {
    const vmm_region *r = (const vmm_region *)(uintptr_t)value;
    pinned += r->saved != NULL && p->saved_host == GMR_VMM_POOL_HOST_PINNED;
  }
  if (u->handles.promised != p->mapped_pages + u->handles.count ||
      u->hosts.promised != pinned + u->hosts.count) {
    return gmr__vmm_violation(err, err_bytes,
                              "unreleased slots: %zu for pages (%zu mapped, %zu kept), %zu for "
                              "pinned copies (%zu held, %zu kept)",
                              u->handles.promised, p->mapped_pages, u->handles.count,
                              u->hosts.promised, pinned, u->hosts.count);
  }
  return GMR_OK;
}

gmr_status gmr__vmm_pool_check_books(gmr_resource *self, char *err, size_t err_bytes) {
  if (self == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  if (p->fine != NULL) return gmr__vmm_shards_check(p, err, err_bytes);
  vmf_engine *engine = gmr__vmm_small(p, false);
  if (engine != NULL) {
    gmr__vmf_lock(engine);
    gmr_status st = gmr__vmf_check(engine, err, err_bytes);
    gmr__vmf_unlock(engine);
    if (st != GMR_OK || p->fine != NULL) return st;
  }
  gmr__u64_map owners = GMR__U64_MAP_INIT;
  size_t sums[5][2] = {{0}};
  size_t live_hits = 0, roots = 0, internal = 0;
  pthread_mutex_lock(&p->lock);
  gmr_status st = GMR_OK;
  for (const vmm_root *root = p->roots; root != NULL && st == GMR_OK; root = root->next) {
    if (root->index != roots++) st = gmr__vmm_violation(err, err_bytes, "VA chunks out of order");
    if (st == GMR_OK) st = check_root(p, root, &owners, sums, &live_hits, err, err_bytes);
    for (const vmm_region *r = root->first; r != NULL && st == GMR_OK; r = r->next) {
      internal += (r->state == VMM_LIVE || r->state == VMM_ASLEEP) && r->internal;
    }
  }
  if (st == GMR_OK && roots != p->root_count) {
    st = gmr__vmm_violation(err, err_bytes, "VA chunk count");
  }
  if (st == GMR_OK) st = check_list(&p->free_list, VMM_FREE, sums, err, err_bytes);
  if (st == GMR_OK) st = check_list(&p->hole_list, VMM_HOLE, sums, err, err_bytes);
  if (st == GMR_OK) st = check_list(&p->zombie_list, VMM_ZOMBIE, sums, err, err_bytes);
  if (st == GMR_OK) st = check_zombies(p, &owners, err, err_bytes);
  if (st == GMR_OK && owners.count != p->mapped_pages) {
    st = gmr__vmm_violation(err, err_bytes, "%zu pages are owned but %zu counted as mapped",
                            owners.count, p->mapped_pages);
  }
  if (st == GMR_OK) st = check_unreleased(p, err, err_bytes);
  if (st == GMR_OK && (live_hits != p->live.count || sums[VMM_LIVE][0] != p->live_count ||
                       sums[VMM_LIVE][1] != p->live_bytes || sums[VMM_ASLEEP][0] != p->asleep_count ||
                       sums[VMM_ASLEEP][1] != p->asleep_bytes || internal != p->internal_count)) {
    st = gmr__vmm_violation(err, err_bytes, "live and asleep counters disagree with the regions");
  }
  pthread_mutex_unlock(&p->lock);
  gmr__u64_map_clear(&owners);
  return st;
}
