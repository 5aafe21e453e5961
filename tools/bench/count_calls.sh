#!/usr/bin/env bash
# Instructions and locked instructions per call of each stack, counted by
# callgrind on the host simulation (no GPU needed): what a change to the hot
# path costs, independent of the machine's load. For every stack and
# workload, bench runs alone under callgrind --collect-bus=yes; the cost of
# the calls bench makes to gmr_resource_allocate / gmr_resource_deallocate (inclusive: every
# layer below, and the simulation's CUDA calls where a layer makes them) is
# divided by their number. Ir: instructions; Ge: global bus events, i.e.
# locked (atomic read-modify-write) instructions.
#
#   tools/bench/count_calls.sh 'pool > cuda(kind=async)' 'tracking > limiting > pool > cuda(kind=async)'
#   WORKLOADS=traces PASSES=2 tools/bench/count_calls.sh 'pool > cuda(kind=async)'
#
# Builds //tools/bench with -c opt --copt=-g first (file names for callgrind).
# WORKLOADS: fixed (64 KiB on the default stream, 100000 calls; default),
# traces (the bundled traces), threads (one thread on a stream of its own:
# the simulation's CUDA calls are counted in).
set -euo pipefail
cd "$(dirname "$0")/../.."
workloads="${WORKLOADS:-fixed}"
passes="${PASSES:-2}"
bazel build -c opt --copt=-g //tools/bench >/dev/null 2>&1
bench="$(pwd)/bazel-bin/tools/bench/bench"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
printf '%-50s %-8s %10s %10s %8s\n' stack workload calls Ir/call Ge/call
for stack in "$@"; do
  for w in ${workloads//,/ }; do
    args=(--sim --workloads "$w" --stacks "$stack")
    if [ "$w" = fixed ]; then args+=(--fixed-bytes 64KiB --ops 100000); fi
    if [ "$w" = traces ]; then args+=(--passes "$passes"); fi
    if [ "$w" = threads ]; then args+=(--threads 1); fi
    valgrind --tool=callgrind --collect-bus=yes --callgrind-out-file="$out/cg" \
      "$bench" "${args[@]}" >/dev/null 2>&1 || { echo "$stack $w: bench failed" >&2; continue; }
    # The caller lines of gmr_resource_allocate_ex / gmr_resource_deallocate that come from the
    # bench or the replay: "Ir (..%) Ge (..%)  < file:caller (Nx) [obj]".
    callgrind_annotate --threshold=100 --tree=caller "$out/cg" 2>/dev/null |
      python3 -c '
import re, sys
stack, workload = sys.argv[1], sys.argv[2]
ir = ge = calls = 0
pending = []
for line in sys.stdin:
    if not line.strip():
        pending = []
        continue
    if "< " in line and re.search(r"< \S*tools/(bench|replay)/\S*:", line) and re.search(r"\(([\d,]+)x\)", line):
        pending.append(line)
        continue
    if re.search(r"\s\*\s", line) and not re.search(r"core/resource\.c:(gmr_resource_allocate_ex|gmr_resource_allocate|gmr_resource_deallocate) ", line):
        pending = []
        continue
    if re.search(r"\*\s+\S*core/resource\.c:(gmr_resource_allocate_ex|gmr_resource_allocate|gmr_resource_deallocate) ", line):
        for p in pending:
            nums = re.findall(r"^\s*([\d,]+)\s+\([^)]*\)\s+(?:([\d,]+)\s+\([^)]*\)|\.)", p)
            if not nums:
                continue
            ir += int(nums[0][0].replace(",", ""))
            ge += int(nums[0][1].replace(",", "")) if nums[0][1] else 0
            calls += int(re.search(r"\(([\d,]+)x\)", p).group(1).replace(",", ""))
        pending = []
if calls:
    print("%-50s %-8s %10d %10.1f %8.2f" % (stack, workload, calls, ir / calls, ge / calls))
' "$stack" "$w"
  done
done
