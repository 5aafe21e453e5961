/*
 * gmr/vmm_resource.h: `vmm`, gmr's recommended VMM resource and the default
 * of the per-device registry, gmr.torch and gmr.cupy: device memory through
 * CUDA's virtual memory management, placed at 256-byte granularity over
 * pages that whatever is live on them shares, so that no request is rounded
 * up to a page. Type name "vmm_resource"; spec component `vmm`. Its handle
 * is the gmr_vmm_pool_resource of every VMM resource (gmr/vmm_pool_resource.h:
 * the config, statistics, regions; gmr/vmm_pool_sleep.h: tags, sleep and
 * wake), which gmr_resource_find(r, "vmm_pool_resource") reaches under
 * adaptors. vmm_pages (gmr/vmm_pages_resource.h) is the other one, VPMM's
 * page placement.
 *
 * Regions are live, free (all their pages mapped; filed per stream in a
 * two-level segregated-fit index, O(1)), holes (whole unmapped pages) and
 * asleep. Physical memory comes in handles (one cuMemCreate each), each
 * mapped whole at one place: CUDA 13.0's cuMemMap takes no offset into a
 * handle and cuMemUnmap only unmaps whole mappings, so memory moves by whole
 * handles.
 * allocate(stream T):
 *   1. the best fit among T's free regions and the shared ones (those whose
 *      stream's work is known done): no CUDA call, the whole path once warm;
 *   2. other streams' free memory whose work is done (their events queried;
 *      a default stream's recorded first) becomes shared;
 *   3. a stream whose work is pending and has a fitting region: T waits for
 *      it on the GPU (cudaStreamWaitEvent) and takes its free regions;
 *   4. the run of free regions and holes that needs the fewest pages mapped
 *      (then the tightest, then the lowest address) gets its holes mapped:
 *      with handles moved from wholly free, shared memory (unmapped there,
 *      mapped here: one cuMemUnmap and one cuMemMap each) when holding more
 *      would pass remap_permille thousandths above the peak of live bytes (or
 *      the device is out of memory), else with new handles (cuMemCreate +
 *      cuMemMap, at most held / handle_divisor each), plus a free tail of
 *      growth_percent of what is held (never past the remap threshold); one
 *      cuMemSetAccess per hole. When the live peak has not grown since
 *      memory last moved, the pool holds up to 1% of that peak more instead
 *      of moving again, and every eighth move made all the same doubles that
 *      allowance (at most 32%), so that a program that repeats settles with
 *      no driver call (four streams trading random-sized buffers: within
 *      three passes of the bundled multistream trace).
 * A free files the region under its stream and merges it with free
 * neighbours of that stream or shared ones (O(1)). A region record_stream
 * named other streams for waits apart until their events, recorded at the
 * free, completed; each allocation first files back those that did (event
 * queries while any wait), so the freeing stream's next request of that
 * size gets the memory back, PyTorch's reuse. On a stream the program
 * created (unless streams.streams_outlive_resource) a free records that
 * stream's event inside the call (the stream may be destroyed after it),
 * never while the stream captures. While the shard (see "Threads") serves
 * other streams too, in batches (issue 32): when the stream's frees since
 * its last record reach 64 or 64 MiB, at its next call after another stream
 * found that this memory would have served it, and at every free for a
 * stream whose memory other streams keep taking (four demands, the count
 * fading over quiet batches), the cost RMM pays at every free (RMM users
 * measured the record at a third to a half of a free, rmm#1995; XLA's VMM
 * allocator writes one timeline marker per batch of 64 frees or 64 MiB).
 * Another stream takes only memory freed before the stream's last record,
 * once that record is done or after a GPU-side wait for it (just the bytes
 * it needs); what was freed since stays the stream's. While the stream is
 * alone in its shard: only at its first four frees and when another stream
 * asked for its memory (gmr's pool's on-demand rule: a warm pair makes no
 * CUDA call, so threads do not meet in the driver's lock). Memory whose
 * frees no record covers reaches other streams through one
 * cudaDeviceSynchronize, made only when it would spare a growth (a fitting
 * region, or enough with the taker's and shared free memory), before a
 * growth (outside a capture) that would pass the remap threshold while
 * streams hold free memory (so that memory the host freed ahead of the GPU
 * can move instead), and at trim. Before a record that covers such frees,
 * or covered memory not known done, the stream's id is
 * checked (cudaStreamGetId after cudaStreamGetCaptureInfo, never on a
 * capturing stream): a new stream that got a destroyed stream's handle does
 * not take the destroyed one's memory in stream order. On a default stream
 * the event is recorded only when another stream wants the memory. trim
 * gives back every handle that lies wholly in free memory whose work is
 * done (waiting for it with the host, or with one device synchronisation).
 * On the bundled traces replayed on the simulation the peak held is within
 * 3% of the peak of live bytes, and repeating passes make no driver call
 * (tests in tests/vmm/vmm_pool_stack_test.cc; multistream, whose sixteen
 * random-sized buffers on four streams leave free bytes that no 2 MiB page
 * holds whole, needs about 12% and moves memory every pass).
 *
 * Growth (how step 4 makes new handles): each is at most held /
 * handle_divisor (so that free memory can later move in pieces) and at
 * least handle_floor_bytes (rounded up to the page; 0: one page). A floor
 * makes the early growths of a small pool take fewer, larger handles, as
 * PyTorch's expandable segments map 20 MiB pages for large blocks: fewer
 * cuMemCreate and cuMemMap calls, coarser pieces to move, and so possibly
 * more held (on the bundled traces, 20 MiB cut the first pass's VMM driver
 * calls by 36-84%; multistream held less, gpt2_train 0.3% more,
 * gpt2_graph_capture and llm_multigraph 3-5% more from their second pass;
 * BENCHMARKS.md, "Growth cost"). With
 * creator_thread_count > 0, that many threads create a growth's handles
 * (cuMemCreate only; it needs no current context) while the allocating
 * thread creates the first one, takes back every creation no thread has
 * started, and maps them all itself, in order: the same handles at the same
 * places as without threads, so the bytes held, the footprint and the other
 * driver calls are the same; only cuMemCreate calls may overlap, where the
 * driver runs them at once (NVIDIA Dynamo's snapshot restore creates on other
 * threads). The threads start at the pool's first growth of several handles
 * (if pthread_create refuses, the pool creates every handle itself), run in
 * relaxed capture mode so that none of their calls breaks a capture another
 * thread makes, block every signal, and are joined by destroy. A creation
 * the driver refused on a thread is made again on the allocating thread; a
 * growth whose creation fails all the same gives back what it made, on any
 * thread, and fails as without threads (GMR_ERR_OUT_OF_MEMORY or
 * GMR_ERR_CUDA, the pool as it was). Nothing is created ahead of need: a
 * handle waiting unmapped is held memory, and a pool that grows holds its
 * high-water mark at every growth, so one made early would raise the peak
 * held. tools/replay reports the driver calls of each pass.
 *
 * Growth in place (gmr_resource_extend): a live allocation grows without
 * moving over the free memory after it that `stream` may use, or by mapping
 * the holes after it; otherwise GMR_ERR_UNSUPPORTED, or
 * GMR_ERR_OUT_OF_MEMORY when the device has no room; nothing changes.
 *
 * Statistics (gmr_vmm_pool_resource_get_stats): mapped_bytes is the
 * physical memory held, page_create_count counts cuMemCreate calls (a
 * handle may be many pages), defrag_count the slow paths that moved handles
 * and remapped_page_count the pages they moved; small_live_* and zombie_*
 * stay 0. Memory info: held = the handles (refused ones too), live = the
 * live allocations, free = free regions, largest = the largest free region.
 *
 * Threads: the pool is sharded. It keeps shard_count independent engines
 * (each its own spin lock, VA chunks, physical handles and free lists;
 * created at a shard's first use). A stream is served by the home shard of
 * the first thread that used it, and every thread that uses it later goes
 * there too: threads on streams of their own take no lock another thread
 * takes and write no cache line another thread writes on a warm allocation
 * and free; threads that share a stream (PyTorch's forward and autograd
 * threads) share one shard's memory. A free goes to the shard that owns the
 * pointer, whatever the stream (the stream's shard is asked first). Before
 * a shard grows it takes free memory another shard holds for the same
 * stream or for any stream (no CUDA call); when a growth finds the device
 * out of memory, the other shards serve the request or give back their
 * wholly free memory and the growth is tried once more. Memory of one shard
 * is not remapped into another, so a program whose threads each use streams
 * of their own holds up to a growth per shard more than with one shard
 * (shard_count = 1 for the least footprint). The trim, sleep, wake,
 * statistics and debug functions act on every shard; statistics are the
 * sums (peak_mapped_bytes is the pool's own high-water mark), each shard
 * read under its lock.
 *
 * Source: gmr's pool_resource and RMM's pool (per-stream free lists, lazy
 * events, TLSF); XLA's VMM allocator (one marker per batch of frees);
 * PyTorch's expandable segments (pages mapped under what is live, 20 MiB
 * pages for large blocks) and record_stream; VPMM (moving free physical
 * memory instead of holding more); NVIDIA Dynamo's snapshot (cuMemCreate on
 * other threads); CUDA's driver VMM API.
 * Thread-safe: yes (one spin lock per shard; the pool's mutex only to make
 * a shard, and for sleep, wake and the tags; the creator threads' own
 * mutex, never held while taking another lock). Create and destroy are not.
 */
#ifndef GMR_VMM_RESOURCE_H_
#define GMR_VMM_RESOURCE_H_

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"
#include "gmr/vmm_pool_resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a `vmm` pool of device memory on `config->device` (see the
 * banner): it reserves virtual addresses, maps handles of physical memory
 * under what is live, and moves free handles to where they are needed
 * instead of holding more. It reads every field of the config but
 * small_pool (vmm_pages only).
 *
 * Units: bytes; pages.
 * Ownership: `config` is copied (NULL: GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT).
 *   The caller owns *out and destroys it with gmr_resource_destroy()
 *   (gmr/vmm_pool_resource.h, "Destroy"). `failure` (may be NULL) receives
 *   the reason of a failure.
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: queries the device (VMM support, granularity, peers, its
 *   total memory: cudaMemGetInfo),
 *   reserves the first shard's VA chunk (cuMemAddressReserve) and maps
 *   initial_pages pages there (cuMemCreate, cuMemMap, cuMemSetAccess); the
 *   caller's current device is restored. No synchronisation. Starts no
 *   thread: creator threads start at the first growth of several handles
 *   (see "Growth").
 * Source: CUDA's cuda.h VMM API; ncclMemAlloc for nccl_ready.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL; a field of the config out of its
 *                             range (gmr/vmm_pool_resource.h, "Create"):
 *                             also growth_percent above 1000, remap_permille
 *                             above 10000 (and not
 *                             GMR_VMM_POOL_REMAP_NEVER), shard_count above
 *                             GMR_VMM_POOL_MAX_SHARDS, handle_floor_bytes
 *                             above GMR_MAX_ALLOCATION_BYTES,
 *                             creator_thread_count above
 *                             GMR_VMM_POOL_MAX_CREATOR_THREADS. The message
 *                             (failure may be NULL) says which and the
 *                             limit.
 *   GMR_ERR_UNSUPPORTED       the device has no VMM support, or a listed
 *                             peer cannot access it.
 *   GMR_ERR_OUT_OF_MEMORY     host memory (or the creator threads' mutex),
 *                             VA, or the initial pages (the message names
 *                             initial_pages, the pages asked and how many
 *                             the device has room for).
 *   GMR_ERR_CUDA              another CUDA failure (code in the record).
 * On failure *out is NULL, and everything the call reserved or mapped is
 * given back.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_resource_create(const gmr_vmm_pool_resource_config *config,
                                                         gmr_vmm_pool_resource **out,
                                                         gmr_failure *failure);

#ifdef __cplusplus
}
#endif

#endif /* GMR_VMM_RESOURCE_H_ */
