#!/usr/bin/env bash
# The wheel and the README's framework examples on a GPU machine, in one
# command (a minute or two; most of it the torch shim's first build):
#
#   (build machine)  tools/gpu/stage.sh                 # puts .gpu/wheel/gmr-*.whl
#   (GPU machine)    tools/frameworks/reach_check.sh
#
# A fresh virtual environment with --system-site-packages (PyTorch, CuPy,
# numba-cuda and cuda-core come from the machine; nothing from the network)
# installs the wheel with pip install --no-index, then each item runs in its
# own process from outside the source tree, so the installed package is the
# one imported (tools/frameworks/reach_check.py says what each checks):
#   version            gmr.version() from the wheel's own libgmr.so, on the GPU
#   torch              the README's PyTorch example; the shim built at first use
#                      against PyTorch's headers; OOM as torch.cuda.OutOfMemoryError
#   cupy               gmr.cupy.use(), arithmetic, gmr's counters
#   numba_env          NUMBA_CUDA_MEMORY_MANAGER=gmr.numba: kernels write and read
#                      gmr memory; defer_cleanup; memory info
#   numba_use          gmr.numba.use(spec) (numba.cuda.set_memory_manager); IPC handle
#   cuda_core          a cuda.core MemoryResource on gmr: allocate, copy, close on a
#                      stream; Device.allocate through it where it can be set
#   cupy_on_cuda_core  CuPy allocating through that MemoryResource
# Output: one PASS/FAIL/SKIP line per item, then "reach_check: N passed, N failed,
# N skipped"; everything also in $OUT/reach_check.txt (default gpu-out). Exit 0
# when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
out="${OUT:-gpu-out}"
mkdir -p "$out"
log="$(cd "$out" && pwd)/reach_check.txt"
: >"$log"

wheel=$(ls "$repo"/.gpu/wheel/gmr-*.whl 2>/dev/null | head -n 1)
[ -n "$wheel" ] || { echo "no .gpu/wheel/gmr-*.whl: run tools/gpu/stage.sh on the build machine" | tee -a "$log"; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/gmr-reach.XXXXXX")"
venv="$work/venv"
unset PYTHONPATH GMR_LIBRARY GMR_LIBRARY_DIR GMR_TORCH_LIBRARY GMR_CUDA_SIM GMR_STACK \
  NUMBA_CUDA_MEMORY_MANAGER
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
# The torch shim is built at first use into this empty cache (not an older one).
export GMR_TORCH_CACHE_DIR="$work/torch_cache"

# Without python3-venv's ensurepip the environment is made without pip, and
# the machine's pip (visible through --system-site-packages) installs into it.
{
  echo "=== wheel $(basename "$wheel") into a fresh venv ($(python3 --version))"
  { python3 -m venv --system-site-packages "$venv" ||
      { rm -rf "$venv" && python3 -m venv --system-site-packages --without-pip "$venv"; }; } &&
    # When python3 is itself a virtual environment (the GPU machine's is
    # /opt/torch/.venv), --system-site-packages reaches only the base
    # interpreter's packages: a .pth file adds the frameworks' site-packages.
    python3 - "$venv" <<'PY' &&
import site, sys, sysconfig, pathlib
if sys.prefix != sys.base_prefix:
    venv = pathlib.Path(sys.argv[1])
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    pathlib.Path(purelib, "_gmr_reach_parent.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n")
    print("parent environment's packages visible:", *site.getsitepackages())
PY
    "$venv/bin/python" -m pip install --no-index "$wheel"
} >>"$log" 2>&1 || { echo "FAIL install: see $log"; tail -n 20 "$log"; exit 1; }

passed=0
failed=0
skipped=0
run_item() {  # run_item NAME [VAR=VALUE...]
  local name=$1
  shift
  echo "=== $name" >>"$log"
  local text
  text=$(cd "$work" && env "$@" "$venv/bin/python" "$repo/tools/frameworks/reach_check.py" "$name" 2>&1)
  echo "$text" >>"$log"
  local last
  last=$(grep -E "^(PASS|FAIL|SKIP) $name" <<<"$text" | tail -n 1)
  [ -n "$last" ] || last="FAIL $name: no result line (crashed?): $(tail -n 3 <<<"$text" | tr '\n' ' ')"
  echo "$last"
  case "$last" in
    PASS*) passed=$((passed + 1)) ;;
    SKIP*) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
}

run_item version
run_item torch
run_item cupy
run_item numba_env NUMBA_CUDA_MEMORY_MANAGER=gmr.numba "GMR_STACK=tracking > pool > cuda(kind=async)"
run_item numba_use
run_item cuda_core
run_item cupy_on_cuda_core

echo "reach_check: $passed passed, $failed failed, $skipped skipped (log: $log)" | tee -a "$log"
rm -rf "$work"
[ "$failed" -eq 0 ]
