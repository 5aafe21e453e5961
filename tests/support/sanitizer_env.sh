# tests/support/sanitizer_env.sh: sourced by shell tests that load gmr's
# shared libraries into programs Bazel did not build (python3, the installed
# examples). Under --config=asan / --config=tsan the libraries are
# instrumented and need the sanitizer's runtime first in the process:
#   sanitizer_for LIB    prints the -fsanitize= list the library was built
#                        with ("address,undefined", "thread"), or nothing;
#   sanitizer_preload S  prints the runtime library to put in LD_PRELOAD.
sanitizer_for() {
  local symbols list=()
  symbols=$(nm -D "$1" 2>/dev/null | grep " U __" || true)
  grep -q "__asan_" <<<"$symbols" && list+=(address)
  grep -q "__ubsan_" <<<"$symbols" && list+=(undefined)
  grep -q "__tsan_" <<<"$symbols" && list+=(thread)
  local IFS=,
  echo "${list[*]}"
}

sanitizer_preload() {
  case "$1" in
    *address*) gcc -print-file-name=libasan.so ;;
    *thread*) gcc -print-file-name=libtsan.so ;;
    *undefined*) gcc -print-file-name=libubsan.so ;;
  esac
}
