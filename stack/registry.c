/*
 * stack/registry.c: the components a spec can name. Add one line here per
 * component of libgmr (and its file): the spec parser, the error messages
 * with their suggestions, and gmr_stack_print_components() read this table
 * and the tables optional libraries register.
 *
 * Optional libraries (libgmr_nccl) register their components when they are
 * loaded (a constructor calls gmr__component_register). A spec naming one of
 * them in a program that has not loaded the library gets it loaded by name
 * (dlopen of its SONAME, next to libgmr or on the loader's path); when that
 * fails, the error says which library to link.
 *
 * Thread-safe: yes. The registered tables form the one process-wide
 * registry; registration and lookup take a mutex, entries are never removed
 * (a library that registered stays loaded: dlclose of it is not supported).
 */
/* dladdr is a GNU extension. */
#define _GNU_SOURCE

#include "stack/registry.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gmr/version.h"

static const gmr__component *const builtin[] = {
    &gmr__component_cuda,        &gmr__component_fixed_block, &gmr__component_graph_arena,
    &gmr__component_host,        &gmr__component_limiting,    &gmr__component_log,
    &gmr__component_nvtx_logging, &gmr__component_oom,        &gmr__component_pool,
    &gmr__component_tracking,    &gmr__component_vmm,         &gmr__component_vmm_pages,
};
#define BUILTIN_COUNT (sizeof builtin / sizeof builtin[0])

/* Components of optional libraries, by the library that has them. */
static const struct {
  const char *component;
  const char *library; /* file name without the .so.<major> */
} optional_components[] = {
    {"chunk_listener", "libgmr_nccl"},
    {"cumem", "libgmr_nccl"},
    {"symmetric", "libgmr_nccl"},
};

/* libgmr's components and those registered, kept in name order (messages
 * and listings show them sorted); under `lock`, entries never removed. */
#define MAX_COMPONENTS (BUILTIN_COUNT + 32)
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const gmr__component *all[MAX_COMPONENTS];
static size_t all_count;

/* Pre: lock held. */
static void load_builtin(void) {
  if (all_count != 0) return;
  for (size_t i = 0; i < BUILTIN_COUNT; ++i) all[all_count++] = builtin[i];
}

/* Pre: lock held, room for one more. */
static void insert_sorted(const gmr__component *c) {
  size_t at = all_count;
  while (at > 0 && strcmp(all[at - 1]->name, c->name) > 0) {
    all[at] = all[at - 1];
    --at;
  }
  all[at] = c;
  ++all_count;
}

bool gmr__component_register(const gmr__component *const *components, size_t count) {
  bool ok = true;
  pthread_mutex_lock(&lock);
  load_builtin();
  for (size_t i = 0; i < count && ok; ++i) {
    bool known = false;
    for (size_t k = 0; k < all_count; ++k) known |= all[k] == components[i];
    if (known) continue;
    ok = all_count < MAX_COMPONENTS;
    if (ok) insert_sorted(components[i]);
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

size_t gmr__component_count(void) {
  pthread_mutex_lock(&lock);
  load_builtin();
  size_t n = all_count;
  pthread_mutex_unlock(&lock);
  return n;
}

const gmr__component *gmr__component_at(size_t index) {
  pthread_mutex_lock(&lock);
  load_builtin();
  const gmr__component *c = index < all_count ? all[index] : NULL;
  pthread_mutex_unlock(&lock);
  return c;
}

static const gmr__component *find_loaded(const char *name) {
  const gmr__component *found = NULL;
  pthread_mutex_lock(&lock);
  load_builtin();
  for (size_t i = 0; i < all_count && found == NULL; ++i) {
    if (strcmp(all[i]->name, name) == 0) found = all[i];
  }
  pthread_mutex_unlock(&lock);
  return found;
}

const char *gmr__component_library(const char *name) {
  for (size_t i = 0; i < sizeof optional_components / sizeof optional_components[0]; ++i) {
    if (strcmp(optional_components[i].component, name) == 0) {
      return optional_components[i].library;
    }
  }
  return NULL;
}

/* Load an optional library by SONAME: first from the folder this library
 * (libgmr) was loaded from, then the loader's path. The folder is looked up
 * with dladdr, not left to RUNPATH: a dlopen interposed by a sanitizer runtime
 * would search that runtime's RUNPATH instead of libgmr's. */
static void load_optional(const char *library) {
  char file[64];
  snprintf(file, sizeof file, "%s.so.%d", library, GMR_VERSION_MAJOR);
  Dl_info self;
  if (dladdr((const void *)builtin, &self) != 0 && self.dli_fname != NULL) {
    const char *slash = strrchr(self.dli_fname, '/');
    if (slash != NULL) {
      char path[4096];
      int n = snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self.dli_fname),
                       self.dli_fname, file);
      if (n > 0 && (size_t)n < sizeof path && dlopen(path, RTLD_NOW | RTLD_GLOBAL) != NULL) return;
    }
  }
  (void)dlopen(file, RTLD_NOW | RTLD_GLOBAL);
}

const gmr__component *gmr__component_find(const char *name) {
  const gmr__component *c = find_loaded(name);
  const char *library = c == NULL ? gmr__component_library(name) : NULL;
  if (library == NULL) return c;
  /* Its library registers its components when loaded; it stays loaded. */
  load_optional(library);
  return find_loaded(name);
}
