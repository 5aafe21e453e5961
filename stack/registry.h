/*
 * stack/registry.h (internal): the table of components a spec can name.
 *
 * A component is a resource (last layer of a spec) or an adaptor (any other
 * layer). Its entry lists its options (name, type, default, meaning) and a
 * create function that receives every option's value, typed and defaulted.
 * Adding a component to specs is one file with its option table and create
 * function (see component_host.c, the smallest) plus one line in the table of
 * registry.c; nothing else switches on names.
 */
#ifndef GMR_STACK_REGISTRY_H_
#define GMR_STACK_REGISTRY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
  const char *default_text;    /* parsed like a spec value; NULL: none (absent) */
  bool required;               /* the spec must give it */
  bool allow_unlimited;        /* SIZE: accept none/max/unlimited */
  const char *const *choices;  /* CHOICE: the accepted names, NULL-terminated */
  const char *help;
  size_t max_bytes;            /* STRING: longest accepted text in bytes; 0: no limit */
} gmr__option_def;

typedef struct gmr__option_value {
  bool given;      /* written in the spec */
  bool has_value;  /* given, or a default applies */
  bool unlimited;  /* SIZE: none/max/unlimited (size is SIZE_MAX) */
  size_t size;
  uint64_t uint;
  double factor;
  bool boolean;
  int choice;      /* CHOICE: index into choices */
  int device;      /* DEVICE: ordinal, or -1 for current */
  gmr_oom_policy oom;
  gmr_limit_policy limit;
  /* STRING: the text, NUL-terminated, borrowed from the spec (or the default)
   * and valid until the create function returns: copy what must last. */
  const char *string;
} gmr__option_value;

/*
 * Create the component over `upstream` (NULL for a resource) from `values`,
 * indexed like the component's option table. The create function owns the
 * policies in `values` from the call on: it hands them to the adaptor, which
 * releases them on failure too. On failure it may write a sentence into
 * `message`.
 */
typedef gmr_status gmr__component_create_fn(const gmr__option_value *values,
                                            gmr_resource *upstream, gmr_resource **out,
                                            char *message, size_t message_bytes);

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
} gmr__component;

/* The component named `name`, or NULL. */
const gmr__component *gmr__component_find(const char *name);

/* Every component, in the table's order. */
size_t gmr__component_count(void);
const gmr__component *gmr__component_at(size_t index);

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
extern const gmr__component gmr__component_vmm_pool;

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_REGISTRY_H_ */
