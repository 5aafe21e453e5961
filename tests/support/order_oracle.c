/*
 * tests/support/order_oracle.c: the stream-ordering oracle and its random
 * programs (order_oracle.h).
 */
#include "tests/support/order_oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"


/* A status the caller may ignore (an injected failure, a best effort). */
static void ignore(gmr_status st) { (void)st; }
/* ---- the oracle ------------------------------------------------------------ */

#define MAX_MARKS 12

/* A range of memory: freed (marks: the work that may still use it) or live
 * (no marks: given out and not freed). */
typedef struct watched {
  uint64_t phys; /* physical allocation id; 0: `start` is an address */
  uint64_t start, end;
  bool live;
  uint32_t mark_count;
  gmr_cuda_sim_mark marks[MAX_MARKS];
  gmr_stream users[MAX_MARKS]; /* the stream of each mark */
  uint64_t free_number;        /* which note_free made it (1, 2, ...) */
  gmr_stream live_stream;
} watched;

struct order_oracle {
  watched *items;
  size_t count, capacity;
  gmr_cuda_sim_mark *all_marks; /* released at destroy (ranges share them after splits) */
  size_t mark_count, mark_capacity;
  size_t frees_since_collect;
  uint64_t free_count;
};

order_oracle *order_oracle_create(void) { return calloc(1, sizeof(order_oracle)); }

void order_oracle_destroy(order_oracle *o) {
  if (o == NULL) return;
  for (size_t i = 0; i < o->mark_count; ++i) ignore(gmr_cuda_sim_mark_release(o->all_marks[i]));
  free(o->all_marks);
  free(o->items);
  free(o);
}

static bool push(order_oracle *o, const watched *w) {
  if (o->count == o->capacity) {
    size_t capacity = o->capacity == 0 ? 64 : o->capacity * 2;
    watched *grown = realloc(o->items, capacity * sizeof *grown);
    if (grown == NULL) return false;
    o->items = grown;
    o->capacity = capacity;
  }
  o->items[o->count++] = *w;
  return true;
}

static void remove_at(order_oracle *o, size_t i) { o->items[i] = o->items[--o->count]; }

/* One physically contiguous piece of [addr, end): its physical id and
 * offset, and where it ends. */
static uintptr_t segment(uintptr_t addr, uintptr_t end, uint64_t *phys, uint64_t *offset) {
  gmr_cuda_sim_vmm_mapping m;
  if (gmr_cuda_sim_vmm_query((const void *)addr, &m) == GMR_OK && m.mapped) {
    uintptr_t base = (uintptr_t)m.base;
    uintptr_t stop = base + m.bytes < end ? base + m.bytes : end;
    *phys = m.physical_id;
    *offset = addr - base;
    return stop;
  }
  *phys = 0;
  *offset = addr;
  return end;
}

/* Drop the freed ranges whose work is all done. */
static void collect(order_oracle *o) {
  for (size_t i = 0; i < o->count;) {
    watched *w = &o->items[i];
    bool done = !w->live;
    for (uint32_t m = 0; done && m < w->mark_count; ++m) {
      bool complete = false;
      done = gmr_cuda_sim_mark_query(w->marks[m], &complete) == GMR_OK && complete;
    }
    if (done) {
      remove_at(o, i);
    } else {
      ++i;
    }
  }
}

size_t order_oracle_watched(order_oracle *o) {
  collect(o);
  size_t n = 0;
  for (size_t i = 0; i < o->count; ++i) n += !o->items[i].live;
  return n;
}

static bool keep_mark(order_oracle *o, gmr_cuda_sim_mark m) {
  if (o->mark_count == o->mark_capacity) {
    size_t capacity = o->mark_capacity == 0 ? 256 : o->mark_capacity * 2;
    gmr_cuda_sim_mark *grown = realloc(o->all_marks, capacity * sizeof *grown);
    if (grown == NULL) return false;
    o->all_marks = grown;
    o->mark_capacity = capacity;
  }
  o->all_marks[o->mark_count++] = m;
  return true;
}

/* Cut [start, end) of physical `phys` out of every range, keeping the rest. */
static bool cut(order_oracle *o, uint64_t phys, uint64_t start, uint64_t end) {
  for (size_t i = 0; i < o->count;) {
    watched w = o->items[i];
    if (w.phys != phys || w.end <= start || end <= w.start) {
      ++i;
      continue;
    }
    remove_at(o, i);
    if (w.start < start) {
      watched left = w;
      left.end = start;
      if (!push(o, &left)) return false;
    }
    if (end < w.end) {
      watched right = w;
      right.start = end;
      if (!push(o, &right)) return false;
    }
    /* i now holds another range (or the end): look at it again. */
  }
  return true;
}

bool order_oracle_note_free(order_oracle *o, const void *ptr, size_t bytes,
                            const gmr_stream *users, size_t user_count) {
  watched w;
  memset(&w, 0, sizeof w);
  for (size_t u = 0; u < user_count && w.mark_count < MAX_MARKS; ++u) {
    gmr_cuda_sim_mark m = 0;
    if (gmr_cuda_sim_mark_stream(users[u], &m) != GMR_OK || !keep_mark(o, m)) return false;
    w.users[w.mark_count] = users[u];
    w.marks[w.mark_count++] = m;
  }
  w.free_number = ++o->free_count;
  uintptr_t addr = (uintptr_t)ptr, end = addr + bytes;
  while (addr < end) {
    uint64_t phys = 0, offset = 0;
    uintptr_t stop = segment(addr, end, &phys, &offset);
    w.phys = phys;
    w.start = offset;
    w.end = offset + (stop - addr);
    if (!cut(o, phys, w.start, w.end) || !push(o, &w)) return false;
    addr = stop;
  }
  if (++o->frees_since_collect >= 64) {
    o->frees_since_collect = 0;
    collect(o);
  }
  return true;
}

static void say(char *why, size_t why_bytes, const char *format, ...) {
  if (why == NULL || why_bytes == 0) return;
  va_list args;
  va_start(args, format);
  (void)vsnprintf(why, why_bytes, format, args);
  va_end(args);
}

bool order_oracle_check_allocation(order_oracle *o, const void *ptr, size_t bytes,
                                   gmr_stream stream, char *why, size_t why_bytes) {
  bool ok = true;
  uintptr_t addr = (uintptr_t)ptr, end = addr + bytes;
  while (addr < end) {
    uint64_t phys = 0, offset = 0;
    uintptr_t stop = segment(addr, end, &phys, &offset);
    uint64_t start = offset, finish = offset + (stop - addr);
    for (size_t i = 0; ok && i < o->count; ++i) {
      const watched *w = &o->items[i];
      if (w->phys != phys || w->end <= start || finish <= w->start) continue;
      if (w->live) {
        ok = false;
        say(why, why_bytes,
            "%zu bytes at %p on stream %p overlap memory that is still allocated (on stream %p)",
            bytes, ptr, (void *)stream, (void *)w->live_stream);
        break;
      }
      for (uint32_t m = 0; m < w->mark_count; ++m) {
        bool ordered = true;
        if (gmr_cuda_sim_mark_ordered_before(w->marks[m], stream, &ordered) != GMR_OK) continue;
        if (!ordered) {
          ok = false;
          say(why, why_bytes,
              "%zu bytes at %p given to stream %p overlap memory of free #%llu (physical "
              "%llu, offsets %llu-%llu) that work of stream %p may still use: stream %p is "
              "not ordered after it (no wait, no synchronisation, not done)",
              bytes, ptr, (void *)stream, (unsigned long long)w->free_number,
              (unsigned long long)phys, (unsigned long long)w->start,
              (unsigned long long)w->end, (void *)w->users[m], (void *)stream);
          break;
        }
      }
    }
    watched live;
    memset(&live, 0, sizeof live);
    live.phys = phys;
    live.start = start;
    live.end = finish;
    live.live = true;
    live.live_stream = stream;
    if (!cut(o, phys, start, finish) || !push(o, &live)) {
      say(why, why_bytes, "the oracle ran out of host memory");
      return false;
    }
    addr = stop;
  }
  return ok;
}
