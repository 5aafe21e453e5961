/*
 * stack/component_vmm_common.c: the options both VMM components take
 * (component_vmm_common.h).
 */
#include "stack/component_vmm_common.h"

#include <stdio.h>


const char *const gmr__vmm_former_names[] = {"vmm_pool", NULL};

const gmr_vmm_pool_resource_config gmr__vmm_config_default = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;

bool gmr__vmm_describe_common(size_t option, char *text, size_t text_bytes) {
  if (option != GMR__VMM_OPTION_PEER_ACCESS) return false;
  bool all = gmr__vmm_config_default.peer_access == GMR_VMM_POOL_PEERS_ALL;
  snprintf(text, text_bytes, "%s", all ? "all" : "none");
  return true;
}

/* peer_access: "none", "all" or device ordinals. */
static bool parse_peers(const char *text, gmr_vmm_pool_resource_config *c) {
  bool all = false;
  size_t count = 0;
  if (!gmr__parse_peer_list(text, &all, c->peers, GMR_VMM_POOL_MAX_PEERS, &count)) return false;
  c->peer_access = all ? GMR_VMM_POOL_PEERS_ALL
                       : count > 0 ? GMR_VMM_POOL_PEERS_LIST : GMR_VMM_POOL_PEERS_NONE;
  c->peer_count = count;
  return true;
}

gmr_status gmr__vmm_apply_common(const gmr__option_value *v, gmr_vmm_pool_resource_config *c,
                                 char *message, size_t message_bytes) {
  if (v[GMR__VMM_OPTION_PEER_ACCESS].given &&
      !parse_peers(v[GMR__VMM_OPTION_PEER_ACCESS].string, c)) {
    snprintf(message, message_bytes,
             "option peer_access: expected none, all, or device ordinals joined by '+' "
             "(at most %d), got '%s'",
             GMR_VMM_POOL_MAX_PEERS, v[GMR__VMM_OPTION_PEER_ACCESS].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

gmr_status gmr__vmm_create_from(gmr_status (*create)(const gmr_vmm_pool_resource_config *,
                                                     gmr_vmm_pool_resource **, gmr_failure *),
                                const gmr_vmm_pool_resource_config *c, gmr_resource **out,
                                char *message, size_t message_bytes) {
  gmr_vmm_pool_resource *p = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = create(c, &p, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_vmm_pool_resource_as_resource(p);
  return st;
}
