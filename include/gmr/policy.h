/*
 * gmr/policy.h: OOM policies and limit policies, by value, by name, or from a
 * shared library.
 *
 * An OOM policy decides what an adaptor does when the stack below it fails a
 * request for lack of memory (GMR_ERR_OUT_OF_MEMORY, or GMR_ERR_LIMIT_EXCEEDED
 * from a limiting adaptor below): fail, or retry after doing something that
 * may free memory. Built in:
 *   fail        return the failure at once (the default).
 *   retry       call a user callback that may free memory (spill, drop
 *               caches), then retry if it says so (RMM's
 *               failure_callback_resource_adaptor). Without a callback: retry
 *               as is, which helps when other threads free concurrently.
 *   trim_retry  ask the whole stack below to give cached free memory back
 *               (gmr_resource_trim: pools release free chunks, cuda(async)
 *               trims its cudaMemPool_t), then retry if anything was released.
 *   wait        block until another thread frees memory through the same
 *               adaptor, or a timeout passes; retry if a free came
 *               (cuCascade's notification channel).
 * Attempts are capped by `max_attempts`, and a policy is never entered
 * re-entrantly: while any OOM policy runs in a thread, a failure below an
 * adaptor in that same thread (say the retry callback allocates) is returned
 * as is, without calling a policy (Lua's tryagain, jemalloc's reentrancy guard).
 *
 * Where a policy attaches: the OOM adaptor (gmr/oom_adaptor.h) carries one
 * on any stack, with or without a limit; a spec's `limiting(on_oom=...)` puts
 * one above its limiting adaptor. The adaptor holding the policy calls it;
 * the policy sees its upstream through gmr_oom_services.
 *
 * A limit policy decides what a limiting adaptor does with a request that
 * would take its outstanding total past its limit (cuCascade's reservation
 * limit policies): fail (GMR_ERR_LIMIT_EXCEEDED, the default), ignore (allow
 * it; the overage is counted), increase (grow the limit by a padding factor,
 * default 1.25, times the request's excess over it, within an optional hard
 * cap, then fail), increase_total (raise the limit to the padded new total).
 *
 * Policies are plain structs copied by value into the adaptor at create. A
 * program gets a built-in one by its name (gmr_oom_policy_from_name,
 * gmr_limit_policy_from_name: the names specs use) and sets the fields it
 * wants to differ (attempts, timeout, callback, padding, cap); the `fail`
 * ones also have static initialisers for config defaults. A user writes
 * their own by filling the struct, registers it under a name for
 * specs (gmr_oom_policy_register), or ships it in a shared library that the
 * program loads (gmr_policy_plugin_load) or that a spec the program passes
 * names (`on_oom=plugin:./libmypolicy.so:my_policy`), through the plugin ABI
 * at the end of this header. A spec read from the environment (GMR_STACK)
 * never loads a library: it names registered policies instead.
 *
 * Registries: names registered with gmr_oom_policy_register() and
 * gmr_limit_policy_register() belong to a context (gmr/context.h): specs
 * built in that context resolve names there; NULL is the default context,
 * whose names every function without a context argument sees
 * (gmr_stack_create, the per-device resources, *_from_name). Built-in names
 * are in every context and cannot be replaced.
 *
 * Thread-safe: each registry is guarded by an internal mutex. A policy's
 * decide function may be called from several threads at once (one failure
 * per thread), so it must be thread-safe itself.
 */
#ifndef GMR_POLICY_H_
#define GMR_POLICY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/context.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest policy name, terminating NUL excluded. */
#define GMR_POLICY_NAME_MAX 31

/* No adaptor retries more often than this, whatever a policy asks. */
#define GMR_OOM_MAX_ATTEMPTS 64u

/* A release function frees a policy's ctx when the adaptor holding the policy
 * is destroyed. */
typedef void gmr_policy_release_fn(void *ctx);

/* ---- OOM policies ------------------------------------------------------- */

typedef enum gmr_oom_action { GMR_OOM_ACTION_FAIL = 0, GMR_OOM_ACTION_RETRY = 1 } gmr_oom_action;

typedef struct gmr_oom_services gmr_oom_services;

/**
 * What an OOM policy may ask of the adaptor that runs it. Given as function
 * pointers so that a policy in a plugin needs no symbol of gmr.
 *
 *   trim(self, &released)   gmr_resource_trim() on the adaptor's upstream;
 *                           emits GMR_EVENT_OOM_TRIM. May synchronise streams.
 *   wait_for_free(self, timeout_ns, &freed)
 *                           block until a deallocation passes through the
 *                           adaptor after the failed attempt began, or
 *                           timeout_ns passes; *freed is 1 or 0. Returns
 *                           GMR_OK. Emits GMR_EVENT_OOM_WAIT.
 */
struct gmr_oom_services {
  uint32_t version;              /* GMR_OOM_SERVICES_VERSION */
  gmr_resource *upstream;        /* the adaptor's upstream; borrowed */
  const gmr_resource *adaptor;   /* the adaptor running the policy; borrowed */
  gmr_status (*trim)(const gmr_oom_services *self, size_t *released_bytes);
  gmr_status (*wait_for_free)(const gmr_oom_services *self, uint64_t timeout_ns, int *freed);
  void *internal;                /* the adaptor's state; do not touch */
};

#define GMR_OOM_SERVICES_VERSION 1u

typedef struct gmr_oom_policy gmr_oom_policy;

/* Decide about `failure` (its `attempt` is 0 for the first try). */
typedef gmr_oom_action gmr_oom_policy_decide_fn(const gmr_oom_policy *policy,
                                                const gmr_failure *failure,
                                                const gmr_oom_services *services);

/* A user callback of the `retry` policy: free what you can, then say whether
 * a retry is worth it (RMM's failure_callback_t, with the whole record). */
typedef gmr_oom_action gmr_oom_callback_fn(void *ctx, const gmr_failure *failure);

#define GMR_OOM_POLICY_VERSION 1u

struct gmr_oom_policy {
  uint32_t version;                  /* GMR_OOM_POLICY_VERSION */
  const char *name;                  /* for events and logs; must outlive the policy */
  gmr_oom_policy_decide_fn *decide;  /* NULL: fail at once */
  void *ctx;                         /* the policy's own data */
  uint32_t max_attempts;             /* retries after the first failure, <= GMR_OOM_MAX_ATTEMPTS */
  uint64_t wait_timeout_ns;          /* wait: how long one wait may block */
  gmr_oom_callback_fn *callback;     /* retry: the user callback, or NULL */
  void *callback_ctx;                /* retry: given to the callback; borrowed */
  gmr_policy_release_fn *release;    /* optional: frees ctx when the holding adaptor is destroyed */
};

/* Version of gmr_oom_counts; callers set it with `size` (GMR_OOM_COUNTS_INIT). */
#define GMR_OOM_COUNTS_VERSION 1u

/* What an adaptor's OOM policy did, in a stats snapshot
 * (gmr_oom_adaptor_get_counts, and the `oom` of gmr_limiting_adaptor_stats).
 * Like every struct the caller allocates and gmr fills, it starts with `size`
 * and `version`, which the caller sets (GMR_OOM_COUNTS_INIT): fields are only
 * appended, with a new version, and gmr never writes past the caller's
 * `size`, nor the header, so a program built against older headers keeps
 * working. */
typedef struct gmr_oom_counts {
  size_t size;                 /* sizeof(gmr_oom_counts) as the caller knows it */
  uint32_t version;            /* GMR_OOM_COUNTS_VERSION as the caller knows it */
  uint64_t failure_count;      /* out-of-memory failures seen from upstream (every attempt) */
  uint64_t retry_count;        /* retries the policy asked for */
  uint64_t recovered_count;    /* requests that failed, then succeeded on a retry */
  uint64_t gave_up_count;      /* requests the policy gave up on (not counted for `fail`) */
  uint64_t reentrant_count;    /* failures returned as is because a policy already ran in the thread */
  uint64_t trim_count;         /* trims of the stack below */
  uint64_t trimmed_bytes;      /* bytes those trims released */
  uint64_t wait_count;         /* waits for a free */
  uint64_t wait_timeout_count; /* waits that ended with no free */
  /* ---- end of version 1 ---- */
} gmr_oom_counts;

/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_OOM_COUNTS_INIT \
  {sizeof(gmr_oom_counts), GMR_OOM_COUNTS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Static initialisers of the `fail` policies, for *_CONFIG_DEFAULT macros. */
#define GMR_OOM_POLICY_FAIL_INIT {GMR_OOM_POLICY_VERSION, "fail", NULL, NULL, 0u, 0u, NULL, NULL, NULL}

/* Defaults of the built-ins from gmr_oom_policy_from_name() (a spec that
 * names one without attempts or a timeout gets them too). */
#define GMR_OOM_DEFAULT_ATTEMPTS 3u
#define GMR_OOM_DEFAULT_WAIT_TIMEOUT_NS ((uint64_t)1000000000) /* 1 s */

/**
 * Check a policy struct: version >= 1, a name of at most GMR_POLICY_NAME_MAX
 * characters, max_attempts <= GMR_OOM_MAX_ATTEMPTS. Adaptors call it at
 * create; a user who fills the struct by hand can call it first.
 * Thread-safe: yes (reads only). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, or a rule broken). Never
 * changes the policy, on failure or not.
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_policy_check(const gmr_oom_policy *policy);

/**
 * Register `policy` under `name` in context `ctx` (NULL: the default
 * context) so specs built there can say `on_oom=NAME`. The struct is
 * copied; its ctx and callback_ctx stay the caller's (copies handed out have
 * `release` cleared). Names are [A-Za-z_][A-Za-z0-9_]*, at most
 * GMR_POLICY_NAME_MAX characters, and may not be a built-in name.
 * Thread-safe: yes (the context's mutex). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (bad name, built-in name or one
 * registered in ctx already, invalid policy); GMR_ERR_BUSY (64 policies
 * registered in ctx).
 * On failure nothing is registered.
 * Source: RMM's named resources in its benchmarks; the registry of names is
 *   gmr's own.
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_policy_register(gmr_context *ctx, const char *name,
                                                         const gmr_oom_policy *policy);

/**
 * Remove the OOM policy registered under `name` in `ctx` (NULL: the default
 * context). Adaptors that were created with it keep their copy; later specs
 * built there can no longer name it.
 * Thread-safe: yes (the context's mutex). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (name NULL, a built-in name, or a
 * name not registered in ctx: nothing changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_policy_unregister(gmr_context *ctx,
                                                           const char *name);

/**
 * The policy named `name`: a built-in, or one registered in the default
 * context (specs built in another context see its names). This is how a
 * program gets a built-in policy for a config; it then sets the fields it
 * wants to differ from the defaults (see "Built-in policies" above):
 *
 *   gmr_oom_policy p;
 *   if (gmr_oom_policy_from_name("retry", &p) != GMR_OK) ...;
 *   p.callback = spill;          // frees what it can, then says RETRY or FAIL
 *   p.callback_ctx = &cache;
 *   p.max_attempts = 5;          // <= GMR_OOM_MAX_ATTEMPTS (the check refuses more)
 *
 * Built-ins: `fail` (never retry); `retry` (callback NULL: retry as is;
 * GMR_OOM_DEFAULT_ATTEMPTS attempts); `trim_retry` (trim the stack below and
 * retry if bytes were released; RMM's failure_callback_resource_adaptor with
 * a callback that frees cached memory, PyTorch's caching allocator freeing
 * cached blocks; GMR_OOM_DEFAULT_ATTEMPTS attempts); `wait` (wait up to
 * wait_timeout_ns, GMR_OOM_DEFAULT_WAIT_TIMEOUT_NS, for a free through the
 * adaptor and retry if one came; cuCascade's memory_reservation_manager;
 * GMR_OOM_DEFAULT_ATTEMPTS attempts).
 * Ownership: *out is a copy: its ctx and callback_ctx stay the registrant's
 *   (a callback_ctx set by the caller must outlive every adaptor holding
 *   the policy), its release is NULL.
 * Thread-safe: yes (internal mutex for registered names); the policy itself
 *   may run in several threads at once. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, or an unknown
 * name; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_policy_from_name(const char *name, gmr_oom_policy *out);

/* ---- limit policies ----------------------------------------------------- */

typedef enum gmr_limit_action {
  GMR_LIMIT_ACTION_FAIL = 0,  /* refuse: GMR_ERR_LIMIT_EXCEEDED */
  GMR_LIMIT_ACTION_ALLOW = 1, /* let the request pass the limit; counted as an overage */
  GMR_LIMIT_ACTION_RAISE = 2  /* raise the limit to *new_limit_bytes, then try again */
} gmr_limit_action;

/* A request that would pass a limit. */
typedef struct gmr_limit_request {
  size_t charge_bytes;  /* what the request is charged (its size rounded up) */
  size_t used_bytes;    /* charged bytes outstanding before it */
  size_t limit_bytes;   /* the limit it would pass */
  gmr_stream stream;    /* the request's stream */
  int scope_stream;     /* 1: the limit is the per-stream limit of `stream` */
} gmr_limit_request;

typedef struct gmr_limit_policy gmr_limit_policy;

/* Decide about `request`. For GMR_LIMIT_ACTION_RAISE set *new_limit_bytes;
 * a new limit that does not admit the request counts as FAIL. */
typedef gmr_limit_action gmr_limit_policy_decide_fn(const gmr_limit_policy *policy,
                                                    const gmr_limit_request *request,
                                                    size_t *new_limit_bytes);

#define GMR_LIMIT_POLICY_VERSION 1u

struct gmr_limit_policy {
  uint32_t version;                  /* GMR_LIMIT_POLICY_VERSION */
  const char *name;                  /* for events and logs; must outlive the policy */
  gmr_limit_policy_decide_fn *decide; /* NULL: fail */
  void *ctx;                         /* the policy's own data */
  double padding_factor;             /* increase: limit grows by excess * factor;
                                        increase_total: new limit = (used + charge) * factor */
  size_t cap_bytes;                  /* increase, increase_total: never raise past this (0: no cap) */
  gmr_policy_release_fn *release;    /* optional: frees ctx when the holding adaptor is destroyed */
};

#define GMR_LIMIT_POLICY_FAIL_INIT {GMR_LIMIT_POLICY_VERSION, "fail", NULL, NULL, 1.0, 0u, NULL}

#define GMR_LIMIT_DEFAULT_PADDING_FACTOR 1.25

/**
 * Check a limit policy struct: version >= 1, a name of at most
 * GMR_POLICY_NAME_MAX characters, and for the built-in `increase` and
 * `increase_total` a padding factor in [1, 1e6).
 * Thread-safe: yes (reads only). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, or a rule broken). Never
 * changes the policy, on failure or not.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limit_policy_check(const gmr_limit_policy *policy);

/**
 * Register `policy` under `name` in context `ctx` (NULL: the default
 * context) so specs built there can say `on_limit=NAME`. The struct is
 * copied; its ctx stays the caller's (copies handed out have `release`
 * cleared). Names are [A-Za-z_][A-Za-z0-9_]*, at most GMR_POLICY_NAME_MAX
 * characters, and may not be a built-in name.
 * Thread-safe: yes (the context's mutex). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (bad name, built-in name or one
 * registered in ctx already, invalid policy); GMR_ERR_BUSY (64 policies
 * registered in ctx).
 * On failure nothing is registered.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limit_policy_register(gmr_context *ctx, const char *name,
                                                           const gmr_limit_policy *policy);

/**
 * Remove the limit policy registered under `name` in `ctx` (NULL: the
 * default context). Adaptors that were created with it keep their copy;
 * later specs built there can no longer name it.
 * Thread-safe: yes (the context's mutex). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (name NULL, a built-in name, or a
 * name not registered in ctx: nothing changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_limit_policy_unregister(gmr_context *ctx,
                                                             const char *name);

/**
 * The limit policy named `name`: a built-in, or one registered in the
 * default context (specs built in another context see its names). This is how
 * a program gets a built-in policy for a config, then sets the fields it
 * wants to differ from the defaults:
 *
 *   gmr_limit_policy p;
 *   if (gmr_limit_policy_from_name("increase", &p) != GMR_OK) ...;
 *   p.padding_factor = 2.0;      // in [1, 1e6) (the check refuses others)
 *   p.cap_bytes = (size_t)8 << 30;
 *
 * Built-ins (factor GMR_LIMIT_DEFAULT_PADDING_FACTOR and no cap unless set):
 * `fail`: refuse a request past the limit (GMR_ERR_LIMIT_EXCEEDED; RMM's
 * limiting_resource_adaptor, cuCascade's fail_reservation_limit_policy).
 * `ignore`: let it through; the adaptor counts the overage
 * (gmr_limiting_adaptor_stats; cuCascade's ignore_reservation_limit_policy).
 * `increase`: grow the limit by padding_factor times the request's excess
 * over it (with excess = used + charge - limit, the new limit is limit +
 * floor(excess * padding_factor), never less than limit + excess); past
 * cap_bytes (0: no cap) grow by exactly the excess, and fail (nothing
 * changed) when even that passes the cap. Example: limit 25600, used 23040,
 * a request of 12800: excess 10240, the limit grows by 12800 to 38400
 * (cuCascade's increase_reservation_limit_policy).
 * `increase_total`: raise the limit to ceil((used + charge) *
 * padding_factor), the padded new total, not past cap_bytes; fail when even
 * the cap does not admit the request (geometric growth, like a vector's
 * capacity: few raises for a use that keeps growing).
 * Ownership: *out is a copy: its ctx stays the registrant's, its release is
 *   NULL.
 * Thread-safe: yes (internal mutex for registered names). Stream/device: no
 *   CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, or an unknown
 * name; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_limit_policy_from_name(const char *name,
                                                            gmr_limit_policy *out);

/* ---- plugins ------------------------------------------------------------ */

/*
 * Plugin ABI, version 1. A shared library exports a function of type
 * gmr_policy_plugin_fn under any name; a spec names it as
 * `plugin:PATH:SYMBOL` (the last ':' separates the symbol). gmr calls it once
 * per adaptor with the ABI version it speaks and the kind of policy wanted;
 * the function fills *out (a gmr_oom_policy or a gmr_limit_policy) and
 * returns GMR_OK, or GMR_ERR_UNSUPPORTED for an ABI version or kind it does
 * not provide. The policy's name and functions live in the library, which
 * stays loaded until the policy is released. The library needs no gmr symbol
 * (the services come as function pointers), so it links nothing of gmr.
 */
#define GMR_POLICY_PLUGIN_ABI_VERSION 1u

typedef enum gmr_policy_kind { GMR_POLICY_KIND_OOM = 1, GMR_POLICY_KIND_LIMIT = 2 } gmr_policy_kind;

typedef gmr_status gmr_policy_plugin_fn(uint32_t abi_version, gmr_policy_kind kind, void *out);

typedef struct gmr_policy_plugin gmr_policy_plugin;

/* Length of the message buffer given to gmr_policy_plugin_load(). */
#define GMR_POLICY_PLUGIN_MESSAGE_BYTES 256

/**
 * dlopen `path` (RTLD_NOW | RTLD_LOCAL), find `symbol`, and call it for a
 * policy of `kind`, written to `out_policy` (a gmr_oom_policy * or a
 * gmr_limit_policy *, checked with the matching *_check function).
 * Ownership: *out_handle keeps the library loaded; unload it with
 * gmr_policy_plugin_unload() after every adaptor holding the policy is
 * destroyed. `message` (may be NULL, GMR_POLICY_PLUGIN_MESSAGE_BYTES long)
 * receives a sentence on failure (dlerror's text included).
 * Thread-safe: yes (dlopen is). Stream/device: none.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, library or symbol
 * not found, the plugin refused (any status), invalid policy). On failure
 * nothing stays loaded and *out_handle is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_policy_plugin_load(const char *path, const char *symbol,
                                                        gmr_policy_kind kind, void *out_policy,
                                                        gmr_policy_plugin **out_handle,
                                                        char *message);

/**
 * Unload a plugin library loaded by gmr_policy_plugin_load() (dlclose) and
 * free the handle. NULL is a no-op.
 * pre: no adaptor holds a policy from the library any more (its functions
 *   would be unmapped).
 * Thread-safe: yes, for distinct handles. Stream/device: no CUDA call.
 * Returns GMR_OK; it never fails (a dlclose error leaves the library loaded,
 * which is harmless).
 */
GMR_API GMR_NODISCARD gmr_status gmr_policy_plugin_unload(gmr_policy_plugin *handle);

#ifdef __cplusplus
}
#endif

#endif /* GMR_POLICY_H_ */
