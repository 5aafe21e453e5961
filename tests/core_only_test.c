/*
 * A program that links only the core library (//:gmr, libgmr): no optional
 * library (tiers, scoped) and no CUDA simulation. GMR_CUDA_SIM in the
 * environment changes nothing here: the real runtime is chosen (without a
 * GPU its calls fail cleanly; this test makes none that need one).
 * Exits 0 when that holds, 1 with the reason on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/gmr.h"

int main(void) {
  if (setenv("GMR_CUDA_SIM", "devices=2", 1) != 0) return 1;
  if (gmr_cuda_is_simulated()) {
    fprintf(stderr, "GMR_CUDA_SIM switched the production library to the simulation\n");
    return 1;
  }
  /* The spec parser, the version and the status names are all there. */
  gmr_spec_error error;
  if (gmr_stack_check("tracking > limiting(limit=1GiB) > pool > cuda(kind=async)", &error) !=
      GMR_OK) {
    fprintf(stderr, "spec refused: %s\n", error.message);
    return 1;
  }
  if (strcmp(gmr_status_name(GMR_ERR_OUT_OF_MEMORY), "GMR_ERR_OUT_OF_MEMORY") != 0) return 1;
  /* A component of an optional library that is neither linked nor on the
   * loader's path: the message names the library to link. */
  if (gmr_stack_check("pool > cumem", &error) != GMR_ERR_INVALID_ARGUMENT ||
      strstr(error.message, "libgmr_nccl") == NULL) {
    fprintf(stderr, "cumem without libgmr_nccl: %s\n", error.message);
    return 1;
  }
  printf("core only: version %d, simulated=%d\n", gmr_version(), gmr_cuda_is_simulated());
  return 0;
}
