#!/usr/bin/env bash
# Every bundled trace through gmr's default and pool (tools/replay), PyTorch's
# caching allocator with and without expandable segments
# (tools/frameworks/torch_replay.py) and RMM's pool (the prebuilt rmm_replay),
# interleaved, in ROUNDS rounds (issue 22's side-by-side run; BENCHMARKS.md,
# "One default"). On the GPU machine, after tools/gpu/stage.sh:
#   tools/frameworks/anchor_run.sh [ROUNDS]        (default 2)
# Results under $OUT (default gpu-out): anchor_run.txt, torch_replay_*.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
unset GMR_STACK GMR_CUDA_SIM PYTORCH_CUDA_ALLOC_CONF
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for rep in $(seq 1 "${1:-2}"); do
    for t in gpt2_train resnet50_train gpt2_graph_capture multistream llm_multigraph; do
      tr=tools/traces/$t.csv.gz
      echo "=== $t rep $rep gmr"
      .gpu/bin/replay --passes 3 --capture off --compare 'vmm; pool' "$tr"
      echo "=== $t rep $rep torch"
      python3 tools/frameworks/torch_replay.py --passes 3 --json "$out/torch_replay_${t}_$rep.json" "$tr"
      echo "=== $t rep $rep rmm"
      .gpu/bench/rmm_replay pool "$tr" 1 --passes=3
    done
  done
} 2>&1 | tee "$out/anchor_run.txt"
