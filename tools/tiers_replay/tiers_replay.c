/*
 * tools/tiers_replay/tiers_replay.c: see tiers_replay.h.
 */
#include "tools/tiers_replay/tiers_replay.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/numa_host_resource.h"
#include "gmr/tiers/stream_pool.h"
#include "gmr/tiers/tier_manager.h"
#include "tools/replay/timing.h"

#define GPU_CHARGE 256u
#define DEFAULT_STACK "pool > cuda(kind=async)"
#define HOST_BLOCKS_PER_CHUNK 64

enum { WHERE_NONE = 0, WHERE_GPU = 1, WHERE_HOST = 2 };

/* A live buffer: one GPU allocation, or on HOST a list of fixed-size blocks
 * (cuCascade keeps host data in 1 MiB blocks; one pinned mapping per buffer
 * would pay a cudaHostRegister for every move). */
typedef struct buf {
  void *ptr;      /* GPU */
  void **blocks;  /* HOST: block_count blocks of host_block bytes (the last may be shorter) */
  uint64_t bytes;
  uint32_t block_count;
  uint32_t seq;   /* bumped at every move: queue entries of an older seq are stale */
  uint8_t where;
} buf;

typedef struct entry {
  size_t index;
  uint32_t seq;
} entry;

/* A growable array of entries used as a FIFO (head) or a stack (count). */
typedef struct queue {
  entry *items;
  size_t head, count, capacity;
} queue;

typedef struct ctx {
  const tiers_replay_options *o;
  tiers_replay_result *r;
  gmr_tier_manager *m;
  gmr_resource *gpu, *host;
  gmr_stream_pool *pool;
  gmr_stream stream;
  gmr_reservation_id gpu_res, host_res;
  size_t trigger_bytes, stop_bytes;
  size_t block_bytes; /* HOST block size */
  size_t used; /* charged bytes live on the GPU reservation */
  buf *bufs;
  queue on_gpu;  /* oldest first */
  queue on_host; /* most recently moved last */
  char *err;
  size_t err_bytes;
  uint64_t line;
} ctx;

static size_t charge(uint64_t bytes) {
  return (size_t)((bytes + GPU_CHARGE - 1) & ~(uint64_t)(GPU_CHARGE - 1));
}

static size_t block_size(const ctx *c, uint64_t bytes, uint32_t k) {
  uint64_t left = bytes - (uint64_t)k * c->block_bytes;
  return (size_t)(left < c->block_bytes ? left : c->block_bytes);
}

static void host_give(ctx *c, void **blocks, uint32_t count, uint64_t bytes) {
  for (uint32_t k = 0; k < count; ++k) {
    GMR_IGNORE_STATUS(gmr_resource_deallocate(c->host, blocks[k], block_size(c, bytes, k), 0, c->stream));
  }
  free(blocks);
}

/* HOST blocks for `bytes`; all or nothing. Timed apart from the copies: a
 * block from a fresh chunk pins the whole chunk here. */
static gmr_status host_take(ctx *c, uint64_t bytes, void ***out, uint32_t *out_count,
                            gmr_failure *f) {
  uint64_t t0 = replay_clock_now_ns();
  uint32_t n = (uint32_t)((bytes + c->block_bytes - 1) / c->block_bytes);
  void **blocks = calloc(n == 0 ? 1 : n, sizeof *blocks);
  gmr_status st = blocks == NULL ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
  for (uint32_t k = 0; k < n && st == GMR_OK; ++k) {
    st = gmr_resource_allocate_ex(c->host, block_size(c, bytes, k), 0, c->stream, &blocks[k], f);
    if (st != GMR_OK) host_give(c, blocks, k, bytes);
  }
  c->r->host_alloc_ns += replay_clock_now_ns() - t0;
  if (st != GMR_OK) return st;
  *out = blocks;
  *out_count = n;
  return GMR_OK;
}

/* Copy between a GPU buffer and its HOST blocks, stream-ordered. */
static gmr_status copy_blocks(ctx *c, buf *b, void *gpu, void **blocks, bool to_host) {
  for (uint32_t k = 0; k < b->block_count; ++k) {
    char *g = (char *)gpu + (size_t)k * c->block_bytes;
    size_t n = block_size(c, b->bytes, k);
    gmr_status st = to_host ? gmr_cuda_stream_memcpy_async(blocks[k], g, n, c->stream)
                            : gmr_cuda_stream_memcpy_async(g, blocks[k], n, c->stream);
    if (st != GMR_OK) return st;
  }
  c->r->copied_bytes += b->bytes;
  return GMR_OK;
}

static gmr_status fail(ctx *c, gmr_status st, const char *fmt, ...) {
  int n = snprintf(c->err, c->err_bytes, "line %llu: ", (unsigned long long)c->line);
  if (n < 0 || (size_t)n >= c->err_bytes) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->err_bytes - (size_t)n, fmt, ap);
  va_end(ap);
  return st;
}

static bool push(queue *q, size_t index, uint32_t seq) {
  if (q->head + q->count == q->capacity) {
    if (q->head > q->capacity / 2) { /* slide down instead of growing */
      memmove(q->items, q->items + q->head, q->count * sizeof *q->items);
      q->head = 0;
    } else {
      size_t cap = q->capacity == 0 ? 1024 : q->capacity * 2;
      entry *e = realloc(q->items, cap * sizeof *e);
      if (e == NULL) return false;
      q->items = e;
      q->capacity = cap;
    }
  }
  q->items[q->head + q->count++] = (entry){index, seq};
  return true;
}

/* The oldest (fifo) or newest (!fifo) live entry still in `where`, removed. */
static bool take(ctx *c, queue *q, bool fifo, uint8_t where, size_t *out) {
  while (q->count > 0) {
    entry e = fifo ? q->items[q->head] : q->items[q->head + q->count - 1];
    if (fifo) q->head++;
    q->count--;
    const buf *b = &c->bufs[e.index];
    if (b->where == where && b->seq == e.seq) {
      *out = e.index;
      return true;
    }
  }
  return false;
}

/* Time copies and their synchronisation. */
static gmr_status sync_copies(ctx *c, uint64_t t0) {
  gmr_status st = gmr_cuda_stream_synchronize(c->stream);
  c->r->copy_ns += replay_clock_now_ns() - t0;
  return st;
}

/* Move GPU buffers, oldest first, to HOST until used + need <= stop (at
 * least one when `force`). Returns GMR_OK, or GMR_ERR_OUT_OF_MEMORY with
 * nothing left to move (then *moved_any says whether anything moved). */
static gmr_status downgrade(ctx *c, size_t need, bool force, bool *moved_any) {
  *moved_any = false;
  size_t victims[256];
  for (;;) {
    size_t n = 0;
    while (n < 256 && (c->used + need > c->stop_bytes || (force && !*moved_any && n == 0))) {
      size_t i = 0;
      if (!take(c, &c->on_gpu, true, WHERE_GPU, &i)) break;
      victims[n++] = i;
      c->used -= charge(c->bufs[i].bytes);
    }
    if (n == 0) return *moved_any ? GMR_OK : GMR_ERR_OUT_OF_MEMORY;
    void **dst[256];
    uint32_t dst_count[256];
    /* Every victim's blocks first, then the copies, timed alone. */
    for (size_t k = 0; k < n; ++k) {
      buf *b = &c->bufs[victims[k]];
      gmr_failure f = GMR_FAILURE_INIT;
      gmr_status st = host_take(c, b->bytes, &dst[k], &dst_count[k], &f);
      if (st != GMR_OK) {
        /* Give back what this batch took; the victims stay on the GPU. */
        for (size_t j = 0; j < k; ++j) host_give(c, dst[j], dst_count[j], c->bufs[victims[j]].bytes);
        for (size_t j = 0; j < n; ++j) c->used += charge(c->bufs[victims[j]].bytes);
        return fail(c, st, "no HOST memory to downgrade a buffer of %llu bytes: %s (raise --host-bytes)",
                    (unsigned long long)b->bytes, f.message);
      }
    }
    uint64_t t0 = replay_clock_now_ns();
    for (size_t k = 0; k < n; ++k) {
      buf *b = &c->bufs[victims[k]];
      b->block_count = dst_count[k];
      if (c->o->copy) {
        gmr_status st = copy_blocks(c, b, b->ptr, dst[k], true);
        if (st != GMR_OK) return fail(c, st, "copy to HOST failed");
      }
    }
    if (c->o->copy) {
      gmr_status st = sync_copies(c, t0);
      if (st != GMR_OK) return fail(c, st, "synchronising the copies failed");
    }
    for (size_t k = 0; k < n; ++k) {
      buf *b = &c->bufs[victims[k]];
      gmr_status st = gmr_resource_deallocate(c->gpu, b->ptr, b->bytes, 0, c->stream);
      if (st != GMR_OK) return fail(c, st, "freeing a downgraded GPU buffer failed");
      b->ptr = NULL;
      b->blocks = dst[k];
      b->where = WHERE_HOST;
      b->seq++;
      if (!push(&c->on_host, victims[k], b->seq)) return fail(c, GMR_ERR_OUT_OF_MEMORY, "host memory");
      c->r->downgraded_count++;
      c->r->downgraded_bytes += b->bytes;
      if (b->bytes > c->r->largest_downgraded_bytes) c->r->largest_downgraded_bytes = b->bytes;
    }
    *moved_any = true;
    if (c->used + need <= c->stop_bytes) return GMR_OK;
  }
}

/* Move the most recently downgraded buffers back while they fit under stop. */
static gmr_status upgrade(ctx *c) {
  bool copied = false;
  uint64_t t0 = replay_clock_now_ns();
  size_t i = 0;
  while (take(c, &c->on_host, false, WHERE_HOST, &i)) {
    buf *b = &c->bufs[i];
    size_t ch = charge(b->bytes);
    void *p = NULL;
    if (c->used + ch > c->stop_bytes ||
        gmr_resource_allocate(c->gpu, b->bytes, 0, c->stream, &p) != GMR_OK) {
      (void)push(&c->on_host, i, b->seq); /* put it back: it stays on HOST */
      break;
    }
    if (c->o->copy) {
      gmr_status st = copy_blocks(c, b, p, b->blocks, false);
      if (st != GMR_OK) return fail(c, st, "copy to GPU failed");
      copied = true;
    }
    /* The blocks go back stream-ordered after the copy on the same stream. */
    host_give(c, b->blocks, b->block_count, b->bytes);
    b->blocks = NULL;
    b->block_count = 0;
    b->ptr = p;
    b->where = WHERE_GPU;
    b->seq++;
    c->used += ch;
    if (!push(&c->on_gpu, i, b->seq)) return fail(c, GMR_ERR_OUT_OF_MEMORY, "host memory");
    c->r->upgraded_count++;
    c->r->upgraded_bytes += b->bytes;
  }
  if (copied) {
    gmr_status st = sync_copies(c, t0);
    if (st != GMR_OK) return fail(c, st, "synchronising the copies failed");
  }
  return GMR_OK;
}

static gmr_status serve_from_host(ctx *c, size_t index, uint64_t bytes) {
  buf *b = &c->bufs[index];
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = host_take(c, bytes, &b->blocks, &b->block_count, &f);
  if (st != GMR_OK) {
    return fail(c, st, "%llu bytes fit neither the GPU reservation nor HOST: %s",
                (unsigned long long)bytes, f.message);
  }
  b->bytes = bytes;
  b->where = WHERE_HOST;
  b->seq++;
  c->r->host_born_count++;
  c->r->host_born_bytes += bytes;
  return push(&c->on_host, index, b->seq) ? GMR_OK : GMR_ERR_OUT_OF_MEMORY;
}

static gmr_status do_alloc(ctx *c, size_t index, uint64_t bytes) {
  size_t ch = charge(bytes);
  c->r->alloc_count++;
  if (ch > c->r->reservation_bytes) return serve_from_host(c, index, bytes);
  bool moved = false;
  if (c->used + ch > c->trigger_bytes) {
    c->r->episode_count++;
    gmr_status st = downgrade(c, ch, false, &moved);
    if (st != GMR_OK && st != GMR_ERR_OUT_OF_MEMORY) return st;
  }
  for (;;) {
    buf *b = &c->bufs[index];
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = gmr_resource_allocate_ex(c->gpu, bytes, 0, c->stream, &b->ptr, &f);
    if (st == GMR_OK) {
      b->bytes = bytes;
      b->where = WHERE_GPU;
      b->seq++;
      c->used += ch;
      if (c->used > c->r->peak_gpu_bytes) c->r->peak_gpu_bytes = c->used;
      return push(&c->on_gpu, index, b->seq) ? GMR_OK : GMR_ERR_OUT_OF_MEMORY;
    }
    if (st != GMR_ERR_LIMIT_EXCEEDED && st != GMR_ERR_OUT_OF_MEMORY) {
      return fail(c, st, "GPU allocation of %llu bytes failed: %s", (unsigned long long)bytes,
                  f.message);
    }
    /* Refused (the reservation, or the stack below): make more room. */
    c->r->refusal_count++;
    c->r->episode_count++;
    st = downgrade(c, ch, true, &moved);
    if (st == GMR_ERR_OUT_OF_MEMORY) return serve_from_host(c, index, bytes); /* nothing to move */
    if (st != GMR_OK) return st;
  }
}

static gmr_status do_free(ctx *c, size_t index) {
  buf *b = &c->bufs[index];
  c->r->free_count++;
  gmr_status st = GMR_OK;
  if (b->where == WHERE_GPU) {
    st = gmr_resource_deallocate(c->gpu, b->ptr, b->bytes, 0, c->stream);
    c->used -= charge(b->bytes);
  } else if (b->where == WHERE_HOST) {
    host_give(c, b->blocks, b->block_count, b->bytes);
    b->blocks = NULL;
    b->block_count = 0;
    c->r->freed_on_host_count++;
  }
  if (st != GMR_OK) return fail(c, st, "free failed");
  b->where = WHERE_NONE;
  b->ptr = NULL;
  b->seq++;
  if (c->o->upgrade && c->used < c->stop_bytes && c->on_host.count > 0) return upgrade(c);
  return GMR_OK;
}

static gmr_status build(ctx *c, const replay_trace *trace) {
  const tiers_replay_options *o = c->o;
  gmr_memory_space_config gpu = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
  gpu.reservation_limit_fraction = 1.0;
  gpu.require_reservation = true;
  gpu.stream_count = 1;
  snprintf(gpu.stack_spec, sizeof gpu.stack_spec, "%s", o->gpu_stack != NULL ? o->gpu_stack : DEFAULT_STACK);
  gmr_memory_space_config host = gmr_memory_space_config_default(GMR_TIER_HOST, 0);
  uint64_t peak = trace->summary.peak_live_bytes;
  host.capacity_bytes = o->host_bytes != 0 ? o->host_bytes : (size_t)peak + ((size_t)64 << 20);
  host.reservation_limit_fraction = 1.0;
  host.block_bytes = c->block_bytes;
  host.blocks_per_chunk = HOST_BLOCKS_PER_CHUNK;
  host.initial_chunk_count =
      o->host_prepin ? host.capacity_bytes / (c->block_bytes * HOST_BLOCKS_PER_CHUNK) : 0;
  host.stream_count = 0;
  gmr_memory_space_config configs[] = {gpu, host};
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = gmr_tier_manager_create(configs, 2, &c->m, &f);
  if (st != GMR_OK) return fail(c, st, "tier manager: %s", f.message);
  gmr_memory_space *gs = gmr_tier_manager_get_space_at(c->m, 0);
  gmr_memory_space *hs = gmr_tier_manager_get_space_at(c->m, 1);
  c->gpu = gmr_memory_space_as_resource(gs);
  c->host = gmr_memory_space_as_resource(hs);
  c->pool = gmr_memory_space_get_stream_pool(gs);
  st = gmr_stream_pool_acquire(c->pool, GMR_STREAM_ACQUIRE_BLOCK, 0, &c->stream);
  if (st != GMR_OK) return fail(c, st, "no stream");
  gmr_reservation_strategy on_gpu = gmr_reservation_strategy_space(gmr_memory_space_get_id(gs));
  gmr_reservation_strategy on_host = gmr_reservation_strategy_space(gmr_memory_space_get_id(hs));
  st = gmr_tier_manager_try_reserve(c->m, &on_gpu, c->r->reservation_bytes, &c->gpu_res, &f);
  if (st == GMR_OK) st = gmr_reservation_bind_stream(c->m, c->gpu_res, c->stream, NULL, &f);
  if (st != GMR_OK) return fail(c, st, "GPU reservation of %zu bytes: %s", c->r->reservation_bytes, f.message);
  st = gmr_tier_manager_try_reserve(c->m, &on_host, host.capacity_bytes, &c->host_res, &f);
  if (st == GMR_OK) st = gmr_reservation_bind_stream(c->m, c->host_res, c->stream, NULL, &f);
  if (st != GMR_OK) return fail(c, st, "HOST reservation: %s", f.message);
  return GMR_OK;
}

/* The pinned host memory behind the HOST space: memory_space > limiting >
 * fixed_block > numa_host. */
static void note_host_chunks(ctx *c) {
  gmr_resource *leaf = gmr_resource_get_upstream(gmr_resource_get_upstream(
      gmr_resource_get_upstream(c->host)));
  gmr_numa_host_resource_stats ns = GMR_NUMA_HOST_RESOURCE_STATS_INIT;
  if (gmr_numa_host_resource_get_stats(gmr_numa_host_resource_from_resource(leaf), &ns) ==
      GMR_OK) {
    c->r->host_chunk_count = ns.placed_count + ns.unplaced_count;
    c->r->host_pinned_bytes = ns.held_bytes;
  }
}

static void teardown(ctx *c, size_t alloc_count) {
  if (c->host != NULL) note_host_chunks(c);
  for (size_t i = 0; i < alloc_count; ++i) {
    buf *b = &c->bufs[i];
    if (b->where == WHERE_GPU)
      GMR_IGNORE_STATUS(gmr_resource_deallocate(c->gpu, b->ptr, b->bytes, 0, c->stream));
    if (b->where == WHERE_HOST) host_give(c, b->blocks, b->block_count, b->bytes);
    b->where = WHERE_NONE;
  }
  if (c->m != NULL) {
    gmr_memory_space_stats hs = GMR_MEMORY_SPACE_STATS_INIT;
    if (gmr_memory_space_get_stats(gmr_tier_manager_get_space_at(c->m, 1), &hs) == GMR_OK) {
      c->r->peak_host_bytes = hs.peak_allocated_bytes;
    }
    if (c->gpu_res != 0) GMR_IGNORE_STATUS(gmr_reservation_release(c->m, c->gpu_res, NULL));
    if (c->host_res != 0) GMR_IGNORE_STATUS(gmr_reservation_release(c->m, c->host_res, NULL));
    if (c->stream != NULL) GMR_IGNORE_STATUS(gmr_cuda_stream_synchronize(c->stream));
    if (c->stream != NULL) GMR_IGNORE_STATUS(gmr_stream_pool_release(c->pool, c->stream));
    GMR_IGNORE_STATUS(gmr_tier_manager_destroy(c->m));
  }
  free(c->bufs);
  free(c->on_gpu.items);
  free(c->on_host.items);
}

gmr_status tiers_replay_run(const replay_trace *trace, const tiers_replay_options *options,
                            tiers_replay_result *out, char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (trace == NULL || options == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  ctx c;
  memset(&c, 0, sizeof c);
  c.o = options;
  c.r = out;
  char scratch[8];
  c.err = err != NULL && err_bytes > 0 ? err : scratch;
  c.err_bytes = err != NULL && err_bytes > 0 ? err_bytes : sizeof scratch;
  out->peak_live_bytes = trace->summary.peak_live_bytes;
  size_t reservation = options->gpu_reservation_bytes;
  if (reservation == 0) reservation = (size_t)((double)trace->summary.peak_live_bytes * options->gpu_fraction);
  reservation = charge(reservation);
  if (reservation == 0 || !(options->stop >= 0 && options->stop <= options->trigger && options->trigger <= 1.0)) {
    return fail(&c, GMR_ERR_INVALID_ARGUMENT,
                "a GPU reservation of %zu bytes, trigger %.2f, stop %.2f: need a reservation above "
                "0 and 0 <= stop <= trigger <= 1",
                reservation, options->trigger, options->stop);
  }
  out->reservation_bytes = reservation;
  c.block_bytes = options->host_block_bytes != 0 ? options->host_block_bytes : (size_t)1 << 20;
  c.trigger_bytes = (size_t)((double)reservation * options->trigger);
  c.stop_bytes = (size_t)((double)reservation * options->stop);
  size_t allocs = trace->summary.alloc_count;
  c.bufs = calloc(allocs == 0 ? 1 : allocs, sizeof *c.bufs);
  if (c.bufs == NULL) return fail(&c, GMR_ERR_OUT_OF_MEMORY, "host memory");
  uint64_t t0 = replay_clock_now_ns();
  gmr_status st = build(&c, trace);
  out->build_ns = replay_clock_now_ns() - t0;
  for (size_t e = 0; e < trace->event_count && st == GMR_OK; ++e) {
    const replay_event *ev = &trace->events[e];
    c.line = ev->line;
    if (ev->op == REPLAY_OP_ALLOC) {
      st = do_alloc(&c, ev->alloc_index, ev->size_bytes);
    } else if (ev->op == REPLAY_OP_FREE) {
      st = do_free(&c, ev->alloc_index);
    }
  }
  teardown(&c, allocs);
  out->wall_ns = replay_clock_now_ns() - t0;
  return st;
}

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

void tiers_replay_print(FILE *out, const replay_trace *trace, const tiers_replay_options *o,
                        const tiers_replay_result *r) {
  fprintf(out, "trace: %s (%s, %zu requests, peak live %.1f MiB)\n", trace->path,
          replay_trace_format_name(trace->format), trace->summary.request_count,
          mib(r->peak_live_bytes));
  fprintf(out, "gpu reservation: %.1f MiB (%.0f%% of the peak), stack \"%s\", trigger %.2f, stop %.2f%s\n",
          mib(r->reservation_bytes),
          r->peak_live_bytes ? 100.0 * (double)r->reservation_bytes / (double)r->peak_live_bytes : 0.0,
          o->gpu_stack != NULL ? o->gpu_stack : DEFAULT_STACK, o->trigger, o->stop,
          o->upgrade ? ", upgrades on" : "");
  fprintf(out, "requests: %zu allocations, %zu frees\n", r->alloc_count, r->free_count);
  fprintf(out, "downgraded: %llu buffers, %.1f MiB, largest %.1f MiB, in %llu episodes (%llu refusals)\n",
          (unsigned long long)r->downgraded_count, mib(r->downgraded_bytes),
          mib(r->largest_downgraded_bytes), (unsigned long long)r->episode_count,
          (unsigned long long)r->refusal_count);
  fprintf(out, "upgraded: %llu buffers, %.1f MiB\n", (unsigned long long)r->upgraded_count,
          mib(r->upgraded_bytes));
  fprintf(out, "served from host (larger than the reservation): %llu buffers, %.1f MiB\n",
          (unsigned long long)r->host_born_count, mib(r->host_born_bytes));
  fprintf(out, "freed while on host: %llu\n", (unsigned long long)r->freed_on_host_count);
  fprintf(out, "peak use: gpu %.1f MiB of the reservation, host %.1f MiB\n", mib(r->peak_gpu_bytes),
          mib(r->peak_host_bytes));
  if (o->copy) {
    fprintf(out, "copies: %.1f MiB in %.1f ms (%.2f GB/s; copies and their synchronisation only)\n",
            mib(r->copied_bytes), (double)r->copy_ns / 1e6,
            r->copy_ns ? (double)r->copied_bytes / (double)r->copy_ns : 0.0);
  } else {
    fprintf(out, "copies: off (accounting only)\n");
  }
  fprintf(out,
          "host blocks: taken in %.1f ms; %llu pinned chunks of %.1f MiB mapped%s, %.1f MiB "
          "pinned at the end\n",
          (double)r->host_alloc_ns / 1e6, (unsigned long long)r->host_chunk_count,
          mib((uint64_t)(o->host_block_bytes != 0 ? o->host_block_bytes : (size_t)1 << 20) *
              HOST_BLOCKS_PER_CHUNK),
          o->host_prepin ? " (the whole HOST space at build)" : " (on demand)",
          mib(r->host_pinned_bytes));
  fprintf(out, "build: %.1f ms; wall time: %.1f ms\n", (double)r->build_ns / 1e6,
          (double)r->wall_ns / 1e6);
}
