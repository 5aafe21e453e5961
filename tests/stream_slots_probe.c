/*
 * tests/stream_slots_probe.c: see stream_slots_probe.h.
 */
#include "tests/stream_slots_probe.h"

#include <stdlib.h>

#include "stream_ordered/stream_slots.h"

typedef struct fake_slot {
  gmr__stream_slot base; /* first */
  int blocks;
  int waiting;
} fake_slot;

struct slots_probe {
  gmr__stream_slots table;
  int creates, destroys, started, moves;
  uint32_t last_move_from, last_move_to;
  bool fail_create;
};

static fake_slot *at(const slots_probe *p, uint32_t i) {
  return (fake_slot *)(void *)p->table.items[i];
}

static gmr__stream_slot *create(void *ctx) {
  slots_probe *p = ctx;
  if (p->fail_create) return NULL;
  fake_slot *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  p->creates++;
  return &s->base;
}

static void destroy(void *ctx, gmr__stream_slot *slot) {
  ((slots_probe *)ctx)->destroys++;
  free(slot);
}

static bool empty(void *ctx, uint32_t i) {
  const fake_slot *s = at(ctx, i);
  return s->blocks == 0 && s->waiting == 0;
}

static bool move_all(void *ctx, uint32_t from, uint32_t to) {
  slots_probe *p = ctx;
  p->moves++;
  p->last_move_from = from;
  p->last_move_to = to;
  int n = at(p, from)->blocks;
  at(p, to)->blocks += n;
  at(p, from)->blocks = 0;
  return n > 0;
}

static void started(void *ctx, uint32_t i) {
  (void)i;
  ((slots_probe *)ctx)->started++;
}

/* No reclaim step runs on the probe's table: their operations stay NULL. */
static const gmr__stream_slots_ops ops = {
    .create = create, .destroy = destroy, .empty = empty, .move_all = move_all, .started = started};

slots_probe *slots_probe_new(bool shared, bool ids, uint32_t reuse_at, bool fail_create) {
  slots_probe *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->fail_create = fail_create;
  if (!gmr__stream_slots_init(&p->table, &ops, p, shared, GMR__STREAM_EVENTS_ON_DEMAND, ids,
                              reuse_at, NULL, NULL)) {
    free(p);
    return NULL;
  }
  return p;
}

bool slots_probe_free(slots_probe *p) {
  gmr__stream_slots_deinit(&p->table);
  bool balanced = p->creates == p->destroys && p->table.items == NULL && p->table.count == 0;
  free(p);
  return balanced;
}

slots_probe_constants slots_probe_constants_get(void) {
  slots_probe_constants c = {GMR__STREAM_SLOT_NONE, GMR__STREAM_SLOTS_REUSE_AT,
                             GMR__STREAM_SLOTS_REUSE_NEVER, GMR__STREAM_EVENT_EAGER_FREES,
                             GMR__STREAM_ID_CAPTURE | 1u};
  return c;
}

static gmr__stream_key key(uintptr_t handle, uint64_t id) {
  gmr__stream_key k = {(gmr_stream)handle, id};
  return k;
}

uint32_t slots_probe_of(slots_probe *p, uintptr_t handle, uint64_t id) {
  return gmr__stream_slots_of(&p->table, key(handle, id));
}

uint32_t slots_probe_find(slots_probe *p, uintptr_t handle, uint64_t id) {
  return gmr__stream_slots_find(&p->table, key(handle, id));
}

uint32_t slots_probe_for_handle(slots_probe *p, uintptr_t handle) {
  return gmr__stream_slots_for_handle(&p->table, (gmr_stream)handle);
}

slots_probe_table slots_probe_table_of(const slots_probe *p) {
  slots_probe_table t = {p->table.count,  p->table.capacity, p->table.cached, p->table.first,
                         p->table.active, p->creates,        p->destroys,     p->started,
                         p->moves,        p->last_move_from, p->last_move_to};
  return t;
}

slots_probe_slot slots_probe_slot_at(const slots_probe *p, uint32_t i) {
  const fake_slot *s = at(p, i);
  slots_probe_slot out = {(uintptr_t)s->base.ev.key.stream,
                          s->base.ev.key.id,
                          s->base.retired,
                          s->base.ev.lazy,
                          s->base.ev.eager_left,
                          s->base.ev.free_seq,
                          s->blocks,
                          s->waiting,
                          s};
  return out;
}

void slots_probe_set(slots_probe *p, uint32_t i, int blocks, int waiting) {
  at(p, i)->blocks = blocks;
  at(p, i)->waiting = waiting;
}

void slots_probe_fail_create(slots_probe *p, bool fail) { p->fail_create = fail; }
