/*
 * tiers/numa.c: see tiers/numa.h.
 */
#define _GNU_SOURCE /* syscall() */

#include "tiers/numa.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* <numaif.h> (libnuma's) is not needed for one constant. */
#define GMR_MPOL_BIND 2

bool gmr__numa_parse_list(const char *text, int *out_count, int *out_max) {
  int count = 0, max = -1;
  const char *p = text;
  while (*p != '\0' && *p != '\n') {
    char *end = NULL;
    long lo = strtol(p, &end, 10);
    if (end == p || lo < 0 || lo > 4095) return false;
    long hi = lo;
    p = end;
    if (*p == '-') {
      ++p;
      hi = strtol(p, &end, 10);
      if (end == p || hi < lo || hi > 4095) return false;
      p = end;
    }
    count += (int)(hi - lo + 1);
    if (hi > max) max = (int)hi;
    if (*p == ',') {
      ++p;
      if (*p == '\0' || *p == '\n') return false;
    } else if (*p != '\0' && *p != '\n') {
      return false;
    }
  }
  if (count == 0) return false;
  *out_count = count;
  *out_max = max;
  return true;
}

void gmr__numa_online(const char *sysfs_root, int *out_count, int *out_max) {
  *out_count = 1;
  *out_max = 0;
  char path[512];
  snprintf(path, sizeof path, "%s/devices/system/node/online", sysfs_root);
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  char line[256];
  if (fgets(line, sizeof line, f) != NULL) {
    int count = 0, max = 0;
    if (gmr__numa_parse_list(line, &count, &max)) {
      *out_count = count;
      *out_max = max;
    }
  }
  fclose(f);
}

size_t gmr__numa_node_memory_bytes(const char *sysfs_root, int node) {
  char path[512];
  snprintf(path, sizeof path, "%s/devices/system/node/node%d/meminfo", sysfs_root, node);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  char line[256];
  size_t bytes = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    /* "Node 0 MemTotal:       65536000 kB" */
    const char *key = strstr(line, "MemTotal:");
    if (key == NULL) continue;
    unsigned long long kib = strtoull(key + strlen("MemTotal:"), NULL, 10);
    bytes = (size_t)kib * 1024u;
    break;
  }
  fclose(f);
  return bytes;
}

int gmr__numa_bind(void *addr, size_t bytes, int node) {
#ifdef SYS_mbind
  if (node < 0 || node >= 4096) return EINVAL;
  unsigned long mask[4096 / (8 * sizeof(unsigned long))];
  memset(mask, 0, sizeof mask);
  mask[(size_t)node / (8 * sizeof(unsigned long))] |= 1ul << ((size_t)node % (8 * sizeof(unsigned long)));
  /* maxnode counts bits; the kernel reads maxnode - 1 of them. */
  long rc = syscall(SYS_mbind, addr, (unsigned long)bytes, GMR_MPOL_BIND, mask,
                    (unsigned long)(node + 2), 0u);
  return rc == 0 ? 0 : errno;
#else
  (void)addr;
  (void)bytes;
  (void)node;
  return ENOSYS;
#endif
}
