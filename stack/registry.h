/*
 * stack/registry.h (internal): what a component a spec can name is, and how
 * an optional library registers its own (part of the extension interface,
 * core/extension.h).
 *
 * A component is a resource (last layer of a spec) or an adaptor (any other
 * layer). Its entry lists its options (name, type, the range the layer
 * accepts, meaning, and the field of the layer's C config the value goes
 * into), the C default config (*_CONFIG_DEFAULT) the listing reads the
 * defaults from, a create function that receives the options the spec gives,
 * typed and checked, and applies them on top of that default
 * (gmr__options_apply for the options with a field, its own code for the
 * rest), a function that describes the defaults of options without a field,
 * and optionally a check of options that contradict each other.
 * Adding a component to specs is one file with its option table and these
 * functions (see component_host.c, the smallest) plus one line in the table of
 * libgmr's components (stack/context.c) and one in stack/BUILD.bazel;
 * nothing else switches on names. An optional library lists its components
 * in a gmr__extension and registers them in a context itself.
 */
#ifndef GMR_STACK_REGISTRY_H_
#define GMR_STACK_REGISTRY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/extension.h"
#include "gmr/context.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gmr__option_type {
  GMR__OPTION_SIZE,         /* bytes: 8GiB, 512, 50%, and none/max if allow_unlimited */
  GMR__OPTION_UINT,         /* a non-negative integer */
  GMR__OPTION_FACTOR,       /* a positive decimal number */
  GMR__OPTION_BOOL,         /* true/false, yes/no, on/off, 1/0 */
  GMR__OPTION_CHOICE,       /* one of `choices` */
  GMR__OPTION_DEVICE,       /* a device ordinal, or `current` */
  GMR__OPTION_OOM_POLICY,   /* an OOM policy name or plugin:PATH:SYMBOL */
  GMR__OPTION_LIMIT_POLICY, /* a limit policy name or plugin:PATH:SYMBOL */
  GMR__OPTION_STRING        /* non-empty text, bare or "quoted" (a path, a name) */
} gmr__option_type;

typedef struct gmr__option_def {
  const char *name;
  gmr__option_type type;
  const char *help;            /* what it means; policy options get the policy names appended */
  bool required;               /* the spec must give it */
  bool allow_unlimited;        /* SIZE: accept none/max/unlimited */
  const char *const *choices;  /* CHOICE: the accepted names, NULL-terminated */
  size_t max_bytes;            /* STRING: longest accepted text in bytes; 0: no limit */
  /* SIZE and UINT: the range the layer accepts, checked before any layer is
   * created so that the message can name it (max_value 0: no maximum). */
  uint64_t min_value;
  uint64_t max_value;
  bool power_of_two;           /* SIZE: the value must be a power of two */
  uint64_t multiple_of;        /* SIZE: 0, or what the value must be a multiple of */
  /* FACTOR: accepted values are min_factor <= v < below_factor (0: no bound). */
  double min_factor;
  double below_factor;
  /* Where the value goes in the component's C config (GMR__FIELD): one
   * place says it for gmr__options_apply and for the listing's default.
   * field_bytes 0: the component applies and describes the option itself.
   * SIZE and UINT go into unsigned fields, BOOL into a bool, FACTOR into a
   * double, CHOICE into an enum whose values are the choices' indexes,
   * STRING into a const char * (the spec's text, valid until create returns),
   * DEVICE into an int (-1: current, as every config says it). */
  size_t field_offset;
  size_t field_bytes;
  /* SIZE with allow_unlimited and a field: what the field holds for
   * none/max, and the word the listing shows for it. */
  uint64_t unlimited_field;
  const char *unlimited_name;
} gmr__option_def;

/* The field of option entries: GMR__FIELD(gmr_pool_resource_config,
 * initial_pool_bytes); `member` may name a nested field (streams.stream_ids). */
#define GMR__FIELD(type, member) \
  .field_offset = offsetof(type, member), .field_bytes = sizeof(((type *)0)->member)

/* Every value stands for at most this many milliseconds, so that the
 * nanoseconds the policies keep (uint64_t) cannot wrap. */
#define GMR__WAIT_TIMEOUT_MS_MAX (UINT64_MAX / 1000000u)

/* A value written in the spec, typed. Options the spec does not give keep the
 * C default of the component's config (its *_CONFIG_DEFAULT macro). */
typedef struct gmr__option_value {
  bool given;      /* written in the spec; nothing else is set otherwise */
  bool unlimited;  /* SIZE: none/max/unlimited (size is SIZE_MAX) */
  size_t size;
  uint64_t uint;
  double factor;
  bool boolean;
  int choice;      /* CHOICE: index into choices */
  int device;      /* DEVICE: ordinal, or -1 for current */
  gmr_oom_policy oom;
  gmr_limit_policy limit;
  /* STRING: the text, NUL-terminated, borrowed from the spec and valid until
   * the create function returns: copy what must last. */
  const char *string;
} gmr__option_value;

/*
 * Create the component over `upstream` (NULL for a resource) from `values`,
 * indexed like the component's option table. The create function owns the
 * policies in `values` from the call on: it hands them to the adaptor, which
 * releases them on failure too. On failure it may write a sentence into
 * `message` (what was asked, the limit, the option to change).
 */
typedef gmr_status gmr__component_create_fn(const gmr__option_value *values,
                                            gmr_resource *upstream, gmr_resource **out,
                                            char *message, size_t message_bytes);

/*
 * Optional: find options that contradict each other (each one is in range on
 * its own), before any layer is created. Returns GMR_OK, or
 * GMR_ERR_INVALID_ARGUMENT with a sentence in `message` and in *blame the
 * index of a given option to point at.
 */
typedef gmr_status gmr__component_check_fn(const gmr__option_value *values, size_t *blame,
                                           char *message, size_t message_bytes);

/*
 * Write the default of option `option`, one without a field (a policy, a
 * list, a word for a special value), into `text`, read from the component's
 * C default config where it can be, so that the listing cannot drift from
 * what an absent option means. Returns false for an option without a default.
 */
typedef bool gmr__component_default_fn(size_t option, char *text, size_t text_bytes);

typedef enum gmr__component_kind {
  GMR__COMPONENT_RESOURCE, /* takes no upstream: the last layer */
  GMR__COMPONENT_ADAPTOR   /* stacks on the next layer */
} gmr__component_kind;

typedef struct gmr__component {
  const char *name;
  gmr__component_kind kind;
  const char *help;
  const gmr__option_def *options;
  size_t option_count;
  gmr__component_create_fn *create;
  gmr__component_check_fn *check;     /* may be NULL */
  /* The C default config (*_CONFIG_DEFAULT), where options with a field
   * read their default for the listing; NULL when none has a field. */
  const void *config_default;
  /* The default of an option without a field; may be NULL. */
  gmr__component_default_fn *describe_default;
  /* Names specs used before for what this component does now, that no
   * component has any more (NULL-terminated; may be NULL): a spec naming one
   * is refused with a message naming every component that took it over. */
  const char *const *former_names;
} gmr__component;

/* An optional library, as it registers itself in a context. */
typedef struct gmr__extension {
  uint32_t version;        /* GMR_EXTENSION_VERSION the library was built with */
  const char *library;     /* its file name without .so ("libgmr_nccl"), for messages */
  const gmr__component *const *components; /* static; names unique among libgmr's */
  size_t component_count;
} gmr__extension;

/* At most this many components of optional libraries per context. */
#define GMR__CONTEXT_EXTRA_COMPONENTS 32

/*
 * Register `ext`'s components in `ctx` (NULL: the default context), so
 * specs built in it can name them. All or nothing; registering the same
 * components again changes nothing.
 * Thread-safe: yes (the context's lock). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_UNSUPPORTED (ext->version is not this libgmr's
 * GMR_EXTENSION_VERSION: the context remembers the refusal, and a spec
 * naming an unknown component is told which library was refused and why);
 * GMR_ERR_INVALID_ARGUMENT (ext NULL, or a component's name is another
 * component's in ctx); GMR_ERR_BUSY (more than GMR__CONTEXT_EXTRA_COMPONENTS).
 * On failure nothing is registered.
 */
GMR_EXTENSION_API
gmr_status gmr__extension_register(gmr_context *ctx, const gmr__extension *ext);

/* Helpers for the component files (component_support.c). */

/* Write the given options of `v` (indexed like `defs`) that have a field
 * into `config`, the component's C config (its default first). */
GMR_EXTENSION_API
void gmr__options_apply(const gmr__option_def *defs, size_t count, const gmr__option_value *v,
                        void *config);

/* Option k's default for the listing into `text`: its field in
 * c->config_default, else c->describe_default's. false: none to show. */
bool gmr__option_describe_default(const gmr__component *c, size_t k, char *text,
                                  size_t text_bytes);

/* What is free where the memory below `upstream` comes from: "; the device
 * has N bytes free of T" when the bottom of the chain is device memory of the
 * current device, else "". */
void gmr__describe_room_below(gmr_resource *upstream, char *text, size_t text_bytes);

/* The message of a layer that failed to take its initial memory at create:
 * "taking <what> from the layer below failed<room>: lower <option>, or 0 to
 * take nothing at create". */
void gmr__describe_initial_failure(gmr_resource *upstream, const char *what, const char *option,
                                   char *message, size_t message_bytes);

/* The same for a size option: "the <asked> bytes of option '<option>'
 * (<option_bytes> as a size)"; asked differs from option_bytes where the
 * layer rounds the option up. */
void gmr__describe_initial_bytes_failure(gmr_resource *upstream, size_t asked_bytes,
                                         size_t option_bytes, const char *option, char *message,
                                         size_t message_bytes);

/* The value an option has for a message: "256MiB" when given, "128MiB, the
 * default" when not (the caller passes the C default then). */
void gmr__describe_size_option(size_t bytes, bool given, char *text, size_t text_bytes);
void gmr__describe_uint_option(uint64_t value, bool given, char *text, size_t text_bytes);

/* "true" or "false" into `text`; returns true (for describe_default). */
GMR_EXTENSION_API
bool gmr__describe_bool(bool value, char *text, size_t text_bytes);

/* A peer_access option value (vmm, vmm_pages, cumem): "none" (*all false, no
 * ordinal), "all" (*all true), or device ordinals joined by '+' (',' and
 * spaces too, inside quotes) into peers[0..*count), at most max_count.
 * False when the text is none of these. */
GMR_EXTENSION_API
bool gmr__parse_peer_list(const char *text, bool *all, int *peers, size_t max_count,
                          size_t *count);

/* The meaning of options several sub-allocators share, written once. */
extern const char gmr__help_nvtx_annotate[];
extern const char gmr__help_streams_outlive[];
extern const char gmr__help_record_every_free[];
extern const char gmr__help_stream_ids[];

/* The entries, one per component file. */
extern const gmr__component gmr__component_cuda;
extern const gmr__component gmr__component_fixed_block;
extern const gmr__component gmr__component_graph_arena;
extern const gmr__component gmr__component_host;
extern const gmr__component gmr__component_limiting;
extern const gmr__component gmr__component_log;
extern const gmr__component gmr__component_nvtx_logging;
extern const gmr__component gmr__component_oom;
extern const gmr__component gmr__component_pool;
extern const gmr__component gmr__component_tracking;
extern const gmr__component gmr__component_vmm;
extern const gmr__component gmr__component_vmm_pages;

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_REGISTRY_H_ */
