#!/usr/bin/env bash
# The default's speed and footprint beside the anchors in one GPU run (issue
# 32, goals 1, 2, 3 and 5; BENCHMARKS.md, "The default's speed"):
#   every bundled trace, ROUNDS interleaved rounds, 3 passes each, through
#   - gmr (tools/replay): vmm, pool, vmm(creators=2) and
#     vmm(creators=2, handle_floor=20MiB), with the CUDA calls of each pass;
#   - PyTorch's caching allocator and expandable segments (torch_replay.py);
#   - RMM's pool (the prebuilt rmm_replay in .gpu/bench);
#   - optionally earlier gmr builds: BEFORE="DIR ..." where DIR/replay is a
#     static replay of another commit (issue 31's before and after);
#   then the 64 KiB pair (bench --workloads fixed, 3 repetitions) and 1 and
#   16 threads (bench --workloads threads, 2 repetitions).
# On the GPU machine, after tools/gpu/stage.sh:
#   tools/gpu/speed_run.sh [ROUNDS]      (default 2)
# Results under $OUT (default gpu-out): speed_run.txt, torch_replay_*.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
unset GMR_STACK GMR_CUDA_SIM PYTORCH_CUDA_ALLOC_CONF
gmr_stacks='vmm; pool; vmm(creators=2); vmm(creators=2, handle_floor=20MiB)'
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for rep in $(seq 1 "${1:-2}"); do
    for t in gpt2_train resnet50_train gpt2_graph_capture multistream llm_multigraph; do
      tr=tools/traces/$t.csv.gz
      echo "=== $t rep $rep gmr"
      .gpu/bin/replay --passes 3 --capture off --compare "$gmr_stacks" "$tr"
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
} 2>&1 | tee "$out/speed_run.txt"
