/*
 * core/nvtx_mem.h (internal): tell memory checkers which parts of a
 * sub-allocator's chunks are handed out, through the NVTX memory extension.
 *
 * A pool that carves blocks out of larger upstream chunks hides its blocks
 * from Compute Sanitizer: memcheck sees one big cudaMalloc, so a write that
 * runs from one block into the next is legal to it. With these calls the pool
 * describes each chunk as a sub-allocator heap and each block it hands out as
 * a region of that heap; memcheck then reports any access outside a live
 * region, initcheck treats a new region as uninitialised, and
 * `--leak-check=full` names regions never unregistered.
 *
 * How a sub-allocating resource uses it (each call behind the resource's own
 * `nvtx_annotate` flag, so a resource that does not annotate pays one branch):
 *
 *   chunk from upstream:   chunk->nvtx_heap = gmr__nvtx_mem_heap_register(base, bytes, "pool_resource chunk");
 *   block handed out:      gmr__nvtx_mem_region_register(chunk->nvtx_heap, ptr, bytes);
 *   block given back:      gmr__nvtx_mem_region_unregister(ptr);
 *   all blocks dropped:    gmr__nvtx_mem_heap_reset(chunk->nvtx_heap);        (arena reset)
 *   chunk back upstream:   gmr__nvtx_mem_heap_unregister(chunk->nvtx_heap);   (BEFORE the upstream free)
 *
 * NULL heaps: with no tool attached, NVTX returns NULL for a heap (and for the
 * domain); that is not an error. Keep the NULL and pass it back: the region
 * calls then do nothing. Reset and unregister ignore a NULL heap, because to
 * NVTX a NULL heap means the whole process (NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE).
 *
 * Order: the CUDA runtime must be initialised before the first NVTX memory
 * call (Compute Sanitizer requires it). A heap is registered after its chunk
 * came from upstream, so a chunk from cudaMalloc has initialised it; a
 * resource that registers memory from elsewhere must make sure of it itself.
 * All calls share one NVTX domain, "gmr" (GMR__NVTX_MEM_DOMAIN_NAME).
 *
 * Compiled out: with -DGMR_DISABLE_NVTX every function is an empty body
 * (heap_register returns NULL).
 *
 * Cost with no tool attached: about 1 ns per call (NVTX checks a function
 * pointer); the first heap registration of the process also initialises NVTX.
 *
 * Thread-safe: yes. The first heap registration is serialised by a mutex (it
 * initialises NVTX's memory extension, whose lazy start is not safe to race);
 * every later call is as thread-safe as the attached tool. A region call must
 * happen after the registration of its heap (the resource's own lock orders them).
 * Source: NVIDIA's Compute Sanitizer NVTX guide; RAPIDS RMM PR #1952 (open).
 */
#ifndef GMR_CORE_NVTX_MEM_H_
#define GMR_CORE_NVTX_MEM_H_

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMR__NVTX_MEM_DOMAIN_NAME "gmr"

/* True unless the library was built with GMR_DISABLE_NVTX. */
bool gmr__nvtx_mem_compiled_in(void);

/*
 * Start NVTX once for the process (nvtxInitialize): loads the tool named by
 * NVTX_INJECTION64_PATH, if any. NVTX would do it lazily at the first call,
 * but its lazy start is not safe to race, so gmr starts it here, under
 * pthread_once, before its first NVTX call from any module (the NVTX logging
 * adaptor calls it at create). Thread-safe: yes.
 */
void gmr__nvtx_start(void);

/*
 * Register [base, base + bytes) as a sub-allocator heap of virtual addresses.
 * `name` (static storage, may be NULL) labels the heap for the tool.
 * Returns the heap handle: NULL when no tool is attached (not an error).
 */
void *gmr__nvtx_mem_heap_register(const void *base, size_t bytes, const char *name);

/* Drop every region of `heap` (the heap stays registered). NULL: no-op. */
void gmr__nvtx_mem_heap_reset(void *heap);

/* Unregister `heap` and its regions. Call before the chunk goes back
 * upstream, so no other owner of the address range inherits our view.
 * NULL: no-op. */
void gmr__nvtx_mem_heap_unregister(void *heap);

/* Register the block [ptr, ptr + bytes) handed out from `heap`. */
void gmr__nvtx_mem_region_register(void *heap, const void *ptr, size_t bytes);

/* Unregister the block that starts at `ptr`. Call before the block can be
 * handed out again. */
void gmr__nvtx_mem_region_unregister(const void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_NVTX_MEM_H_ */
