#!/usr/bin/env bash
# PyTorch's memory tools and PyTorch's allocator beside gmr, on a GPU machine,
# in one command (issues 22 and 24):
#  1. tools/frameworks/memviz_check.py: gmr.torch's snapshots of a small
#     training run read by torch.cuda._memory_viz and replayed by tools/replay
#     with the peak gmr's books recorded (PASS/FAIL line);
#  2. every bundled trace through tools/replay (pool, vmm) and through
#     PyTorch's caching allocator with and without expandable segments
#     (tools/frameworks/torch_replay.py), 3 passes each, captures off on both
#     sides (torch_replay.py skips capture rows), in the same columns.
#
# Before (on the build machine): tools/gpu/stage.sh (.gpu/bin/replay and
# .gpu/lib). Then, on the GPU machine, from the repository root:
#   tools/frameworks/memviz_run.sh [TRACE ...]      (default: tools/traces/*.csv.gz)
# Results under $OUT (default gpu-out): memviz_run.txt (everything printed),
# memviz/ (the snapshots and plots), torch_replay_NAME.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
log="$out/memviz_run.txt"
: >"$log"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib"
export GMR_TORCH_CACHE_DIR="$PWD/.gpu/cache"
export GMR_REPLAY="$PWD/.gpu/bin/replay"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
unset GMR_STACK GMR_CUDA_SIM PYTORCH_CUDA_ALLOC_CONF
section() { echo "=== $* ($(date +%T))" | tee -a "$log"; }
for f in "$GMR_LIBRARY_DIR/libgmr.so" "$GMR_REPLAY"; do
  [ -e "$f" ] || { echo "no $f: run tools/gpu/stage.sh first" | tee -a "$log"; exit 1; }
done

status=0
section "memory snapshots: gmr.torch -> torch.cuda._memory_viz and tools/replay"
python3 tools/frameworks/memviz_check.py --out "$out/memviz" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

traces=("$@")
[ ${#traces[@]} -gt 0 ] || traces=(tools/traces/*.csv.gz)
for trace in "${traces[@]}"; do
  name="$(basename "$trace")"
  name="${name%%.*}"
  section "$name: gmr (tools/replay --capture off)"
  "$GMR_REPLAY" --passes 3 --capture off --compare 'pool; vmm' "$trace" 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  section "$name: PyTorch's caching allocator (tools/frameworks/torch_replay.py)"
  python3 tools/frameworks/torch_replay.py --passes 3 --json "$out/torch_replay_$name.json" \
    "$trace" 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
section "done: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
