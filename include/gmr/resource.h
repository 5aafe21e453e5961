/*
 * gmr/resource.h: the memory resource interface every gmr component implements,
 * and the dispatch functions callers use.
 *
 * A resource is a struct whose first member is a `gmr_resource`, which points
 * at a static table of function pointers (the vtable). Concrete resources
 * (cuda_resource, host_resource, pools) get memory from a system source or from
 * an upstream resource; adaptors forward to an upstream and add a behaviour
 * (limits, tracking, logging). A whole allocator is one stack of them.
 *
 * Callers never call vtable slots directly: they call gmr_resource_allocate(),
 * gmr_resource_deallocate() and the other dispatch functions below, which check
 * arguments once for every resource (RMM's non-virtual interface, jemalloc's
 * ehooks).
 *
 * Stream-ordered semantics (the same as RAPIDS RMM's device_memory_resource):
 *  - Allocating on stream S returns memory that is valid for work ordered
 *    after the call on S. Using it on another stream needs the usual ordering
 *    (an event or a synchronisation) between S and that stream.
 *  - Deallocating on stream S means the memory may be handed out again to
 *    work ordered after S's work enqueued so far. The caller must not free
 *    memory that work on another stream still uses unless that stream is
 *    ordered before S. A resource may give the block to another stream only
 *    after it has made sure that S's earlier work has completed (an event) or
 *    that the other stream waits for it.
 *  - `bytes` and `alignment` at deallocate equal those given at allocate;
 *    `stream` should be the stream the memory was last used on.
 *  - A resource belongs to the device it was created for, and allocates and
 *    frees there whatever device is current in the calling thread.
 *  - NULL is the default stream (cudaStreamLegacy semantics).
 *
 * Zero bytes: allocating 0 bytes succeeds and gives *out_ptr == NULL without
 * calling the resource; deallocating a NULL pointer is a no-op that returns
 * GMR_OK. No resource ever sees a zero-byte request, so none records one.
 *
 * Bad frees: a resource that can tell refuses a free of memory that is not a
 * live allocation of its own, releasing nothing, with the status that names
 * the fault, the same in every layer: GMR_ERR_UNKNOWN_POINTER (never
 * allocated here, or not the start of an allocation), GMR_ERR_DOUBLE_FREE
 * (freed already), GMR_ERR_FREE_MISMATCH (bytes or alignment, or the stream
 * where the resource checks it, differ from the allocation's).
 * GMR_ERR_INVALID_ARGUMENT is kept for malformed arguments (a NULL resource,
 * an alignment that is not a power of two, bytes == 0 with a pointer).
 *
 * Alignment: 0 means GMR_DEFAULT_ALIGNMENT (256 bytes, what cudaMalloc
 * guarantees). Any other value must be a power of two. A resource that cannot
 * honour an alignment above 256 returns GMR_ERR_UNSUPPORTED.
 *
 * Thread-safe: the dispatch functions add no state of their own; whether a
 * resource may be used from several threads at once is stated in its header.
 */
#ifndef GMR_RESOURCE_H_
#define GMR_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same type as cudaStream_t, without including a CUDA header. NULL is the
 * default stream. */
typedef struct CUstream_st *gmr_stream;

typedef struct gmr_resource gmr_resource;
typedef struct gmr_resource_vtbl gmr_resource_vtbl;

/* The alignment every allocation has unless the caller asks for more. */
#define GMR_DEFAULT_ALIGNMENT ((size_t)256)

/* Requests above this many bytes fail with GMR_ERR_OUT_OF_MEMORY at dispatch,
 * so no resource has to guard its size arithmetic against overflow. */
#define GMR_MAX_ALLOCATION_BYTES (SIZE_MAX / 4)

/* Length of gmr_failure::message, terminating NUL included. */
#define GMR_FAILURE_MESSAGE_BYTES 192

/* Version of gmr_failure; callers set it with `size` (GMR_FAILURE_INIT).
 * Version 1 ends at `message`; version 2 adds free_info_known, free_bytes and
 * largest_free_block_bytes. */
#define GMR_FAILURE_VERSION 2u

/**
 * What went wrong in a failed allocation, filled by the dispatch and by the
 * resources below it; given to OOM policies and loggers, and to callers of
 * gmr_resource_allocate_ex() and every other function that takes one.
 *
 * The record is the caller's and the caller sets its header first, as for
 * the stats structs: `size` = sizeof(gmr_failure) and `version` =
 * GMR_FAILURE_VERSION as the caller's headers know them (GMR_FAILURE_INIT).
 * The library never writes past `size` bytes of it, and never writes the
 * header: a caller built against an older, smaller gmr_failure gets the
 * fields its struct has, and the rest is not written. A record whose `size`
 * is smaller than the header (0 from a zeroed or forgotten record) gets
 * nothing at all, and the call still returns its status. Fields of a newer
 * version than the library's, past sizeof(gmr_failure) in the caller's
 * struct, are left as the caller set them. Resources (vtable slots, chunk
 * listeners, OOM policies) always receive a whole record of the library's
 * version, never the caller's smaller one.
 *
 * `where` is the deepest resource that failed: the first dispatch on the way
 * back up whose resource left `where` NULL fills in status, bytes, alignment,
 * stream and where. A resource that failed because of a CUDA call sets
 * `cuda_error` (a cudaError_t value); it may write a sentence for people into
 * `message`. The record is meaningful only when the call returned a failure.
 */
typedef struct gmr_failure {
  size_t size;                  /* sizeof(gmr_failure) as the caller knows it */
  uint32_t version;             /* GMR_FAILURE_VERSION as the caller knows it */
  gmr_status status;            /* the status the failing resource returned */
  int cuda_error;               /* cudaError_t of the failing CUDA call, 0 if none */
  size_t bytes;                 /* bytes requested from the failing resource */
  size_t alignment;             /* alignment requested from it (0 replaced by 256) */
  gmr_stream stream;            /* stream of the request */
  const gmr_resource *where;    /* the resource that failed; borrowed */
  uint32_t attempt;             /* 0 for a first try; OOM policies count retries here */
  char message[GMR_FAILURE_MESSAGE_BYTES]; /* NUL-terminated, may be empty */
  /* ---- end of version 1 ---- */
  /* What the failing resource still held free when it failed, so a policy can
   * tell fragmentation (much free, no block large enough) from exhaustion.
   * Meaningful only when free_info_known is true; a resource that keeps no
   * free memory (a leaf) leaves it false. */
  bool free_info_known;
  size_t free_bytes;               /* free bytes the resource held */
  size_t largest_free_block_bytes; /* the largest request it could have served */
  /* ---- end of version 2 ---- */
} gmr_failure;

/* A fresh record: `gmr_failure f = GMR_FAILURE_INIT;` (C and C++; in C, a
 * record reused after a memset can be reset with
 * `f = (gmr_failure)GMR_FAILURE_INIT;`). Every field spelled out: C++ warns
 * about partial initialisers. */
#define GMR_FAILURE_INIT \
  {sizeof(gmr_failure), GMR_FAILURE_VERSION, GMR_OK, 0, 0, 0, NULL, NULL, 0, {0}, false, 0, 0}

/**
 * How much memory a resource holds from the memory below it (its upstream, or
 * the CUDA driver / operating system for a leaf resource), in bytes.
 * `peak_held_bytes` is the high-water mark since the resource was created.
 */
typedef struct gmr_footprint {
  size_t held_bytes;
  size_t peak_held_bytes;
} gmr_footprint;

/* ---- vtable slots ------------------------------------------------------- */

/* Required. Allocate at least `bytes` (> 0, <= GMR_MAX_ALLOCATION_BYTES) with
 * `alignment` (a power of two, >= 1) for use on `stream`. On success set
 * *out_ptr; on failure leave it NULL, and set failure->cuda_error (and
 * optionally failure->message) when a CUDA call was the cause. `failure` is
 * never NULL. */
typedef gmr_status gmr_resource_allocate_fn(gmr_resource *self, size_t bytes, size_t alignment,
                                            gmr_stream stream, void **out_ptr,
                                            gmr_failure *failure);

/* Required. Release `ptr` (non-NULL) that this resource returned for `bytes`
 * and `alignment`, stream-ordered on `stream`. Returns GMR_OK, or a failure
 * status when the release is refused, in which case nothing was released. */
typedef gmr_status gmr_resource_deallocate_fn(gmr_resource *self, void *ptr, size_t bytes,
                                              size_t alignment, gmr_stream stream);

/* Required. Free the resource itself (never its upstream). Returns GMR_ERR_BUSY,
 * changing nothing, if it still has live allocations it can count. */
typedef gmr_status gmr_resource_destroy_fn(gmr_resource *self);

/* Optional. The resource this one forwards to, or NULL for a leaf. */
typedef gmr_resource *gmr_resource_get_upstream_fn(const gmr_resource *self);

/* Optional. Give cached free memory back to the upstream; add the bytes given
 * back to *released_bytes. NULL in an adaptor means "forward to the upstream". */
typedef gmr_status gmr_resource_trim_fn(gmr_resource *self, size_t *released_bytes);

/* Optional. Report what this resource holds from below. NULL in an adaptor
 * means "ask the upstream". */
typedef gmr_status gmr_resource_get_footprint_fn(const gmr_resource *self, gmr_footprint *out);

/* ---- version 2 slots ---------------------------------------------------- */

/* Version of gmr_memory_info; callers set it (GMR_MEMORY_INFO_INIT). */
#define GMR_MEMORY_INFO_VERSION 1u

/**
 * What a resource holds and how much of it is free, in bytes: the answer to
 * "why did a request fail while the pool is half empty?". RMM declined this
 * (rapidsai/rmm#813); PyTorch's memory_stats report inactive split bytes.
 *
 * held_bytes   what the resource holds from below (its footprint);
 * live_bytes   the part of it in live allocations, as the resource carved
 *              them (rounding included);
 * free_bytes   the part it could hand out again without asking below (free
 *              blocks, pending or not); held = live + free + overhead;
 * largest_free_block_bytes  the largest single request it could serve from
 *              free memory now (0 when nothing is free);
 * free_block_count  the number of free blocks (fragments) free_bytes is in.
 * The caller sets `size` and `version` (GMR_MEMORY_INFO_INIT); a resource
 * fills only the fields that fit in `size`.
 */
typedef struct gmr_memory_info {
  size_t size;      /* sizeof(gmr_memory_info) as the caller knows it */
  uint32_t version; /* GMR_MEMORY_INFO_VERSION as the caller knows it */
  size_t held_bytes;
  size_t live_bytes;
  size_t free_bytes;
  size_t largest_free_block_bytes;
  size_t free_block_count;
} gmr_memory_info;

#define GMR_MEMORY_INFO_INIT {sizeof(gmr_memory_info), GMR_MEMORY_INFO_VERSION, 0, 0, 0, 0, 0}

/* Optional. Fill *out (header already checked by the dispatch). NULL in an
 * adaptor means "ask the upstream". */
typedef gmr_status gmr_resource_get_memory_info_fn(const gmr_resource *self,
                                                   gmr_memory_info *out);

/* Optional. `ptr` (the start of a live allocation of this resource) is also
 * used on `stream`: when it is freed, its memory must not be handed out again
 * before the work `stream` had queued at the free has completed (PyTorch's
 * Tensor.record_stream). Returns GMR_OK, GMR_ERR_UNKNOWN_POINTER for a pointer
 * that is not a live allocation start, GMR_ERR_OUT_OF_MEMORY for host memory.
 * NULL means the resource cannot: the dispatch returns GMR_ERR_UNSUPPORTED.
 * Adaptors forward explicitly; a NULL slot is never skipped over, because a
 * sub-allocator's pointers mean nothing to its upstream. */
typedef gmr_status gmr_resource_record_stream_fn(gmr_resource *self, void *ptr,
                                                 gmr_stream stream);

/* Optional. Allocate as `allocate` does, for use on `stream` while `stream`
 * captures a CUDA graph, without breaking or joining the capture: no
 * stream-ordered call on any stream (no cudaMallocAsync, event record or
 * stream wait), and calls that global capture mode forbids (cudaMalloc, page
 * mapping, event queries) only with the calling thread in relaxed capture
 * mode (cudaThreadExchangeStreamCaptureMode, restored before returning, on
 * every path). The graph keeps the address; the memory is freed later with
 * the ordinary deallocate. This is how PyTorch's private pools grow during
 * capture (cudaMallocMaybeCapturing). NULL means the resource cannot: the
 * dispatch returns GMR_ERR_CAPTURE_UNSAFE. Adaptors forward explicitly (with
 * their own bookkeeping) to the upstream's slot. */
typedef gmr_status gmr_resource_allocate_capturing_fn(gmr_resource *self, size_t bytes,
                                                      size_t alignment, gmr_stream stream,
                                                      void **out_ptr, gmr_failure *failure);

/* ---- version 3 slot ---------------------------------------------------- */

/* Optional. Grow the live allocation at `ptr` (this resource returned it for
 * `bytes` and `alignment`, or a successful extend made it `bytes` long) to
 * `new_bytes` (> bytes) in place: on GMR_OK the caller owns
 * [ptr, ptr + new_bytes) and frees it with new_bytes; the added bytes are
 * usable by work ordered after the call on `stream`, as from allocate. When
 * it cannot, it returns GMR_ERR_UNSUPPORTED (the addresses after the
 * allocation are taken, or the resource never grows in place) or
 * GMR_ERR_OUT_OF_MEMORY (the addresses are free but memory to back them is
 * not), and changes nothing: the allocation keeps `bytes`. Set
 * failure->cuda_error when a CUDA call was the cause. NULL means the resource
 * cannot: the dispatch returns GMR_ERR_UNSUPPORTED. Adaptors forward
 * explicitly (with their own bookkeeping); a NULL slot is never skipped over,
 * because a sub-allocator's pointers mean nothing to its upstream. */
typedef gmr_status gmr_resource_extend_fn(gmr_resource *self, void *ptr, size_t bytes,
                                          size_t new_bytes, size_t alignment, gmr_stream stream,
                                          gmr_failure *failure);

/* Version 1: the first eight slots; version 2 appends three (memory info,
 * record_stream, allocate_capturing), version 3 one (extend). Later versions
 * only append slots, so a vtable of a newer version works with this library
 * and one of an older version has its missing slots treated as NULL. */
#define GMR_RESOURCE_VTBL_VERSION 3u

struct gmr_resource_vtbl {
  uint32_t version;      /* GMR_RESOURCE_VTBL_VERSION when the vtable was written */
  const char *type_name; /* e.g. "cuda_resource"; static storage */
  gmr_resource_allocate_fn *allocate;     /* required */
  gmr_resource_deallocate_fn *deallocate; /* required */
  gmr_resource_destroy_fn *destroy;       /* required */
  gmr_resource_get_upstream_fn *get_upstream;   /* optional, may be NULL */
  gmr_resource_trim_fn *trim;                   /* optional, may be NULL */
  gmr_resource_get_footprint_fn *get_footprint; /* optional, may be NULL */
  /* ---- end of version 1 ---- */
  gmr_resource_get_memory_info_fn *get_memory_info;       /* optional, may be NULL */
  gmr_resource_record_stream_fn *record_stream;           /* optional, may be NULL */
  gmr_resource_allocate_capturing_fn *allocate_capturing; /* optional, may be NULL */
  /* ---- end of version 2 ---- */
  gmr_resource_extend_fn *extend; /* optional, may be NULL */
  /* ---- end of version 3 ---- */
};

/* Embedded as the FIRST member of every concrete resource and adaptor. */
struct gmr_resource {
  const gmr_resource_vtbl *vtbl;
};

/* ---- dispatch ----------------------------------------------------------- */

/**
 * Check the stack headed by `r`: `r` and every layer below it (through
 * gmr_resource_get_upstream) can be used (non-NULL, a vtable of version >= 1
 * with a type name and the three required slots), and the layers that keep
 * books of their memory hold to them: a pool_resource's blocks tile its
 * chunks, every block is in the one index or map it belongs to and free
 * blocks are merged, counts and sums agree
 * (gmr/pool_resource.h); a vmm_pool_resource's regions, pages, lists and
 * counters agree (gmr/vmm_pool_resource.h). For tests and debugging: a
 * user who writes a resource calls it in a test, and a program that
 * suspects corruption calls it on its stack.
 * Units: O(layers), plus O(blocks) / O(regions + pages) for each pool.
 * Thread-safe: yes (reads only; each pool's books under its own locks, one
 *   at a time). Stream/device: no CUDA call, never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT when `r` or a layer below it is
 * not a valid resource, or when the upstream links loop (a layer's
 * get_upstream returns that layer or one above it: a user's resource can
 * make one; the check finds it in O(layers) calls of get_upstream, before it
 * calls anything else, and always returns); GMR_ERR_INTERNAL when a layer's
 * books are broken. It changes nothing, on failure or not.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_check(const gmr_resource *r);

/**
 * Allocate `bytes` from `r` for use on `stream` with `alignment` (0 = 256).
 *
 * Units: bytes; alignment in bytes, a power of two or 0.
 * Ownership: the returned memory belongs to the caller until it is given to
 *   gmr_resource_deallocate() on the same resource with the same bytes and alignment.
 * Thread-safe: as the resource's header says.
 * Stream/device: stream-ordered as described at the top of this header. Whether
 *   it may synchronise or call cudaMalloc depends on the resource.
 * Returns:
 *   GMR_OK                    *out_ptr is set (NULL only when bytes == 0).
 *   GMR_ERR_INVALID_ARGUMENT  r or out_ptr is NULL, r has no valid vtable, or
 *                             alignment is not a power of two.
 *   GMR_ERR_OUT_OF_MEMORY     no memory below (also bytes > GMR_MAX_ALLOCATION_BYTES).
 *   GMR_ERR_LIMIT_EXCEEDED, GMR_ERR_UNSUPPORTED, GMR_ERR_CUDA, GMR_ERR_CAPTURE_UNSAFE,
 *   GMR_ERR_INTERNAL          as the resource documents.
 * After failure: *out_ptr is NULL (when out_ptr is not NULL) and the resource
 *   is as it was before the call.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_allocate(gmr_resource *r, size_t bytes,
                                                       size_t alignment, gmr_stream stream,
                                                       void **out_ptr);

/**
 * gmr_resource_allocate() that also describes a failure in `*failure` (may be NULL,
 * then it is exactly gmr_resource_allocate()). On success the record's content is
 * unspecified. Adaptors pass their own `failure` argument here when they call
 * their upstream, so the record travels up the stack.
 * Ownership: *failure is the caller's, its header set (GMR_FAILURE_INIT); the
 * call writes at most failure->size bytes of it (see gmr_failure). Thread-safe,
 * stream/device semantics, Returns and state after failure: as gmr_resource_allocate().
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_allocate_ex(gmr_resource *r, size_t bytes,
                                                          size_t alignment, gmr_stream stream,
                                                          void **out_ptr, gmr_failure *failure);

/**
 * Give `ptr` back to `r`, stream-ordered on `stream`. `bytes` and `alignment`
 * are those given at allocation (alignment 0 means 256 in both places).
 *
 * Bad frees, one vocabulary for every resource and adaptor that can tell
 * (resources that keep books of their live allocations say so in their
 * header; a resource that cannot tell may not see the fault at all):
 *   GMR_ERR_UNKNOWN_POINTER  `ptr` is not the start of a live allocation of
 *                            `r` (never allocated there, or freed so long
 *                            ago that `r` no longer remembers it);
 *   GMR_ERR_DOUBLE_FREE      `ptr` was allocated and already freed through
 *                            `r`, and is not live again;
 *   GMR_ERR_FREE_MISMATCH    `ptr` is live, but `bytes` or `alignment` (or,
 *                            where the resource checks it, `stream`) differ
 *                            from the allocation's.
 * Each changes nothing: the memory stays allocated and the caller still owns
 * it. GMR_ERR_INVALID_ARGUMENT is only for malformed arguments (below).
 *
 * Ownership: `ptr` is no longer the caller's once GMR_OK is returned.
 * Thread-safe: as the resource's header says.
 * Stream/device: may the memory be reused right away? Only by work ordered
 *   after `stream` (see the top of this header). Whether it synchronises
 *   depends on the resource (cudaFree does).
 * Returns:
 *   GMR_OK                    released (or ptr was NULL: nothing to do).
 *   GMR_ERR_INVALID_ARGUMENT  r is NULL or invalid, alignment is not a power of
 *                             two, or bytes == 0 with a non-NULL ptr.
 *   GMR_ERR_UNKNOWN_POINTER, GMR_ERR_DOUBLE_FREE, GMR_ERR_FREE_MISMATCH
 *                             a bad free, as described above.
 *   other statuses            as the resource documents (a CUDA resource may
 *                             refuse a free that would break a capture, or
 *                             pass on a CUDA failure).
 * After failure: nothing was released; the caller still owns ptr.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_deallocate(gmr_resource *r, void *ptr, size_t bytes,
                                                         size_t alignment, gmr_stream stream);

/**
 * Destroy `r` (never its upstream). NULL is a no-op returning GMR_OK.
 * Thread-safe: no; no other thread may use `r` during or after the call.
 * Stream/device: may synchronise, and may free device memory it cached.
 * Returns GMR_OK; GMR_ERR_BUSY if it has live allocations it can count;
 * GMR_ERR_INVALID_ARGUMENT if `r` has no valid vtable; other statuses as the
 * resource documents (a pool whose upstream refuses a chunk). After failure
 * nothing is destroyed: `r` stays valid, and a retry once the cause is gone
 * works.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_destroy(gmr_resource *r);

/**
 * The upstream `r` forwards to, or NULL for a leaf resource, NULL `r`, or a
 * vtable without the get_upstream slot. Thread-safe: yes.
 */
GMR_API gmr_resource *gmr_resource_get_upstream(const gmr_resource *r);

/**
 * The vtable's type name ("cuda_resource"), or "invalid" for NULL / no vtable.
 * Ownership: static string. Thread-safe: yes.
 */
GMR_API const char *gmr_resource_get_type_name(const gmr_resource *r);

/**
 * The handle of gmr type `type_name` behind `r`: `r` itself when it is an
 * instance of that gmr resource or adaptor, else NULL (also for a NULL `r`
 * or `type_name`). The per-type functions of each header
 * (gmr_pool_resource_from_resource(), ...) are this call with their type's
 * name; the result is a `gmr_pool_resource *` and so on.
 *
 * Every handle of gmr (gmr_pool_resource, gmr_limiting_adaptor, ...) has its
 * gmr_resource as its first member, so the handle and its resource are the
 * same address: the per-type *_as_resource() functions are casts, and a
 * downcast only has to check the type. It checks the vtable's identity, not
 * the name alone: only resources created by gmr's own create functions are
 * instances of gmr's types. A resource written by a user never downcasts to
 * a gmr type, whatever its vtable's type_name says (its author casts it
 * themselves).
 *
 * Type names are those gmr_resource_get_type_name() reports: "cuda_resource",
 * "host_resource", "pool_resource", "vmm_resource", "vmm_pages_resource",
 * "fixed_block_resource", "graph_arena_resource", "limiting_adaptor",
 * "tracking_adaptor", "oom_adaptor", "log_adaptor", "nvtx_logging_adaptor";
 * and those of the optional libraries ("memory_space", "numa_host_resource",
 * "scoped_pool", "cumem_resource", "symmetric_resource",
 * "chunk_listener_adaptor"). A family's name reaches each of its types:
 * "vmm_pool_resource" is "vmm_resource" or "vmm_pages_resource", whose
 * common handle is gmr_vmm_pool_resource (gmr/vmm_pool_resource.h).
 * Ownership: the result is `r`, borrowed as `r` is.
 * Thread-safe: yes (reads the vtable and a lock-free table of gmr's types).
 * Stream/device: no CUDA call.
 */
GMR_API void *gmr_resource_downcast(gmr_resource *r, const char *type_name);

/**
 * The first layer of type `type_name` in the stack headed by `top`: `top`
 * itself, or the first one reached going down through
 * gmr_resource_get_upstream(); NULL when there is none, or for a NULL `top`
 * or `type_name`. This is how a program reaches a layer of a stack built
 * from a spec (gmr/stack.h, gmr/device_resource.h): the pool under the
 * adaptors for its tags and sleep, the graph arena for its sessions, the
 * limiting adaptor for its limit. The result downcasts with the type's
 * *_from_resource() (gmr_resource_downcast()).
 *
 * For the name of a gmr type or family (see gmr_resource_downcast()) only
 * gmr's own instances match, so the result always downcasts; for any other
 * name, the first layer whose vtable has that type_name (a user's type).
 * A stack whose upstream links loop (a user's get_upstream that returns its
 * own layer or one above it; gmr_resource_check() names the layers) gives
 * NULL, whatever layers it has: the walk looks for a loop first, in
 * O(layers) calls of get_upstream, and always returns.
 * Ownership: borrowed from the stack, as `top`.
 * Thread-safe: yes (reads the layers' links, fixed at their create).
 * Stream/device: no CUDA call.
 */
GMR_API gmr_resource *gmr_resource_find(gmr_resource *top, const char *type_name);

/**
 * Ask `r` and everything below it to give cached free memory back to its
 * upstream (e.g. wholly free pool chunks). A resource without a trim slot
 * forwards to its upstream; a leaf without one releases nothing.
 *
 * Units: *released_bytes (may be NULL) receives the bytes given back, summed
 *   over the stack.
 * Thread-safe: as the resources' headers say for trim.
 * Stream/device: may synchronise streams to learn which blocks are free.
 * Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT for an invalid `r` or a stack
 * whose upstream links loop (see gmr_resource_check(); nothing is trimmed),
 * or the first failure of a resource's trim (memory given back before it
 * stays given back).
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_trim(gmr_resource *r, size_t *released_bytes);

/**
 * Report the memory the stack headed by `r` holds from below: the first
 * resource, going down through adaptors, that implements get_footprint answers.
 * For `pool > cuda` that is the pool's chunks; for a plain cuda resource, what
 * it holds from the driver.
 * Thread-safe: yes where the answering resource says so; a concurrent reading
 *   may miss allocations in flight.
 * Stream/device: no CUDA call, never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for NULL arguments, an invalid
 * `r`, or a stack whose upstream links loop (see gmr_resource_check());
 * GMR_ERR_UNSUPPORTED when no resource in the stack reports a footprint.
 * On failure *out is zeroed (when out is not NULL).
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_get_footprint(const gmr_resource *r,
                                                            gmr_footprint *out);

/**
 * Report held, live and free bytes and the largest free block of the stack
 * headed by `r`: the first resource, going down through adaptors, that
 * implements get_memory_info answers (for `tracking > pool > cuda`, the pool).
 *
 * Units: bytes. Ownership: *out is the caller's; set out->size and
 *   out->version first (GMR_MEMORY_INFO_INIT).
 * Thread-safe: as the answering resource says; a concurrent reading may miss
 *   requests in flight. Stream/device: no CUDA call, never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (r invalid, out NULL, out->size
 *   smaller than the version-1 struct or out->version 0, or a stack whose
 *   upstream links loop: see gmr_resource_check()); GMR_ERR_UNSUPPORTED
 *   when no resource in the stack answers. On failure the fields after the
 *   header are zeroed (when out is usable).
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_get_memory_info(const gmr_resource *r,
                                                              gmr_memory_info *out);

/**
 * Tell `r` that the allocation starting at `ptr` is also used on `stream`
 * (PyTorch's Tensor.record_stream, same meaning): its later free must not let
 * the memory be reused before the work queued on `stream` up to that free has
 * completed. Call it any time between allocation and free, once per stream.
 *
 * Ownership: none taken. Thread-safe: as the resource's header says.
 * Stream/device: makes no stream-ordered call now; the resource records an
 *   event on `stream` when the block is freed.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (r invalid or ptr NULL);
 *   GMR_ERR_UNKNOWN_POINTER (ptr is not the start of a live allocation of r);
 *   GMR_ERR_UNSUPPORTED (a resource of the stack cannot honour it; nothing
 *   was recorded); GMR_ERR_OUT_OF_MEMORY (host memory for the record).
 * After failure nothing was recorded.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_record_stream(gmr_resource *r, void *ptr,
                                                            gmr_stream stream);

/**
 * gmr_resource_allocate_ex() for a request made while `stream` captures a CUDA graph,
 * served without breaking the capture (see gmr_resource_allocate_capturing_fn):
 * the resource may switch the calling thread to relaxed capture mode around
 * calls such as cudaMalloc or page mapping, and restores it. Zero bytes,
 * alignment and argument checks are as in gmr_resource_allocate_ex().
 *
 * Thread-safe: as the resource's header says.
 * Returns as gmr_resource_allocate_ex(), and GMR_ERR_CAPTURE_UNSAFE when a resource of
 * the stack cannot allocate during capture (cudaMallocAsync would add a
 * memory node to the graph); the capture is then untouched.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_allocate_capturing(gmr_resource *r, size_t bytes,
                                                                 size_t alignment,
                                                                 gmr_stream stream, void **out_ptr,
                                                                 gmr_failure *failure);

/**
 * Grow the live allocation at `ptr` from `bytes` to `new_bytes` without
 * moving it, so a sub-allocator can enlarge a chunk it holds instead of
 * taking a new one (growth that adds no fragmentation). What the resource
 * must do is in gmr_resource_extend_fn above; resources that can say so in
 * their header (gmr/vmm_pool_resource.h: the pages after the allocation).
 *
 * Units: bytes; alignment as given at allocation (0 = 256).
 * Ownership: on GMR_OK the caller owns [ptr, ptr + new_bytes) and later frees
 *   it with gmr_resource_deallocate(r, ptr, new_bytes, alignment, ...).
 * Thread-safe: as the resource's header says.
 * Stream/device: the added bytes are valid for work ordered after the call on
 *   `stream`. Whether it may map pages, synchronise or run while `stream`
 *   captures a graph is the resource's to document.
 * Returns:
 *   GMR_OK                    grown (new_bytes == bytes: nothing to do, the
 *                             resource is not called).
 *   GMR_ERR_INVALID_ARGUMENT  r invalid, ptr NULL, bytes 0, new_bytes below
 *                             bytes, or alignment not a power of two.
 *   GMR_ERR_UNSUPPORTED       r cannot grow this allocation in place (no
 *                             extend slot, or the addresses after it are in
 *                             use): allocate elsewhere instead.
 *   GMR_ERR_OUT_OF_MEMORY     no memory to back the growth (also new_bytes >
 *                             GMR_MAX_ALLOCATION_BYTES).
 *   GMR_ERR_UNKNOWN_POINTER, GMR_ERR_FREE_MISMATCH (ptr is not a live
 *   allocation of r, or bytes is not its size), GMR_ERR_CUDA, GMR_ERR_BUSY
 *                             as the resource documents.
 * `failure` (may be NULL) is filled as by gmr_resource_allocate_ex() on failure, with
 *   bytes = new_bytes.
 * After failure: nothing changed; the allocation is still `bytes` long.
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_extend(gmr_resource *r, void *ptr, size_t bytes,
                                                     size_t new_bytes, size_t alignment,
                                                     gmr_stream stream, gmr_failure *failure);

#ifdef __cplusplus
}
#endif

#endif /* GMR_RESOURCE_H_ */
