/*
 * tests/plugins/test_policy_plugin.c: a policy plugin as a deployment would
 * ship one, built as a shared library that links nothing of gmr (only its
 * header): the services come as function pointers.
 *
 *   gmr_test_oom_policy      retry after trimming, at most 2 retries; its
 *                            context is heap memory freed by `release`.
 *   gmr_test_limit_policy    let requests up to 4 KiB pass the limit, refuse others.
 *   gmr_test_refusing_policy refuses every ABI version and kind.
 *   gmr_test_invalid_policy  gives a policy without a name.
 */
#include <stdlib.h>
#include <string.h>

#include "gmr/policy.h"

#if defined(__GNUC__)
#define EXPORT __attribute__((visibility("default")))
#else
#define EXPORT
#endif

typedef struct counters {
  int decisions;
} counters;

static gmr_oom_action oom_decide(const gmr_oom_policy *policy, const gmr_failure *failure,
                                 const gmr_oom_services *services) {
  (void)failure;
  counters *c = policy->ctx;
  c->decisions++;
  size_t released = 0;
  (void)services->trim(services, &released);
  return GMR_OOM_ACTION_RETRY;
}

static void release_counters(void *ctx) { free(ctx); }

static gmr_limit_action limit_decide(const gmr_limit_policy *policy,
                                     const gmr_limit_request *request, size_t *new_limit_bytes) {
  (void)policy;
  (void)new_limit_bytes;
  return request->charge_bytes <= 4096 ? GMR_LIMIT_ACTION_ALLOW : GMR_LIMIT_ACTION_FAIL;
}

EXPORT gmr_status gmr_test_oom_policy(uint32_t abi_version, gmr_policy_kind kind, void *out);
EXPORT gmr_status gmr_test_limit_policy(uint32_t abi_version, gmr_policy_kind kind, void *out);
EXPORT gmr_status gmr_test_refusing_policy(uint32_t abi_version, gmr_policy_kind kind, void *out);
EXPORT gmr_status gmr_test_invalid_policy(uint32_t abi_version, gmr_policy_kind kind, void *out);

gmr_status gmr_test_oom_policy(uint32_t abi_version, gmr_policy_kind kind, void *out) {
  if (abi_version != GMR_POLICY_PLUGIN_ABI_VERSION || kind != GMR_POLICY_KIND_OOM) {
    return GMR_ERR_UNSUPPORTED;
  }
  counters *c = calloc(1, sizeof *c);
  if (c == NULL) return GMR_ERR_OUT_OF_MEMORY;
  gmr_oom_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_OOM_POLICY_VERSION;
  p.name = "test_plugin_oom";
  p.decide = oom_decide;
  p.ctx = c;
  p.max_attempts = 2;
  p.release = release_counters;
  memcpy(out, &p, sizeof p);
  return GMR_OK;
}

gmr_status gmr_test_limit_policy(uint32_t abi_version, gmr_policy_kind kind, void *out) {
  if (abi_version != GMR_POLICY_PLUGIN_ABI_VERSION || kind != GMR_POLICY_KIND_LIMIT) {
    return GMR_ERR_UNSUPPORTED;
  }
  gmr_limit_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_LIMIT_POLICY_VERSION;
  p.name = "test_plugin_limit";
  p.decide = limit_decide;
  p.padding_factor = 1.0;
  memcpy(out, &p, sizeof p);
  return GMR_OK;
}

gmr_status gmr_test_refusing_policy(uint32_t abi_version, gmr_policy_kind kind, void *out) {
  (void)abi_version;
  (void)kind;
  (void)out;
  return GMR_ERR_UNSUPPORTED;
}

gmr_status gmr_test_invalid_policy(uint32_t abi_version, gmr_policy_kind kind, void *out) {
  (void)abi_version;
  if (kind != GMR_POLICY_KIND_OOM) return GMR_ERR_UNSUPPORTED;
  gmr_oom_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_OOM_POLICY_VERSION; /* but no name */
  memcpy(out, &p, sizeof p);
  return GMR_OK;
}
