/*
 * resources/vmm/base/vmm_unreleased.h (internal): what the driver refused to
 * give back, kept instead of forgotten, for every VMM resource
 * (gmr/vmm_pool_resource.h: vmm and vmm_pages).
 *
 * A physical allocation whose cuMemRelease the driver refuses is still
 * device memory, and a pinned host copy whose cudaFreeHost it refuses is
 * still pinned: a pool that drops the handle or the pointer can never give
 * them back. Each is kept here with its size; the pool's books (footprint,
 * held bytes, statistics) go on counting it until the driver takes it, and
 * the next trim, sleep, wake and destroy ask again first
 * (gmr__vmm_unreleased_retry). Destroy fails while anything is kept.
 *
 * Keeping must not need host memory at the moment of the refusal (the
 * caller has unmapped the memory and cannot undo that): a slot is promised
 * before a handle is created (cuMemCreate) or a pinned copy allocated
 * (cudaHostAlloc), and the promise ends when it is released or freed, so
 * the arrays always have room for every refusal.
 *
 * Thread-safe: no; each set belongs to one lock (vmm_pages's mutex, or
 * the spin lock of one placement engine).
 */
#ifndef GMR_RESOURCES_VMM_BASE_VMM_UNRELEASED_H_
#define GMR_RESOURCES_VMM_BASE_VMM_UNRELEASED_H_

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/resource.h"
#include "gmr/status.h"

/* One thing kept: a physical allocation handle, or a pinned copy's address. */
typedef struct gmr__vmm_kept_item {
  uint64_t id;
  size_t bytes;
} gmr__vmm_kept_item;

typedef struct gmr__vmm_kept_list {
  gmr__vmm_kept_item *items; /* [0, count): kept now */
  size_t count;
  size_t bytes;    /* of the items kept */
  size_t promised; /* slots owed: every handle (copy) alive, kept ones included */
  size_t capacity;
} gmr__vmm_kept_list;

typedef struct gmr__vmm_unreleased {
  const gmr__cuda_ops *cuda;
  const gmr__cuda_vmm_ops *vmm;
  gmr__vmm_kept_list handles; /* cuMemRelease refused; unmapped everywhere */
  gmr__vmm_kept_list hosts;   /* cudaFreeHost refused (pinned copies only) */
} gmr__vmm_unreleased;

void gmr__vmm_unreleased_init(gmr__vmm_unreleased *u, const gmr__cuda_ops *cuda,
                              const gmr__cuda_vmm_ops *vmm);
/* Free the arrays. Pre: nothing kept (destroy checked). */
void gmr__vmm_unreleased_deinit(gmr__vmm_unreleased *u);

static inline bool gmr__vmm_unreleased_any(const gmr__vmm_unreleased *u) {
  return u->handles.count + u->hosts.count > 0;
}

/* Promise a slot before making one handle or pinned copy. false: host
 * memory ran out (make nothing). */
bool gmr__vmm_kept_promise(gmr__vmm_kept_list *l);
/* End the promise of a handle or copy that was not made after all. */
void gmr__vmm_kept_unpromise(gmr__vmm_kept_list *l);

/* cuMemRelease of h (`bytes`, mapped nowhere); a refusal keeps it. Returns
 * the driver's result. */
CUresult gmr__vmm_release_or_keep(gmr__vmm_unreleased *u, CUmemGenericAllocationHandle h,
                                  size_t bytes);
/* cudaFreeHost of a pinned copy; a refusal keeps it. Returns the result. */
cudaError_t gmr__vmm_free_pinned_or_keep(gmr__vmm_unreleased *u, void *host, size_t bytes);

/* Release and free again everything kept; what the driver still refuses
 * stays. Adds the handles released to *released_bytes and
 * *released_count. GMR_OK when nothing is kept any more, else
 * GMR_ERR_CUDA with the failure (may be NULL) naming the call, its code and
 * what stays kept. */
gmr_status gmr__vmm_unreleased_retry(gmr__vmm_unreleased *u, size_t *released_bytes,
                                     size_t *released_count, gmr_failure *failure);

/* Describe, in the failure record (may be NULL), a refusal (`call` answered
 * `code`, named `code_name`), what holds all the same (`done`, e.g. "asleep
 * all the same"; may be NULL) and what is kept (device and pinned host
 * bytes). Returns GMR_ERR_CUDA. */
gmr_status gmr__vmm_unreleased_fail(gmr_failure *failure, const char *call, const char *code_name,
                                    int code, const char *done, size_t kept_device_bytes,
                                    size_t kept_host_bytes);

#endif /* GMR_RESOURCES_VMM_BASE_VMM_UNRELEASED_H_ */
