/*
 * stack/component_support.c: sentences the component files share, for
 * messages that say what was asked and what there is.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "stack/registry.h"
#include "stack/value.h"

void gmr__describe_room_below(gmr_resource *upstream, char *text, size_t text_bytes) {
  text[0] = '\0';
  if (upstream == NULL || gmr__resource_links_loop(upstream)) return;
  gmr_resource *bottom = upstream;
  while (bottom != NULL && gmr_resource_get_upstream(bottom) != NULL) {
    bottom = gmr_resource_get_upstream(bottom);
  }
  gmr_cuda_resource *cuda = bottom != NULL ? gmr_cuda_resource_from_resource(bottom) : NULL;
  if (cuda == NULL || gmr_cuda_resource_get_kind(cuda) == GMR_CUDA_KIND_PINNED) return;
  /* cudaMemGetInfo answers for the current device only. */
  int current = -1;
  size_t free_bytes = 0, total_bytes = 0;
  if (gmr_device_get_current(&current) != GMR_OK ||
      current != gmr_cuda_resource_get_device(cuda) ||
      gmr_device_get_memory_info(&free_bytes, &total_bytes) != GMR_OK) {
    return;
  }
  snprintf(text, text_bytes, "; the device has %zu bytes free of %zu", free_bytes, total_bytes);
}

void gmr__describe_initial_failure(gmr_resource *upstream, const char *what, const char *option,
                                   char *message, size_t message_bytes) {
  char room[128];
  gmr__describe_room_below(upstream, room, sizeof room);
  snprintf(message, message_bytes,
           "taking %s from the layer below failed%s: lower %s, or 0 to take nothing at create",
           what, room, option);
}

void gmr__describe_initial_bytes_failure(gmr_resource *upstream, size_t asked_bytes,
                                         size_t option_bytes, const char *option, char *message,
                                         size_t message_bytes) {
  char size[48], what[128];
  gmr__format_size(option_bytes, size, sizeof size);
  snprintf(what, sizeof what, "the %zu bytes of option '%s' (%s)", asked_bytes, option, size);
  gmr__describe_initial_failure(upstream, what, option, message, message_bytes);
}

void gmr__describe_size_option(size_t bytes, bool given, char *text, size_t text_bytes) {
  char size[48];
  gmr__format_size(bytes, size, sizeof size);
  snprintf(text, text_bytes, "%s%s", size, given ? "" : ", the default");
}

void gmr__describe_uint_option(uint64_t value, bool given, char *text, size_t text_bytes) {
  snprintf(text, text_bytes, "%" PRIu64 "%s", value, given ? "" : ", the default");
}

bool gmr__describe_bool(bool value, char *text, size_t text_bytes) {
  snprintf(text, text_bytes, "%s", value ? "true" : "false");
  return true;
}

const char gmr__help_nvtx_annotate[] =
    "describe chunks and blocks to Compute Sanitizer (NVTX memory regions)";

const char gmr__help_streams_outlive[] =
    "the program keeps its streams alive until the stack is destroyed: frees record no event "
    "(faster on created streams)";
const char gmr__help_record_every_free[] =
    "record an event at every free on a created stream (RMM's rule) instead of when another "
    "stream asks for the memory";
const char gmr__help_stream_ids[] =
    "know a created stream by its id too before it takes back its own memory not known done "
    "(programs that destroy streams with work pending and create new ones); false: by handle, "
    "as RMM";

bool gmr__parse_peer_list(const char *text, bool *all, int *peers, size_t max_count,
                          size_t *count) {
  *all = false;
  *count = 0;
  if (strcmp(text, "none") == 0) return true;
  if (strcmp(text, "all") == 0) {
    *all = true;
    return true;
  }
  for (const char *s = text; *s != '\0';) {
    while (*s == '+' || *s == ',' || *s == ' ') s++;
    if (*s == '\0') break;
    if (!isdigit((unsigned char)*s) || *count == max_count) return false;
    char *end = NULL;
    long d = strtol(s, &end, 10);
    if (d > 1024 || (*end != '\0' && *end != '+' && *end != ',' && *end != ' ')) return false;
    peers[(*count)++] = (int)d;
    s = end;
  }
  return *count > 0;
}
