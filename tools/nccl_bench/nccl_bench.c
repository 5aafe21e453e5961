/*
 * tools/nccl_bench/nccl_bench.c: an int32 sum all-reduce over two GPUs on
 * buffers from gmr and from cudaMalloc, registered with NCCL or not; checks
 * every element of every result and times the collective.
 *
 * Variants (bench_run.c): cudaMalloc; cudaMalloc with each buffer
 * registered; `pool > chunk_listener > cumem(nccl_ready)` without and with
 * gmr_nccl_register_pool; the same over vmm_pages (registered per 2 MiB
 * page: larger buffers are not zero-copy); `symmetric > chunk_listener >
 * cumem` registered, whose buffers must sit at the same offset on every
 * rank. Sizes double from --min to --max. Per size: allocate, register,
 * check once (poisoned results, every element compared with the sum of the
 * ranks' patterns), --warmup untimed runs, --iterations timed with CUDA
 * events on each rank's stream (the slowest rank counts), then free and
 * trim, so pools give their chunks back, deregistered first.
 *
 * One process drives both GPUs (ncclCommInitAll), or with --processes one
 * process per GPU (fork before any CUDA call; ncclCommInitRank with an id
 * rank 0 sends over a pipe): then NCCL moves registered memory between
 * processes as POSIX file descriptors, which nccl_ready memory allows.
 *
 * NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is set before NCCL loads;
 * gmr never calls cuMulticast*.
 *
 *   nccl_bench [--lib PATH] [--min 1MiB] [--max 1GiB] [--iterations 20]
 *              [--warmup 5] [--processes] [--variants 0,1,2,3,4,5] [--devices 2]
 * Prints a markdown table per process mode (median us, bus bandwidth GB/s,
 * zero-copy coverage) and one line "nccl_bench: PASS" or "FAIL ...".
 * Exit status: 0 every result correct; 1 a wrong result or a failed call;
 * 2 command-line error; 3 fewer than two GPUs or no NCCL (the reason is
 * printed).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmr/nccl/nccl.h"
#include "tools/nccl_bench/nccl_bench.h"

static bool parse_size(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  size_t unit = 1;
  if (strcmp(end, "KiB") == 0) unit = (size_t)1 << 10;
  else if (strcmp(end, "MiB") == 0) unit = (size_t)1 << 20;
  else if (strcmp(end, "GiB") == 0) unit = (size_t)1 << 30;
  else if (*end != '\0') return false;
  *out = (size_t)v * unit;
  return v > 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "nccl_bench: %s\nusage: nccl_bench [--lib PATH] [--min SIZE] [--max SIZE] "
          "[--iterations N] [--warmup N] [--processes] [--variants 0,1,...] [--devices N]\n",
          why);
  return 2;
}

static int parse(int argc, char **argv, bench_options *o) {
  *o = (bench_options){NULL, (size_t)1 << 20, (size_t)1 << 30, 20, 5, false,
                       (1u << VARIANT_COUNT) - 1, 2};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = true;
    static const char *const with_value[] = {"--lib",     "--min",     "--max",    "--iterations",
                                             "--warmup",  "--devices", "--variants"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; ++k) {
      known = known || strcmp(a, with_value[k]) == 0;
    }
    if (strcmp(a, "--processes") == 0) {
      o->processes = true;
      takes = false;
    } else if (!known) {
      return usage("unknown option");
    } else if (v == NULL) {
      return usage("an option needs a value");
    } else if (strcmp(a, "--lib") == 0) {
      o->library = v;
    } else if (strcmp(a, "--min") == 0) {
      if (!parse_size(v, &o->min_bytes)) return usage("--min: a size such as 1MiB");
    } else if (strcmp(a, "--max") == 0) {
      if (!parse_size(v, &o->max_bytes)) return usage("--max: a size such as 1GiB");
    } else if (strcmp(a, "--iterations") == 0) {
      o->iterations = atoi(v);
    } else if (strcmp(a, "--warmup") == 0) {
      o->warmup = atoi(v);
    } else if (strcmp(a, "--devices") == 0) {
      o->device_count = atoi(v);
    } else if (strcmp(a, "--variants") == 0) {
      o->variant_mask = 0;
      for (const char *s = v; *s != '\0'; ++s) {
        if (*s >= '0' && *s < '0' + VARIANT_COUNT) o->variant_mask |= 1u << (*s - '0');
      }
    } else {
      return usage("unknown option");
    }
    if (takes) i++;
  }
  if (o->iterations < 1 || o->iterations > BENCH_MAX_ITERATIONS || o->warmup < 0 ||
      o->min_bytes > o->max_bytes || o->min_bytes % 4 != 0 || o->device_count < 2 ||
      o->device_count > BENCH_MAX_RANKS || o->variant_mask == 0) {
    return usage("bad values (iterations 1..1000, min <= max, sizes a multiple of 4, "
                 "devices 2..8)");
  }
  return 0;
}

static void table_sizes(const bench_options *o, bench_table *t) {
  t->size_count = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes && t->size_count < BENCH_MAX_SIZES; s *= 2) {
    t->sizes[t->size_count++] = s;
  }
}

static void print_size(size_t bytes) {
  if (bytes >= (size_t)1 << 30) printf("%zu GiB", bytes >> 30);
  else if (bytes >= (size_t)1 << 20) printf("%zu MiB", bytes >> 20);
  else printf("%zu KiB", bytes >> 10);
}

/* The tables; returns the number of wrong or failed cells. */
static int print_tables(const bench_options *o, const bench_table *t, const char *mode,
                        int rank_count, int version) {
  printf("\n### all-reduce (int32 sum), %d ranks, %s, NCCL %d, %d timed iterations\n\n",
         rank_count, mode, version, o->iterations);
  const char *what[3] = {"median time per all-reduce (us)", "bus bandwidth (GB/s)",
                         "zero-copy: every buffer inside one registered segment"};
  int failures = 0;
  for (int k = 0; k < 3; ++k) {
    printf("%s\n\n| size |", what[k]);
    for (int v = 0; v < VARIANT_COUNT; ++v) {
      if (o->variant_mask >> v & 1u) printf(" %s |", bench_variant_names[v]);
    }
    printf("\n|---|");
    for (int v = 0; v < VARIANT_COUNT; ++v) {
      if (o->variant_mask >> v & 1u) printf("---:|");
    }
    printf("\n");
    for (size_t s = 0; s < t->size_count; ++s) {
      printf("| ");
      print_size(t->sizes[s]);
      printf(" |");
      for (int v = 0; v < VARIANT_COUNT; ++v) {
        if ((o->variant_mask >> v & 1u) == 0) continue;
        const bench_cell *c = &t->cells[v][s];
        if (!c->ran || !c->correct) {
          printf(" FAIL |");
          if (k == 0) failures++;
        } else if (k == 0) {
          printf(" %.1f |", c->median_us);
        } else if (k == 1) {
          /* NCCL's busbw for all-reduce: algbw * 2(n-1)/n. */
          double algbw = (double)t->sizes[s] / (c->median_us * 1e3);
          printf(" %.1f |", algbw * 2.0 * (rank_count - 1) / rank_count);
        } else {
          printf(" %s%s |", c->covered < 0 ? "-" : c->covered ? "yes" : "no",
                 c->offsets_equal == 1 ? ", same offsets" : c->offsets_equal == 0 ? ", OFFSETS DIFFER" : "");
          if (c->offsets_equal == 0) failures++;
        }
      }
      printf("\n");
    }
    printf("\n");
  }
  for (int v = 0; v < VARIANT_COUNT; ++v) {
    for (size_t s = 0; s < t->size_count; ++s) {
      const bench_cell *c = &t->cells[v][s];
      if (c->ran && c->error[0] != '\0') {
        printf("- %s at ", bench_variant_names[v]);
        print_size(t->sizes[s]);
        printf(": %s\n", c->error);
      }
    }
  }
  fflush(stdout);
  return failures;
}

static gmr_nccl_library *open_nccl(const bench_options *o) {
  gmr_nccl_library *lib = NULL;
  gmr_failure f = GMR_FAILURE_INIT;
  if (gmr_nccl_library_open(o->library, &lib, &f) != GMR_OK) {
    fprintf(stderr, "nccl_bench: SKIP: %s\n", f.message);
    return NULL;
  }
  return lib;
}

static int enough_devices(const bench_options *o) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n < o->device_count) {
    fprintf(stderr, "nccl_bench: SKIP: needs %d GPUs, found %d (%s); run on nvidia-h200-x2\n",
            o->device_count, n, cudaGetErrorName(err));
    return 0;
  }
  return 1;
}

/* One process, every GPU: ncclCommInitAll. */
static int run_single(const bench_options *o) {
  if (!enough_devices(o)) return 3;
  gmr_nccl_library *lib = open_nccl(o);
  if (lib == NULL) return 3;
  int devices[BENCH_MAX_RANKS];
  for (int i = 0; i < o->device_count; ++i) devices[i] = i;
  gmr_nccl_comm *comms[BENCH_MAX_RANKS] = {NULL};
  gmr_failure f = GMR_FAILURE_INIT;
  if (gmr_nccl_comm_init_all(lib, o->device_count, devices, comms, &f) != GMR_OK) {
    printf("nccl_bench: FAIL ncclCommInitAll: %s\n", f.message);
    return 1;
  }
  static bench_table table;
  table_sizes(o, &table);
  bench_ranks *ranks = bench_ranks_create(o, lib, comms, o->device_count);
  int failures = 1;
  if (ranks != NULL) {
    bench_run(ranks, &table);
    failures = print_tables(o, &table, "one process (ncclCommInitAll)", o->device_count,
                            gmr_nccl_library_get_version(lib));
    bench_ranks_destroy(ranks);
  }
  for (int i = 0; i < o->device_count; ++i) {
    if (gmr_nccl_comm_destroy(comms[i], &f) != GMR_OK) {
      printf("nccl_bench: FAIL destroying rank %d: %s\n", i, f.message);
      failures++;
    }
  }
  if (gmr_nccl_library_close(lib) != GMR_OK) failures++;
  return failures == 0 ? 0 : 1;
}

/* One rank of --processes (a child, before any CUDA call of its own). */
static int run_rank(const bench_options *o, int rank, int id_read, int id_write) {
  if (!enough_devices(o)) return 3;
  gmr_nccl_library *lib = open_nccl(o);
  if (lib == NULL) return 3;
  gmr_nccl_unique_id id;
  gmr_failure f = GMR_FAILURE_INIT;
  if (rank == 0) {
    if (gmr_nccl_get_unique_id(lib, &id, &f) != GMR_OK) {
      printf("nccl_bench: FAIL ncclGetUniqueId: %s\n", f.message);
      return 1;
    }
    for (int r = 1; r < o->device_count; ++r) {
      if (write(id_write, &id, sizeof id) != (ssize_t)sizeof id) return 1;
    }
  } else if (read(id_read, &id, sizeof id) != (ssize_t)sizeof id) {
    printf("nccl_bench: FAIL rank %d got no id from rank 0\n", rank);
    return 1;
  }
  gmr_nccl_comm *comm = NULL;
  if (gmr_nccl_comm_init_rank(lib, o->device_count, &id, rank, rank, &comm, &f) != GMR_OK) {
    printf("nccl_bench: FAIL ncclCommInitRank (rank %d): %s\n", rank, f.message);
    return 1;
  }
  static bench_table table;
  table_sizes(o, &table);
  bench_ranks *ranks = bench_ranks_create(o, lib, &comm, 1);
  int failures = 1;
  if (ranks != NULL) {
    bench_run(ranks, &table);
    if (rank == 0) {
      failures = print_tables(o, &table, "one process per GPU (ncclCommInitRank)",
                              o->device_count, gmr_nccl_library_get_version(lib));
    } else {
      failures = 0;
      for (int v = 0; v < VARIANT_COUNT; ++v) {
        for (size_t s = 0; s < table.size_count; ++s) {
          const bench_cell *c = &table.cells[v][s];
          if (c->ran && !c->correct) {
            printf("- rank %d, %s, %zu bytes: %s\n", rank, bench_variant_names[v], table.sizes[s],
                   c->error);
            failures++;
          }
        }
      }
    }
    bench_ranks_destroy(ranks);
  }
  if (gmr_nccl_comm_destroy(comm, &f) != GMR_OK) failures++;
  GMR_IGNORE_STATUS(gmr_nccl_library_close(lib));
  fflush(stdout);
  return failures == 0 ? 0 : 1;
}

/* --processes: fork one child per GPU before this process touches CUDA
 * (a child cannot use CUDA a parent initialised). */
static int run_processes(const bench_options *o) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t pids[BENCH_MAX_RANKS];
  for (int r = 0; r < o->device_count; ++r) {
    fflush(stdout);
    pids[r] = fork();
    if (pids[r] < 0) return 1;
    if (pids[r] == 0) _exit(run_rank(o, r, fds[0], fds[1]));
  }
  close(fds[0]);
  close(fds[1]);
  int worst = 0;
  for (int r = 0; r < o->device_count; ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status)) {
      printf("nccl_bench: FAIL rank %d did not exit normally\n", r);
      worst = 1;
    } else if (WEXITSTATUS(status) != 0 && (worst == 0 || WEXITSTATUS(status) == 1)) {
      worst = WEXITSTATUS(status);
    }
  }
  return worst;
}

int main(int argc, char **argv) {
  bench_options o;
  int rc = parse(argc, argv, &o);
  if (rc != 0) return rc;
  /* Before NCCL reads its environment: no NVLink multicast (the machines
   * forbid cuMulticastCreate). */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  rc = o.processes ? run_processes(&o) : run_single(&o);
  if (rc == 0) {
    printf("nccl_bench: PASS (%s)\n", o.processes ? "one process per GPU" : "one process");
  } else if (rc == 3) {
    printf("nccl_bench: SKIPPED (see the reason above)\n");
  } else {
    printf("nccl_bench: FAIL (%s)\n", o.processes ? "one process per GPU" : "one process");
  }
  return rc;
}
