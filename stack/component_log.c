/*
 * stack/component_log.c: `log` in specs, gmr_log_adaptor (every allocate,
 * failed allocate and free of the layers below as a CSV file in RMM's log
 * format, which tools/replay reads back).
 */
/* strerror_r (the XSI one: strerror is not thread-safe) is POSIX, not C11. */
#define _POSIX_C_SOURCE 200112L

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gmr/log_adaptor.h"
#include "stack/registry.h"

enum { FILE_PATH, FLUSH, OPTION_COUNT };

/* In the order of gmr_log_flush. */
static const char *const flush_choices[] = {"every_row", "buffered", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [FILE_PATH] = {GMR__FIELD(gmr_log_adaptor_config, path),
                   .name = "file",
                   .type = GMR__OPTION_STRING,
                   .required = true,
                   .help = "the CSV file to create (or truncate)"},
    [FLUSH] = {GMR__FIELD(gmr_log_adaptor_config, flush),
               .name = "flush",
               .type = GMR__OPTION_CHOICE,
               .choices = flush_choices,
               .help = "every_row (a crash loses at most one row) or buffered (faster; flushed "
                       "when the buffer fills and at destroy)"},
};

static const gmr_log_adaptor_config defaults = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_log_adaptor_config config = defaults;
  gmr__options_apply(options, OPTION_COUNT, values, &config); /* the path is copied (opened) */
  gmr_log_adaptor *a = NULL;
  errno = 0;
  gmr_status st = gmr_log_adaptor_create(upstream, &config, &a);
  if (st == GMR_ERR_INVALID_ARGUMENT) {
    /* Every other cause is ruled out by the spec's checks: fopen failed. */
    int err = errno;
    char why[128] = "unknown error";
    if (err != 0 && strerror_r(err, why, sizeof why) != 0) snprintf(why, sizeof why, "errno %d", err);
    snprintf(message, message_bytes, "cannot open '%s' for writing: %s", config.path, why);
  }
  *out = gmr_log_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_log = {
    .name = "log",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "a CSV row per allocate, failed allocate and free of the layers below, in RMM's log "
            "format, for tools/replay (gmr/log_adaptor.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
};
