/*
 * core/status.c: gmr_status strings and the library version.
 */
#include "gmr/status.h"

#include "gmr/version.h"

const char *gmr_status_string(gmr_status status) {
  switch (status) {
#define GMR_STATUS_STRING_(name, value, sentence) \
  case GMR_##name:                                \
    return sentence;
    GMR_STATUS_MAP(GMR_STATUS_STRING_)
#undef GMR_STATUS_STRING_
    default:
      return "Unknown gmr status.";
  }
}

const char *gmr_status_name(gmr_status status) {
  switch (status) {
#define GMR_STATUS_NAME_(name, value, sentence) \
  case GMR_##name:                              \
    return "GMR_" #name;
    GMR_STATUS_MAP(GMR_STATUS_NAME_)
#undef GMR_STATUS_NAME_
    default:
      return "UNKNOWN";
  }
}

int gmr_version(void) { return GMR_VERSION; }
