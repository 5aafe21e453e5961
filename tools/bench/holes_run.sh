#!/usr/bin/env bash
# rmm#2507's measurement on a GPU, gmr beside RMM's pool and cudaMallocAsync
# in one run: N separated free holes of 512 B (N = 4,096, 16,384, 65,536),
# then 1 KiB allocate + free pairs on the default stream, the mean per pair.
#   gmr: bench's `holes` workload (pairs timed in batches of 64);
#   RMM's pool (rmm_replay pool) and cudaMallocAsync (replay_baseline async):
#   the same program as traces (bench --holes-traces), each replayed twice,
#   the setup alone and the setup with 100,000 pairs; per pair = the
#   difference of the fastest repetitions' wall times / 100,000.
# Usage (GPU machine, .gpu staged by tools/gpu/stage.sh, which copies the
# anchors' binaries from ../shared/bench into .gpu/bench; ANCHORS=DIR names
# another folder):
#   tools/bench/holes_run.sh [ROUNDS]     # rounds interleave gmr and anchors
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
bin=.gpu/bin
anchors="${ANCHORS:-.gpu/bench}"
if [ ! -x "$anchors/rmm_replay" ] && [ -x .gpu/anchors/rmm_replay ]; then anchors=.gpu/anchors; fi
work=$(mktemp -d)
holes="4096,16384,65536"
pairs=100000
"$bin/bench" --holes "$holes" --holes-traces "$work" || exit 1
# rmm_replay prints wall_us=; replay_baseline prints "N ops ... best of 3: X ns/op"
# (its fastest repetition's wall time is N * X).
wall_us() {
  local text
  text=$(cat)
  local us
  us=$(echo "$text" | sed -n 's/.*wall_us=\([0-9.]*\).*/\1/p' | head -1)
  if [ -z "$us" ]; then
    us=$(echo "$text" | sed -n 's/.*: \([0-9]*\) ops .*best of [0-9]*: \([0-9.]*\) ns\/op.*/\1 \2/p' |
      head -1 | awk 'NF == 2 { printf "%.1f", $1 * $2 / 1000 }')
  fi
  echo "$us"
}
for round in $(seq 1 "$rounds"); do
  echo "== round $round"
  # pool serves the pairs from its recent frees; recent_frees=0 measures
  # its size index itself. fixed_block's 1 MiB blocks make every 512 B hole
  # a whole block (a row says "does not apply" where they outgrow the
  # device); 1 KiB blocks run the same program in 2N+1 KiB.
  "$bin/bench" --workloads holes --holes "$holes" --seconds 2 \
    --stacks 'pool;pool(recent_frees=0) > cuda(kind=async);vmm;vmm_pages;fixed_block;fixed_block(block=1KiB) > cuda' |
    grep -E '^(workload|holes)'
  for n in ${holes//,/ }; do
    for who in "rmm_pool:$anchors/rmm_replay pool" "cuda_async:$anchors/replay_baseline async"; do
      name=${who%%:*}
      cmd=${who#*:}
      setup=$($cmd "$work/holes_$n.csv.gz" 3 2>&1)
      full=$($cmd "$work/holes_${n}_pairs.csv.gz" 3 2>&1)
      a=$(echo "$setup" | wall_us)
      b=$(echo "$full" | wall_us)
      if [ -n "$a" ] && [ -n "$b" ]; then
        awk -v n="$n" -v who="$name" -v a="$a" -v b="$b" -v p="$pairs" \
          'BEGIN { printf "holes(%s) %-12s %.1f ns per pair (setup %.0f us, with pairs %.0f us)\n", n, who, (b - a) * 1000 / p, a, b }'
      else
        echo "holes($n) $name: no wall_us in its output:"
        echo "$setup" | tail -3
        echo "$full" | tail -3
      fi
    done
  done
done
rm -rf "$work"
