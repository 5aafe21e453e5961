/*
 * resources/vmm/base/vmm_base.h (internal): the VMM base, what both VMM
 * resources are made of: the common handle gmr_vmm_pool_resource
 * (gmr/vmm_pool_resource.h), which each resource's own struct has first,
 * and the table of operations through which the public functions of that
 * handle reach the resource behind it.
 *
 *   vmm_base.c         create's common part: the config's common fields,
 *                      the device's VMM properties, page and VA chunk sizes,
 *                      peers; the device synchronisation of destroy
 *   vmm_base_stats.c   gmr_vmm_pool_resource_get_stats, _get_regions, _dump,
 *                      the deprecated _check_invariants
 *   vmm_base_sleep.c   the tags, sleep and wake functions
 *                      (gmr/vmm_pool_sleep.h)
 *   vmm_base_ranges.c  the reserved ranges' functions (gmr/vmm_pool_range.h)
 *   vmm_sleep_run.c    sleep and wake written once: the sequence, host
 *                      copies, rollbacks (each resource gives its steps)
 *   vmm_host.c         the host memory of sleep: backups, kept backups, the
 *                      staging ring, the copy stream (vmm_host.h)
 *   vmm_copy.c         the copies between device and backups, through the
 *                      ring with copy threads
 *   vmm_ranges.c       reserved ranges: commit, decommit, their books
 *   vmm_ranges_sleep.c the ranges as a participant of sleep and wake
 *   vmm_unreleased.c   what the driver refused to give back, kept and asked
 *                      for again
 *
 * Each resource (resources/vmm/fine: vmm; resources/vmm/pages: vmm_pages)
 * fills the handle at create (gmr__vmm_base_init) with its own vtable and
 * operations table; nothing here knows which resource it serves.
 *
 * Thread-safe: the fields below are fixed at create, but `lock` (the
 * resource's mutex: sleep, wake and the tags take it around the operations
 * that say so), `sleeping`, and what `host` and `ranges` point to (under
 * `lock`).
 */
#ifndef GMR_RESOURCES_VMM_BASE_VMM_BASE_H_
#define GMR_RESOURCES_VMM_BASE_VMM_BASE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/resource.h"
#include "gmr/status.h"
#include "gmr/vmm_pool_resource.h"

/* The devices that get access to every page: the pool's and its peers. */
#define VMM_MAX_ACCESS (1 + GMR_VMM_POOL_MAX_PEERS)

struct gmr__vmm_host;   /* vmm_host.h */
struct gmr__vmm_ranges; /* vmm_ranges.h */

/* Text that grows into a caller's buffer (the dump): `used` is what the
 * whole text needs, NUL excluded, also past `bytes`. */
typedef struct gmr__vmm_text {
  char *buf;
  size_t bytes;
  size_t used;
} gmr__vmm_text;

/* Append printf-style text (truncated in the buffer, counted whole). */
void gmr__vmm_put(gmr__vmm_text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* What a VMM resource does for the public functions of its handle. None is
 * called with `p`'s mutex held unless it says so. */
typedef struct gmr__vmm_engine_ops {
  /* Fill the statistics past page_bytes and granularity_bytes (s is
   * zeroed, size and version set). */
  void (*stats)(gmr_vmm_pool_resource *p, gmr_vmm_pool_resource_stats *s);
  /* Up to `capacity` regions into out (may be NULL with capacity 0), in
   * address order; returns how many there are. */
  size_t (*regions)(gmr_vmm_pool_resource *p, gmr_vmm_pool_region *out, size_t capacity);
  /* Append every region as a line of text (the dump, after the figures). */
  void (*dump_regions)(gmr_vmm_pool_resource *p, gmr__vmm_text *t);
  /* The tag of allocations made from now on (tag checked). */
  void (*set_default_tag)(gmr_vmm_pool_resource *p, uint32_t tag);
  /* Tag the allocation at ptr: GMR_OK or GMR_ERR_UNKNOWN_POINTER. */
  gmr_status (*set_tag)(gmr_vmm_pool_resource *p, void *ptr, uint32_t tag);
  /* Mutex held: add what the allocations of tag_mask hold to *s. */
  void (*tag_stats)(gmr_vmm_pool_resource *p, uint64_t tag_mask, gmr_vmm_pool_tag_stats *s);
  /* Mutex held, the pool awake, `o` checked: put it to sleep
   * (vmm_sleep_run.h); *asleep as gmr__vmm_sleep_run says. */
  gmr_status (*sleep)(gmr_vmm_pool_resource *p, const gmr_vmm_pool_sleep_options *o,
                      gmr_failure *failure, bool *asleep);
  /* Mutex held, the pool asleep, `o` checked: wake the selected
   * allocations; *woken as gmr__vmm_wake_run says, *still_asleep whether
   * anything sleeps after it. */
  gmr_status (*wake)(gmr_vmm_pool_resource *p, const gmr_vmm_pool_wake_options *o,
                     gmr_failure *failure, bool *woken, bool *still_asleep);
} gmr__vmm_engine_ops;

struct gmr_vmm_pool_resource {
  gmr_resource base;               /* first: the pool is a gmr_resource */
  const gmr__vmm_engine_ops *ops;  /* the resource's operations */
  const gmr__cuda_ops *cuda;
  const gmr__cuda_vmm_ops *vmm;
  pthread_mutex_t lock;
  int device;
  int access_devices[VMM_MAX_ACCESS]; /* [0] = device, then peers */
  size_t access_count;
  gmr__vmm_prop prop; /* what cuMemCreate is asked for; never written after create */
  /* The driver refused fabric handles once: no later cuMemCreate asks for
   * them (set by whichever thread saw it; read by every creating thread). */
  atomic_bool fabric_refused;
  size_t page_bytes;
  size_t granularity_bytes;
  size_t va_chunk_bytes;
  size_t device_total_bytes; /* cudaMemGetInfo's total at create: no request above it is served */
  gmr_vmm_pool_resource_config config; /* as created */
  /* From a sleep past its point of return (GMR_OK, or a release refused at
   * its end) until a wake leaves nothing asleep (written under the mutex;
   * read without it on the allocation paths). */
  atomic_bool sleeping;
  /* The tag of allocations (and ranges) made from now on, as last set
   * (each resource keeps its own copy for its allocations). */
  atomic_uint default_tag;
  /* The host side of sleep (backups, ring, copies) and the reserved
   * ranges, both under `lock`. */
  struct gmr__vmm_host *host;
  struct gmr__vmm_ranges *ranges;
};

/* Whether the pool is asleep: allocate and extend refuse meanwhile. */
static inline bool gmr__vmm_asleep(const gmr_vmm_pool_resource *p) {
  return atomic_load_explicit(&p->sleeping, memory_order_relaxed);
}

/* The message `failure` gets and the status a create returns for a
 * refused config: st with `message` (failure is never NULL here). */
gmr_status gmr__vmm_create_fail(gmr_failure *failure, gmr_status st, const char *message);

/* The common fields of a config: peer_access and peer_count in range, and
 * of `streams` nothing but streams_outlive_resource away from its default. */
gmr_status gmr__vmm_config_check(const gmr_vmm_pool_resource_config *c, gmr_failure *failure);

/* Set up the handle `p` (zeroed by the caller) for a resource of vtable
 * `vtbl` and operations `ops` from config `c` (checked): the device, its
 * VMM properties, the page and VA chunk sizes, the peers, the host side of
 * sleep and the (empty) ranges. On failure the message is in `failure`;
 * gmr__vmm_base_deinit() undoes it either way. */
gmr_status gmr__vmm_base_init(gmr_vmm_pool_resource *p, const gmr_vmm_pool_resource_config *c,
                              const gmr_resource_vtbl *vtbl, const gmr__vmm_engine_ops *ops,
                              gmr_failure *failure);
void gmr__vmm_base_deinit(gmr_vmm_pool_resource *p);

/* Destroy's part of the base: GMR_ERR_BUSY while a range is reserved (the
 * mutex taken); else, the device synchronised by the caller, give back the
 * host side of sleep (GMR_ERR_CUDA while the driver refuses some: a later
 * destroy goes on). */
gmr_status gmr__vmm_base_release(gmr_vmm_pool_resource *p);
/* The base's books (ranges): the type's check calls it (mutex taken). */
gmr_status gmr__vmm_base_check(gmr_vmm_pool_resource *p, char *err, size_t err_bytes);

/* initial_pages that cannot be mapped (st OUT_OF_MEMORY): the message says
 * what was asked, how many pages the device has room for and the option to
 * lower; the driver's code stays in the record. Returns st. */
gmr_status gmr__vmm_initial_pages_fail(gmr_vmm_pool_resource *p, size_t pages, gmr_status st,
                                       gmr_failure *failure);

/* Destroy's first step: the device synchronised (made current around
 * cudaDeviceSynchronize), so nothing still runs on the memory. */
cudaError_t gmr__vmm_synchronize_device(gmr_vmm_pool_resource *p);

/* cuMemCreate of `bytes` with the pool's properties and its fabric_refused
 * flag (gmr__vmm_create_or_drop_fabric: any thread, no lock). */
CUresult gmr__vmm_create_handle(gmr_vmm_pool_resource *p, CUmemGenericAllocationHandle *handle,
                                size_t bytes);

/* GMR_ERR_OUT_OF_MEMORY, with a message, for a request (or an extension) of
 * `bytes` above all of the device's memory, before anything is planned for
 * it (a growth's books grow with its size); GMR_OK otherwise. */
gmr_status gmr__vmm_refuse_beyond_device(const gmr_vmm_pool_resource *p, size_t bytes,
                                         gmr_failure *failure);

/* The refusal of a request while the pool is asleep ("allocating",
 * "extending"): GMR_ERR_BUSY. */
gmr_status gmr__vmm_busy_asleep(gmr_failure *failure, const char *doing);

/* Add `stream` to the set (*streams, *count) of streams record_stream named.
 * false: host memory ran out (the set is unchanged). */
static inline bool gmr__vmm_streams_add(gmr_stream **streams, uint32_t *count, gmr_stream stream) {
  for (uint32_t i = 0; i < *count; ++i) {
    if ((*streams)[i] == stream) return true;
  }
  gmr_stream *grown = (gmr_stream *)realloc(*streams, (*count + 1) * sizeof *grown);
  if (grown == NULL) return false;
  grown[(*count)++] = stream;
  *streams = grown;
  return true;
}

/* The region list as text, one line per region under a line per VA chunk
 * (a dump_regions for a resource whose regions() says all). */
void gmr__vmm_dump_listed_regions(gmr_vmm_pool_resource *p, gmr__vmm_text *t);

/* Names of the region kinds (gmr_vmm_pool_region_kind order), for text. */
extern const char *const gmr__vmm_region_kind_names[5];

/* Write an invariant's violation into err (err_bytes, may be NULL/0) and
 * return GMR_ERR_INTERNAL. */
gmr_status gmr__vmm_violation(char *err, size_t err_bytes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* GMR_RESOURCES_VMM_BASE_VMM_BASE_H_ */
