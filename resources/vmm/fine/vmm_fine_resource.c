/*
 * resources/vmm/fine/vmm_fine_resource.c: `vmm` (gmr/vmm_resource.h):
 * create, destroy and the vtable, every request handed to the shards
 * (vmm_fine_shards.c).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/failure.h"
#include "core/resource_type.h"
#include "resources/vmm/fine/vmm_fine.h"

/* ---- the vtable ------------------------------------------------------------ */

static gmr_status fine_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return gmr__vmm_shards_allocate((vmm_fine *)self, bytes, alignment, stream, false, out_ptr,
                                  failure);
}

static gmr_status fine_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                          gmr_stream stream, void **out_ptr,
                                          gmr_failure *failure) {
  return gmr__vmm_shards_allocate((vmm_fine *)self, bytes, alignment, stream, true, out_ptr,
                                  failure);
}

static gmr_status fine_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  return gmr__vmm_shards_deallocate((vmm_fine *)self, ptr, bytes, alignment, stream);
}

static gmr_status fine_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  return gmr__vmm_shards_record_stream((vmm_fine *)self, ptr, stream);
}

static gmr_status fine_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                              size_t alignment, gmr_stream stream, gmr_failure *failure) {
  return gmr__vmm_shards_extend((vmm_fine *)self, ptr, bytes, new_bytes, alignment, stream,
                                failure);
}

static gmr_status fine_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_memory_info info = *out;
  gmr__vmm_shards_memory_info((vmm_fine *)(uintptr_t)self, &info);
  /* Only the fields the caller's struct has. */
  size_t known = out->size < sizeof info ? out->size : sizeof info;
  memcpy(out, &info, known);
  return GMR_OK;
}

static gmr_status fine_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr__vmm_shards_footprint((vmm_fine *)(uintptr_t)self, out);
  return GMR_OK;
}

static gmr_status fine_trim(gmr_resource *self, size_t *released_bytes) {
  *released_bytes = 0;
  return gmr__vmm_shards_trim((vmm_fine *)self, released_bytes);
}

/* Free the pool's host memory (its memory is given back already). */
static void free_host(vmm_fine *f) {
  if (f->creator_ready) gmr__vmf_creator_deinit(&f->creator); /* idle: joined */
  gmr__vmm_shards_free_host(f);
  gmr__vmm_base_deinit(&f->pool);
  free(f);
}

/* What the driver refused before goes first (the pool's device current);
 * while it still refuses, destroy changes nothing (a later one asks again). */
static gmr_status retry_unreleased(vmm_fine *f) {
  int saved_device = -1;
  if (gmr__cuda_device_enter(f->pool.cuda, f->pool.device, &saved_device) != cudaSuccess) {
    return GMR_ERR_CUDA;
  }
  gmr_status st = gmr__vmm_shards_retry_unreleased(f);
  gmr__cuda_device_leave(f->pool.cuda, saved_device);
  return st;
}

static gmr_status fine_destroy(gmr_resource *self) {
  vmm_fine *f = (vmm_fine *)self;
  if (gmr__vmm_shards_busy(f)) return GMR_ERR_BUSY;
  /* Nothing may still run on the memory that is about to go. */
  if (gmr__vmm_synchronize_device(&f->pool) != cudaSuccess) return GMR_ERR_CUDA;
  /* Ranges still reserved: busy; else the host side of sleep goes. */
  gmr_status st = gmr__vmm_base_release(&f->pool);
  if (st != GMR_OK) return st;
  st = retry_unreleased(f);
  if (st != GMR_OK) return st;
  st = gmr__vmm_shards_destroy(f);
  if (st != GMR_OK) return st; /* still a valid pool: destroy may be tried again */
  free_host(f);
  return GMR_OK;
}

static const gmr_resource_vtbl fine_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "vmm_resource",
    .allocate = fine_allocate,
    .deallocate = fine_deallocate,
    .destroy = fine_destroy,
    .trim = fine_trim,
    .get_footprint = fine_get_footprint,
    .get_memory_info = fine_get_memory_info,
    .record_stream = fine_record_stream,
    .allocate_capturing = fine_allocate_capturing,
    .extend = fine_extend,
};

/* gmr_resource_downcast() knows the type by its vtable, as itself and as a
 * VMM resource, and gmr_resource_check() its books (core/resource_type.h). */
static const gmr__resource_type fine_type = {&fine_vtbl, gmr__vmm_fine_check_books};
static const gmr__resource_member fine_member = {&fine_type, "vmm_pool_resource"};

/* ---- create ---------------------------------------------------------------- */

/* Shards when the config says 0: one per CPU, at most this many (each made
 * only when a thread first uses it). */
#define FINE_DEFAULT_MAX_SHARDS 16u

/* vmm's own fields of the config, in range. */
static gmr_status check_config(const gmr_vmm_pool_resource_config *c, gmr_failure *failure) {
  if (c->shard_count > GMR_VMM_POOL_MAX_SHARDS) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg, "vmm_pool: shard_count %u is above the most, %d", c->shard_count,
             GMR_VMM_POOL_MAX_SHARDS);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  if (c->handle_floor_bytes > GMR_MAX_ALLOCATION_BYTES ||
      c->creator_thread_count > GMR_VMM_POOL_MAX_CREATOR_THREADS) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg,
             "vmm_pool: handle_floor_bytes is at most %zu (%zu asked) and creator_thread_count "
             "at most %d (%u asked)",
             (size_t)GMR_MAX_ALLOCATION_BYTES, c->handle_floor_bytes,
             GMR_VMM_POOL_MAX_CREATOR_THREADS, c->creator_thread_count);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  if (c->growth_percent > 1000 ||
      (c->remap_permille > 10000 && c->remap_permille != GMR_VMM_POOL_REMAP_NEVER)) {
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT,
                                "vmm_pool: growth_percent is at most 1000 and remap_permille at "
                                "most 10000 (or GMR_VMM_POOL_REMAP_NEVER)");
  }
  return GMR_OK;
}

/* The shards: their number, and shard 0 with initial_pages. */
static gmr_status make_shards(vmm_fine *f, gmr_failure *failure) {
  uint32_t shards = f->pool.config.shard_count;
  if (shards == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    shards = cpus < 1 ? 1u : cpus > (long)FINE_DEFAULT_MAX_SHARDS ? FINE_DEFAULT_MAX_SHARDS
                                                                   : (uint32_t)cpus;
  }
  f->shard_count = shards;
  atomic_init(&f->total.held_bytes, 0);
  atomic_init(&f->total.peak_held_bytes, 0);
  atomic_init(&f->shards_made, 1u);
  for (uint32_t i = 0; i < GMR_VMM_POOL_MAX_SHARDS; ++i) atomic_init(&f->shards[i], NULL);
  vmf_engine *e = NULL;
  gmr_status st = gmr__vmm_fine_shard_new(f, true, &e, failure);
  if (st == GMR_OK) atomic_store_explicit(&f->shards[0], e, memory_order_release);
  return st;
}

static gmr_status vmm_resource_create_impl(const gmr_vmm_pool_resource_config *config,
                                           gmr_vmm_pool_resource **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, "vmm_pool: out is NULL");
  }
  *out = NULL;
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) c = *config;
  gmr_status st = gmr__vmm_config_check(&c, failure);
  if (st == GMR_OK) st = check_config(&c, failure);
  if (st != GMR_OK) return st;
  vmm_fine *f = calloc(1, sizeof *f);
  if (f == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  }
  gmr__resource_member_register(&fine_member);
  st = gmr__vmm_base_init(&f->pool, &c, &fine_vtbl, &gmr__vmm_fine_ops, failure);
  if (st == GMR_OK) {
    f->handle_floor_bytes = gmr__align_up(c.handle_floor_bytes, f->pool.page_bytes);
    f->creator_ready = gmr__vmf_creator_init(&f->creator, f->pool.cuda, &f->pool,
                                             c.creator_thread_count);
    if (!f->creator_ready) {
      st = gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY,
                                "vmm_pool: the creator threads' mutex could not be made");
    }
  }
  if (st == GMR_OK) st = make_shards(f, failure);
  if (st != GMR_OK) {
    free_host(f);
    return st;
  }
  *out = &f->pool;
  return GMR_OK;
}

gmr_status gmr_vmm_resource_create(const gmr_vmm_pool_resource_config *config,
                                   gmr_vmm_pool_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_resource_create_impl(config, out, f));
}
