#!/usr/bin/env bash
# Builds the GPU tests and tools as optimised static binaries and copies them
# into .gpu/ (git-ignored), ready to carry to a GPU machine that has no Bazel:
#   tools/gpu/stage.sh            # build + copy
#   (on the GPU machine) tools/gpu/run.sh   # run everything, summary last
#   (on the GPU machine) tools/frameworks/run_all.sh   # PyTorch/CuPy on gmr (.gpu/lib)
#   (on the GPU machine) tools/frameworks/reach_check.sh  # the wheel (.gpu/wheel) and the
#                                                      # README's framework examples
#   (on the GPU machine) tools/gpu/stream_safety_run.sh  # stream canary (C++ and PyTorch),
#                                   # PyTorch's reclaim tests (.scratch/pytorch_tests), memcheck
# The binaries link the CUDA runtime statically; they need only the driver.
#   tools/gpu/stage.sh --libs     # only the shared libraries into .gpu/lib (for
#                                 # tools/frameworks/serving_check.sh: a few MiB)
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = "--libs" ]; then
  bazel build -c opt //dist:libgmr //integrations/torch:libgmr_torch
  rm -rf .gpu
  mkdir -p .gpu/lib
  cp bazel-bin/dist/libgmr.so bazel-bin/integrations/torch/libgmr_torch.so .gpu/lib/
  chmod u+w .gpu/lib/*
  du -sh .gpu
  exit 0
fi

# Every test tagged gpu, plus the tools the GPU run uses.
mapfile -t tests < <(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
tools=()
for t in //tools/replay:replay //tools/bench:bench //tools/bench_arena:bench_arena \
         //tools/bench_arena:stack_passes //tools/bench_nvtx:bench_nvtx; do
  if bazel query "$t" >/dev/null 2>&1; then tools+=("$t"); fi
done
extra=()
for t in $(bazel query 'attr(tags, "\bgpu_tool\b", //...)' 2>/dev/null); do extra+=("$t"); done

# The shared libraries the framework runs load (tools/frameworks/run_all.sh).
libs=(//dist:libgmr //dist:libgmr_tiers //dist:libgmr_scoped //dist:libgmr_nccl //integrations/torch:libgmr_torch)

bazel build -c opt "${tests[@]}" "${tools[@]}" "${extra[@]}" "${libs[@]}"

rm -rf .gpu
mkdir -p .gpu/bin .gpu/traces
for t in "${tests[@]}" "${tools[@]}" "${extra[@]}"; do
  path="${t#//}"
  path="${path/://}"
  src="bazel-bin/${path}"
  [ -f "$src" ] || continue
  cp "$src" ".gpu/bin/$(basename "$path")"
  chmod u+w ".gpu/bin/$(basename "$path")"
  # shared objects (NVTX injection libraries etc.) keep their names
done
strip --strip-unneeded .gpu/bin/* 2>/dev/null || true
mkdir -p .gpu/lib
cp bazel-bin/dist/libgmr.so bazel-bin/dist/libgmr_tiers.so bazel-bin/dist/libgmr_scoped.so bazel-bin/dist/libgmr_nccl.so \
  bazel-bin/integrations/torch/libgmr_torch.so .gpu/lib/
chmod u+w .gpu/lib/*
# The wheel of the same libraries (tools/frameworks/reach_check.sh installs it
# into a fresh virtual environment there).
python3 tools/wheel/make_wheel.py --prebuilt bazel-bin --out .gpu/wheel
cp tools/traces/*.csv.gz .gpu/traces/
# RMM's and cudaMallocAsync's replayers, when the project's shared folder has
# them, so full_run.sh measures the anchors in the same run.
if [ -x ../shared/bench/rmm_replay ]; then
  mkdir -p .gpu/bench
  cp ../shared/bench/rmm_replay ../shared/bench/replay_baseline .gpu/bench/
fi
du -sh .gpu
ls .gpu/bin
# PyTorch's test files are never committed (tools/frameworks/graph_run.sh).
[ -f .scratch/pytorch_tests/test_cuda.py ] ||
  echo "note: no .scratch/pytorch_tests/test_cuda.py: graph_run.sh's cuda_tests/reclaim parts need it"
