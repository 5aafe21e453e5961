#!/usr/bin/env bash
# Runs a Python test file of this package with python3 from PATH, with the
# package and the libraries Bazel built (runfiles) and two simulated devices.
set -euo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gmr}"
command -v python3 >/dev/null || { echo "python3 is not installed (tools/setup.sh installs it)" >&2; exit 1; }
export PYTHONPATH="$root/python"
export GMR_LIBRARY_DIR="$root/dist"
# Everything and the simulation (libgmr.so itself ignores GMR_CUDA_SIM).
export GMR_LIBRARY="$root/dist/libgmr_testing.so"
export GMR_TORCH_LIBRARY="$root/integrations/torch/libgmr_torch.so"
export GMR_CUDA_SIM="devices=2,memory=1GiB"
unset GMR_STACK
# An instrumented build (--config=asan/tsan): the sanitizer's runtime must be
# loaded first; Python itself is not instrumented and keeps memory at exit.
# shellcheck source=/dev/null
source "$root/tests/support/sanitizer_env.sh"
san=$(sanitizer_for "$GMR_LIBRARY")
if [ -n "$san" ]; then
  export LD_PRELOAD="$(sanitizer_preload "$san")"
  export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1"
fi
exec python3 "$root/$1"
