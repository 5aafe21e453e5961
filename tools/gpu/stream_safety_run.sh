#!/usr/bin/env bash
# Stream safety on a real GPU (issue 30, items 2 and 4), in one command:
#   1. the stream canary (stream_canary_gpu_test): long kernels re-read memory
#      their stream freed while other streams allocate and write, on vmm, pool,
#      vmm_pages and tracking > limiting > pool, 3 and 4 streams, and its
#      positive control (a stream-blind allocator must be caught);
#   2. the same idea through PyTorch (tools/frameworks/stream_canary.py): side
#      streams, record_stream and torch.cuda._sleep on gmr.torch, every result
#      bit for bit against eager and PyTorch's own allocator;
#   3. PyTorch's TestMemPool.test_graph_capture_reclaim_2_streams and
#      _4_streams (test_cuda.py) on gmr and on PyTorch's allocator;
#   4. Compute Sanitizer memcheck over the canary on one stack (vmm, 4 streams,
#      fewer and smaller rounds: memcheck is slow).
#
# Before (on the build machine): tools/gpu/stage.sh (.gpu/: the test binaries
# and libgmr*.so), and PyTorch's test/test_cuda.py in .scratch/pytorch_tests
# (never committed; tools/frameworks/graph_run.sh says how). Carry .gpu and
# .scratch. Then, from the repository root on the GPU machine:
#   tools/gpu/stream_safety_run.sh
# Environment: RECLAIM_ALLOCATORS (default 'gmr,native'; gmr=SPEC adds a stack),
# CANARY_STACKS (stream_canary.py --stacks), MEMCHECK_FILTER (gtest filter).
# Results: $OUT/stream-safety.tgz (one log per step) and $OUT/summary.txt,
# which is also printed last; both are rewritten after each step. About 5
# minutes; the steps' limits add up to more than a device call's 10, so a
# step that hangs costs the later ones, never the results of the earlier.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
work=$(mktemp -d)
bin=.gpu/bin
san="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib"
export GMR_TORCH_CACHE_DIR="$PWD/.gpu/cache"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
unset GMR_STACK GMR_CUDA_SIM
# The summary and the archive are rewritten after every step, so that a run
# stopped at the device call's limit still returns what it did.
summarize() {
  {
    cat "$work/gpu.txt" "$work/steps.txt" 2>/dev/null
    echo "== canary (C++): one line per stack and stream count"
    grep -hE '^stream_canary: ' "$work/canary.txt" 2>/dev/null
    grep -hE '^\[ +(PASSED|FAILED|SKIPPED) +\]' "$work/canary.txt" 2>/dev/null
    echo "== canary (PyTorch): one line per allocator"
    grep -hE '^stream_canary: ' "$work/torch_canary.txt" 2>/dev/null
    echo "== PyTorch's reclaim tests (test_cuda.py -k reclaim)"
    grep -hE '^(=== PyTorch|ran |  )' "$work/reclaim/graph_run.txt" 2>/dev/null
    echo "== memcheck (canary, one stack)"
    grep -hE 'stream_canary: |^\[ +(PASSED|FAILED|SKIPPED) +\]|ERROR SUMMARY|LEAK SUMMARY' \
      "$work/memcheck_canary.txt" 2>/dev/null
  } >"$work/summary.txt"
  cp "$work/summary.txt" "$out/summary.txt"
  tar czf "$out/stream-safety.tgz" -C "$work" .
}
step() {  # step NAME TIMEOUT_S command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  echo "step $name rc=$? $((SECONDS - t0))s" >>"$work/steps.txt"
  summarize
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/gpu.txt" 2>&1
[ -x "$bin/stream_canary_gpu_test" ] || echo "no $bin/stream_canary_gpu_test: run tools/gpu/stage.sh" >>"$work/gpu.txt"

# 1. The canary on every stack (and its control).
step canary 150 "$bin/stream_canary_gpu_test" --gtest_output="xml:$work/canary.xml"

# 2. PyTorch side streams; the torch shim is built first so the children
#    only load it.
step torch_shim 150 python3 -c "import os, gmr.torch as t; print(t.build_shim(os.environ['GMR_LIBRARY_DIR']))"
step torch_canary 240 python3 tools/frameworks/stream_canary.py --timeout 120 \
  ${CANARY_STACKS:+--stacks "$CANARY_STACKS"} --json "$work/torch_canary.json"

# 3. PyTorch's two reclaim tests, on gmr and on PyTorch's allocator.
OUT="$work/reclaim" step reclaim 240 tools/frameworks/graph_run.sh \
  "reclaim=${RECLAIM_ALLOCATORS:-gmr,native}"

# 4. memcheck over the canary on one stack. The allocators query events that
#    are not done yet (cudaErrorNotReady) by design: memcheck judges memory
#    accesses and leaks here; the test itself checks every CUDA call.
GMR_CANARY_ROUNDS=12 GMR_CANARY_MAX_MIB=8 step memcheck_canary 180 "$san" --tool memcheck \
  --leak-check full --report-api-errors no --error-exitcode 3 "$bin/stream_canary_gpu_test" \
  --gtest_filter="${MEMCHECK_FILTER:-Stacks/StreamCanary.NoStreamSeesAnotherStreamsWrites/vmm_4streams}"

cat "$work/summary.txt"
