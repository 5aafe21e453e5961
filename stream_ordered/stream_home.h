/*
 * stream_ordered/stream_home.h (internal): which of a resource's shards (pool arenas,
 * fixed_block shards) serves a stream.
 *
 * A stream is served by the home shard of the first thread that used it
 * (util/thread_home.h), and every thread that uses it later goes there too.
 * Threads on one stream (PyTorch's forward thread and its autograd thread,
 * both on the default stream) then share one shard's memory: their work is
 * ordered on that stream anyway, and two shards would each hold memory for
 * it. A thread with a stream of its own (the case that scales) has a shard
 * of its own, and one thread's several streams share its shard, so memory
 * moves between them as it would with one shard.
 *
 * The table is a hint, by a hash of the stream's handle (the id for
 * cudaStreamPerThread, a different stream in every thread): any shard is
 * correct for any stream, so two streams that collide simply overwrite each
 * other's entry, and a new stream that gets a destroyed one's handle starts
 * where that one was served. The handle, not the id, so that a call that
 * does not know its stream's id yet (stream_ordered/stream_event.h) goes to the same
 * shard as one that does. Lock-free: one atomic load on a hit.
 *
 * Thread-safe: yes (atomics).
 */
#ifndef GMR_STREAM_ORDERED_STREAM_HOME_H_
#define GMR_STREAM_ORDERED_STREAM_HOME_H_

#include <stdatomic.h>
#include <stdint.h>

#include "stream_ordered/stream_event.h"
#include "util/thread_home.h"

#define GMR__STREAM_HOME_ENTRIES 256u

typedef struct gmr__stream_home {
  _Atomic uint64_t entries[GMR__STREAM_HOME_ENTRIES]; /* (number << 8) | shard, 0: empty */
} gmr__stream_home;

/* The shard (0..count-1, count <= 256) that serves the stream of `key`.
 * Pre: `count` is the same at every call on `t` (a resource's shard count):
 * entries keep the shard already reduced, so a hit needs no division (a
 * 32-bit division was a tenth of a pool's allocate + free pair). */
static inline uint32_t gmr__stream_home_of(gmr__stream_home *t, gmr__stream_key key,
                                           uint32_t count) {
  uint64_t n = key.stream == (gmr_stream)cudaStreamPerThread
                   ? key.id
                   : (uint64_t)(uintptr_t)key.stream ^ (UINT64_C(1) << 55);
  n &= (UINT64_C(1) << 56) - 1u;
  uint64_t h = (n * UINT64_C(0x9E3779B97F4A7C15)) >> 56;
  _Atomic uint64_t *entry = &t->entries[h & (GMR__STREAM_HOME_ENTRIES - 1u)];
  uint64_t e = atomic_load_explicit(entry, memory_order_relaxed);
  if (e != 0 && (e >> 8) == n) return (uint32_t)(e & 0xffu);
  uint32_t shard = gmr__thread_home() % count;
  atomic_store_explicit(entry, (n << 8) | shard, memory_order_relaxed);
  return shard;
}

#endif /* GMR_STREAM_ORDERED_STREAM_HOME_H_ */
