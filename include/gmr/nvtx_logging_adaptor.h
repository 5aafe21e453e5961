/*
 * gmr/nvtx_logging_adaptor.h: an adaptor that shows every allocation and
 * free of the stack below it in NVIDIA's tools (Nsight Systems:
 * `nsys profile --trace=cuda,nvtx ./app`), through NVTX v3.
 *
 * In its NVTX domain (default "gmr") it emits:
 *  - a range around each allocate and each deallocate, named
 *    "allocate (stream 0x7f..)" / "deallocate (default stream)", with the
 *    byte count as the range's payload (NVTX_PAYLOAD_TYPE_UNSIGNED_INT64).
 *    One registered string per (action, stream): no formatting per call;
 *  - a mark inside the range for every failed allocation ("allocate failed:
 *    GMR_ERR_OUT_OF_MEMORY ...", payload = bytes), in category "limit" when a
 *    limit refused it (GMR_ERR_LIMIT_EXCEEDED) and "failure" otherwise, and a
 *    mark for every refused deallocation;
 *  - a mark for every action of a limit or OOM policy in the stack below it
 *    (the gmr_events of gmr/events.h whose source is one of the layers under
 *    the adaptor; events of other stacks are not its business), payload = the
 *    request's bytes (for limit events the bytes charged): in category "limit" for LIMIT_REFUSED ("limit refused
 *    (policy fail): 2048 bytes charged, 512 of 1024 bytes used (default
 *    stream; in limiting_adaptor)"), LIMIT_RAISED ("limit raised (policy
 *    increase): 1024 -> 2560 bytes for 2048 bytes charged (...)") and
 *    LIMIT_OVERAGE ("limit passed (policy ignore): 1024 bytes over 1024 after
 *    2048 bytes charged (...)"; "stream limit" for per-stream limits); in
 *    category "oom policy" for OOM_RETRY ("oom policy trim_retry: retry 1
 *    after GMR_ERR_OUT_OF_MEMORY (...)"), OOM_TRIM ("oom policy trim_retry:
 *    trim released 4096 bytes, GMR_OK (...)"), OOM_WAIT ("oom policy wait:
 *    waited 120000 ns, a free came (...)") and OOM_GAVE_UP ("oom policy
 *    trim_retry: gave up after 1 retries: GMR_ERR_OUT_OF_MEMORY (...)"). The
 *    marks fall inside the allocate range of the request that caused them.
 *    A limit refusal marked from its event is not marked a second time from
 *    the GMR_ERR_LIMIT_EXCEEDED the allocation then returns (the event's mark
 *    says more: the limit, the usage, the policy); a LIMIT_EXCEEDED that comes
 *    with no event (a resource of the user's) still gets the status mark.
 *    The adaptor listens only while a tool is attached (then every gmr
 *    adaptor that takes policy actions builds events, a few ns per action);
 *  - a counter "bytes in use": the bytes handed out through this adaptor and
 *    not yet freed, sampled after each change (nvToolsExtCounters.h). A tool
 *    without the counters extension gets the same value as a mark in category
 *    "bytes in use" (payload = the value) instead.
 * Categories (named in the domain) and ARGB colours:
 *   1 allocate     green  0xFF43A047     4 limit          orange 0xFFFB8C00
 *   2 deallocate   blue   0xFF1E88E5     5 oom policy     purple 0xFF8E24AA
 *   3 failure      red    0xFFE53935     6 bytes in use   grey   0xFF757575
 *
 * Cost: with no tool attached NVTX gives the adaptor a NULL domain; it then
 * makes no NVTX call at all and adds one load and one branch to each call
 * (measured by tools/bench_nvtx; target <= 5 ns). The run-time switch
 * (gmr_nvtx_logging_adaptor_set_enabled) stops all emission at the same cost.
 * Built with GMR_DISABLE_NVTX (`bazel build --copt=-DGMR_DISABLE_NVTX ...` or
 * `--config=nonvtx`), the adaptor is a plain forwarder and NVTX is not even
 * compiled in (gmr_nvtx_is_compiled_in() says which).
 *
 * NVTX facts it relies on: the tool is found once per process, at the first
 * NVTX call, through NVTX_INJECTION64_PATH (nsys and compute-sanitizer set it);
 * a NULL domain with no tool attached is not an error. The adaptor never
 * destroys its domain: domains are process-wide and may be shared by name.
 *
 * Optional slots: an allocation for a capture (allocate_capturing, forwarded
 * to the upstream's) gets the same range, counter sample and failure marks as
 * an allocation; record_stream is forwarded (no range); get_memory_info is
 * answered from below. A growth in place (gmr_resource_extend, forwarded to the
 * upstream's extend) gets a range "extend (stream ..)" in the allocate
 * category with the bytes added as payload, a counter sample after success
 * (the bytes added count as in use), and a mark "extend failed: ..." in the
 * failure category when it fails (the counter then stays).
 *
 * Thread-safe: yes (atomics; a mutex only when a new stream is first seen; a
 * read lock of the table of adaptors while a policy event is marked, which
 * destroy takes for writing, so a destroyed adaptor is never marked into).
 * NVTX ranges nest per thread, so concurrent calls from several threads each
 * get their own ranges. Counter samples from several threads may reach the
 * tool slightly out of order.
 * Source: RAPIDS RMM asks for switchable NVTX ranges (#495, #1595); NVTX v3
 * headers (nvToolsExt.h, nvToolsExtCounters.h); policy marks: gmr/events.h.
 */
#ifndef GMR_NVTX_LOGGING_ADAPTOR_H_
#define GMR_NVTX_LOGGING_ADAPTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NVTX categories the adaptor uses in its domain (named there at create). */
typedef enum gmr_nvtx_category {
  GMR_NVTX_CATEGORY_ALLOCATE = 1,
  GMR_NVTX_CATEGORY_DEALLOCATE = 2,
  GMR_NVTX_CATEGORY_FAILURE = 3,
  GMR_NVTX_CATEGORY_LIMIT = 4,
  GMR_NVTX_CATEGORY_OOM_POLICY = 5,
  GMR_NVTX_CATEGORY_BYTES_IN_USE = 6
} gmr_nvtx_category;

/* Longest domain name accepted, in bytes, without the terminating NUL. */
#define GMR_NVTX_DOMAIN_NAME_MAX_BYTES 63

typedef struct gmr_nvtx_logging_adaptor_config {
  const char *domain_name; /* NVTX domain; NULL means "gmr". Copied. */
  bool enabled;            /* initial state of the run-time switch */
} gmr_nvtx_logging_adaptor_config;

/* Domain "gmr", enabled. */
#define GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT {"gmr", true}

typedef struct gmr_nvtx_logging_adaptor gmr_nvtx_logging_adaptor;

/**
 * Create an adaptor that forwards to `upstream` and annotates each call in
 * NVTX domain `config->domain_name`.
 *
 * Units: none of its own; payloads are bytes.
 * Ownership: `upstream` is borrowed: it must outlive the adaptor and must not
 *   be moved. `config` is copied (NULL means the default); the domain name is
 *   copied. The caller destroys *out with gmr_resource_destroy() (never the
 *   upstream).
 * Thread-safe: yes (creates an independent object).
 * Stream/device: no CUDA call. The first create of the process starts NVTX,
 *   which loads the tool named by NVTX_INJECTION64_PATH, if any; with a tool
 *   it creates the domain, subscribes to policy events (gmr/events.h; the
 *   first such adaptor of the process registers one gmr event listener for
 *   all of them, the last one destroyed removes it), registers its strings
 *   and names its categories, and registers its counter.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  upstream or out is NULL, upstream has no vtable
 *                             with the required slots, or the domain name is empty
 *                             or longer than GMR_NVTX_DOMAIN_NAME_MAX_BYTES.
 *   GMR_ERR_OUT_OF_MEMORY     a host allocation for the adaptor failed.
 *   GMR_ERR_BUSY              a tool is attached and gmr's event listener
 *                             could not be registered (GMR_EVENT_MAX_LISTENERS
 *                             other listeners are registered).
 * On failure *out is NULL (when out is not NULL) and nothing needs destroying.
 */
GMR_API GMR_NODISCARD gmr_status gmr_nvtx_logging_adaptor_create(
    gmr_resource *upstream, const gmr_nvtx_logging_adaptor_config *config,
    gmr_nvtx_logging_adaptor **out);

/**
 * The gmr_nvtx_logging_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_nvtx_logging_adaptor_as_resource(gmr_nvtx_logging_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_nvtx_logging_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "nvtx_logging_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_nvtx_logging_adaptor *gmr_nvtx_logging_adaptor_from_resource(gmr_resource *r) {
  return (gmr_nvtx_logging_adaptor *)gmr_resource_downcast(r, "nvtx_logging_adaptor");
}

/**
 * Switch emission on or off at run time. Calls already inside the adaptor
 * finish as they started (a range pushed is always popped). Off, the adaptor
 * still keeps its bytes-in-use count (when a tool is attached), so the first
 * sample after switching back on is right. No-op when compiled out, and for
 * NULL.
 * Thread-safe: yes (an atomic store). Stream/device: none.
 */
GMR_API void gmr_nvtx_logging_adaptor_set_enabled(gmr_nvtx_logging_adaptor *a, bool enabled);

/** The run-time switch (false for NULL, and always when compiled out). Thread-safe: yes. */
GMR_API bool gmr_nvtx_logging_adaptor_is_enabled(const gmr_nvtx_logging_adaptor *a);

/**
 * True when a tool took the adaptor's domain at create (NVTX gave a non-NULL
 * handle): only then does the adaptor emit anything. Thread-safe: yes.
 */
GMR_API bool gmr_nvtx_logging_adaptor_is_tool_attached(const gmr_nvtx_logging_adaptor *a);

/** The domain name (the adaptor's copy; valid while it lives; NULL for NULL). Thread-safe: yes. */
GMR_API const char *gmr_nvtx_logging_adaptor_get_domain_name(const gmr_nvtx_logging_adaptor *a);

/**
 * False when the library was built with GMR_DISABLE_NVTX: then no gmr code
 * makes any NVTX call (this adaptor forwards only; pools do not annotate).
 * Thread-safe: yes.
 */
GMR_API bool gmr_nvtx_is_compiled_in(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_NVTX_LOGGING_ADAPTOR_H_ */
