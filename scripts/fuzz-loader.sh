#!/usr/bin/env bash
# Fuzzes the JIT ELF loader with libFuzzer for N seconds (default 30).
#
#   scripts/fuzz-loader.sh [seconds]
#
# Builds fuzz/fuzz_elf_loader.cpp with clang++-19 (-fsanitize=fuzzer,address,
# undefined) from the loader sources alone, seeds the corpus with real x86-64
# and AArch64 objects compiled by clang-19, and exits non-zero on any crash,
# leak or sanitizer report. Set SVOD_FUZZ_DIR to keep the corpus and build.
set -euo pipefail

seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${SVOD_FUZZ_DIR:-$(mktemp -d -t svod-fuzz-loader.XXXXXX)}"
mkdir -p "$work/corpus" "$work/seeds" "$work/obj"
if [[ -z "${SVOD_FUZZ_DIR:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
fi

cxx="${CXX_FUZZ:-clang++-19}"
cc="${CC_SEED:-clang-19}"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -I "$root")

echo "building the fuzzer in $work"
sources=("$root"/svod/loader/*.cpp "$root/svod/base/error.cpp" "$root/fuzz/fuzz_elf_loader.cpp")
pids=()
objects=()
for source in "${sources[@]}"; do
  object="$work/obj/$(basename "${source%.cpp}").o"
  objects+=("$object")
  "$cxx" "${flags[@]}" -c "$source" -o "$object" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cxx" "${flags[@]}" "${objects[@]}" -o "$work/fuzz_elf_loader" -lfmt -ldl

echo "compiling seed objects"
kernels=(
  'void noop(void) {}'
  'void add(float* restrict o, const float* restrict a, const float* restrict b, int n) { for (int i = 0; i < n; ++i) o[i] = a[i] + b[i]; }'
  'float expf(float); float sinf(float); void k(float* o, const float* a, int n) { for (int i = 0; i < n; ++i) o[i] = expf(a[i]) + sinf(a[i]); }'
  'static const int t[8] = {3,1,4,1,5,9,2,6}; static int s[4]; int c; int k(int x) { s[x & 3] += t[x & 7]; return s[x & 3] + ++c; }'
  'int sw(int x, int y) { switch (x) { case 0: return y; case 1: return y*2; case 2: return y-3; case 3: return y^7; case 4: return y<<2; case 5: return -y; case 6: return y/3; default: return 0; } }'
  'extern int ext_data; extern void wmaybe(void) __attribute__((weak)); int g(void) { return ext_data + (wmaybe ? 1 : 0); }'
  'unsigned __int128 d(unsigned __int128 a, unsigned __int128 b) { return a / b; } _Float16 h(_Float16 a, _Float16 b) { return a * b; }'
  'static char big[8192] __attribute__((aligned(65536))); char* kernel(void) { return big; }'
)
i=0
for kernel in "${kernels[@]}"; do
  for pic in -fPIC -fno-pic; do
    for target in "" "--target=aarch64-none-elf"; do
      out="$work/seeds/seed-$i.o"
      i=$((i + 1))
      march=(-march=native)
      [[ -n "$target" ]] && march=("$target" -mno-global-merge)
      if ! echo "$kernel" | "$cc" -c -x c -O2 -ffreestanding -fno-math-errno -fno-stack-protector \
          -fcommon "${march[@]}" "$pic" - -o "$out" 2>/dev/null; then
        rm -f "$out"
      fi
    done
  done
done
echo "$(ls "$work/seeds" | wc -l) seeds"

echo "fuzzing for ${seconds}s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$work/fuzz_elf_loader" "$work/corpus" "$work/seeds" -max_total_time="$seconds" \
  -max_len=65536 -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1 || status=$?
grep -v '^"' "$work/fuzz.log" | tail -n 40
if [[ $status -ne 0 ]]; then
  echo "fuzz-loader: the fuzzer failed (status $status); crash inputs are in $work" >&2
  trap - EXIT
  exit "$status"
fi
echo "fuzz-loader: no crash in ${seconds}s"
