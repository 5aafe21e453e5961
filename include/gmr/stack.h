/*
 * gmr/stack.h: a whole allocator (a chain of resources) owned as one object,
 * built in code or from a spec string at start-up.
 *
 * A spec names the layers top first; `>` means "stacks on":
 *
 *   tracking(per=stream) > limiting(limit=8GiB, on_limit=increase, on_oom=trim_retry) > cuda(kind=async)
 *
 * Grammar (EBNF; whitespace, including newlines, may appear between any two
 * tokens):
 *
 *   spec      = layer , { ">" , layer } ;
 *   layer     = name , [ "(" , [ option , { "," , option } ] , ")" ] ;
 *   option    = name , "=" , value ;
 *   name      = letter , { letter | digit | "_" } ;      (letter: A-Z a-z _)
 *   value     = bare | quoted ;
 *   bare      = bare_char , { bare_char } ;   (any character but whitespace , ( ) > = ")
 *   quoted    = '"' , { any character but '"' and '\' | '\' , any character } , '"' ;
 *
 * The last layer is a resource (cuda, host, ...); every other layer is an
 * adaptor or a pool. Component and option names are case-sensitive. A spec
 * has at most GMR_STACK_MAX_DEPTH (64) layers.
 *
 * Values:
 *   sizes     a number (decimal fractions allowed) with an optional unit:
 *             none or B = bytes; K, KiB = 1024, M, MiB = 1024^2, G, GiB, T, TiB
 *             (binary, as RMM and mimalloc read K/M/G/T); KB = 1000, MB = 10^6,
 *             GB = 10^9, TB = 10^12 (decimal: the SI meaning of a "B" unit).
 *             Units are case-insensitive. A size is a whole number of bytes
 *             (1.5KiB is; 1.1KiB and 0.5 are refused, not rounded). `N%` is N
 *             percent of the total memory of the current device
 *             (cudaMemGetInfo; works on the simulation), rounded down, at
 *             least one byte unless N is 0. Options that allow it also take
 *             `none` (no limit) or `max`.
 *   ranges    a value a layer would refuse is refused by the spec with the
 *             range ("at most 64", "not a power of two (512 bytes and 1KiB
 *             are)"), and so are options that contradict each other.
 *   policies  a built-in or registered name (gmr/policy.h), or
 *             plugin:PATH:SYMBOL, a function loaded from a shared library
 *             (not in a spec from the environment: see below).
 *   booleans  true/false, yes/no, on/off, 1/0.
 *   texts     any non-empty value (paths, names), quoted when it holds one of
 *             the characters a bare value may not: log(file="/tmp/my log.csv").
 * `gmr_stack_print_components()` lists every component with its options,
 * their types, defaults and meaning.
 *
 * Errors point at the spot: `spec:1:27: unknown option 'limt' for limiting
 * (did you mean 'limit'?)`. A spec that fails creates nothing and leaks
 * nothing: the whole spec is checked before any layer is created, and layers
 * already created when a later one fails are destroyed again.
 *
 * Contexts: a spec is resolved in a context (gmr/context.h), which holds the
 * components and the registered policy names it may use: gmr_stack_create_in()
 * names one, every other function here uses the default context.
 *
 * Environment: GMR_STACK is read in one place, gmr_stack_create_from_env()
 * (which the per-device resources of gmr/device_resource.h use), and only
 * when called; no constructor reads the environment. A spec from the
 * environment loads no library: a plugin:PATH:SYMBOL policy there is refused
 * (register the policy by name and name it instead), so setting a variable
 * never makes a program run code it did not choose. Nothing in libgmr loads
 * a library by itself: an optional library's components come with the
 * library (gmr/context.h).
 *
 * Ownership: a gmr_stack owns its layers and the policy plugins its spec
 * loaded; gmr_stack_destroy() destroys the layers top-down, then unloads the
 * plugins (RMM's owning_wrapper). Adaptors created by hand borrow their
 * upstream; gmr_stack_push() takes ownership of a layer built that way.
 *
 * Thread-safe: creating and destroying stacks: yes for distinct stacks.
 * A stack's layers are as thread-safe as their headers say; the stack adds no
 * locking of its own. gmr_stack_push/destroy are not thread-safe with other
 * use of the same stack.
 */
#ifndef GMR_STACK_H_
#define GMR_STACK_H_

#include <stddef.h>
#include <stdio.h>

#include "gmr/config.h"
#include "gmr/context.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_stack gmr_stack;

/* The most layers a spec may have. Every call passes through every layer on
 * the C stack, so a spec of thousands of layers would overflow it; no real
 * allocator comes near 64 (RMM's deepest documented stacks have five). */
#define GMR_STACK_MAX_DEPTH 64

#define GMR_SPEC_ERROR_MESSAGE_BYTES 512

/* Where and why a spec was refused. */
typedef struct gmr_spec_error {
  int line;    /* 1-based; 0 when the error is not at a place in the spec */
  int column;  /* 1-based, in bytes */
  char message[GMR_SPEC_ERROR_MESSAGE_BYTES]; /* "spec:1:27: unknown option ..." */
} gmr_spec_error;

/**
 * Build the stack `spec` describes, bottom layer first, and give it to *out.
 *
 * Units: sizes in the spec as described at the top of this header.
 * Ownership: `spec` is copied; *out is the caller's (gmr_stack_destroy).
 *   `error` (may be NULL) receives the reason on failure.
 * Thread-safe: yes (the policy registries are read under their mutex).
 * Stream/device: creates each layer, which may call CUDA (cuda(kind=async)
 *   creates a cudaMemPool_t); a `%` size reads cudaMemGetInfo. Never synchronises.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  spec or out is NULL, or the spec is malformed
 *                             (syntax, more than GMR_STACK_MAX_DEPTH layers,
 *                             unknown component, option or policy, bad value
 *                             or one outside the layer's range, options that
 *                             contradict each other, a device ordinal past the
 *                             device count, wrong order, plugin not loadable).
 *   other statuses            the create function of a layer failed (e.g.
 *                             GMR_ERR_CUDA without a GPU); the message names it.
 * On failure *out is NULL, nothing was created or stays loaded, and
 * error->message says what and where (also for statuses from layers).
 * Source: RMM's owning_wrapper and its resource names in benchmarks; the
 *   environment variable in the style of PYTORCH_CUDA_ALLOC_CONF.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_create(const char *spec, gmr_stack **out,
                                                  gmr_spec_error *error);

/**
 * gmr_stack_create() in context `ctx` (NULL: the default context): the
 * spec may name the components and registered policy names of `ctx` only.
 * Ownership, thread safety, stream/device semantics, Returns and state
 * after failure: as gmr_stack_create() (an unknown component or policy name
 * is GMR_ERR_INVALID_ARGUMENT with the names `ctx` knows). The stack does
 * not refer to `ctx` after the call: it may outlive it.
 * Source: gmr's own.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_create_in(gmr_context *ctx, const char *spec,
                                                     gmr_stack **out, gmr_spec_error *error);

/**
 * gmr_stack_create() with the spec in the environment variable GMR_STACK, or
 * `fallback_spec` when GMR_STACK is unset or empty. Messages say `GMR_STACK:`
 * instead of `spec:` when the spec came from the environment.
 * Ownership, thread safety, stream/device semantics, Returns and state
 * after failure: as gmr_stack_create(); GMR_ERR_INVALID_ARGUMENT also when
 * GMR_STACK is unset and fallback_spec is NULL, and when GMR_STACK names a
 * plugin:PATH:SYMBOL policy (the environment loads no library; the message
 * says what to do instead; fallback_spec may name one). Reads the
 * environment only during this call (getenv: do not change the environment
 * concurrently).
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_create_from_env(const char *fallback_spec,
                                                           gmr_stack **out,
                                                           gmr_spec_error *error);

/**
 * Check `spec` as gmr_stack_create() would, without creating any layer and
 * without any CUDA call: syntax, depth, component and option names, the order
 * of layers, values and their ranges, options that contradict each other (a
 * `%` size is checked for its form but not resolved, and a device ordinal is
 * not compared with the device count, since both need the device), policy
 * names, and plugins (loaded, asked for their policy, released and unloaded
 * again). Tools use it to refuse a command line before long work.
 * Thread-safe: yes. Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (or
 * GMR_ERR_OUT_OF_MEMORY; on failure nothing stays created or loaded) with
 * `error` (may be NULL) filled as by
 * gmr_stack_create(). Creating can still fail where checking passed (no
 * device, a device ordinal past the count, out of memory).
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_check(const char *spec, gmr_spec_error *error);

/**
 * Create an empty stack, for composing by hand with gmr_stack_push().
 * Ownership: *out is the caller's (gmr_stack_destroy).
 * Thread-safe: yes (an independent object). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out NULL); GMR_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL (when out is not NULL) and nothing needs destroying.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_create_empty(gmr_stack **out);

/**
 * Put `layer` on top of the stack and take ownership of it. On an empty stack
 * any resource is accepted; otherwise `layer` must be an adaptor whose
 * upstream (gmr_resource_get_upstream) is the current top.
 * Ownership: on GMR_OK the stack owns `layer` (gmr_stack_destroy destroys it).
 * Thread-safe: no. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, invalid resource, or its
 * upstream is not the top); GMR_ERR_OUT_OF_MEMORY. On failure the stack is
 * unchanged and the caller keeps `layer`.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_push(gmr_stack *stack, gmr_resource *layer);

/**
 * The top layer, the one to allocate from (NULL for NULL or an empty stack).
 * Ownership: borrowed from the stack. Thread-safe: yes.
 */
GMR_API gmr_resource *gmr_stack_as_resource(gmr_stack *stack);

/**
 * Number of layers (0 for NULL): one per layer of the spec, and one more for
 * each `limiting(on_oom=...)` with a policy other than fail (its OOM layer,
 * docs/stack_spec.md). Thread-safe: yes.
 */
GMR_API size_t gmr_stack_get_depth(const gmr_stack *stack);

/**
 * Layer `index` counted from the top (0 = top), or NULL past the bottom (or
 * for NULL). Ownership: borrowed from the stack. Thread-safe: yes.
 */
GMR_API gmr_resource *gmr_stack_get_layer(const gmr_stack *stack, size_t index);

/**
 * The spec the stack was built from (NULL for a stack built by hand, or for
 * NULL). Ownership: the stack's, valid until it is destroyed. Thread-safe: yes.
 */
GMR_API const char *gmr_stack_get_spec(const gmr_stack *stack);

/**
 * Destroy the layers top-down, then unload the plugins and free the stack.
 * NULL is a no-op. Thread-safe: no. Stream/device: as each layer's destroy
 *   (a pool gives its chunks back: cudaFree may synchronise).
 * Returns GMR_OK; or the first failure of a layer's destroy (GMR_ERR_BUSY
 * while allocations are live): then the layers above it are already gone,
 * that layer and those below it stay in the stack, which remains valid (its
 * top is now the layer that refused), so the caller can free what is live
 * and call gmr_stack_destroy() again.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_destroy(gmr_stack *stack);

/**
 * Print every component a spec can name in the default context (libgmr's,
 * and those of optional libraries loaded so far), with its options (type,
 * default, meaning), and the built-in policy names, to `out`.
 * Thread-safe: yes (the context's lock while it copies the list).
 * Stream/device: no CUDA call.
 * Returns GMR_OK (write errors of `out` are not reported: check ferror);
 * GMR_ERR_INVALID_ARGUMENT (out NULL). On failure nothing is written.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stack_print_components(FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_H_ */
