/*
 * stack/context.c: contexts (gmr/context.h): the components a spec can
 * name, with the registration of optional libraries' ones
 * (gmr__extension_register, stack/registry.h), and the registered policy
 * names (gmr/policy.h).
 *
 * libgmr's components are one static table below; a context copies their
 * pointers at creation (the default context at its first use) and adds what
 * optional libraries register, keeping all in name order for messages and
 * the listing. libgmr never loads a library to find a component.
 *
 * A registered component is a pointer into its library, which therefore
 * stays loaded while the context lives (dlclose of it is not supported).
 *
 * Thread-safe: yes. A context's components and refusals are under its lock;
 * each policy registry has its own.
 */
#include "stack/context.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/policy_internal.h"
#include "stack/policy_registry.h"

static const gmr__component *const builtin[] = {
    &gmr__component_cuda,        &gmr__component_fixed_block, &gmr__component_graph_arena,
    &gmr__component_host,        &gmr__component_limiting,    &gmr__component_log,
    &gmr__component_nvtx_logging, &gmr__component_oom,        &gmr__component_pool,
    &gmr__component_tracking,    &gmr__component_vmm,         &gmr__component_vmm_pages,
};
#define BUILTIN_COUNT (sizeof builtin / sizeof builtin[0])
#define MAX_COMPONENTS (BUILTIN_COUNT + GMR__CONTEXT_EXTRA_COMPONENTS)

struct gmr_context {
  pthread_mutex_t lock;
  bool is_default;
  /* Under `lock`, in name order; 0 until the built-ins are in (the default
   * context takes them at its first use: it has no create). */
  const gmr__component *components[MAX_COMPONENTS];
  size_t component_count;
  char refused[256]; /* registrations refused, for messages; under `lock` */
  /* Libraries whose registration was accepted (static names); under `lock`. */
  const char *libraries[8];
  size_t library_count;
  gmr__policy_registry oom;
  gmr__policy_registry limit;
};

static gmr_context default_context = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .is_default = true,
    .oom = GMR__POLICY_REGISTRY_INIT,
    .limit = GMR__POLICY_REGISTRY_INIT,
};

gmr_context *gmr_context_default(void) { return &default_context; }

gmr_context *gmr__context_or_default(gmr_context *ctx) {
  return ctx != NULL ? ctx : &default_context;
}

/* Pre: lock held. */
static void load_builtin(gmr_context *ctx) {
  if (ctx->component_count != 0) return;
  for (size_t i = 0; i < BUILTIN_COUNT; ++i) ctx->components[ctx->component_count++] = builtin[i];
}

/* Pre: lock held, room for one more. */
static void insert_sorted(gmr_context *ctx, const gmr__component *c) {
  size_t at = ctx->component_count;
  while (at > 0 && strcmp(ctx->components[at - 1]->name, c->name) > 0) {
    ctx->components[at] = ctx->components[at - 1];
    --at;
  }
  ctx->components[at] = c;
  ++ctx->component_count;
}

/* Pre: lock held. */
static const gmr__component *find_locked(gmr_context *ctx, const char *name) {
  for (size_t i = 0; i < ctx->component_count; ++i) {
    if (strcmp(ctx->components[i]->name, name) == 0) return ctx->components[i];
  }
  return NULL;
}

gmr_status gmr_context_create(gmr_context **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return GMR_ERR_OUT_OF_MEMORY;
  bool lock = pthread_mutex_init(&ctx->lock, NULL) == 0;
  bool oom = lock && gmr__policy_registry_init(&ctx->oom);
  bool limit = oom && gmr__policy_registry_init(&ctx->limit);
  if (!limit) {
    if (oom) gmr__policy_registry_deinit(&ctx->oom);
    if (lock) pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  load_builtin(ctx);
  *out = ctx;
  return GMR_OK;
}

gmr_status gmr_context_destroy(gmr_context *ctx) {
  if (ctx == NULL) return GMR_OK;
  if (ctx->is_default) return GMR_ERR_INVALID_ARGUMENT;
  gmr__policy_registry_deinit(&ctx->limit);
  gmr__policy_registry_deinit(&ctx->oom);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return GMR_OK;
}

/* ---- components ----------------------------------------------------------- */

/* Pre: lock held. Appends "LIBRARY (why)" to the refusals, as room allows. */
static void remember_refusal(gmr_context *ctx, const gmr__extension *ext) {
  size_t used = strlen(ctx->refused);
  snprintf(ctx->refused + used, sizeof ctx->refused - used,
           "%s%s was built for gmr's extension interface %u, this libgmr has %u",
           used != 0 ? "; " : "", ext->library != NULL ? ext->library : "a library",
           (unsigned)ext->version, (unsigned)GMR_EXTENSION_VERSION);
}

/* Pre: lock held. */
static bool has_library_locked(const gmr_context *ctx, const char *library) {
  for (size_t i = 0; i < ctx->library_count; ++i) {
    if (strcmp(ctx->libraries[i], library) == 0) return true;
  }
  return false;
}

gmr_status gmr__extension_register(gmr_context *ctx, const gmr__extension *ext) {
  if (ext == NULL || (ext->component_count != 0 && ext->components == NULL)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  ctx = gmr__context_or_default(ctx);
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&ctx->lock);
  load_builtin(ctx);
  if (ext->version != GMR_EXTENSION_VERSION) {
    /* Its component tables may have another layout: none is looked at. */
    remember_refusal(ctx, ext);
    st = GMR_ERR_UNSUPPORTED;
  }
  size_t fresh = 0;
  for (size_t i = 0; i < ext->component_count && st == GMR_OK; ++i) {
    const gmr__component *known = find_locked(ctx, ext->components[i]->name);
    if (known == NULL) {
      fresh++;
    } else if (known != ext->components[i]) {
      st = GMR_ERR_INVALID_ARGUMENT; /* another component has that name */
    }
  }
  if (st == GMR_OK && ctx->component_count + fresh > MAX_COMPONENTS) st = GMR_ERR_BUSY;
  for (size_t i = 0; i < ext->component_count && st == GMR_OK; ++i) {
    if (find_locked(ctx, ext->components[i]->name) == NULL) insert_sorted(ctx, ext->components[i]);
  }
  if (st == GMR_OK && ext->library != NULL && !has_library_locked(ctx, ext->library) &&
      ctx->library_count < sizeof ctx->libraries / sizeof ctx->libraries[0]) {
    ctx->libraries[ctx->library_count++] = ext->library;
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

bool gmr__context_has_library(gmr_context *ctx, const char *library) {
  ctx = gmr__context_or_default(ctx);
  pthread_mutex_lock(&ctx->lock);
  bool has = has_library_locked(ctx, library);
  pthread_mutex_unlock(&ctx->lock);
  return has;
}

const gmr__component *gmr__context_find_component(gmr_context *ctx, const char *name) {
  ctx = gmr__context_or_default(ctx);
  pthread_mutex_lock(&ctx->lock);
  load_builtin(ctx);
  const gmr__component *c = find_locked(ctx, name);
  pthread_mutex_unlock(&ctx->lock);
  return c;
}

size_t gmr__context_list_components(gmr_context *ctx, const gmr__component **out, size_t max) {
  ctx = gmr__context_or_default(ctx);
  pthread_mutex_lock(&ctx->lock);
  load_builtin(ctx);
  size_t n = ctx->component_count;
  for (size_t i = 0; i < n && i < max; ++i) out[i] = ctx->components[i];
  pthread_mutex_unlock(&ctx->lock);
  return n;
}

void gmr__context_describe_refusals(gmr_context *ctx, char *text, size_t text_bytes) {
  ctx = gmr__context_or_default(ctx);
  pthread_mutex_lock(&ctx->lock);
  snprintf(text, text_bytes, "%s", ctx->refused);
  pthread_mutex_unlock(&ctx->lock);
}

/* ---- policy names ----------------------------------------------------------- */

bool gmr__context_find_oom_policy(gmr_context *ctx, const char *name, gmr_oom_policy *out) {
  if (gmr__oom_policy_builtin(name, out)) return true;
  gmr__policy_value value;
  if (!gmr__policy_registry_get(&gmr__context_or_default(ctx)->oom, name, &value)) return false;
  *out = value.oom;
  return true;
}

bool gmr__context_find_limit_policy(gmr_context *ctx, const char *name, gmr_limit_policy *out) {
  if (gmr__limit_policy_builtin(name, out)) return true;
  gmr__policy_value value;
  if (!gmr__policy_registry_get(&gmr__context_or_default(ctx)->limit, name, &value)) {
    return false;
  }
  *out = value.limit;
  return true;
}

gmr_status gmr_oom_policy_register(gmr_context *ctx, const char *name,
                                   const gmr_oom_policy *policy) {
  gmr_oom_policy ignored;
  if (!gmr__policy_name_is_valid(name) || gmr__oom_policy_builtin(name, &ignored) ||
      gmr_oom_policy_check(policy) != GMR_OK) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__policy_value value;
  value.oom = *policy;
  value.oom.release = NULL; /* the registrant keeps its ctx */
  return gmr__policy_registry_add(&gmr__context_or_default(ctx)->oom, name, &value);
}

gmr_status gmr_oom_policy_unregister(gmr_context *ctx, const char *name) {
  if (name == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__policy_registry_remove(&gmr__context_or_default(ctx)->oom, name);
}

gmr_status gmr_oom_policy_from_name(const char *name, gmr_oom_policy *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__context_find_oom_policy(NULL, name, out) ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_limit_policy_register(gmr_context *ctx, const char *name,
                                     const gmr_limit_policy *policy) {
  gmr_limit_policy ignored;
  if (!gmr__policy_name_is_valid(name) || gmr__limit_policy_builtin(name, &ignored) ||
      gmr_limit_policy_check(policy) != GMR_OK) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__policy_value value;
  value.limit = *policy;
  value.limit.release = NULL; /* the registrant keeps its ctx */
  return gmr__policy_registry_add(&gmr__context_or_default(ctx)->limit, name, &value);
}

gmr_status gmr_limit_policy_unregister(gmr_context *ctx, const char *name) {
  if (name == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__policy_registry_remove(&gmr__context_or_default(ctx)->limit, name);
}

gmr_status gmr_limit_policy_from_name(const char *name, gmr_limit_policy *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__context_find_limit_policy(NULL, name, out) ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}
