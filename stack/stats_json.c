/*
 * stack/stats_json.c: gmr_resource_write_stats_json (gmr/stats_json.h).
 *
 * The text is appended snprintf-style: `used` counts every character the
 * whole document needs, and only what fits in the caller's buffer is stored.
 */
#include "gmr/stats_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/resource_type.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/tracking_adaptor.h"

typedef struct text {
  char *buffer;
  size_t capacity;
  size_t used;
} text;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void append(text *t, const char *fmt, ...) {
  char *at = t->used < t->capacity ? t->buffer + t->used : NULL;
  size_t room = t->used < t->capacity ? t->capacity - t->used : 0;
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(at, room, fmt, args);
  va_end(args);
  if (n > 0) t->used += (size_t)n;
}

static void append_count(text *t, const char *name, const gmr_stat_count *c) {
  append(t, "\"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRId64 ", \"total\": %" PRId64 "}",
         name, c->current, c->peak, c->total);
}

static gmr_status append_tracking(text *t, const gmr_tracking_adaptor *a) {
  gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
  if (gmr_tracking_adaptor_get_stats(a, &s) != GMR_OK) return GMR_ERR_INTERNAL;
  append(t, ", ");
  append_count(t, "bytes", &s.bytes);
  append(t, ", ");
  append_count(t, "allocations", &s.allocations);
  append(t,
         ", \"deallocation_count\": %" PRIu64 ", \"upstream_failure_count\": %" PRIu64
         ", \"unknown_pointer_count\": %" PRIu64 ", \"double_free_count\": %" PRIu64
         ", \"size_mismatch_count\": %" PRIu64 ", \"stream_mismatch_count\": %" PRIu64,
         s.deallocation_count, s.upstream_failure_count, s.unknown_pointer_count,
         s.double_free_count, s.size_mismatch_count, s.stream_mismatch_count);
  /* Owners can be added between the two calls: ask with some room to spare. */
  size_t count = 0;
  if (gmr_tracking_adaptor_list_owners(a, NULL, 0, &count) != GMR_OK) return GMR_ERR_INTERNAL;
  size_t capacity = count + 16;
  uint64_t *owners = malloc(capacity * sizeof *owners);
  if (owners == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (gmr_tracking_adaptor_list_owners(a, owners, capacity, &count) != GMR_OK) {
    free(owners);
    return GMR_ERR_INTERNAL;
  }
  if (count > capacity) count = capacity;
  append(t, ", \"owners\": {");
  for (size_t i = 0; i < count; ++i) {
    gmr_tracking_adaptor_owner_stats o = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
    if (gmr_tracking_adaptor_get_owner_stats(a, owners[i], &o) != GMR_OK) continue;
    append(t, "%s\"0x%" PRIx64 "\": {", i == 0 ? "" : ", ", owners[i]);
    append_count(t, "bytes", &o.bytes);
    append(t, ", ");
    append_count(t, "allocations", &o.allocations);
    append(t, "}");
  }
  append(t, "}");
  free(owners);
  return GMR_OK;
}

static gmr_status append_limiting(text *t, const gmr_limiting_adaptor *a) {
  gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
  if (gmr_limiting_adaptor_get_stats(a, &s) != GMR_OK) return GMR_ERR_INTERNAL;
  if (s.limit_bytes == GMR_LIMIT_NONE) {
    append(t, ", \"limit_bytes\": null");
  } else {
    append(t, ", \"limit_bytes\": %zu", s.limit_bytes);
  }
  append(t,
         ", \"used_bytes\": %zu, \"peak_used_bytes\": %zu, \"refused_count\": %" PRIu64
         ", \"upstream_failure_count\": %" PRIu64,
         s.used_bytes, s.peak_used_bytes, s.refused_count, s.upstream_failure_count);
  return GMR_OK;
}

gmr_status gmr_resource_write_stats_json(gmr_resource *top, char *buffer, size_t buffer_bytes,
                                         size_t *out_bytes) {
  if (out_bytes == NULL || gmr__resource_check_vtbl(top) != GMR_OK ||
      (buffer == NULL && buffer_bytes > 0) || gmr__resource_links_loop(top)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  text t = {buffer, buffer_bytes, 0};
  if (buffer_bytes > 0) buffer[0] = '\0';

  gmr_footprint footprint;
  if (gmr_resource_get_footprint(top, &footprint) == GMR_OK) {
    append(&t, "{\"held_bytes\": %zu, \"peak_held_bytes\": %zu", footprint.held_bytes,
           footprint.peak_held_bytes);
  } else {
    append(&t, "{\"held_bytes\": null, \"peak_held_bytes\": null");
  }
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  if (gmr_resource_get_memory_info(top, &info) == GMR_OK) {
    append(&t,
           ", \"memory\": {\"held_bytes\": %zu, \"live_bytes\": %zu, \"free_bytes\": %zu, "
           "\"largest_free_block_bytes\": %zu, \"free_block_count\": %zu}",
           info.held_bytes, info.live_bytes, info.free_bytes, info.largest_free_block_bytes,
           info.free_block_count);
  } else {
    append(&t, ", \"memory\": null");
  }

  append(&t, ", \"layers\": [");
  gmr_status st = GMR_OK;
  for (gmr_resource *r = top; r != NULL && st == GMR_OK; r = gmr_resource_get_upstream(r)) {
    /* Type names are C identifiers (no characters JSON would escape). */
    append(&t, "%s{\"type\": \"%s\"", r == top ? "" : ", ", gmr_resource_get_type_name(r));
    const gmr_tracking_adaptor *tracking = gmr_tracking_adaptor_from_resource(r);
    const gmr_limiting_adaptor *limiting = gmr_limiting_adaptor_from_resource(r);
    if (tracking != NULL) st = append_tracking(&t, tracking);
    if (limiting != NULL) st = append_limiting(&t, limiting);
    append(&t, "}");
  }
  append(&t, "]}");
  *out_bytes = t.used;
  if (buffer_bytes > 0 && st != GMR_OK) buffer[0] = '\0';
  return st;
}
