#!/usr/bin/env bash
# The whole single-GPU session in one command (device time is scarce): every
# GPU test, Compute Sanitizer memcheck over the tests that touch capture, VMM,
# pools and tiers, the NVTX sanitizer verdicts, cold and warm replays of every
# bundled trace beside RAPIDS RMM's pool and cudaMallocAsync, the graph pool on
# the capture traces with nothing reserved, thread scaling, per-call costs and
# the VMM page costs: what BENCHMARKS.md reports. Run on the GPU machine after
# tools/gpu/stage.sh staged .gpu/ here (RMM's replayer from ../shared/bench
# copied to .gpu/bench/ when it is to run beside):
#   tools/gpu/full_run.sh
# About 6 minutes on an H100. The frameworks (PyTorch, CuPy) have their own
# command: tools/frameworks/run_all.sh; two GPUs: tools/gpu/nccl_run.sh.
# Results: $OUT/full-run.tgz (one log per step) and a summary printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
work=$(mktemp -d)
bin=.gpu/bin
rmm=.gpu/bench/rmm_replay
san="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
step() {  # step NAME TIMEOUT_S command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  echo "step $name rc=$? $((SECONDS - t0))s" >>"$work/steps.txt"
}
traces="gpt2_train resnet50_train gpt2_graph_capture multistream llm_multigraph"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/gpu.txt" 2>&1

# 1. GPU tests (gtest XML + logs in gpu-results.tgz, one summary line each).
OUT="$work" step gpu_tests 400 tools/gpu/run.sh
# 2. memcheck. Some tests provoke CUDA API errors on purpose (out of memory,
#    cudaMalloc during capture): memcheck judges memory accesses and leaks.
for t in graph_pool_gpu_test graph_arena_gpu_test pool_gpu_test cuda_capture_gpu_test \
         vmm_pool_gpu_test vmm_fine_gpu_test tiers_gpu_test cuda_resource_gpu_test; do
  [ -x "$bin/$t" ] && step "memcheck_$t" 300 "$san" --tool memcheck --leak-check full \
    --report-api-errors no --error-exitcode 3 "$bin/$t"
done
OUT="$work/sanitizer" step sanitizer_nvtx 240 tests/gpu/run_sanitizer_checks.sh "$bin"
# 3. Cold and warm: every bundled trace, captures ignored (the stacks are
#    compared on the same requests), beside RMM's pool and cuda_async.
stacks="cuda_async;pool;vmm;tracking(per=stream) > limiting > pool > cuda(kind=async);graph_pool"
for t in $traces; do
  step "replay_$t" 300 "$bin/replay" --passes 3 --capture off --compare "$stacks" \
    "tools/traces/$t.csv.gz"
  if [ -x "$rmm" ]; then
    step "rmm_$t" 200 sh -c "$rmm pool tools/traces/$t.csv.gz 3 --passes=3; \
$rmm cuda_async tools/traces/$t.csv.gz 3 --passes=3"
  fi
done
# 4. The capture traces for real, nothing reserved: the graph pool and vmm.
for t in gpt2_graph_capture llm_multigraph; do
  step "capture_$t" 200 "$bin/replay" --passes 2 --compare "cuda_async;pool;graph_pool;vmm;\
tracking(per=stream) > limiting > graph_arena(uncaptured=forward, policy=monotone, detect=hinted) > pool > cuda(kind=device)" \
    "tools/traces/$t.csv.gz"
done
# 5. Threads (64 KiB, each thread its own stream) and per-call costs.
step threads 200 "$bin/bench" --workloads threads --threads 1,16 --thread-seconds 1 \
  --stacks "pool;tracking > limiting > pool > cuda(kind=async);fixed_block;vmm;vmm(shards=1);pool(streams_outlive=true) > cuda(kind=async)"
step fixed 200 "$bin/bench" --workloads fixed \
  --stacks "pool;tracking > limiting > pool > cuda(kind=async);fixed_block;graph_pool;vmm;cuda_async"
step bench_arena 120 "$bin/bench_arena" --allocs 1000 --rounds 1001
step bench_nvtx 120 "$bin/bench_nvtx" --pairs 20000000 --repeats 9
# 6. VMM page operations and the cost of driver calls by handle size.
step bench_vmm 180 "$bin/bench_vmm" --pages 256 --rounds 5
[ -x "$bin/bench_handles" ] && step bench_handles 300 "$bin/bench_handles" --rounds 5 --max-mib 2048
# 7. Tiers: a trace under a GPU reservation smaller than its peak.
step tiers_replay 120 "$bin/tiers_replay" tools/traces/gpt2_train.csv.gz
step tiers_replay_prepin 120 "$bin/tiers_replay" --host-prepin tools/traces/gpt2_train.csv.gz

tar czf "$out/full-run.tgz" -C "$work" .
cat "$work/gpu.txt" "$work/steps.txt"
tar xzOf "$work/gpu-results.tgz" ./summary.txt 2>/dev/null
grep -h 'ERROR SUMMARY' "$work"/memcheck_*.txt | sort | uniq -c
tail -n 6 "$work/sanitizer_nvtx.txt"
for t in $traces; do
  echo "== $t"
  grep -E '^ *[a-z_(=)> ,]* *[0-9] (cold|warm)' "$work/replay_$t.txt" | cut -c1-160
  [ -f "$work/rmm_$t.txt" ] && grep -o 'mode=[a-z_]*\|pass[0-9]_ns=[0-9.]*\|ratio=[0-9.]*' "$work/rmm_$t.txt" | paste -sd' '
done
for t in gpt2_graph_capture llm_multigraph; do
  echo "== capture $t"; grep -E 'captures begun|failures' "$work/capture_$t.txt" | cut -c1-200
done
grep -E '^threads=' "$work/threads.txt"
grep -E '^fixed' "$work/fixed.txt"
