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

/* An unsigned field of 1, 2, 4 or 8 bytes (a bool, an enum, a count, a size). */
static uint64_t field_load(const void *config, const gmr__option_def *d) {
  const unsigned char *at = (const unsigned char *)config + d->field_offset;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64 = 0;
  switch (d->field_bytes) {
    case 1:
      memcpy(&u8, at, 1);
      return u8;
    case 2:
      memcpy(&u16, at, 2);
      return u16;
    case 4:
      memcpy(&u32, at, 4);
      return u32;
    default:
      memcpy(&u64, at, sizeof u64);
      return u64;
  }
}

static void field_store(void *config, const gmr__option_def *d, uint64_t value) {
  unsigned char *at = (unsigned char *)config + d->field_offset;
  uint8_t u8 = (uint8_t)value;
  uint16_t u16 = (uint16_t)value;
  uint32_t u32 = (uint32_t)value;
  switch (d->field_bytes) {
    case 1:
      memcpy(at, &u8, 1);
      break;
    case 2:
      memcpy(at, &u16, 2);
      break;
    case 4:
      memcpy(at, &u32, 4);
      break;
    default:
      memcpy(at, &value, sizeof value);
  }
}

void gmr__options_apply(const gmr__option_def *defs, size_t count, const gmr__option_value *v,
                        void *config) {
  for (size_t k = 0; k < count; ++k) {
    const gmr__option_def *d = &defs[k];
    if (!v[k].given || d->field_bytes == 0) continue;
    switch (d->type) {
      case GMR__OPTION_SIZE:
        field_store(config, d, v[k].unlimited ? d->unlimited_field : (uint64_t)v[k].size);
        break;
      case GMR__OPTION_UINT:
        field_store(config, d, v[k].uint);
        break;
      case GMR__OPTION_BOOL:
        field_store(config, d, v[k].boolean);
        break;
      case GMR__OPTION_CHOICE:
        field_store(config, d, (uint64_t)v[k].choice);
        break;
      case GMR__OPTION_DEVICE: /* -1, current, is every config's "current device" */
        memcpy((unsigned char *)config + d->field_offset, &v[k].device, sizeof(int));
        break;
      case GMR__OPTION_FACTOR:
        memcpy((unsigned char *)config + d->field_offset, &v[k].factor, sizeof(double));
        break;
      case GMR__OPTION_STRING: /* borrowed from the spec until create returns */
        memcpy((unsigned char *)config + d->field_offset, &v[k].string, sizeof(const char *));
        break;
      default: /* no field type: the component applies it */
        break;
    }
  }
}

bool gmr__option_describe_default(const gmr__component *c, size_t k, char *text,
                                  size_t text_bytes) {
  const gmr__option_def *d = &c->options[k];
  if (d->field_bytes == 0 || c->config_default == NULL) {
    return c->describe_default != NULL && c->describe_default(k, text, text_bytes);
  }
  const unsigned char *field = (const unsigned char *)c->config_default + d->field_offset;
  switch (d->type) {
    case GMR__OPTION_STRING: {
      const char *s = NULL;
      memcpy(&s, field, sizeof s);
      if (s == NULL) return false;
      snprintf(text, text_bytes, "%s", s);
      return true;
    }
    case GMR__OPTION_DEVICE: {
      int device = 0;
      memcpy(&device, field, sizeof device);
      if (device < 0) {
        snprintf(text, text_bytes, "current");
      } else {
        snprintf(text, text_bytes, "%d", device);
      }
      return true;
    }
    case GMR__OPTION_FACTOR: {
      double f = 0;
      memcpy(&f, field, sizeof f);
      snprintf(text, text_bytes, "%g", f);
      return true;
    }
    default:
      break;
  }
  uint64_t value = field_load(c->config_default, d);
  switch (d->type) {
    case GMR__OPTION_SIZE:
      if (d->allow_unlimited && value == d->unlimited_field) {
        snprintf(text, text_bytes, "%s", d->unlimited_name);
      } else {
        gmr__format_size_value((size_t)value, text, text_bytes);
      }
      return true;
    case GMR__OPTION_BOOL:
      return gmr__describe_bool(value != 0, text, text_bytes);
    case GMR__OPTION_CHOICE:
      snprintf(text, text_bytes, "%s", d->choices[value]);
      return true;
    default: /* UINT */
      snprintf(text, text_bytes, "%" PRIu64, value);
      return true;
  }
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
