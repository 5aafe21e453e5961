#!/usr/bin/env bash
# CUDA graphs on gmr.torch on a GPU machine, in one command: the torch shim
# built against the installed PyTorch, tools/frameworks/graph_checks.py (each
# result against eager, gmr stacks beside PyTorch's allocator), and PyTorch's
# own CUDA graph tests (test/test_cuda.py -k graph, test/inductor/
# test_cudagraph_trees.py) on gmr and on PyTorch's allocator.
#
# Before (on the build machine): tools/gpu/stage.sh (or only the libraries:
# bazel build -c opt //dist:libgmr //integrations/torch:libgmr_torch, copied
# to .gpu/lib). PyTorch's test files are never committed: fetch test_cuda.py
# and inductor/test_cudagraph_trees.py of pytorch/pytorch into a git-ignored
# folder ($PT_TESTS, default .scratch/pytorch_tests) and carry it along.
#
#   tools/frameworks/graph_run.sh PART...
# PART: checks[=CHECKS[@STACKS]]  graph_checks.py (default: all checks, its stacks)
#       cuda_tests[=ALLOCATORS]   test_cuda.py -k graph ('gmr,native' by default;
#                                 gmr=SPEC for another stack)
#       trees[=PATTERN[@ALLOCATORS]] test_cudagraph_trees.py -k PATTERN
#       cuda_k=PATTERN[@ALLOCATORS]  test_cuda.py -k PATTERN, each test's verdict
#                                 listed ('gmr,native' by default)
#       reclaim[=ALLOCATORS]      cuda_k=reclaim: exactly TestMemPool's
#                                 test_graph_capture_reclaim_2_streams and _4_streams
#                                 (graph_capture_record_stream_reuse:True)
# Results under $OUT (default gpu-out): graph_run.txt (everything printed) and
# one file per part.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
log="$out/graph_run.txt"
: >"$log"
export GMR_LIBRARY_DIR="$PWD/.gpu/lib"
export GMR_TORCH_CACHE_DIR="$PWD/.gpu/cache"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/gmr_inductor
export PYTORCH_TESTING_DEVICE_ONLY_FOR=cuda
unset GMR_STACK GMR_CUDA_SIM
tests="${PT_TESTS:-$PWD/.scratch/pytorch_tests}"
section() { echo "=== $* ($(date +%T))" | tee -a "$log"; }

section "environment and the torch shim against PyTorch's headers"
python3 - 2>&1 <<'PY' | tee -a "$log"
import os, time, torch, gmr.torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
start = time.time()
print("shim:", gmr.torch.build_shim(os.environ["GMR_LIBRARY_DIR"]), "%.1f s" % (time.time() - start))
PY

# Counts of a unittest log: "Ran N tests", then OK/FAILED (failures=, errors=,
# skipped=, expected failures=).
summary() {
  python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
ran = re.findall(r"^Ran (\d+) tests?", text, re.M)
tail = re.findall(r"^(OK|FAILED)(?: \((.*)\))?$", text, re.M)
info = dict(kv.split("=") for kv in (tail[-1][1].split(", ") if tail and tail[-1][1] else []))
n = int(ran[-1]) if ran else 0
bad = int(info.get("failures", 0)) + int(info.get("errors", 0))
skip = int(info.get("skipped", 0))
xf = int(info.get("expected failures", 0))
print("ran %d: passed %d, failed %s, errors %s, skipped %d, expected failures %d, "
      "unexpected successes %s" % (n, n - bad - skip - xf - int(info.get("unexpected successes", 0)),
                                   info.get("failures", 0), info.get("errors", 0), skip, xf,
                                   info.get("unexpected successes", 0)))
for m in re.findall(r"^(?:FAIL|ERROR): (\S+ \(\S+\))", text, re.M):
    print("  not passed:", m)
PY
}

for part in "$@"; do
  name="${part%%=*}"
  arg="${part#*=}"; [ "$arg" = "$part" ] && arg=""
  case "$name" in
    checks)
      section "graph checks ${arg}"
      only="${arg%%@*}"; stacks=""; [[ "$arg" == *@* ]] && stacks="${arg#*@}"
      python3 tools/frameworks/graph_checks.py ${only:+--only "$only"} \
        ${stacks:+--stacks "$stacks"} --json "$out/graph_checks.json" 2>&1 | tee -a "$log"
      ;;
    cuda_tests|trees|cuda_k|reclaim)
      verdicts=""
      if [ "$name" = cuda_tests ]; then
        file="$tests/test_cuda.py"; pattern="graph"; allocs="${arg:-gmr,native}"
      elif [ "$name" = trees ]; then
        file="$tests/inductor/test_cudagraph_trees.py"; pattern="${arg%%@*}"
        allocs="gmr,native"; [[ "$arg" == *@* ]] && allocs="${arg#*@}"
      else
        # A few tests by name: each one's verdict goes to the log too.
        file="$tests/test_cuda.py"; verdicts=1
        if [ "$name" = reclaim ]; then
          pattern="reclaim"; allocs="${arg:-gmr,native}"
        else
          pattern="${arg%%@*}"; allocs="gmr,native"; [[ "$arg" == *@* ]] && allocs="${arg#*@}"
        fi
        [ -n "$pattern" ] || { echo "$name needs a pattern" | tee -a "$log"; continue; }
      fi
      [ -f "$file" ] || { echo "no $file: fetch it (see the top of this script)" | tee -a "$log"; continue; }
      IFS=, read -ra list <<<"$allocs"
      for alloc in "${list[@]}"; do
        flag=""; [[ "$alloc" == gmr* ]] && flag="--gmr${alloc#gmr}"
        tag="${name}${verdicts:+_$pattern}_$alloc"
        tag="$(echo "$tag" | tr -c 'a-zA-Z0-9\n' '_')"
        section "PyTorch's ${file##*/} -k ${pattern:-all} on ${alloc}"
        ( cd "$(dirname "$file")" && timeout 280 python3 "$OLDPWD/tools/frameworks/pytorch_tests.py" \
            $flag "$file" -v ${pattern:+-k "$pattern"} ) >"$out/$tag.txt" 2>&1
        echo "exit $?" >>"$out/$tag.txt"
        summary "$out/$tag.txt" | tee -a "$log"
        if [ -n "$verdicts" ]; then
          grep -E '^test_[A-Za-z0-9_]+ \(.*\) \.\.\. ' "$out/$tag.txt" | sed 's/^/  /' | tee -a "$log"
        fi
      done
      ;;
    *) echo "unknown part $part" | tee -a "$log" ;;
  esac
done
section done
