/*
 * tests/support/order_oracle.h: the stream-ordering oracle of the test suite
 * and the fuzz target, on the host simulation (gmr/sim/cuda_sim.h).
 *
 * The rule every stream-ordered resource keeps (docs/stream_ordering.md):
 * memory freed while some stream's work may still use it goes to another
 * stream only once that stream is ordered after that work (an event waited
 * on, the work known done, a synchronisation). The oracle knows, for every
 * freed byte, the work that may still use it: a mark of the simulation
 * (gmr_cuda_sim_mark_stream) on each stream that used the memory, made at
 * the free. The simulation orders streams as a GPU does, transitively, so
 * work a stream inherits by a wait the allocator made is counted. An
 * allocation that overlaps freed bytes whose marks its stream is not ordered
 * after is a violation.
 *
 * Bytes are known by the physical memory behind them (gmr_cuda_sim_vmm_query:
 * a VMM allocation mapped at two addresses is one memory), else by address.
 *
 * The random programs (order_program_run) drive a resource on several
 * streams with holds, waits that chain, frees with record_stream, handoffs,
 * stream destroys and new streams, trims, and (as an option) failed event
 * calls, and check every allocation with the oracle.
 *
 * Thread-safe: no (one program at a time).
 */
#ifndef GMR_TESTS_SUPPORT_ORDER_ORACLE_H_
#define GMR_TESTS_SUPPORT_ORDER_ORACLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct order_oracle order_oracle;

/* A new oracle, or NULL (host memory). */
order_oracle *order_oracle_create(void);
void order_oracle_destroy(order_oracle *o);

/* [ptr, ptr + bytes) is about to be freed; the streams in `users` may still
 * use it (their work queued so far). False when a mark could not be made. */
bool order_oracle_note_free(order_oracle *o, const void *ptr, size_t bytes,
                            const gmr_stream *users, size_t user_count);

/* [ptr, ptr + bytes) was just given to `stream`. False, with a message in
 * `why`, when a byte of it may still be in use by work `stream` is not
 * ordered after. The bytes are `stream`'s from now (forgotten as freed). */
bool order_oracle_check_allocation(order_oracle *o, const void *ptr, size_t bytes,
                                   gmr_stream stream, char *why, size_t why_bytes);

/* Freed ranges the oracle still watches (their work not known done). */
size_t order_oracle_watched(order_oracle *o);

/* ---- random programs ------------------------------------------------------ */

/* Where a program's choices come from: a fuzzer's bytes (data != NULL: the
 * program ends when they run out) or a seed. */
typedef struct order_source {
  const uint8_t *data;
  size_t size;
  size_t pos;
  uint64_t state;
} order_source;

static inline order_source order_source_seed(uint64_t seed) {
  order_source s = {NULL, 0, 0, seed};
  return s;
}

static inline order_source order_source_bytes(const uint8_t *data, size_t size) {
  order_source s = {data, size, 0, 0};
  return s;
}

typedef struct order_program_options {
  uint32_t stream_count;   /* streams in use at once (at least 2) */
  uint32_t op_count;       /* steps (a fuzzer's bytes may end the program sooner) */
  size_t max_bytes;        /* largest request */
  uint32_t max_live;       /* live allocations at most */
  bool record_stream;      /* gmr_resource_record_stream on other streams */
  bool destroy_streams;    /* destroy streams (work pending or not) and make new ones */
  bool reuse_handles;      /* a new stream may get a destroyed stream's handle while its
                              work is pending (only resources that ask stream ids:
                              stream_ids=true or streams that outlive) */
  bool faults;             /* make cudaEventRecord / cudaEventQuery /
                              cudaStreamWaitEvent / cudaEventCreate fail now and then */
  bool trim;               /* gmr_resource_trim now and then */
  bool same_stream_free;   /* free only on the allocating stream (no handoffs) */
  bool captures;           /* capture graphs: begin on a stream, fork streams into the
                              capture (nested forks too), join them back in part or
                              in full, allocate, free and record_stream inside it */
  /* Called after each capture ended and its graph was destroyed, with the
   * streams that took part (the origin first): a graph arena's caller claims
   * the capture's memory. NULL: none. */
  void (*after_capture)(void *ctx, const gmr_stream *streams, size_t count);
  void *after_capture_ctx;
  /* Called after a stream of the program is created and before one is
   * destroyed (`created` false): a tier manager's caller binds it to a
   * reservation. NULL: none. */
  void (*on_stream)(void *ctx, gmr_stream stream, bool created);
  void *on_stream_ctx;
} order_program_options;

#define ORDER_PROGRAM_OPTIONS_DEFAULT \
  {4, 400, (size_t)8 << 20, 48, true, true, false, false, true, false, false, NULL, NULL, NULL, NULL}

typedef struct order_program_result {
  uint64_t allocations;
  uint64_t frees;
  uint64_t failed_allocations; /* out of memory or refused: allowed, not checked */
  uint64_t resource_waits;     /* cudaStreamWaitEvent calls the resource made */
  uint64_t holds;
  uint64_t captures;
  uint64_t violations;
  char first_violation[512];
  char error[256]; /* the program itself could not go on (a resource call failed that
                      must not: a free, a destroy); empty if it ran */
  /* Without destroy_streams the streams are promised to outlive the resource:
   * they are left here, for the caller to destroy after the resource. */
  gmr_stream kept_streams[8];
  uint32_t kept_count;
} order_program_result;

/*
 * Run one random program on `r` (which must be empty, on the simulation) and
 * leave it empty again: every allocation freed, every stream destroyed (but
 * see kept_streams), the device synchronised. Returns true when it ran with no violation and no
 * error (details in *out).
 */
bool order_program_run(gmr_resource *r, order_source *src, const order_program_options *opt,
                       order_program_result *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_ORDER_ORACLE_H_ */
