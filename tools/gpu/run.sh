#!/usr/bin/env bash
# Runs the staged GPU test binaries (see stage.sh) on a machine with a GPU and
# no Bazel. Logs and gtest XML go to a work folder, packed into
# $OUT/gpu-results.tgz (the device tool returns only a few files); the last
# lines printed are one summary line per test binary.
#   tools/gpu/run.sh [extra command ...]   # extra commands run after the tests,
#                                          # their output saved as extra-N.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
work=$(mktemp -d)
bin=.gpu/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/gpu.txt" 2>&1

summary=()
for t in "$bin"/*_test; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  "$t" --gtest_output="xml:$work/$name.xml" >"$work/$name.log" 2>&1
  rc=$?
  counts=$(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \] [0-9]+ test' "$work/$name.log" | tr -s ' ' | tr '\n' ' ')
  summary+=("$name rc=$rc $counts")
done
printf '%s\n' "${summary[@]}" >"$work/summary.txt"
mkdir -p "$out"
tar czf "$out/gpu-results.tgz" -C "$work" .
cat "$work/gpu.txt" "$work/summary.txt"
