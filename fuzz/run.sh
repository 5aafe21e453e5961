#!/usr/bin/env bash
# Build gmr's libFuzzer targets with clang outside Bazel and run them.
#
#   fuzz/run.sh list                  the targets (every fuzz/*_fuzz.c)
#   fuzz/run.sh build                 build them all, run none
#   fuzz/run.sh TARGET SECONDS [ARG]  fuzz one target for SECONDS
#   fuzz/run.sh all SECONDS [ARG]     fuzz every target in turn, SECONDS each
#
# ARGs go to libFuzzer (e.g. -jobs=4, -max_len=8192). A target NAME is built
# from fuzz/NAME_fuzz.c; its seed corpus is fuzz/corpus/NAME/ (read, never
# written), its dictionary fuzz/NAME.dict if there is one; what the fuzzer
# learns goes to fuzz/build/corpus/NAME/, and a
# finding to fuzz/build/findings/NAME-crash-... (commit the input under
# fuzz/findings/NAME/ and reproduce it with fuzz/build/bin/NAME FILE).
#
# The library (core, util, stream_ordered, resources, adaptors, stack, nccl),
# tools/replay's reader and the stream-ordering oracle (tests/support/order_*.c)
# are compiled with -fsanitize=fuzzer-no-link,address,undefined into one
# archive; every *.c below those folders is taken, so files added or moved
# there need no change here. Targets run on the host simulation of CUDA: no
# GPU is used. Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev;
# tools/setup.sh --fuzz installs them), zlib and the CUDA toolkit's headers
# and libcudart_static.a (at $CUDA_PATH or /usr/local/cuda).
#
# Exit status: 0 when every target ran its time without a finding; 1 on a
# finding (the last lines say which target and where the input is); 2 when
# the build failed or the arguments are wrong. The last line of each run is
#   fuzz: TARGET: ok, N runs, cov C, ft F      or      fuzz: TARGET: FINDING ...
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${GMR_FUZZ_OUT:-$root/fuzz/build}"
cuda="${CUDA_PATH:-/usr/local/cuda}"
cc="${CLANG:-}"
if [ -z "$cc" ]; then
  for c in clang clang-14 clang-15 clang-16; do
    if command -v "$c" >/dev/null; then cc="$c"; break; fi
  done
fi

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

targets() {
  for f in "$root"/fuzz/*_fuzz.c; do
    [ -e "$f" ] || continue
    basename "$f" _fuzz.c
  done
}

sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
cflags=(-std=c11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra
        -I"$root" -I"$root/include" -I"$cuda/include")
libs=("$cuda/lib64/libcudart_static.a" -lz -ldl -lpthread -lrt -lm)

build() {
  [ -n "$cc" ] || { echo "fuzz: no clang found (install clang and libclang-rt-14-dev)" >&2; return 2; }
  [ -f "$cuda/include/cuda_runtime_api.h" ] || { echo "fuzz: no CUDA toolkit at $cuda" >&2; return 2; }
  mkdir -p "$out/obj" "$out/bin"
  # The library's sources, wherever they sit below these folders (main()s left out).
  mapfile -t sources < <(cd "$root" && { find core util stream_ordered resources adaptors stack nccl tools/replay \
                           -name '*.c' ! -name main.c; \
                           ls tests/support/order_oracle.c tests/support/order_program.c; } | sort)
  # Rebuild an object when its source, or any header of the tree, is newer.
  newest_header="$(cd "$root" && find include core util stream_ordered resources adaptors stack nccl tools/replay fuzz \
                     tests/support/order_oracle.h -name '*.h' -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2)"
  stale=()
  objects=()
  for src in "${sources[@]}"; do
    obj="$out/obj/${src//\//__}.o"
    objects+=("$obj")
    if [ ! -f "$obj" ] || [ "$root/$src" -nt "$obj" ] || [ "$root/$newest_header" -nt "$obj" ]; then
      stale+=("$src")
    fi
  done
  # Objects of files that no longer exist must not stay in the archive.
  rm -f "$out/libgmr_fuzz.a"
  if ((${#stale[@]} > 0)); then
    echo "fuzz: compiling ${#stale[@]} of ${#sources[@]} library files with $cc" >&2
    printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -n 1 "$0" __compile \
      || { echo "fuzz: the library did not compile" >&2; return 2; }
  fi
  ar rcs "$out/libgmr_fuzz.a" "${objects[@]}" || return 2
  for t in $(targets); do
    "$cc" "${cflags[@]}" "${sanitize[@]}" -fsanitize=fuzzer "$root/fuzz/${t}_fuzz.c" \
      "$out/libgmr_fuzz.a" "${libs[@]}" -o "$out/bin/$t" \
      || { echo "fuzz: target $t did not build" >&2; return 2; }
  done
}

# Compile one library file (a path relative to the root) into its object.
compile_one() {
  local src="$1"
  cd "$root" && "$cc" "${cflags[@]}" "${sanitize[@]}" -fsanitize=fuzzer-no-link -c "$src" \
    -o "$out/obj/${src//\//__}.o"
}

# Fuzz target $1 for $2 seconds; extra arguments go to libFuzzer.
run_one() {
  local t="$1" seconds="$2"
  shift 2
  [ -x "$out/bin/$t" ] || { echo "fuzz: no target '$t' (fuzz/run.sh list)" >&2; return 2; }
  mkdir -p "$out/corpus/$t" "$out/findings" "$out/logs"
  local seeds=()
  [ -d "$root/fuzz/corpus/$t" ] && seeds=("$root/fuzz/corpus/$t")
  local dict=()
  [ -f "$root/fuzz/$t.dict" ] && dict=(-dict="$root/fuzz/$t.dict")
  local log="$out/logs/$t.log"
  # Huge requests get NULL from malloc (each target also says so in its
  # __asan_default_options, for runs by hand), and ASan's warning about each
  # is left out of the log; leaks are findings.
  ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=1024:detect_leaks=1:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
    "$out/bin/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=25 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -artifact_prefix="$out/findings/$t-" \
      "${dict[@]}" "$@" "$out/corpus/$t" "${seeds[@]}" 2>&1 \
    | grep -v 'WARNING: AddressSanitizer failed to allocate' >"$log"
  local rc=${PIPESTATUS[0]}
  local runs cov ft
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  ft="$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $t: ok, ${runs:-0} runs, cov ${cov:-0}, ft ${ft:-0} (${seconds}s, log $log)"
    return 0
  fi
  tail -40 "$log" >&2
  local artifact
  artifact="$(grep -o "$out/findings/$t-[^ ]*" "$log" | tail -1)"
  echo "fuzz: $t: FINDING after ${runs:-?} runs: ${artifact:-see $log}" \
       "(commit it under fuzz/findings/$t/; reproduce: $out/bin/$t FILE)"
  return 1
}

[ $# -ge 1 ] || usage
case "$1" in
  list)
    targets
    ;;
  build)
    build
    ;;
  __compile) # internal: one file, for the parallel build
    compile_one "$2"
    ;;
  all)
    [ $# -ge 2 ] || usage
    seconds="$2"
    shift 2
    build || exit 2
    status=0
    for t in $(targets); do
      run_one "$t" "$seconds" "$@" || status=1
    done
    exit "$status"
    ;;
  -h | --help)
    usage
    ;;
  *)
    [ $# -ge 2 ] || usage
    target="$1"
    seconds="$2"
    shift 2
    case " $(targets | tr '\n' ' ') " in
      *" $target "*) ;;
      *) echo "fuzz: no target '$target' (fuzz/run.sh list)" >&2; exit 2 ;;
    esac
    build || exit 2
    run_one "$target" "$seconds" "$@"
    ;;
esac
