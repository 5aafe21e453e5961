/*
 * gmr/vmm_pool_sleep.h: tags, sleep and wake of gmr_vmm_pool_resource
 * (gmr/vmm_pool_resource.h: vmm and vmm_pages alike): what LLM inference servers do
 * between workloads (vLLM's sleep mode and its CuMemAllocator, SGLang's
 * torch_memory_saver, TensorRT-LLM's release and resume, NVIDIA Dynamo's GPU
 * memory service). docs/serving.md maps their calls to these. Reserved
 * ranges whose memory is committed later (gmr/vmm_pool_range.h, included at
 * the end) sleep and wake with the pool too.
 *
 * Tags: every allocation carries a tag 0..63, the pool's default tag when it
 * was made (gmr_vmm_pool_resource_set_default_tag) or one set on it later
 * (gmr_vmm_pool_resource_set_tag). Tags choose, at sleep, which allocations
 * are copied to host memory, which are discarded, and which stay as they
 * are; at wake, which come back.
 *
 * Sleep: the device is synchronised (so work still running on the memory
 * finishes first: the rule is "synchronise", never "refuse", and nothing is
 * unmapped under a running kernel), every free
 * page (and, in vmm_pages, zombie) goes back to the device as trim
 * gives it, the live allocations of the tags to save are copied to host
 * memory (pageable, through the pool's pinned staging ring, or pinned;
 * "Host memory" below), then the physical memory
 * of every live allocation not of a tag to keep is unmapped and released:
 * its addresses stay reserved and the allocation is ASLEEP. Allocations of a
 * tag to keep stay mapped, with their contents (in vmm the
 * physical memory they share with others stays too: memory moves in whole
 * handles). Wake maps fresh physical memory at the same addresses and copies
 * the saved contents back, so pointers, and CUDA graphs captured before
 * sleep, stay valid; allocations that were not saved wake with undefined
 * contents.
 *
 * The pool is asleep from a sleep that succeeds (GMR_OK, or GMR_ERR_CUDA
 * "asleep all the same", below) until a wake leaves nothing asleep (a wake
 * of some tags leaves it asleep; freeing every asleep allocation does not
 * wake it). While it is asleep:
 *  - allocate and extend fail with GMR_ERR_BUSY, kept tags included;
 *  - a free of an asleep allocation is allowed: its addresses and its host
 *    copy go at once (a second free of it is GMR_ERR_DOUBLE_FREE; a pinned
 *    copy cudaFreeHost refuses is kept and freed later, the free succeeds);
 *    a free of a kept allocation is an ordinary free;
 *  - a second sleep is GMR_ERR_BUSY and changes nothing;
 *  - destroy is GMR_ERR_BUSY while an allocation is asleep.
 * A wake of a pool that is not asleep is GMR_ERR_INVALID_ARGUMENT.
 * Every failed sleep or wake (a refused driver call at any point, host or
 * device memory that ran out) leaves the pool as it was before the call
 * (but for the free memory a sleep gave back first, as trim would):
 * nothing mapped that the books do not know, no host copy leaked, the same
 * statistics; the call may be repeated once the cause is gone. Two
 * refusals come after the point of return and leave the call done all the
 * same, with GMR_ERR_CUDA and a message that says "all the same": a
 * cuMemRelease refused at the end of a sleep (the pool is asleep; the
 * memory is kept, unreleased_bytes in the statistics) and a cudaFreeHost
 * refused at the end of a wake (the allocations are awake with their
 * contents; the copy is kept, unfreed_host_bytes). Nothing is forgotten:
 * the next trim, sleep, wake or destroy asks the driver again first
 * (gmr/vmm_pool_resource.h, "Refused releases").
 *
 * Host memory: a host copy (a backup) is made at sleep and freed at the wake
 * of its allocation, at its free, or when a failed sleep rolls back, unless
 * the sleep asked to keep it (keep_backup): then the wake keeps it for the
 * next sleep, which reuses kept backups of the same kind and size and frees
 * the others. Backups are of one of two kinds:
 *  - pageable (GMR_VMM_POOL_HOST_PAGEABLE, the default): ordinary memory,
 *    copied through the pool's staging ring, one pinned buffer of
 *    staging_bytes (256 MiB by default) cut in chunks of at most 8 MiB: the
 *    device copies one chunk while copy threads move the previous ones
 *    between the ring and the backups, all on the pool's own stream (what
 *    NVIDIA Dynamo's snapshot restore does with one pinned arena, one
 *    staging range and one stream). The ring is pinned once, at the first
 *    sleep that needs it, and kept until destroy (or a sleep that asks for
 *    another size);
 *  - pinned (GMR_VMM_POOL_HOST_PINNED): page-locked memory (cudaHostAlloc),
 *    one direct copy per allocation; pinning a fresh backup costs more than
 *    the copy (an H200 pinned at about 2 GB/s), so it pays only with
 *    keep_backup, which holds pinned memory as large as the backups while
 *    awake.
 * Pinned host memory held while awake is thus the ring, plus kept pinned
 * backups only when asked for; while asleep, the backups too. A program that
 * sleeps and wakes holds no more after each cycle than after the first
 * (vLLM issue 21336 is that leak), unless cudaFreeHost refuses memory: then
 * it is kept, counted (unfreed_host_bytes) and freed by the next sleep, wake
 * or destroy (a backup's also by the next trim). The statistics say what
 * is held (host_pinned_bytes, host_pageable_bytes, staging_bytes,
 * kept_backup_bytes).
 *
 * Thread-safe: yes (under the pool's mutex and every engine's lock), but no
 * work may use the memory of a sleeping allocation until it is woken (an
 * access is an illegal address), and no other thread should allocate while
 * a sleep or wake runs.
 * Source: vLLM's CuMemAllocator (sleep(offload_tags), wake_up(tags)) and
 * torch_memory_saver (region, pause, resume); CUDA's driver VMM API.
 */
#ifndef GMR_VMM_POOL_SLEEP_H_
#define GMR_VMM_POOL_SLEEP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"
/* gmr_vmm_pool_resource (that header includes this one at its end). */
#include "gmr/vmm_pool_resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tags are 0..63. */
#define GMR_VMM_POOL_MAX_TAG 63u

/**
 * Give allocations made from now on tag `tag` (0 at create): e.g. set 1
 * before loading weights and 2 before the KV cache, then save only tag 1 at
 * sleep. Chunks of vmm_pages' small path get the tag in
 * force when they are made: their small blocks share it.
 * Units: a tag number, 0..GMR_VMM_POOL_MAX_TAG.
 * Thread-safe: yes (under the pool's or the engine's lock). The tag is the
 *   pool's, not the thread's: an allocation made by another thread meanwhile
 *   gets it too.
 * Stream/device: no CUDA call.
 * Source: vLLM's CuMemAllocator.use_memory_pool(tag), torch_memory_saver's
 *   region(tag).
 * Returns:
 *   GMR_OK                    set.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL, or tag is above 63.
 * On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_set_default_tag(
    gmr_vmm_pool_resource *pool, uint32_t tag);

/**
 * Tag the live (or asleep) allocation starting at `ptr`, or the reserved
 * range whose first address `ptr` is (gmr/vmm_pool_range.h: every page of
 * it, committed now or later). vmm_pages: an allocation of whole pages (a
 * small block lives in a chunk that has the chunk's tag); vmm: any
 * allocation.
 * Units: a tag number, 0..GMR_VMM_POOL_MAX_TAG.
 * Thread-safe: yes (under the pool's or the engine's lock).
 * Stream/device: no CUDA call; safe during a capture.
 * Returns:
 *   GMR_OK                    tagged.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL, or tag is above 63.
 *   GMR_ERR_UNKNOWN_POINTER   ptr is not the start of a live or asleep
 *                             allocation that can be tagged (see above),
 *                             nor of a reserved range.
 * On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_set_tag(gmr_vmm_pool_resource *pool,
                                                               void *ptr, uint32_t tag);

/* Where sleep keeps the contents it saves (see "Host memory" above). */
typedef enum gmr_vmm_pool_host_kind {
  /* Page-locked host memory (cudaHostAlloc), copied directly; pinning a
   * fresh backup is slow: pair it with keep_backup. */
  GMR_VMM_POOL_HOST_PINNED = 0,
  /* Ordinary pageable memory (mmap from 64 KiB, with transparent huge pages
   * from 2 MiB; malloc below), copied through the pool's pinned staging
   * ring by copy threads: no pinned memory but the ring is held. */
  GMR_VMM_POOL_HOST_PAGEABLE = 1
} gmr_vmm_pool_host_kind;

/* The staging ring when staging_bytes is 0: 256 MiB. */
#define GMR_VMM_POOL_STAGING_DEFAULT_BYTES ((size_t)256 << 20)

#define GMR_VMM_POOL_SLEEP_OPTIONS_VERSION 3u

typedef struct gmr_vmm_pool_sleep_options {
  size_t size;            /* sizeof as the caller knows it */
  uint32_t version;       /* GMR_VMM_POOL_SLEEP_OPTIONS_VERSION as the caller knows it */
  bool save_all;          /* copy every live allocation (not kept) to host memory */
  uint64_t save_tag_mask; /* else: bit t copies the allocations of tag t */
  /* Version 2: */
  uint64_t keep_tag_mask;      /* bit t: allocations of tag t stay mapped and valid
                                * (neither saved nor released); wins over saving */
  gmr_vmm_pool_host_kind host; /* where the copies go */
  /* Version 3: */
  size_t staging_bytes;  /* pageable copies: the pinned staging ring, bytes (0: 256 MiB;
                          * below 1 MiB: 1 MiB); kept by the pool across cycles */
  bool keep_backup;      /* the wake keeps this sleep's backups for the next sleep
                          * (held while awake; reused when of the same kind and size) */
  uint32_t copy_threads; /* pageable copies: host threads moving chunks between the ring and
                          * the backups (0: the CPUs, at most 16; at most 64) */
} gmr_vmm_pool_sleep_options;

/* Save nothing, keep nothing (every allocation discarded); pageable backups
 * through a 256 MiB staging ring, not kept; copy threads chosen by the pool.
 * (Before version 3 the default was pinned backups: a version-2 struct is
 * read as its caller set it.) */
#define GMR_VMM_POOL_SLEEP_OPTIONS_INIT                                                        \
  {sizeof(gmr_vmm_pool_sleep_options), GMR_VMM_POOL_SLEEP_OPTIONS_VERSION, false, 0, 0,      \
   GMR_VMM_POOL_HOST_PAGEABLE, 0, false, 0u}

/**
 * Give the physical memory of the pool back to the device while keeping
 * every live allocation's addresses (see the banner): free memory as trim
 * does, then the allocations (and the committed pages of reserved ranges,
 * gmr/vmm_pool_range.h) of every tag not in keep_tag_mask, after copying
 * those selected by save_all / save_tag_mask to host memory.
 *
 * Units: bytes. Ownership: `options` is read during the call only (NULL:
 *   save nothing, keep nothing; a version-1 struct is read as such: keep
 *   nothing, pinned; a version-2 struct: the host kind it names, the
 *   default ring, nothing kept); the backups, the staging ring and the
 *   kept backups are the pool's (until wake, the free of their allocation,
 *   a later sleep, or destroy: see the banner). `failure` (may be NULL)
 *   receives the reason of a failure.
 * Source: vLLM's CuMemAllocator.sleep(offload_tags), torch_memory_saver's
 *   pause(), TensorRT-LLM's release(tags); the staging ring after
 *   ai-dynamo/snapshot's restore (one pinned arena, one stream).
 * Thread-safe: yes (see the banner); the copy threads are the pool's and
 *   make no CUDA call.
 * Stream/device: synchronises the device (cudaDeviceSynchronize: work still
 *   running on the memory finishes first, on every stream), releases and
 *   frees again what the driver refused before (cuMemRelease,
 *   cudaFreeHost), makes the pool's copy stream (cudaStreamCreateWithFlags,
 *   non-blocking) and, for pageable backups, the staging ring and its events
 *   (cudaHostAlloc, cudaEventCreateWithFlags) when it has none, pins pinned
 *   backups (cudaHostAlloc), copies on the pool's stream (cudaMemcpyAsync;
 *   through the ring cudaEventRecord and cudaEventSynchronize per chunk,
 *   else one cudaStreamSynchronize), unmaps and releases physical memory
 *   (cuMemUnmap, cuMemRelease). Not during a CUDA graph capture: the driver
 *   refuses the synchronisation (and invalidates that capture); nothing
 *   changes here.
 * Returns:
 *   GMR_OK                    asleep (also when nothing was live: then the
 *                             pool is asleep with nothing to wake).
 *   GMR_ERR_INVALID_ARGUMENT  NULL pool; options with a bad header (the
 *                             message says which, the size and version
 *                             given and needed), an unknown host kind, or
 *                             copy_threads above 64.
 *   GMR_ERR_BUSY              the pool is asleep already (the message says
 *                             how much): wake it first.
 *   GMR_ERR_CAPTURE_UNSAFE    a CUDA graph capture is under way (the
 *                             device synchronisation was refused).
 *   GMR_ERR_OUT_OF_MEMORY     host memory for a backup or for the staging
 *                             ring ran out (the message says how much was
 *                             asked, and of which kind).
 *   GMR_ERR_CUDA              a CUDA call failed (the message names it);
 *                             also the driver still refusing to release
 *                             memory it refused before (nothing more was
 *                             done), and a cuMemRelease refused at the end:
 *                             then the sleep is done all the same (the
 *                             message says "asleep all the same"; see
 *                             below).
 * After failure the live allocations are mapped and intact, the pool is
 * awake, and no host copy is kept (but one cudaFreeHost refused, kept as
 * unfreed); the ring, the stream and the kept backups are as before (a ring
 * or stream this call made is freed again; kept backups it took are kept
 * again); free memory given back before the failure stays given back (as
 * trim). Except after "asleep all the same": gmr_vmm_pool_resource_is_asleep()
 * is true, the allocations sleep with their copies as after GMR_OK, and the
 * memory the driver refused is kept, still counted as held (statistics:
 * unreleased_bytes), and released by the next trim, wake or destroy
 * (a sleep now is GMR_ERR_BUSY, as after any sleep).
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_sleep(
    gmr_vmm_pool_resource *pool, const gmr_vmm_pool_sleep_options *options, gmr_failure *failure);

#define GMR_VMM_POOL_WAKE_OPTIONS_VERSION 1u

typedef struct gmr_vmm_pool_wake_options {
  size_t size;
  uint32_t version;       /* GMR_VMM_POOL_WAKE_OPTIONS_VERSION */
  bool wake_all;          /* wake every asleep allocation (NULL options: the same) */
  uint64_t wake_tag_mask; /* else: bit t wakes the allocations of tag t */
} gmr_vmm_pool_wake_options;

#define GMR_VMM_POOL_WAKE_OPTIONS_INIT \
  {sizeof(gmr_vmm_pool_wake_options), GMR_VMM_POOL_WAKE_OPTIONS_VERSION, true, 0}

/**
 * Map fresh physical memory at the addresses of the asleep allocations
 * (and reserved ranges' committed pages) selected by `options` (NULL: all)
 * and copy back the contents that sleep saved. The pool is awake again when
 * nothing is left asleep.
 * Units: bytes. Ownership: `options` is read during the call only; the
 *   backups of the woken allocations are freed, or kept by the pool for the
 *   next sleep when that sleep asked for it (keep_backup). `failure` (may be
 *   NULL) receives the reason of a failure.
 * Thread-safe: yes (see the banner).
 * Stream/device: first releases and frees again, best effort, what the
 *   driver refused before (cuMemRelease, cudaFreeHost: the room may be
 *   needed; what it still refuses stays kept and does not fail the wake),
 *   creates and maps physical memory (cuMemCreate, cuMemMap,
 *   cuMemSetAccess), copies on the pool's copy stream as the sleep did
 *   (cudaMemcpyAsync; through the staging ring cudaEventRecord and
 *   cudaEventSynchronize per chunk) and waits for the copies
 *   (cudaStreamSynchronize) before it returns, frees the backups
 *   (cudaFreeHost; pageable ones munmap/free) unless kept; not during a
 *   capture (the synchronisation is refused there: GMR_ERR_CAPTURE_UNSAFE,
 *   nothing changed).
 * Source: vLLM's CuMemAllocator.wake_up(tags), torch_memory_saver's
 *   resume(), TensorRT-LLM's resume(tags).
 * Returns:
 *   GMR_OK                    woken (also when the selected tags had
 *                             nothing asleep).
 *   GMR_ERR_INVALID_ARGUMENT  NULL pool; options with a bad header (the
 *                             message says which, as for sleep); the pool
 *                             is not asleep (never slept, or woken
 *                             already).
 *   GMR_ERR_OUT_OF_MEMORY     the device has no room for the memory
 *                             (cuMemCreate; the message says how much the
 *                             wake needs), or host memory ran out. Free
 *                             device memory and call wake again.
 *   GMR_ERR_CAPTURE_UNSAFE    a capture refused the copies' synchronisation
 *                             (cudaEventSynchronize or cudaStreamSynchronize).
 *   GMR_ERR_CUDA              another CUDA failure (the message names it);
 *                             also a cudaFreeHost refused at the end: then
 *                             the wake is done all the same (the message
 *                             says "woken all the same"; see below).
 * After failure every selected allocation is still asleep with its host
 * copy, the pool is still asleep, nothing of this call's copies is still in
 * flight, and no memory this call mapped or created stays mapped or
 * allocated (memory whose release the driver refuses while undoing is
 * kept, as unreleased). Except after "woken all the same": the
 * selected allocations are awake with their contents, as after GMR_OK (the
 * pool is awake unless other tags sleep), and the host copies the driver
 * refused to free are kept, counted (unfreed_host_bytes) and freed by the
 * next trim, sleep, wake or destroy.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_wake(
    gmr_vmm_pool_resource *pool, const gmr_vmm_pool_wake_options *options, gmr_failure *failure);

/**
 * True while the pool is asleep: from a sleep that succeeds (GMR_OK, or
 * GMR_ERR_CUDA "asleep all the same") until a wake leaves nothing asleep
 * (allocate and extend return GMR_ERR_BUSY meanwhile); false for NULL. After
 * a sleep that returned GMR_ERR_CUDA, it tells whether the pool sleeps.
 * Thread-safe: yes (another thread's sleep or wake may change the answer
 *   right after). Stream/device: no CUDA call.
 */
GMR_API bool gmr_vmm_pool_resource_is_asleep(gmr_vmm_pool_resource *pool);

#define GMR_VMM_POOL_TAG_STATS_VERSION 1u

/* What the allocations of some tags hold, in bytes unless named _count.
 * Bytes are as placed: whole pages (vmm_pages; a small-path chunk
 * counts under its own tag), 256-byte units (vmm). A reserved range with
 * committed pages counts as one allocation of its committed bytes (live or
 * asleep as the range is). */
typedef struct gmr_vmm_pool_tag_stats {
  size_t size;         /* sizeof as the caller knows it */
  uint32_t version;    /* GMR_VMM_POOL_TAG_STATS_VERSION as the caller knows it */
  size_t live_bytes;   /* awake allocations (LIVE) */
  size_t live_count;
  size_t asleep_bytes; /* allocations whose physical memory sleep gave back */
  size_t asleep_count;
  size_t saved_bytes;  /* backups (host copies) held for asleep allocations */
  size_t saved_count;
  bool saved_pinned;   /* the backups are pinned (cudaHostAlloc); false: pageable or none */
} gmr_vmm_pool_tag_stats;

#define GMR_VMM_POOL_TAG_STATS_INIT \
  {sizeof(gmr_vmm_pool_tag_stats), GMR_VMM_POOL_TAG_STATS_VERSION, 0, 0, 0, 0, 0, 0, false}

/**
 * Sum what the allocations of the tags in `tag_mask` (bit t: tag t; all
 * ones: every tag) hold, awake and asleep, and what their host copies take.
 * O(allocations): for queries between phases, not for a hot path.
 * Units: bytes, counts. Ownership: *out is the caller's (size and version
 *   set: GMR_VMM_POOL_TAG_STATS_INIT; fields past `size` are left alone).
 * Thread-safe: yes (each engine read under its lock; engines one after
 *   another). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out is NULL, out->size is smaller
 *                             than version 1's struct, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_get_tag_stats(
    gmr_vmm_pool_resource *pool, uint64_t tag_mask, gmr_vmm_pool_tag_stats *out);

#ifdef __cplusplus
}
#endif

/* Reserved ranges whose physical memory is committed and decommitted later
 * (declared there; included here so that one include brings the pool's
 * serving calls). */
#include "gmr/vmm_pool_range.h"

#endif /* GMR_VMM_POOL_SLEEP_H_ */
