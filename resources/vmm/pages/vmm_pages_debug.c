/*
 * resources/vmm/pages/vmm_pages_debug.c (internal): what vmm_pages tells
 * about itself (the VMM base's operations, vmm/base/vmm_base.h):
 * statistics, the region list, its lines of the dump, and the invariant
 * check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"

void gmr__vmm_pages_stats(gmr_vmm_pool_resource *pool, gmr_vmm_pool_resource_stats *s) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  vmf_engine *sp = gmr__vmm_small(p, false);
  if (sp != NULL) { /* the small_live_ fields: its blocks */
    gmr_vmm_pool_resource_stats small;
    memset(&small, 0, sizeof small);
    gmr__vmf_fill_stats(sp, &small);
    s->small_live_bytes = small.live_bytes;
    s->small_live_count = small.live_count;
  }
  pthread_mutex_lock(&pool->lock);
  s->mapped_bytes = gmr__vmm_held_bytes(p);
  s->peak_mapped_bytes = p->peak_held_pages * pool->page_bytes;
  for (const vmm_root *r = p->roots; r != NULL; r = r->next) s->reserved_bytes += r->bytes;
  s->va_chunk_count = p->root_count;
  s->live_bytes = p->live_bytes;
  s->live_count = p->live_count;
  s->free_bytes = p->free_list.bytes;
  s->free_region_count = p->free_list.count;
  s->hole_bytes = p->hole_list.bytes;
  s->hole_count = p->hole_list.count;
  s->zombie_bytes = p->zombie_list.bytes;
  s->zombie_count = p->zombie_list.count;
  s->asleep_bytes = p->asleep_bytes;
  s->asleep_count = p->asleep_count;
  s->saved_bytes = p->saved_bytes;
  s->unreleased_bytes = p->unreleased.handles.bytes;
  s->unreleased_handle_count = p->unreleased.handles.count;
  s->unfreed_host_bytes = p->unreleased.hosts.bytes;
  s->unfreed_host_count = p->unreleased.hosts.count;
  s->page_create_count = p->counts.page_create;
  s->page_release_count = p->counts.page_release;
  s->map_count = p->counts.map;
  s->unmap_count = p->counts.unmap;
  s->defrag_count = p->counts.defrag;
  s->remapped_page_count = p->counts.remapped_pages;
  s->extend_count = p->counts.extend;
  s->event_record_count = p->counts.event_record;
  s->event_query_count = p->counts.event_query;
  s->stream_wait_count = p->counts.stream_wait;
  s->event_synchronize_count = p->counts.event_synchronize;
  s->sleep_count = p->counts.sleep;
  s->wake_count = p->counts.wake;
  pthread_mutex_unlock(&pool->lock);
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

size_t gmr__vmm_pages_regions(gmr_vmm_pool_resource *pool, gmr_vmm_pool_region *out,
                              size_t capacity) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pthread_mutex_lock(&pool->lock);
  size_t n = 0;
  for (const vmm_root *root = p->roots; root != NULL; root = root->next) {
    for (const vmm_region *r = root->first; r != NULL; r = r->next) {
      if (n < capacity) describe(r, &out[n]);
      n++;
    }
  }
  pthread_mutex_unlock(&pool->lock);
  return n;
}

/* Every VA chunk with its regions, each region with what the list does not
 * say (a chunk of the small path, a saved copy). */
void gmr__vmm_pages_dump_regions(gmr_vmm_pool_resource *pool, gmr__vmm_text *t) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pthread_mutex_lock(&pool->lock);
  for (const vmm_root *root = p->roots; root != NULL; root = root->next) {
    gmr__vmm_put(t, "VA chunk %zu at %#zx, %zu bytes\n", root->index, (size_t)root->base,
                 root->bytes);
    for (const vmm_region *r = root->first; r != NULL; r = r->next) {
      gmr_vmm_pool_region d;
      describe(r, &d);
      gmr__vmm_put(t, "  %#zx %12zu %s", (size_t)r->addr, r->bytes,
                   gmr__vmm_region_kind_names[r->state]);
      if (r->state == VMM_FREE || r->state == VMM_LIVE) {
        gmr__vmm_put(t, " stream %p", (void *)d.stream);
      }
      if (d.pending) gmr__vmm_put(t, " pending");
      if (r->state == VMM_LIVE || r->state == VMM_ASLEEP) {
        gmr__vmm_put(t, " tag %u%s%s", r->tag, r->internal ? " small-pool chunk" : "",
                     r->saved != NULL ? " saved" : "");
      }
      gmr__vmm_put(t, "\n");
    }
  }
  pthread_mutex_unlock(&pool->lock);
}

/* ---- invariants ------------------------------------------------------------- */

static bool mapped_state(vmm_state s) { return s == VMM_FREE || s == VMM_LIVE || s == VMM_ZOMBIE; }

/* Walk one root; adds what it finds to the sums. `owners` collects the
 * handles of free and live pages (each physical page once). */
static gmr_status check_root(const vmm_pages *p, const vmm_root *root,
                             gmr__u64_map *owners, size_t sums[5][2], size_t *live_map_hits,
                             char *err, size_t err_bytes) {
  uintptr_t at = root->base;
  const vmm_region *prev = NULL;
  for (const vmm_region *r = root->first; r != NULL; prev = r, r = r->next) {
    if (r->root != root || r->prev != prev || r->addr != at || r->bytes == 0 ||
        r->bytes % p->pool.page_bytes != 0) {
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
    for (uintptr_t a = r->addr; a < r->addr + r->bytes; a += p->pool.page_bytes) {
      CUmemGenericAllocationHandle h = *gmr__vmm_page_slot(root, a);
      if (mapped_state(r->state) != (h != 0)) {
        return gmr__vmm_violation(err, err_bytes, "%s region at %#zx %s a page at %#zx",
                                  gmr__vmm_region_kind_names[r->state], (size_t)r->addr,
                                  h != 0 ? "has" : "lacks",
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
                                gmr__vmm_region_kind_names[r->state],
                                gmr__vmm_region_kind_names[state]);
    }
    n++;
    bytes += r->bytes;
  }
  if (n != l->count || bytes != l->bytes || n != sums[state][0] || bytes != sums[state][1]) {
    return gmr__vmm_violation(err, err_bytes, "the %s list disagrees with the regions",
                              gmr__vmm_region_kind_names[state]);
  }
  return GMR_OK;
}

/* Every zombie page must double-map a page some free or live region owns. */
static gmr_status check_zombies(const vmm_pages *p, const gmr__u64_map *owners,
                                char *err, size_t err_bytes) {
  for (const vmm_region *z = p->zombie_list.head; z != NULL; z = z->list_next) {
    for (uintptr_t a = z->addr; a < z->addr + z->bytes; a += p->pool.page_bytes) {
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
static gmr_status check_unreleased(const vmm_pages *p, char *err, size_t err_bytes) {
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

gmr_status gmr__vmm_pages_check_books(gmr_resource *self, char *err, size_t err_bytes) {
  if (self == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  vmm_pages *p = (vmm_pages *)self;
  vmf_engine *engine = gmr__vmm_small(p, false);
  if (engine != NULL) {
    gmr__vmf_lock(engine);
    gmr_status st = gmr__vmf_check(engine, err, err_bytes);
    gmr__vmf_unlock(engine);
    if (st != GMR_OK) return st;
  }
  gmr__u64_map owners = GMR__U64_MAP_INIT;
  size_t sums[5][2] = {{0}};
  size_t live_hits = 0, roots = 0, internal = 0;
  pthread_mutex_lock(&p->pool.lock);
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
  pthread_mutex_unlock(&p->pool.lock);
  gmr__u64_map_clear(&owners);
  if (st == GMR_OK) st = gmr__vmm_base_check(&p->pool, err, err_bytes);
  return st;
}

