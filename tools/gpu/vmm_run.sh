#!/usr/bin/env bash
# The VMM pool's GPU session (issue 10), after tools/gpu/stage.sh staged .gpu/
# here: its GPU tests, the same under compute-sanitizer memcheck, the cost of
# page operations (bench_vmm), and the footprint of `vmm` beside `pool` and
# cuda_async on the bundled traces. With RMM_REPLAY set to RMM's replayer
# (../shared/bench/rmm_replay carried along), RMM's pool on the same traces.
#   tools/gpu/vmm_run.sh            # on the GPU machine
# Results: $OUT/vmm-run.tgz (one log per step) and a summary printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
work=$(mktemp -d)
bin=.gpu/bin
san="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
step() {  # step NAME TIMEOUT_S command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  echo "step $name rc=$? $((SECONDS - t0))s" >>"$work/steps.txt"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/gpu.txt" 2>&1
# 1. The GPU tests, then memcheck over them (leaks included; the tests make no
#    API error on purpose, so API errors count too).
step vmm_pool_gpu_test 180 "$bin/vmm_pool_gpu_test" --gtest_output="xml:$work/vmm_pool_gpu_test.xml"
step memcheck_vmm_pool_gpu_test 300 "$san" --tool memcheck --leak-check full --error-exitcode 3 \
  "$bin/vmm_pool_gpu_test"
# 2. Page operations per page: a small and a large batch.
step bench_vmm_16 120 "$bin/bench_vmm" --pages 16 --rounds 9
step bench_vmm_256 180 "$bin/bench_vmm" --pages 256 --rounds 5
# 3. Footprint and host time on the bundled traces (captures ignored: the
#    graph pool is not what is compared here).
for t in gpt2_train resnet50_train gpt2_graph_capture multistream; do
  step "replay_$t" 180 "$bin/replay" --capture off --compare "cuda_async;pool;vmm;vmm_pool" \
    ".gpu/traces/$t.csv.gz"
  if [ -n "${RMM_REPLAY:-}" ] && [ -x "$RMM_REPLAY" ]; then
    step "rmm_pool_$t" 180 "$RMM_REPLAY" pool ".gpu/traces/$t.csv.gz" 3 --passes=3
  fi
done

tar czf "$out/vmm-run.tgz" -C "$work" .
cat "$work/gpu.txt" "$work/steps.txt"
grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]' "$work/vmm_pool_gpu_test.txt"
grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$work/memcheck_vmm_pool_gpu_test.txt"
cat "$work/bench_vmm_256.txt"
for t in gpt2_train resnet50_train gpt2_graph_capture multistream; do
  echo "== $t"
  grep -E '^(cuda_async|pool|vmm|vmm_pool) ' "$work/replay_$t.txt"
  [ -f "$work/rmm_pool_$t.txt" ] && cat "$work/rmm_pool_$t.txt"
done
