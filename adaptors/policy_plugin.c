/*
 * adaptors/policy_plugin.c: policies loaded from shared libraries with
 * dlopen/dlsym. See gmr/policy.h ("plugins").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/policy.h"

struct gmr_policy_plugin {
  void *library;
};

static void say(char *message, const char *fmt, const char *a, const char *b) {
  if (message != NULL) snprintf(message, GMR_POLICY_PLUGIN_MESSAGE_BYTES, fmt, a, b);
}

gmr_status gmr_policy_plugin_load(const char *path, const char *symbol, gmr_policy_kind kind,
                                  void *out_policy, gmr_policy_plugin **out_handle,
                                  char *message) {
  if (message != NULL) message[0] = '\0';
  if (out_handle != NULL) *out_handle = NULL;
  if (path == NULL || symbol == NULL || out_policy == NULL || out_handle == NULL ||
      (kind != GMR_POLICY_KIND_OOM && kind != GMR_POLICY_KIND_LIMIT)) {
    say(message, "%s%sinvalid argument to gmr_policy_plugin_load", "", "");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_policy_plugin *h = calloc(1, sizeof *h);
  if (h == NULL) return GMR_ERR_OUT_OF_MEMORY;
  h->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h->library == NULL) {
    const char *why = dlerror();
    say(message, "cannot load plugin '%s': %s", path, why != NULL ? why : "unknown error");
    free(h);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* POSIX's sanctioned way to turn dlsym's object pointer into a function pointer. */
  gmr_policy_plugin_fn *fn = NULL;
  void *sym = dlsym(h->library, symbol);
  memcpy(&fn, &sym, sizeof fn);
  gmr_status st = GMR_OK;
  if (fn == NULL) {
    say(message, "plugin '%s' has no symbol '%s'", path, symbol);
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (kind == GMR_POLICY_KIND_OOM) {
    gmr_oom_policy p;
    memset(&p, 0, sizeof p);
    if (fn(GMR_POLICY_PLUGIN_ABI_VERSION, kind, &p) != GMR_OK) {
      say(message, "plugin symbol '%s' in '%s' refused to give an OOM policy", symbol, path);
      st = GMR_ERR_INVALID_ARGUMENT;
    } else if (gmr_oom_policy_check(&p) != GMR_OK) {
      say(message, "plugin symbol '%s' in '%s' gave an invalid OOM policy", symbol, path);
      if (p.release != NULL) p.release(p.ctx);
      st = GMR_ERR_INVALID_ARGUMENT;
    } else {
      memcpy(out_policy, &p, sizeof p);
    }
  } else {
    gmr_limit_policy p;
    memset(&p, 0, sizeof p);
    if (fn(GMR_POLICY_PLUGIN_ABI_VERSION, kind, &p) != GMR_OK) {
      say(message, "plugin symbol '%s' in '%s' refused to give a limit policy", symbol, path);
      st = GMR_ERR_INVALID_ARGUMENT;
    } else if (gmr_limit_policy_check(&p) != GMR_OK) {
      say(message, "plugin symbol '%s' in '%s' gave an invalid limit policy", symbol, path);
      if (p.release != NULL) p.release(p.ctx);
      st = GMR_ERR_INVALID_ARGUMENT;
    } else {
      memcpy(out_policy, &p, sizeof p);
    }
  }
  if (st != GMR_OK) {
    dlclose(h->library);
    free(h);
    return st;
  }
  *out_handle = h;
  return GMR_OK;
}

gmr_status gmr_policy_plugin_unload(gmr_policy_plugin *handle) {
  if (handle == NULL) return GMR_OK;
  dlclose(handle->library);
  free(handle);
  return GMR_OK;
}
