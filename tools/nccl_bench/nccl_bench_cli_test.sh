#!/usr/bin/env bash
# nccl_bench's command line without GPUs (this machine): bad options are
# usage errors (exit 2) that say what is wrong; a run on a machine with fewer
# than two GPUs says it skips and why (exit 3), in both process modes, and
# never reports a pass.
set -u
bench="$TEST_SRCDIR/gmr/tools/nccl_bench/nccl_bench"
fail=0
expect() {  # expect RC PATTERN args...
  local want=$1 pattern=$2
  shift 2
  local out
  out=$("$bench" "$@" 2>&1)
  local rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: nccl_bench $*: rc=$rc (want $want), output:"
    echo "$out"
    fail=1
  fi
}
expect 2 'unknown option' --bogus
expect 2 'needs a value' --min
expect 2 'a size such as 1MiB' --min lots
expect 2 'min <= max' --min 2GiB --max 1GiB
expect 2 'iterations 1..1000' --iterations 0
if ! nvidia-smi -L 2>/dev/null | grep -q 'GPU 1'; then
  expect 3 'SKIP: needs 2 GPUs' --min 1MiB --max 1MiB
  expect 3 'SKIP: needs 2 GPUs' --processes --min 1MiB --max 1MiB
  out=$("$bench" --min 1MiB --max 1MiB 2>&1)
  if grep -q 'nccl_bench: PASS' <<<"$out"; then
    echo "FAIL: a run without two GPUs claimed a pass"
    fail=1
  fi
fi
exit $fail
