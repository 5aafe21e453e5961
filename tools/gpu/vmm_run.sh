#!/usr/bin/env bash
# The VMM resources' GPU session (issue 10), after tools/gpu/stage.sh staged
# .gpu/ here: their GPU tests (vmm_pages and vmm), the same under
# compute-sanitizer memcheck, the cost of page operations (bench_vmm) and of
# one driver call by handle size (bench_handles), and, on the bundled traces,
# the footprint (captures off) and host time per call (three passes: cold,
# then warm) of `vmm` beside `pool`, cuda_async and vmm_pages. With RMM_REPLAY
# set to RMM's replayer (../shared/bench/rmm_replay carried along), RMM's
# pool on the same traces, same passes.
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
for t in vmm_pool_gpu_test vmm_fine_gpu_test; do
  step "$t" 180 "$bin/$t" --gtest_output="xml:$work/$t.xml"
  step "memcheck_$t" 300 "$san" --tool memcheck --leak-check full --error-exitcode 3 "$bin/$t"
done
# 2. Page operations per page: a small and a large batch.
step bench_vmm_16 120 "$bin/bench_vmm" --pages 16 --rounds 9
step bench_vmm_256 180 "$bin/bench_vmm" --pages 256 --rounds 5
step bench_handles 300 "$bin/bench_handles" --rounds 5 --max-mib 2048
# 3. Footprint and host time on the bundled traces (captures ignored: the
#    graph pool is not what is compared here).
traces="gpt2_train resnet50_train gpt2_graph_capture multistream llm_multigraph"
stacks="vmm;vmm(streams_outlive=true);pool;cuda_async;vmm_pages"
for t in $traces; do
  step "footprint_$t" 240 "$bin/replay" --passes 3 --capture off --compare "$stacks" \
    ".gpu/traces/$t.csv.gz"
  step "replay_$t" 240 "$bin/replay" --passes 3 --compare "$stacks" ".gpu/traces/$t.csv.gz"
  if [ -n "${RMM_REPLAY:-}" ] && [ -x "$RMM_REPLAY" ]; then
    step "rmm_pool_$t" 180 "$RMM_REPLAY" pool ".gpu/traces/$t.csv.gz" 3 --passes=3
  fi
done

tar czf "$out/vmm-run.tgz" -C "$work" .
cat "$work/gpu.txt" "$work/steps.txt"
for t in vmm_pool_gpu_test vmm_fine_gpu_test; do
  grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]' "$work/$t.txt"
  grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$work/memcheck_$t.txt"
done
cat "$work/bench_vmm_256.txt" "$work/bench_handles.txt"
for t in $traces; do
  echo "== $t (footprint: captures off; time: captures real)"
  grep -E '^ *[a-z_(=)]* *[0-9] (cold|warm)' "$work/footprint_$t.txt"
  grep -E '^ *[a-z_(=)]* *[0-9] (cold|warm)' "$work/replay_$t.txt"
  [ -f "$work/rmm_pool_$t.txt" ] && cat "$work/rmm_pool_$t.txt"
done
