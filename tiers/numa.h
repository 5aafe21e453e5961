/*
 * tiers/numa.h (internal): what the machine's NUMA layout is (read from
 * /sys/devices/system/node) and binding a range of pages to one node with
 * the mbind system call (made through libc's syscall(), so no libnuma is
 * needed at build or run time).
 *
 * Thread-safe: yes (reads files; mbind acts on the caller's pages only).
 */
#ifndef GMR_TIERS_NUMA_H_
#define GMR_TIERS_NUMA_H_

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parse a kernel cpu/node list ("0", "0-3", "0,2-3"): the number of entries
 * and the highest one. false for malformed text. */
bool gmr__numa_parse_list(const char *text, int *out_count, int *out_max);

/* The NUMA nodes online under `sysfs_root` (normally "/sys"): count and the
 * highest node number. A machine without the file (no NUMA support in the
 * kernel) has one node, 0. */
void gmr__numa_online(const char *sysfs_root, int *out_count, int *out_max);

/* MemTotal of `node` in bytes (its meminfo file), 0 when unknown. */
size_t gmr__numa_node_memory_bytes(const char *sysfs_root, int node);

/* Bind [addr, addr + bytes) (page-aligned, not touched yet) to `node` with
 * MPOL_BIND. Returns 0 or the errno of mbind (ENOSYS where the system call
 * does not exist, EPERM where a sandbox forbids it). */
int gmr__numa_bind(void *addr, size_t bytes, int node);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TIERS_NUMA_H_ */
