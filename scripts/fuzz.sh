#!/usr/bin/env bash
# Fuzzes one of svod's parsers with libFuzzer for N seconds (default 30).
#
#   scripts/fuzz.sh TARGET [seconds]
#
# TARGET is one of: plan_file, tune_file, npy, expr, object_cache (fuzz/fuzz_TARGET.cpp),
# or elf_loader (scripts/fuzz-loader.sh). The target is built with clang++-19
# (-fsanitize=fuzzer,address,undefined) from the sources it needs, seeded from
# the examples, fuzz/seeds/TARGET and the kept crashing inputs in
# fuzz/regressions/TARGET, and the script exits non-zero on any crash, leak,
# hang or sanitizer report, leaving the input that caused it in the work
# folder. Keep such an input: fix the bug, then add the input under
# fuzz/regressions/TARGET/ (tests/planfile/fuzz_regressions_test.cpp replays
# them in the normal test run). Set SVOD_FUZZ_DIR to keep the build and corpus.
set -euo pipefail

target="${1:-}"
seconds="${2:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

case "$target" in
  elf_loader) exec bash "$root/scripts/fuzz-loader.sh" "$seconds" ;;
  plan_file | tune_file | npy | expr | object_cache) ;;
  *)
    echo "usage: scripts/fuzz.sh plan_file|tune_file|npy|expr|object_cache|elf_loader [seconds]" >&2
    exit 2
    ;;
esac

work="${SVOD_FUZZ_DIR:-$(mktemp -d -t "svod-fuzz-$target.XXXXXX")}"
mkdir -p "$work/corpus" "$work/seeds" "$work/obj"
if [[ -z "${SVOD_FUZZ_DIR:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
fi

# The runtime sources each target needs, beyond svod/base/error.cpp and dtype.cpp.
plan_sources=(svod/planfile/plan_parse.cpp svod/planfile/json_text.cpp svod/program/program_spec.cpp
              svod/program/expr.cpp)
case "$target" in
  plan_file) sources=("${plan_sources[@]}") ;;
  tune_file) sources=("${plan_sources[@]}" svod/tune/tune_file.cpp) ;;
  npy) sources=(svod/base/npy.cpp) ;;
  expr) sources=(svod/program/expr.cpp) ;;
  object_cache) sources=(svod/cache/object_cache.cpp svod/base/hash.cpp svod/base/env.cpp svod/base/log.cpp
                         svod/cache/cache_key.cpp svod/compile/compiler.cpp) ;;
esac
sources+=(svod/base/error.cpp svod/base/dtype.cpp "fuzz/fuzz_$target.cpp")

cxx="${CXX_FUZZ:-clang++-19}"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED
       -I "$root")

echo "building fuzz_$target in $work"
objects=()
pids=()
for source in "${sources[@]}"; do
  object="$work/obj/$(echo "$source" | tr / _).o"
  objects+=("$object")
  if [[ ! -f "$object" || "$root/$source" -nt "$object" ]]; then
    "$cxx" "${flags[@]}" -c "$root/$source" -o "$object" &
    pids+=($!)
    # Two compiles at a time.
    if ((${#pids[@]} >= 2)); then
      wait "${pids[0]}"
      pids=("${pids[@]:1}")
    fi
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cxx" "${flags[@]}" "${objects[@]}" -o "$work/fuzz_$target" -lfmt -lspdlog -lxxhash

echo "seeding"
seed() { cp "$@" "$work/seeds/" 2>/dev/null || true; }
case "$target" in
  plan_file) for f in $(grep -rl '"svod_plan"' "$root/examples" --include='*.json'); do
               cp "$f" "$work/seeds/$(echo "${f#"$root"/}" | tr / _)"; done ;;
  tune_file) for f in $(grep -rl '"svod_tune"' "$root/examples" --include='*.json'); do
               cp "$f" "$work/seeds/$(echo "${f#"$root"/}" | tr / _)"; done ;;
  npy) seed "$root"/examples/mlp/*.npy ;;
esac
[[ -d "$root/fuzz/seeds/$target" ]] && seed "$root/fuzz/seeds/$target"/*
[[ -d "$root/fuzz/regressions/$target" ]] && seed "$root/fuzz/regressions/$target"/*
echo "$(ls "$work/seeds" | wc -l) seeds"

echo "fuzzing fuzz_$target for ${seconds}s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$work/fuzz_$target" "$work/corpus" "$work/seeds" -max_total_time="$seconds" \
  -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1 || status=$?
grep -v '^"' "$work/fuzz.log" | tail -n 40
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: fuzz_$target failed (status $status); the input is in $work" >&2
  trap - EXIT
  exit "$status"
fi
echo "fuzz.sh: fuzz_$target: no crash in ${seconds}s"
