#!/usr/bin/env bash
# Runs the staged GPU binaries (see stage.sh) on a machine with a GPU and no
# Bazel. Each gtest binary writes XML and a log under $OUT (or ./gpu-out);
# the last lines are a summary per binary.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
bin=.gpu/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"

summary=()
for t in "$bin"/*_test; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  "$t" --gtest_output="xml:$out/$name.xml" >"$out/$name.log" 2>&1
  rc=$?
  line=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$name.log" | tr '\n' ' ')
  summary+=("$name rc=$rc $line")
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
