/*
 * core/stats.h (internal): the check and copy-out of the size+version
 * header that stats structs start with (`size_t size; uint32_t version;`,
 * set by the caller through the struct's _INIT macro). Part of the
 * extension interface (core/extension.h; inline, nothing exported): the
 * pool, fixed_block and graph_arena resources and the optional libraries'
 * getters use it. The adaptors' and vmm_pool's getters, and gmr_failure
 * (core/failure.h), check the same header by hand, with the same rule.
 *
 * The caller's `size` says how much of the struct it has, so a program built
 * against an older, shorter struct keeps working: the library fills only what
 * both know (mimalloc's mi_stats_t and SQLite's versioned structs do the
 * same).
 *
 * Thread-safe: yes (pure functions on the caller's memory).
 */
#ifndef GMR_CORE_STATS_H_
#define GMR_CORE_STATS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The leading fields of every stats struct. */
typedef struct gmr__stats_header {
  size_t size;
  uint32_t version;
} gmr__stats_header;

#define GMR__STATS_HEADER_BYTES (offsetof(gmr__stats_header, version) + sizeof(uint32_t))

/* Whether `out` (a caller's stats struct, may be NULL) has a usable header:
 * room for at least the header itself and a version other than 0. */
static inline bool gmr__stats_header_ok(const void *out) {
  if (out == NULL) return false;
  gmr__stats_header h;
  memcpy(&h.size, out, sizeof h.size);
  memcpy(&h.version, (const char *)out + offsetof(gmr__stats_header, version), sizeof h.version);
  return h.size >= GMR__STATS_HEADER_BYTES && h.version != 0;
}

/* Copy the library's snapshot (`snapshot_bytes` long, header included) into
 * the caller's struct as far as the caller's size reaches, keeping the
 * caller's size and version. Pre: gmr__stats_header_ok(out). */
static inline void gmr__stats_copy_out(void *out, const void *snapshot, size_t snapshot_bytes) {
  gmr__stats_header h;
  memcpy(&h.size, out, sizeof h.size);
  memcpy(&h.version, (const char *)out + offsetof(gmr__stats_header, version), sizeof h.version);
  memcpy(out, snapshot, h.size < snapshot_bytes ? h.size : snapshot_bytes);
  memcpy(out, &h.size, sizeof h.size);
  memcpy((char *)out + offsetof(gmr__stats_header, version), &h.version, sizeof h.version);
}

#endif /* GMR_CORE_STATS_H_ */
