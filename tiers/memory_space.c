/*
 * tiers/memory_space.c: memory spaces (see gmr/tiers/memory_space.h): building and
 * tearing down their allocator stacks, the space resource at the top of
 * each stack, and the books the manager keeps for them.
 */
#define _GNU_SOURCE /* strcasecmp, statvfs */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "adaptors/oom_internal.h"
#include "core/cuda_layer.h"
#include "core/resource_type.h"
#include "gmr/device.h"
#include "tiers/tiers_internal.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type space_type = {&gmr__space_vtbl, NULL};

static const char *const tier_names[GMR_TIER_COUNT] = {"GPU", "HOST", "DISK"};

const char *gmr_tier_name(gmr_tier tier) {
  return (int)tier >= 0 && tier < GMR_TIER_COUNT ? tier_names[tier] : "unknown";
}

gmr_status gmr_tier_from_name(const char *name, gmr_tier *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (int t = 0; t < GMR_TIER_COUNT; ++t) {
    if (strcasecmp(name, tier_names[t]) == 0) {
      *out = (gmr_tier)t;
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}

gmr_memory_space_config gmr_memory_space_config_default(gmr_tier tier, int index) {
  gmr_memory_space_config c;
  memset(&c, 0, sizeof c);
  c.id.tier = tier;
  c.id.index = index;
  c.reservation_limit_fraction = 0.85;
  c.downgrade_trigger_fraction = 0.85;
  c.downgrade_stop_fraction = 0.65;
  c.max_stream_slots = 1024;
  c.on_limit = (gmr_limit_policy)GMR_LIMIT_POLICY_FAIL_INIT;
  c.on_oom = (gmr_oom_policy)GMR_OOM_POLICY_FAIL_INIT;
  c.stream_count = tier == GMR_TIER_DISK ? 0 : GMR_STREAM_POOL_DEFAULT_COUNT;
  c.stream_device = -1;
  c.downgrade_numa_node = -1;
  c.numa_node = tier == GMR_TIER_HOST ? index : -1;
  c.block_bytes = (size_t)1 << 20;
  c.blocks_per_chunk = 128;
  c.initial_chunk_count = 4;
  return c;
}

/* ---- building ----------------------------------------------------------------------- */

/* fraction (in [0, 1]) of bytes, never above bytes (a double rounds large
 * sizes up). */
static size_t fraction_of(size_t bytes, double fraction) {
  double v = (double)bytes * fraction;
  return v >= (double)bytes ? bytes : (size_t)v;
}

/* The device's total memory (cudaMemGetInfo with the device current). On
 * failure *call names the call the driver refused. */
static cudaError_t detect_gpu_capacity(const gmr__cuda_ops *cuda, int device, size_t *out,
                                       const char **call) {
  int saved = -1;
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t err = gmr__cuda_device_enter(cuda, device, &saved);
  if (err != cudaSuccess) {
    *call = gmr__cuda_device_enter_failed_call(err);
  } else {
    *call = "cudaMemGetInfo";
    err = cuda->mem_get_info(&free_bytes, &total_bytes);
    gmr__cuda_device_leave(cuda, saved);
  }
  *out = total_bytes;
  return err;
}

static gmr_status build_gpu(gmr_memory_space *s, gmr_failure *failure) {
  const gmr_memory_space_config *c = &s->config;
  const gmr__cuda_ops *cuda = gmr__cuda();
  int count = 0;
  cudaError_t err = cuda->get_device_count(&count);
  if (err != cudaSuccess) {
    return gmr__tier_fail(failure, gmr__status_from_cuda(err), 0,
                          "GPU space %d: cudaGetDeviceCount failed (%s)", c->id.index,
                          gmr_cuda_error_name((int)err));
  }
  if (c->id.index < 0 || c->id.index >= count) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "GPU space %d: no such device (the machine has %d)", c->id.index, count);
  }
  /* The device's memory: the capacity when none is given, else its bound. */
  size_t device_bytes = 0;
  const char *call = NULL;
  err = detect_gpu_capacity(cuda, c->id.index, &device_bytes, &call);
  if (err != cudaSuccess) {
    return gmr__tier_fail(failure, gmr__status_from_cuda(err), 0,
                          "GPU space %d: %s failed reading the device's memory: CUDA error %d (%s)",
                          c->id.index, call, (int)err, gmr_cuda_error_name((int)err));
  }
  if (s->capacity_bytes == 0) {
    s->capacity_bytes = device_bytes;
  } else if (s->capacity_bytes > device_bytes) {
    /* A space that promises more than the device has: reservations would
     * fit that allocations cannot, and the downgrade trigger would never
     * fire. No override (see gmr_tier_manager_create). */
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "GPU space %d: capacity_bytes %zu is above device %d's memory of %zu "
                          "bytes; set capacity_bytes to at most that (0: all of it)",
                          c->id.index, s->capacity_bytes, c->id.index, device_bytes);
  }
  if (c->upstream != NULL) {
    if (gmr__resource_check_vtbl(c->upstream) != GMR_OK) {
      return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                            "GPU space %d: the upstream is not a valid resource", c->id.index);
    }
    s->stack_top = c->upstream;
    return GMR_OK;
  }
  const char *spec = c->stack_spec[0] != '\0' ? c->stack_spec : "cuda(kind=async)";
  int saved = -1;
  err = gmr__cuda_device_enter(cuda, c->id.index, &saved);
  if (err != cudaSuccess) {
    return gmr__tier_fail(failure, GMR_ERR_CUDA, 0,
                          "%s failed making device %d current: CUDA error %d",
                          gmr__cuda_device_enter_failed_call(err), c->id.index, (int)err);
  }
  gmr_spec_error spec_error;
  gmr_status st = gmr_stack_create(spec, &s->stack, &spec_error);
  gmr__cuda_device_leave(cuda, saved);
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0, "GPU space %d: stack '%s': %s", c->id.index, spec,
                          spec_error.message);
  }
  s->stack_top = gmr_stack_as_resource(s->stack);
  return GMR_OK;
}

static gmr_status build_host(gmr_memory_space *s, gmr_failure *failure) {
  const gmr_memory_space_config *c = &s->config;
  gmr_numa_host_resource_config nc = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  nc.numa_node = c->numa_node;
  gmr_status st = gmr_numa_host_resource_create(&nc, &s->numa);
  if (st != GMR_OK) {
    int nodes = 1, max = 0;
    GMR_IGNORE_STATUS(gmr_numa_host_resource_get_node_count(&nodes, &max));
    return gmr__tier_fail(failure, st, 0,
                          "HOST space %d: no NUMA node %d (%d online, highest %d)", c->id.index,
                          c->numa_node, nodes, max);
  }
  if (s->capacity_bytes == 0) {
    s->capacity_bytes = gmr_numa_host_resource_get_node_memory_bytes(c->numa_node);
    if (s->capacity_bytes == 0) {
      long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
      if (pages > 0 && page > 0) s->capacity_bytes = (size_t)pages * (size_t)page;
    }
  }
  gmr_fixed_block_resource_config fc = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  fc.block_bytes = c->block_bytes;
  fc.blocks_per_chunk = c->blocks_per_chunk;
  fc.initial_chunk_count = c->initial_chunk_count;
  st = gmr_fixed_block_resource_create(gmr_numa_host_resource_as_resource(s->numa), &fc,
                                       &s->blocks);
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0,
                          "HOST space %d: fixed_block(block_bytes=%zu, blocks_per_chunk=%zu, "
                          "initial_chunk_count=%zu) could not be made (%s)",
                          c->id.index, c->block_bytes, c->blocks_per_chunk,
                          c->initial_chunk_count, gmr_status_name(st));
  }
  s->stack_top = gmr_fixed_block_resource_as_resource(s->blocks);
  return GMR_OK;
}

static gmr_status build_disk(gmr_memory_space *s, gmr_failure *failure) {
  const gmr_memory_space_config *c = &s->config;
  struct statvfs vfs;
  if (c->mount_path[0] == '\0' || statvfs(c->mount_path, &vfs) != 0) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "DISK space %d: mount_path '%s' is not a directory that can be read",
                          c->id.index, c->mount_path);
  }
  if (s->capacity_bytes == 0) s->capacity_bytes = (size_t)vfs.f_bavail * (size_t)vfs.f_frsize;
  return GMR_OK;
}

static gmr_status build_limiter(gmr_memory_space *s, gmr_failure *failure) {
  const gmr_memory_space_config *c = &s->config;
  gmr_limiting_adaptor_config lc = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  lc.limit_bytes = s->capacity_bytes;
  size_t charge = 256;
  if (c->id.tier == GMR_TIER_HOST && (c->block_bytes & (c->block_bytes - 1)) == 0) {
    charge = c->block_bytes; /* a block is taken whatever part of it is used */
  }
  lc.charge_alignment = charge;
  s->charge_mask = charge - 1;
  lc.on_limit = gmr__space_limit_policy(s);
  lc.per_stream = true;
  lc.stream_limit_bytes = GMR_LIMIT_NONE; /* streams without a reservation */
  lc.max_streams = c->max_stream_slots;
  s->oom_policy_owned = true; /* released from here on, even on failure */
  /* on_oom is an OOM layer above the limiter, which leaves the reservations'
   * refusals to their limit policy (adaptors/oom_internal.h). */
  gmr_status st = gmr__limiting_with_oom_create(s->stack_top, &lc, &c->on_oom, &s->limiter,
                                                &s->base.upstream);
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0, "%s space %d: the limiting adaptor could not be made",
                          gmr_tier_name(c->id.tier), c->id.index);
  }
  return GMR_OK;
}

static gmr_status check_config(const gmr_memory_space_config *c, gmr_failure *failure) {
  const char *tier = gmr_tier_name(c->id.tier);
  if ((int)c->id.tier < 0 || c->id.tier >= GMR_TIER_COUNT) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "unknown tier %d",
                          (int)c->id.tier);
  }
  if (c->id.index < 0) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0, "%s space: index %d is negative",
                          tier, c->id.index);
  }
  if (c->capacity_bytes > GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "%s space %d: capacity_bytes %zu cannot be real: the most a space may "
                          "have is %zu bytes (INT64_MAX / 2; 0 detects it)",
                          tier, c->id.index, c->capacity_bytes,
                          (size_t)GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES);
  }
  double limit = c->reservation_limit_fraction, trigger = c->downgrade_trigger_fraction,
         stop = c->downgrade_stop_fraction;
  if (!(limit > 0.0 && limit <= 1.0) || !(trigger > 0.0 && trigger <= 1.0) ||
      !(stop >= 0.0 && stop <= trigger)) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "%s space %d: fractions must be reservation_limit in (0,1] (%g), "
                          "downgrade_trigger in (0,1] (%g), downgrade_stop in [0, trigger] (%g)",
                          tier, c->id.index, limit, trigger, stop);
  }
  if (memchr(c->stack_spec, '\0', sizeof c->stack_spec) == NULL ||
      memchr(c->mount_path, '\0', sizeof c->mount_path) == NULL) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "%s space %d: stack_spec or mount_path is not NUL-terminated", tier,
                          c->id.index);
  }
  if (c->id.tier != GMR_TIER_DISK && c->max_stream_slots == 0) {
    return gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                          "%s space %d: max_stream_slots is 0", tier, c->id.index);
  }
  return GMR_OK;
}

static gmr_status build_streams(gmr_memory_space *s, gmr_failure *failure) {
  const gmr_memory_space_config *c = &s->config;
  if (c->stream_count == 0) return GMR_OK;
  gmr_stream_pool_config pc = GMR_STREAM_POOL_CONFIG_DEFAULT;
  pc.device = c->id.tier == GMR_TIER_GPU ? c->id.index : c->stream_device;
  pc.stream_count = c->stream_count;
  gmr_status st = gmr_stream_pool_create(&pc, &s->streams);
  if (st != GMR_OK) {
    return gmr__tier_fail(failure, st, 0, "%s space %d: its %zu streams could not be made",
                          gmr_tier_name(c->id.tier), c->id.index, c->stream_count);
  }
  return GMR_OK;
}

/* Undo a partly built space (never the manager's books). */
static void teardown(gmr_memory_space *s) {
  if (s->streams != NULL) GMR_IGNORE_STATUS(gmr_stream_pool_destroy(s->streams));
  gmr_resource *limiter = gmr_limiting_adaptor_as_resource(s->limiter);
  if (s->base.upstream != limiter) GMR_IGNORE_STATUS(gmr_resource_destroy(s->base.upstream));
  if (limiter != NULL) GMR_IGNORE_STATUS(gmr_resource_destroy(limiter));
  if (s->blocks != NULL) GMR_IGNORE_STATUS(gmr_resource_destroy(gmr_fixed_block_resource_as_resource(s->blocks)));
  if (s->numa != NULL) GMR_IGNORE_STATUS(gmr_resource_destroy(gmr_numa_host_resource_as_resource(s->numa)));
  if (s->stack != NULL) GMR_IGNORE_STATUS(gmr_stack_destroy(s->stack));
  if (!s->oom_policy_owned && s->config.on_oom.release != NULL) {
    s->config.on_oom.release(s->config.on_oom.ctx);
  }
  gmr__space_books_deinit(s);
  gmr__key_slots_deinit(&s->slots);
  free((void *)s->bound_ids);
  free(s->bound);
  free(s);
}

gmr_status gmr__space_create(gmr_tier_manager *manager, const gmr_memory_space_config *config,
                             gmr_memory_space **out, gmr_failure *failure) {
  *out = NULL;
  gmr_memory_space *s = calloc(1, sizeof *s);
  if (s == NULL) {
    if (config->on_oom.release != NULL) config->on_oom.release(config->on_oom.ctx);
    return gmr__tier_fail(failure, GMR_ERR_OUT_OF_MEMORY, 0, "no host memory for a space");
  }
  gmr__adaptor_init(&s->base, &gmr__space_vtbl, NULL); /* build_limiter sets the upstream */
  gmr__resource_type_register(&space_type);
  s->manager = manager;
  s->config = *config;
  s->capacity_bytes = config->capacity_bytes;
  gmr_status st = check_config(config, failure);
  if (st == GMR_OK && config->id.tier != GMR_TIER_DISK) {
    size_t slots = config->max_stream_slots;
    if (!gmr__key_slots_init(&s->slots, slots) ||
        (s->bound_ids = calloc(s->slots.capacity + 1, sizeof *s->bound_ids)) == NULL ||
        !gmr__space_books_init(s)) {
      st = gmr__tier_fail(failure, GMR_ERR_OUT_OF_MEMORY, 0, "no host memory for stream slots");
    }
  }
  if (st == GMR_OK) {
    switch (config->id.tier) {
      case GMR_TIER_GPU:
        st = build_gpu(s, failure);
        break;
      case GMR_TIER_HOST:
        st = build_host(s, failure);
        break;
      default:
        st = build_disk(s, failure);
        break;
    }
  }
  if (st == GMR_OK && s->capacity_bytes == 0) {
    st = gmr__tier_fail(failure, GMR_ERR_INVALID_ARGUMENT, 0,
                        "%s space %d: capacity_bytes is 0 and could not be detected",
                        gmr_tier_name(config->id.tier), config->id.index);
  }
  if (st == GMR_OK && config->id.tier != GMR_TIER_DISK) st = build_limiter(s, failure);
  if (st == GMR_OK) st = build_streams(s, failure);
  if (st != GMR_OK) {
    teardown(s);
    return st;
  }
  s->limit_bytes = fraction_of(s->capacity_bytes, config->reservation_limit_fraction);
  s->trigger_bytes = fraction_of(s->capacity_bytes, config->downgrade_trigger_fraction);
  s->stop_bytes = fraction_of(s->capacity_bytes, config->downgrade_stop_fraction);
  *out = s;
  return GMR_OK;
}

gmr_status gmr__space_check_idle(gmr_memory_space *s) {
  if (s->limiter != NULL && gmr_limiting_adaptor_get_used_bytes(s->limiter) != 0) {
    return GMR_ERR_BUSY;
  }
  if (s->streams != NULL) {
    gmr_stream_pool_stats ps = GMR_STREAM_POOL_STATS_INIT;
    if (gmr_stream_pool_get_stats(s->streams, &ps) != GMR_OK || ps.lent_count != 0 ||
        ps.waiter_count != 0) {
      return GMR_ERR_BUSY;
    }
  }
  return GMR_OK;
}

gmr_status gmr__space_synchronize_streams(gmr_memory_space *s) {
  return gmr__stream_pool_synchronize(s->streams);
}

void gmr__space_destroy(gmr_memory_space *s) {
  /* The allocator released the OOM policy of GPU and HOST spaces;
   * teardown releases a DISK space's, which no layer ever held. */
  teardown(s);
}

/* ---- books ------------------------------------------------------------------------- */

size_t gmr__stream_held_bytes(const gmr_memory_space *s, gmr_stream stream) {
  size_t used = 0;
  if (s->limiter != NULL) {
    GMR_IGNORE_STATUS(gmr_limiting_adaptor_get_stream_usage(s->limiter, stream, &used, NULL));
  }
  return used;
}

size_t gmr__reservation_allocated_bytes(const gmr__tier_reservation *r) {
  if (!r->bound) return 0;
  size_t used = gmr__stream_held_bytes(r->space, r->stream);
  /* What the stream held before the binding is not the reservation's. */
  return used > r->baseline_bytes ? used - r->baseline_bytes : 0;
}

void gmr__space_usage_locked(const gmr_memory_space *s, gmr__space_usage *out) {
  memset(out, 0, sizeof *out);
  if (s->limiter != NULL) out->allocated_bytes = gmr_limiting_adaptor_get_used_bytes(s->limiter);
  for (size_t i = 0; i < s->bound_count; ++i) {
    const gmr__tier_reservation *r = s->bound[i];
    size_t a = gmr__reservation_allocated_bytes(r);
    out->reserved_allocated_bytes += a;
    if (a > r->bytes) out->over_bytes += a - r->bytes;
  }
  /* Counters are read one by one while others allocate: never below zero. */
  if (out->allocated_bytes > out->reserved_allocated_bytes) {
    out->untracked_bytes = out->allocated_bytes - out->reserved_allocated_bytes;
  }
  out->used_bytes = s->reserved_bytes + out->over_bytes + out->untracked_bytes;
  out->available_bytes = s->limit_bytes > out->used_bytes ? s->limit_bytes - out->used_bytes : 0;
}

/* ---- public queries ---------------------------------------------------------------- */

gmr_memory_space_id gmr_memory_space_get_id(const gmr_memory_space *s) { return s->config.id; }

size_t gmr_memory_space_get_capacity_bytes(const gmr_memory_space *s) {
  return s == NULL ? 0 : s->capacity_bytes;
}

gmr_stream_pool *gmr_memory_space_get_stream_pool(gmr_memory_space *s) {
  return s == NULL ? NULL : s->streams;
}

gmr_limiting_adaptor *gmr_memory_space_get_limiting_adaptor(gmr_memory_space *s) {
  return s == NULL ? NULL : s->limiter;
}

static gmr__space_usage usage_of(gmr_memory_space *s) {
  gmr__space_usage u;
  pthread_mutex_lock(&s->manager->mutex);
  gmr__space_usage_locked(s, &u);
  pthread_mutex_unlock(&s->manager->mutex);
  return u;
}

size_t gmr_memory_space_get_available_bytes(gmr_memory_space *s) {
  return s == NULL ? 0 : usage_of(s).available_bytes;
}

bool gmr_memory_space_should_downgrade(gmr_memory_space *s) {
  return s != NULL && usage_of(s).used_bytes > s->trigger_bytes;
}

bool gmr_memory_space_should_stop_downgrading(gmr_memory_space *s) {
  return s == NULL || usage_of(s).used_bytes <= s->stop_bytes;
}

size_t gmr_memory_space_get_amount_to_downgrade(gmr_memory_space *s) {
  if (s == NULL) return 0;
  size_t used = usage_of(s).used_bytes;
  return used > s->stop_bytes ? used - s->stop_bytes : 0;
}

gmr_status gmr_memory_space_poll_downgrade(gmr_memory_space *s, bool *out_downgrading,
                                           size_t *out_amount) {
  if (out_amount != NULL) *out_amount = 0;
  if (s == NULL || out_downgrading == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&s->manager->mutex);
  gmr__space_usage u;
  gmr__space_usage_locked(s, &u);
  if (!s->downgrading && u.used_bytes > s->trigger_bytes) {
    s->downgrading = true;
    s->downgrade_start_count++;
  } else if (s->downgrading && u.used_bytes <= s->stop_bytes) {
    s->downgrading = false;
  }
  bool downgrading = s->downgrading;
  pthread_mutex_unlock(&s->manager->mutex);
  *out_downgrading = downgrading;
  if (downgrading && out_amount != NULL) {
    *out_amount = u.used_bytes > s->stop_bytes ? u.used_bytes - s->stop_bytes : 0;
  }
  return GMR_OK;
}

gmr_status gmr_memory_space_get_stats(gmr_memory_space *s, gmr_memory_space_stats *out) {
  if (s == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_memory_space_stats st;
  memset(&st, 0, sizeof st);
  st.id = s->config.id;
  st.capacity_bytes = s->capacity_bytes;
  st.reservation_limit_bytes = s->limit_bytes;
  st.downgrade_trigger_bytes = s->trigger_bytes;
  st.downgrade_stop_bytes = s->stop_bytes;
  pthread_mutex_lock(&s->manager->mutex);
  gmr__space_usage u;
  gmr__space_usage_locked(s, &u);
  st.reserved_bytes = s->reserved_bytes;
  st.peak_reserved_bytes = s->peak_reserved_bytes;
  st.reservation_count = s->reservation_count;
  st.bound_stream_count = s->bound_count;
  st.downgrading = s->downgrading;
  st.downgrade_start_count = s->downgrade_start_count;
  st.reservation_raise_count = s->raise_count;
  st.reservation_overage_count = s->overage_count;
  st.reservation_refusal_count = s->refusal_count;
  pthread_mutex_unlock(&s->manager->mutex);
  st.allocated_bytes = u.allocated_bytes;
  if (s->limiter != NULL) {
    gmr_limiting_adaptor_stats ls = GMR_LIMITING_ADAPTOR_STATS_INIT;
    if (gmr_limiting_adaptor_get_stats(s->limiter, &ls) == GMR_OK) {
      st.peak_allocated_bytes = ls.peak_used_bytes;
    }
  }
  st.reserved_allocated_bytes = u.reserved_allocated_bytes;
  st.untracked_bytes = u.untracked_bytes;
  st.used_bytes = u.used_bytes;
  st.available_bytes = u.available_bytes;
  st.no_reservation_count = atomic_load_explicit(&s->no_reservation_count, memory_order_relaxed);
  gmr__stats_copy_out(out, &st, sizeof st);
  return GMR_OK;
}
