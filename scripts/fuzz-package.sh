#!/usr/bin/env bash
# Fuzzes the package reader with libFuzzer for N seconds (default 30).
#
#   scripts/fuzz-package.sh [seconds]
#
# Builds fuzz/fuzz_package.cpp with clang++-19 (-fsanitize=fuzzer,address,
# undefined) from the package format's sources alone, seeds the corpus with
# real packages when a built svod is found (SVOD_CLI, else build/release/svod),
# and exits non-zero on any crash, leak or sanitizer report. Set SVOD_FUZZ_DIR
# to keep the corpus and build.
set -euo pipefail

seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${SVOD_FUZZ_DIR:-$(mktemp -d -t svod-fuzz-package.XXXXXX)}"
mkdir -p "$work/corpus" "$work/seeds" "$work/obj"
if [[ -z "${SVOD_FUZZ_DIR:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
fi

cxx="${CXX_FUZZ:-clang++-19}"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -I "$root")

echo "building the fuzzer in $work"
sources=("$root/svod/package/package_format.cpp" "$root/svod/base/error.cpp" "$root/svod/base/hash.cpp"
         "$root/fuzz/fuzz_package.cpp")
pids=()
objects=()
for source in "${sources[@]}"; do
  object="$work/obj/$(basename "${source%.cpp}").o"
  objects+=("$object")
  "$cxx" "${flags[@]}" -c "$source" -o "$object" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cxx" "${flags[@]}" "${objects[@]}" -o "$work/fuzz_package" -lfmt -lxxhash

cli="${SVOD_CLI:-$root/build/release/svod}"
if [[ -x "$cli" ]]; then
  echo "packing seed packages with $cli"
  for plan in examples/features/plan.json examples/cross_device/plan.json; do
    SVOD_CACHE=0 "$cli" pack "$root/$plan" -o "$work/seeds/$(basename "$(dirname "$plan")").svodpkg" >/dev/null \
      || echo "  could not pack $plan (skipped)"
  done
fi
echo "$(ls "$work/seeds" | wc -l) seeds"

echo "fuzzing for ${seconds}s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$work/fuzz_package" "$work/corpus" "$work/seeds" -max_total_time="$seconds" \
  -max_len=262144 -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1 || status=$?
grep -v '^"' "$work/fuzz.log" | tail -n 40
if [[ $status -ne 0 ]]; then
  echo "fuzz-package: the fuzzer failed (status $status); crash inputs are in $work" >&2
  trap - EXIT
  exit "$status"
fi
echo "fuzz-package: no crash in ${seconds}s"
