/*
 * adaptors/event_listeners.c: gmr_resource_add_event_listener and
 * gmr_resource_remove_event_listener (gmr/events.h). The layers that report
 * events are the limiting and OOM adaptors; each keeps its own listeners, so
 * a listener hears only the layers of the stack it registered on.
 */
#include <stddef.h>

#include "adaptors/oom_internal.h"
#include "core/events.h"
#include "core/resource_type.h"
#include "gmr/events.h"

static gmr__event_listeners *events_of(gmr_resource *r) {
  gmr__event_listeners *l = gmr__limiting_events(r);
  return l != NULL ? l : gmr__oom_adaptor_events(r);
}

gmr_status gmr_resource_add_event_listener(gmr_resource *r, gmr_event_listener_fn *fn,
                                           void *ctx) {
  if (gmr__resource_check_vtbl(r) != GMR_OK || fn == NULL || gmr__resource_links_loop(r)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_status st = GMR_OK;
  gmr_resource *cur = r;
  for (; cur != NULL && st == GMR_OK; cur = gmr_resource_get_upstream(cur)) {
    gmr__event_listeners *l = events_of(cur);
    if (l != NULL) st = gmr__event_listeners_add(l, fn, ctx);
    if (st != GMR_OK) break;
  }
  if (st == GMR_OK) return GMR_OK;
  /* Undo the layers above the one that refused: nothing changes. */
  for (gmr_resource *undo = r; undo != cur; undo = gmr_resource_get_upstream(undo)) {
    gmr__event_listeners *l = events_of(undo);
    if (l != NULL) (void)gmr__event_listeners_remove(l, fn, ctx);
  }
  return st;
}

gmr_status gmr_resource_remove_event_listener(gmr_resource *r, gmr_event_listener_fn *fn,
                                              void *ctx) {
  if (gmr__resource_check_vtbl(r) != GMR_OK || fn == NULL || gmr__resource_links_loop(r)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Check first, so a pair missing from any layer changes nothing. */
  for (gmr_resource *cur = r; cur != NULL; cur = gmr_resource_get_upstream(cur)) {
    gmr__event_listeners *l = events_of(cur);
    if (l == NULL) continue;
    if (!gmr__event_listeners_has(l, fn, ctx)) return GMR_ERR_INVALID_ARGUMENT;
  }
  for (gmr_resource *cur = r; cur != NULL; cur = gmr_resource_get_upstream(cur)) {
    gmr__event_listeners *l = events_of(cur);
    if (l != NULL) (void)gmr__event_listeners_remove(l, fn, ctx);
  }
  return GMR_OK;
}
