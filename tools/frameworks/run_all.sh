#!/usr/bin/env bash
# The whole framework session on a GPU machine, in one command (about 8
# minutes on an H100): the environment, the torch shim rebuilt against the
# installed PyTorch's headers, the functional checks (tools/frameworks/checks.py)
# and the benchmark table (tools/frameworks/bench.py).
#
# Before (on the build machine): tools/gpu/stage.sh puts libgmr.so,
# libgmr_torch.so (and the test binaries) into .gpu/; carry .gpu along.
# Then, on the GPU machine, from the repository root:
#   tools/frameworks/run_all.sh ['extra gmr stack' ...]
# Each argument adds a gmr stack to the benchmark (besides
# 'pool > cuda(kind=async)'), e.g. a vmm stack once it exists.
# Results: $OUT/frameworks.txt (everything printed) and $OUT/bench.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
log="$out/frameworks.txt"
: >"$log"

export GMR_LIBRARY_DIR="$PWD/.gpu/lib"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
unset GMR_STACK GMR_CUDA_SIM
[ -f "$GMR_LIBRARY_DIR/libgmr.so" ] || { echo "no $GMR_LIBRARY_DIR/libgmr.so: run tools/gpu/stage.sh first" | tee -a "$log"; exit 1; }

section() { echo "=== $* ($(date +%T))" | tee -a "$log"; }

section environment
python3 - 2>&1 <<'PY' | tee -a "$log"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
raw = getattr(torch._C, "_CUDAPluggableAllocator", None)
print("allocator hook setters:", sorted(m for m in dir(raw) if m.startswith("set_")) if raw else None)
print("MemPool:", hasattr(torch.cuda, "MemPool"), "use_mem_pool:", hasattr(torch.cuda, "use_mem_pool"))
try:
    import cupy
    print("cupy", cupy.__version__)
except ImportError as e:
    print("cupy: not importable:", e)
import transformers, torchvision
print("transformers", transformers.__version__, "torchvision", torchvision.__version__)
PY

section "torch shim against PyTorch's headers (torch.cuda.OutOfMemoryError)"
python3 -c "import gmr.torch as t; print(t.build_shim('$GMR_LIBRARY_DIR', verbose=True))" 2>&1 | tee -a "$log"
[ -f "$GMR_LIBRARY_DIR/libgmr_torch_c10.so" ] ||
  echo "(build failed: the checks use libgmr_torch.so, whose OOM is RuntimeError)" | tee -a "$log"

section checks
python3 tools/frameworks/checks.py 2>&1 | tee -a "$log"

section benchmark
stacks=(--stack 'pool > cuda(kind=async)')
for s in "$@"; do stacks+=(--stack "$s"); done
python3 tools/frameworks/bench.py "${stacks[@]}" --json "$out/bench.json" 2>&1 | tee -a "$log"
section done
