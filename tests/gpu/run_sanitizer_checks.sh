#!/usr/bin/env bash
# Runs gmr's NVTX memory-annotation checks under Compute Sanitizer on a GPU
# machine and checks memcheck's verdicts. One summary line per check; exit 1
# if any checked verdict is wrong (INFO lines are reported, never judged).
#
#   tests/gpu/run_sanitizer_checks.sh [BIN_DIR]
#
# BIN_DIR holds nvtx_overflow_demo and nvtx_gpu_test (default: .gpu/bin when
# tools/gpu/stage.sh staged them, else bazel-bin/tests/gpu). The sanitizer is
# $COMPUTE_SANITIZER, else compute-sanitizer on the PATH, else
# /usr/local/cuda/bin/compute-sanitizer. Full reports go to $OUT (or
# ./sanitizer-out) as one log per check.
#
# Checked:
#   no-annotate   the overflow into a pool block's padding, chunk NOT annotated:
#                 memcheck must stay silent (0 errors): the whole chunk is a
#                 valid cudaMalloc to it. This is why pools need annotating.
#   annotate      the same overflow, chunk annotated through core/nvtx_mem:
#                 memcheck must report an invalid __global__ write (>= 1 error).
#                 The positive control: proves the regions reach the tool.
#   clean         annotated, no overflow: 0 errors (no false positives).
#   pool-no-annotate, pool-annotate, pool-clean
#                 the same three with gmr's real pool_resource (nvtx_annotate
#                 off / on) carving A and B instead of the test-only one
#                 (nvtx_overflow_demo --allocator=pool): silent / the overflow
#                 into A's rounding reported / silent.
#   gpu-test      nvtx_gpu_test under memcheck: 0 errors, passes. It writes
#                 with kernels, exactly, blocks of annotated pool_resource,
#                 fixed_block_resource and graph_arena_resource (and replays a
#                 captured graph whose blocks were freed during the capture),
#                 and runs the NVTX adaptor over cuda_resource.
# Reported only (INFO), with what an H100 (driver 580, CUDA 13.0) showed:
#   memset/memcpy-annotate  the overflow by cudaMemset / cudaMemcpy instead of
#                           a kernel: 0 errors (memcheck checks kernels' accesses
#                           against NVTX regions, not copy/set API ranges);
#   into-next-block         an overflow that lands in the next live block: no
#                           tool can tell it from a legal write (expect 0);
#   pool-into-next-block    the same with the real pool (expect 0);
#   leak-regions            --leak-check full with regions never unregistered
#                           before their chunk's cudaFree: 0 leaks reported.
set -uo pipefail
cd "$(dirname "$0")/../.."

bin="${1:-}"
if [ -z "$bin" ]; then
  if [ -x .gpu/bin/nvtx_overflow_demo ]; then bin=.gpu/bin; else bin=bazel-bin/tests/gpu; fi
fi
cs="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
out="${OUT:-sanitizer-out}"
mkdir -p "$out"
demo="$bin/nvtx_overflow_demo"
gtest="$bin/nvtx_gpu_test"
for f in "$cs" "$demo" "$gtest"; do
  if [ ! -x "$f" ]; then
    echo "run_sanitizer_checks: $f not found or not executable" >&2
    exit 1
  fi
done

failed=0

# errors_in LOG: the number in memcheck's "ERROR SUMMARY: N errors", or "?".
errors_in() {
  local n
  n=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$1" | tail -1 | grep -Eo '[0-9]+')
  echo "${n:-?}"
}

# check NAME EXPECT(clean|error|info) COMMAND...
check() {
  local name=$1 expect=$2
  shift 2
  local log="$out/sanitizer-$name.log"
  "$@" >"$log" 2>&1
  local rc=$?
  local n
  n=$(errors_in "$log")
  local invalid
  invalid=$(grep -c 'Invalid __global__ write' "$log")
  local leaks
  leaks=$(grep -ci 'leak' "$log")
  local detail="memcheck errors=$n, invalid __global__ writes=$invalid, rc=$rc"
  case "$expect" in
    clean)
      if [ "$n" = "0" ] && { [ "$rc" = "0" ] || [ "$name" != "gpu-test" ]; }; then
        echo "PASS $name: silent as expected ($detail)"
      else
        echo "FAIL $name: expected 0 errors ($detail; see $log)"
        failed=1
      fi
      ;;
    error)
      if [ "$n" != "?" ] && [ "$n" -ge 1 ] && [ "$invalid" -ge 1 ]; then
        echo "PASS $name: overflow reported ($detail)"
      else
        echo "FAIL $name: expected an invalid __global__ write ($detail; see $log)"
        failed=1
      fi
      ;;
    *)
      echo "INFO $name: $detail, lines mentioning leaks=$leaks (log: $log)"
      ;;
  esac
}

mc=("$cs" --tool memcheck)
check no-annotate clean "${mc[@]}" "$demo" --no-annotate --via=kernel
check annotate error "${mc[@]}" "$demo" --annotate --via=kernel
check clean clean "${mc[@]}" "$demo" --annotate --via=kernel --overflow=0
check pool-no-annotate clean "${mc[@]}" "$demo" --allocator=pool --no-annotate --via=kernel
check pool-annotate error "${mc[@]}" "$demo" --allocator=pool --annotate --via=kernel
check pool-clean clean "${mc[@]}" "$demo" --allocator=pool --annotate --via=kernel --overflow=0
check gpu-test clean "${mc[@]}" "$gtest"
check memset-annotate info "${mc[@]}" "$demo" --annotate --via=memset
check memcpy-annotate info "${mc[@]}" "$demo" --annotate --via=memcpy
check into-next-block info "${mc[@]}" "$demo" --annotate --via=kernel --into-next-block
check pool-into-next-block info "${mc[@]}" "$demo" --allocator=pool --annotate --via=kernel \
  --into-next-block
check leak-regions info "${mc[@]}" --leak-check full "$demo" --annotate --overflow=0 --keep-regions

if [ "$failed" = 0 ]; then
  echo "run_sanitizer_checks: all checked verdicts as expected"
else
  echo "run_sanitizer_checks: some verdicts were wrong"
fi
exit "$failed"
