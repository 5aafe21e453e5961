/*
 * stack/component_vmm_common.c: the options both VMM components take
 * (component_vmm_common.h).
 */
#include "stack/component_vmm_common.h"

#include <stdio.h>

#include "stack/value.h"

const char *const gmr__vmm_former_names[] = {"vmm_pool", NULL};

bool gmr__vmm_describe_common(const gmr_vmm_pool_resource_config *c, size_t option, char *text,
                              size_t text_bytes) {
  switch (option) {
    case GMR__VMM_OPTION_DEVICE:
      if (c->device == GMR_VMM_POOL_CURRENT_DEVICE) {
        snprintf(text, text_bytes, "current");
      } else {
        snprintf(text, text_bytes, "%d", c->device);
      }
      return true;
    case GMR__VMM_OPTION_PAGE_SIZE:
      gmr__format_size_value(c->page_bytes, text, text_bytes);
      return true;
    case GMR__VMM_OPTION_VA_CHUNK:
      gmr__format_size_value(c->va_chunk_bytes, text, text_bytes);
      return true;
    case GMR__VMM_OPTION_INITIAL_PAGES:
      snprintf(text, text_bytes, "%zu", c->initial_pages);
      return true;
    case GMR__VMM_OPTION_PEER_ACCESS:
      snprintf(text, text_bytes, "%s", c->peer_access == GMR_VMM_POOL_PEERS_ALL ? "all" : "none");
      return true;
    case GMR__VMM_OPTION_NCCL_READY:
      return gmr__describe_bool(c->nccl_ready, text, text_bytes);
    case GMR__VMM_OPTION_STREAMS_OUTLIVE:
      return gmr__describe_bool(c->streams.streams_outlive_resource, text, text_bytes);
    default:
      return false;
  }
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
  if (v[GMR__VMM_OPTION_DEVICE].given) {
    int device = v[GMR__VMM_OPTION_DEVICE].device;
    c->device = device < 0 ? GMR_VMM_POOL_CURRENT_DEVICE : device;
  }
  if (v[GMR__VMM_OPTION_PAGE_SIZE].given) c->page_bytes = v[GMR__VMM_OPTION_PAGE_SIZE].size;
  if (v[GMR__VMM_OPTION_VA_CHUNK].given) c->va_chunk_bytes = v[GMR__VMM_OPTION_VA_CHUNK].size;
  if (v[GMR__VMM_OPTION_INITIAL_PAGES].given) {
    uint64_t pages = v[GMR__VMM_OPTION_INITIAL_PAGES].uint;
    c->initial_pages = pages > SIZE_MAX ? SIZE_MAX : (size_t)pages;
  }
  if (v[GMR__VMM_OPTION_NCCL_READY].given) c->nccl_ready = v[GMR__VMM_OPTION_NCCL_READY].boolean;
  if (v[GMR__VMM_OPTION_STREAMS_OUTLIVE].given) {
    c->streams.streams_outlive_resource = v[GMR__VMM_OPTION_STREAMS_OUTLIVE].boolean;
  }
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
