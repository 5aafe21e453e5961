/*
 * core/cuda_sim/sim_env.c (internal): GMR_CUDA_SIM, the environment switch that
 * selects the host simulation for a program that does not choose a layer
 * itself (an installed example, a Python process loading libgmr.so, CI
 * without a GPU). Read once, at the first use of the CUDA layer; a program
 * that calls gmr_cuda_sim_enable() or gmr_cuda_sim_disable() before that is
 * never affected. The value rules follow mimalloc's option parsing: the
 * usual words for on and off, sizes with K/M/G/T units, a warning (and the
 * default kept) for anything else.
 *
 *   GMR_CUDA_SIM=1                         one device of 80 GiB (the default)
 *   GMR_CUDA_SIM=devices=2,memory=16GiB    two devices of 16 GiB each
 *   GMR_CUDA_SIM=0 (or unset)              the real CUDA runtime
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "gmr/sim/cuda_sim.h"

static bool word_is(const char *text, size_t length, const char *word) {
  if (strlen(word) != length) return false;
  for (size_t i = 0; i < length; ++i) {
    if (tolower((unsigned char)text[i]) != word[i]) return false;
  }
  return true;
}

/* "16GiB", "512M", "1000000": bytes, or false when the text is no size. */
static bool parse_size(const char *text, size_t length, size_t *out) {
  char buffer[64];
  if (length == 0 || length >= sizeof buffer) return false;
  memcpy(buffer, text, length);
  buffer[length] = '\0';
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull(buffer, &end, 10);
  if (end == buffer || errno != 0) return false;
  unsigned shift = 0;
  switch (tolower((unsigned char)*end)) {
    case '\0':
      break;
    case 'k':
      shift = 10;
      break;
    case 'm':
      shift = 20;
      break;
    case 'g':
      shift = 30;
      break;
    case 't':
      shift = 40;
      break;
    default:
      return false;
  }
  if (*end != '\0') {
    const char *unit = end + 1;
    if (!(word_is(unit, strlen(unit), "") || word_is(unit, strlen(unit), "ib") ||
          word_is(unit, strlen(unit), "b"))) {
      return false;
    }
  }
  if (value == 0 || value > (SIZE_MAX >> shift)) return false;
  *out = (size_t)value << shift;
  return true;
}

static void warn(const char *value, const char *what) {
  fprintf(stderr, "gmr: GMR_CUDA_SIM=%s: %s; keeping the default\n", value, what);
}

void gmr__cuda_sim_enable_from_env(void) {
  const char *value = getenv("GMR_CUDA_SIM");
  if (value == NULL || value[0] == '\0') return;
  size_t length = strlen(value);
  if (word_is(value, length, "0") || word_is(value, length, "false") ||
      word_is(value, length, "no") || word_is(value, length, "off")) {
    return;
  }
  gmr_cuda_sim_config config = GMR_CUDA_SIM_CONFIG_DEFAULT;
  bool is_on_word = word_is(value, length, "1") || word_is(value, length, "true") ||
                    word_is(value, length, "yes") || word_is(value, length, "on");
  /* Otherwise a list of key=value pairs, separated by commas. */
  for (const char *item = value; !is_on_word && *item != '\0';) {
    const char *comma = strchr(item, ',');
    size_t item_length = comma != NULL ? (size_t)(comma - item) : strlen(item);
    const char *equals = memchr(item, '=', item_length);
    if (equals == NULL) {
      warn(value, "expected 1, 0, or key=value pairs (devices=N, memory=SIZE)");
    } else {
      size_t key_length = (size_t)(equals - item);
      const char *v = equals + 1;
      size_t v_length = item_length - key_length - 1;
      size_t number = 0;
      if (word_is(item, key_length, "devices")) {
        if (parse_size(v, v_length, &number) && number >= 1 && number <= 16) {
          config.device_count = (int)number;
        } else {
          warn(value, "devices must be 1..16");
        }
      } else if (word_is(item, key_length, "memory")) {
        if (parse_size(v, v_length, &number)) {
          config.device_memory_bytes = number;
        } else {
          warn(value, "memory must be a size such as 16GiB");
        }
      } else {
        warn(value, "unknown key (known: devices, memory)");
      }
    }
    item += item_length;
    if (*item == ',') ++item;
  }
  gmr_status st = gmr_cuda_sim_enable(&config);
  if (st != GMR_OK) {
    fprintf(stderr, "gmr: GMR_CUDA_SIM=%s: enabling the simulation failed (%s)\n", value,
            gmr_status_name(st));
  }
}
