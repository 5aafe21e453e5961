#!/usr/bin/env bash
# The whole GPU session in one command (device time is scarce): every GPU
# test, the Compute Sanitizer checks, the replays of the four bundled traces,
# and the benchmarks for BENCHMARKS.md. Run on the GPU machine after
# tools/gpu/stage.sh staged .gpu/ here:
#   tools/gpu/full_run.sh
# Results: $OUT/full-run.tgz (one log per step) and a short summary printed last.
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

# 1. GPU tests (gtest XML + logs in gpu-results.tgz).
OUT="$work" step gpu_tests 240 tools/gpu/run.sh
# 2. Sanitizer: NVTX annotation verdicts, then memcheck on the other GPU tests.
OUT="$work/sanitizer" step sanitizer_nvtx 240 tests/gpu/run_sanitizer_checks.sh "$bin"
for t in graph_arena_gpu_test graph_pool_gpu_test pool_gpu_test cuda_resource_gpu_test; do
  # These tests provoke CUDA API errors on purpose (out of memory, cudaMalloc
  # during capture): memcheck judges memory accesses and leaks only.
  [ -x "$bin/$t" ] && step "memcheck_$t" 240 "$san" --tool memcheck --leak-check full \
    --report-api-errors no --error-exitcode 3 "$bin/$t"
done
# 3. Replays of the bundled traces.
for t in gpt2_train resnet50_train multistream; do
  step "replay_$t" 120 "$bin/replay" --compare "cuda_device;cuda_async;pool;fixed_block" \
    "tools/traces/$t.csv.gz"
done
step replay_multistream_outlive 120 "$bin/replay" \
  --compare "pool;pool(streams_outlive=true) > cuda(kind=async)" tools/traces/multistream.csv.gz
step replay_gpt2_graph_capture 120 "$bin/replay" \
  --stack cuda_async --stack pool \
  --stack 'tracking(per=stream) > limiting > graph_arena(uncaptured=forward, policy=monotone) > pool > cuda(kind=async)' \
  --stack 'tracking(per=stream) > limiting > graph_arena(uncaptured=forward, policy=ordered_reuse) > pool > cuda(kind=async)' \
  --arena-reserve 0,0,598964224,198295552 tools/traces/gpt2_graph_capture.csv.gz
# The graph pool with nothing reserved: the arena grows inside the capture.
step replay_gpt2_graph_capture_no_reserve 120 "$bin/replay" \
  --compare "cuda_async;pool;graph_pool" tools/traces/gpt2_graph_capture.csv.gz
# Both capture traces through the graph pool, nothing reserved, cold and warm
# (BENCHMARKS.md "The graph pool with no reserve", issue 11).
for t in llm_multigraph gpt2_graph_capture; do
  step "replay_graph_pool_$t" 120 "$bin/replay" --passes 2 --compare "cuda_async;pool;graph_pool;\
tracking(per=stream) > limiting > graph_arena(uncaptured=forward, policy=monotone, detect=hinted) > pool > cuda(kind=device)" \
    "tools/traces/$t.csv.gz"
done
step replay_default 120 "$bin/replay"
# 4. Benchmarks.
step bench_arena 120 "$bin/bench_arena" --allocs 1000 --rounds 1001
# Cold and warm mean per call: graph_pool against pool alone (target: at most 2x warm).
step stack_passes_pool 120 "$bin/stack_passes" --passes 3 --stack "pool > cuda(kind=device)" \
  tools/traces/gpt2_train.csv.gz
step stack_passes_tracking_limiting_pool 120 "$bin/stack_passes" --passes 3 \
  --stack "tracking(per=stream) > limiting > pool > cuda(kind=device)" tools/traces/gpt2_train.csv.gz
step stack_passes_graph_pool 120 "$bin/stack_passes" --passes 3 --stack graph_pool \
  tools/traces/gpt2_train.csv.gz
step bench_nvtx 120 "$bin/bench_nvtx" --pairs 20000000 --repeats 9
step bench 300 "$bin/bench"
step bench_outlive 200 "$bin/bench" --workloads threads,traces \
  --stacks "pool;pool(streams_outlive=true) > cuda(kind=async)"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/gpu.txt" 2>&1
tar czf "$out/full-run.tgz" -C "$work" .
cat "$work/gpu.txt" "$work/steps.txt"
tar xzOf "$work/gpu-results.tgz" ./summary.txt 2>/dev/null
tail -n 14 "$work/sanitizer_nvtx.txt"
