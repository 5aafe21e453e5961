/*
 * tests/stream_slots_probe.h: stream_ordered/stream_slots.h driven from C over a fake
 * resource (the table's event state uses C11 atomics, which C++ cannot
 * include), for tests/stream_slots_test.cc. A fake slot holds a number of
 * free blocks and of blocks waiting for events; it is empty when both are 0.
 * Streams are plain handle values: the table makes no CUDA call.
 */
#ifndef GMR_TESTS_STREAM_SLOTS_PROBE_H_
#define GMR_TESTS_STREAM_SLOTS_PROBE_H_

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct slots_probe slots_probe;

/* The table's constants, for the C++ test. */
typedef struct slots_probe_constants {
  uint32_t none;        /* GMR__STREAM_SLOT_NONE */
  uint32_t reuse_at;    /* GMR__STREAM_SLOTS_REUSE_AT */
  uint32_t reuse_never; /* GMR__STREAM_SLOTS_REUSE_NEVER */
  uint32_t eager_frees; /* GMR__STREAM_EVENT_EAGER_FREES */
  uint64_t capture_id;  /* GMR__STREAM_ID_CAPTURE | 1: a stream known by a capture */
} slots_probe_constants;
slots_probe_constants slots_probe_constants_get(void);

/* A table over a fake resource (gmr__stream_slots_init with `shared`,
 * on-demand events, `ids`, `reuse_at`); NULL when the init failed (with
 * `fail_create`, the shared slot cannot be made). */
slots_probe *slots_probe_new(bool shared, bool ids, uint32_t reuse_at, bool fail_create);
/* Deinit (every slot destroyed) and free; false if creates and destroys
 * differ. */
bool slots_probe_free(slots_probe *p);

/* gmr__stream_slots_of / _find / _for_handle. */
uint32_t slots_probe_of(slots_probe *p, uintptr_t handle, uint64_t id);
uint32_t slots_probe_find(slots_probe *p, uintptr_t handle, uint64_t id);
uint32_t slots_probe_for_handle(slots_probe *p, uintptr_t handle);

typedef struct slots_probe_table {
  uint32_t count, capacity, cached, first, active;
  int creates, destroys, started; /* the resource's create/destroy/started calls */
  int moves;                      /* move_all calls */
  uint32_t last_move_from, last_move_to;
} slots_probe_table;
slots_probe_table slots_probe_table_of(const slots_probe *p);

typedef struct slots_probe_slot {
  uintptr_t handle;
  uint64_t id;
  bool retired;
  bool lazy;
  uint32_t eager_left;
  uint64_t free_seq;
  int blocks, waiting;
  const void *identity; /* the slot's address: stays while the table grows */
} slots_probe_slot;
slots_probe_slot slots_probe_slot_at(const slots_probe *p, uint32_t i);

void slots_probe_set(slots_probe *p, uint32_t i, int blocks, int waiting);
void slots_probe_fail_create(slots_probe *p, bool fail);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_STREAM_SLOTS_PROBE_H_ */
