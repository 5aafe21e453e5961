#!/usr/bin/env bash
# Every bundled trace through gmr (tools/replay), PyTorch's caching allocator
# with and without expandable segments (tools/frameworks/torch_replay.py) and
# RMM's pool (the prebuilt rmm_replay), interleaved, in ROUNDS rounds (issue
# 22's side-by-side run, issue 32's with the options below; BENCHMARKS.md,
# "One default" and "The default's speed"). On the GPU machine, after
# tools/gpu/stage.sh:
#   tools/frameworks/anchor_run.sh [ROUNDS]        (default 2)
# Environment:
#   STACKS   gmr's stacks, as replay --compare takes them (default 'vmm; pool');
#            replay prints the CUDA calls of each pass after its table
#   BEFORE   folders each holding a static replay of another commit, run
#            beside it on 'vmm; pool' (a before/after of a change)
#   PAIR=1   then the 64 KiB pair (bench --workloads fixed, 3 repetitions) and
#            1 and 16 threads (bench --workloads threads, 2 repetitions)
# Results under $OUT (default gpu-out): anchor_run.txt, torch_replay_*.json;
# tools/frameworks/summarize_anchor_run.py anchor_run.txt gives the tables.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
unset GMR_STACK GMR_CUDA_SIM PYTORCH_CUDA_ALLOC_CONF
stacks="${STACKS:-vmm; pool}"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for rep in $(seq 1 "${1:-2}"); do
    for t in gpt2_train resnet50_train gpt2_graph_capture multistream llm_multigraph; do
      tr=tools/traces/$t.csv.gz
      echo "=== $t rep $rep gmr"
      .gpu/bin/replay --passes 3 --capture off --compare "$stacks" "$tr"
      for dir in ${BEFORE:-}; do
        echo "=== $t rep $rep gmr-before $dir"
        "$dir/replay" --passes 3 --capture off --compare 'vmm; pool' "$tr"
      done
      echo "=== $t rep $rep torch"
      python3 tools/frameworks/torch_replay.py --passes 3 --json "$out/torch_replay_${t}_$rep.json" "$tr"
      echo "=== $t rep $rep rmm"
      .gpu/bench/rmm_replay pool "$tr" 1 --passes=3
    done
  done
  if [ "${PAIR:-0}" = 1 ]; then
    for rep in 1 2 3; do
      echo "=== pair rep $rep"
      .gpu/bin/bench --workloads fixed --fixed-bytes 64KiB \
        --stacks "pool;fixed_block;tracking > limiting > pool > cuda(kind=async);vmm"
    done
    for rep in 1 2; do
      echo "=== threads rep $rep"
      .gpu/bin/bench --workloads threads --threads 1,16 --thread-seconds 1 \
        --stacks "pool;vmm;tracking > limiting > pool > cuda(kind=async);fixed_block"
    done
  fi
} 2>&1 | tee "$out/anchor_run.txt"
