/*
 * gmr/version.h: the library's version.
 *
 * Thread-safe: yes (constants).
 */
#ifndef GMR_VERSION_H_
#define GMR_VERSION_H_

#include "gmr/config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GMR_VERSION_MAJOR 0
#define GMR_VERSION_MINOR 2
#define GMR_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch, as in mimalloc's MI_MALLOC_VERSION. */
#define GMR_VERSION (GMR_VERSION_MAJOR * 10000 + GMR_VERSION_MINOR * 100 + GMR_VERSION_PATCH)

/**
 * Return GMR_VERSION of the library that was linked, which may differ from the
 * GMR_VERSION of the headers a program was compiled with.
 * Thread-safe: yes. Never fails.
 */
GMR_API int gmr_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_VERSION_H_ */
