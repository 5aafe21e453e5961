#!/usr/bin/env bash
# Sleep and wake of gmr.torch on a GPU machine, in one command (issues 23 and
# 33): the torch shim rebuilt against the installed PyTorch's headers into
# .gpu/lib, then tools/frameworks/serving_check.py: a transformers Llama
# model from a config (generate, CUDA graphs, sleep/wake bit-identical, 100
# cycles), sleep/wake bandwidth of 64 MiB .. 4 GiB buffers and of the model
# beside a plain pinned copy with the host memory held awake and asleep
# (serving_bench.py), a KV cache reserved now and committed later under CUDA
# graphs and decommit/sleep waiting for running kernels (serving_kv.py), two
# processes taking turns.
#
# Before (on the build machine): tools/gpu/stage.sh --libs (only the shared
# libraries into .gpu/lib; tools/gpu/stage.sh stages everything); carry .gpu.
# Then, on the GPU machine:
#   tools/frameworks/serving_check.sh [--parts model,cycles,bench,modelbench,kvcache,unmap,turns]
#                                     [--cycles N]
# Results: $OUT/serving_check.txt (everything printed; the bandwidth table
# and GOAL lines, then "N passed, M failed" last) and $OUT/serving_check.json.
# About 5 to 7 minutes on an H100 or H200 (each part prints its time).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
log="$out/serving_check.txt"
: >"$log"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib"
export GMR_TORCH_CACHE_DIR="$PWD/.gpu/cache"
export PYTHONPATH="$PWD/python:$PWD/tools/frameworks${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
unset GMR_STACK GMR_CUDA_SIM GMR_TORCH_LIBRARY
[ -f "$GMR_LIBRARY_DIR/libgmr.so" ] || { echo "no $GMR_LIBRARY_DIR/libgmr.so: run tools/gpu/stage.sh first" | tee -a "$log"; exit 1; }

echo "=== the torch shim against PyTorch's headers ($(date +%T))" | tee -a "$log"
python3 - 2>&1 <<'PY' | tee -a "$log"
import os, time, torch, gmr.torch
start = time.time()
print("shim:", gmr.torch.build_shim(os.environ["GMR_LIBRARY_DIR"]), "%.1f s" % (time.time() - start))
PY

echo "=== serving checks ($(date +%T))" | tee -a "$log"
python3 tools/frameworks/serving_check.py --json "$out/serving_check.json" "$@" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
echo "=== done ($(date +%T)), exit $status" | tee -a "$log"
exit "$status"
