#!/usr/bin/env bash
# Fuzzes one of svod's parsers with libFuzzer for N seconds (default 30).
#
#   scripts/fuzz.sh TARGET [seconds]
#
# TARGET is one of plan_file, tune_file, npy, expr, object_cache, elf_loader
# or package (fuzz/fuzz_TARGET.cpp). The target is built with clang++-19
# (-fsanitize=fuzzer,address,undefined) from the sources it needs alone,
# seeded with real inputs (the examples and test plans, objects compiled by
# clang-19, packages made by a built svod), fuzz/seeds/TARGET (among them
# *.rep, short inputs that the JSON and expression targets expand into
# nesting 100,000 deep: fuzz/fuzz_common.h, fuzz/make_deep_seeds.py) and the
# kept crashing inputs in fuzz/regressions/TARGET, and the script exits
# non-zero on any crash, leak, hang or sanitizer report, leaving the input
# that caused it in the work folder. Keep such an input: fix the bug, then
# add the input under fuzz/regressions/TARGET/
# (tests/planfile/fuzz_regressions_test.cpp replays them in the normal test
# run). Set SVOD_FUZZ_DIR to keep the build and
# corpus; CXX_FUZZ and CC_SEED override the compilers, SVOD_CLI the svod
# that packs the package seeds (default build/release/svod). The sources are
# compiled through CMAKE_CXX_COMPILER_LAUNCHER (e.g. ccache) when it is set.
set -euo pipefail

target="${1:-}"
seconds="${2:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
targets="plan_file|tune_file|npy|expr|object_cache|elf_loader|package"

# Seeding, one function per kind of input; each copies into $work/seeds.
seed_json() {  # the example and test files whose top-level key is $1
  local f
  for f in $(grep -rl "\"$1\"" "$root/examples" "$root/tests/planfile/data" --include='*.json'); do
    cp "$f" "$work/seeds/$(echo "${f#"$root"/}" | tr / _)"
  done
}
seed_npy() { cp "$root"/examples/mlp/*.npy "$work/seeds/"; }
seed_objects() {  # x86-64 and AArch64 objects of small kernels with varied relocations and sections
  local cc="${CC_SEED:-clang-19}" kernel pic triple out i=0
  local kernels=(
    'void noop(void) {}'
    'void add(float* restrict o, const float* restrict a, const float* restrict b, int n) { for (int i = 0; i < n; ++i) o[i] = a[i] + b[i]; }'
    'float expf(float); float sinf(float); void k(float* o, const float* a, int n) { for (int i = 0; i < n; ++i) o[i] = expf(a[i]) + sinf(a[i]); }'
    'static const int t[8] = {3,1,4,1,5,9,2,6}; static int s[4]; int c; int k(int x) { s[x & 3] += t[x & 7]; return s[x & 3] + ++c; }'
    'int sw(int x, int y) { switch (x) { case 0: return y; case 1: return y*2; case 2: return y-3; case 3: return y^7; case 4: return y<<2; case 5: return -y; case 6: return y/3; default: return 0; } }'
    'extern int ext_data; extern void wmaybe(void) __attribute__((weak)); int g(void) { return ext_data + (wmaybe ? 1 : 0); }'
    'unsigned __int128 d(unsigned __int128 a, unsigned __int128 b) { return a / b; } _Float16 h(_Float16 a, _Float16 b) { return a * b; }'
    'static char big[8192] __attribute__((aligned(65536))); char* kernel(void) { return big; }'
  )
  for kernel in "${kernels[@]}"; do
    for pic in -fPIC -fno-pic; do
      for triple in "" "--target=aarch64-none-elf"; do
        out="$work/seeds/seed-$i.o"
        i=$((i + 1))
        local march=(-march=native)
        [[ -n "$triple" ]] && march=("$triple" -mno-global-merge)
        echo "$kernel" | "$cc" -c -x c -O2 -ffreestanding -fno-math-errno -fno-stack-protector -fcommon \
          "${march[@]}" "$pic" - -o "$out" 2>/dev/null || rm -f "$out"
      done
    done
  done
}
seed_packages() {  # packages of the examples, when a built svod can pack them
  local cli="${SVOD_CLI:-$root/build/release/svod}" plan
  if [[ ! -x "$cli" ]]; then
    echo "  no svod at $cli: no package seeds (build svod_cli or set SVOD_CLI)"
    return
  fi
  cp "$root"/tests/package/data/*.svodpkg "$work/seeds/"  # format version 1
  for plan in examples/features/plan.json examples/cross_device/plan.json tests/planfile/data/named_inputs.json; do
    SVOD_CACHE=0 "$cli" pack "$root/$plan" -o "$work/seeds/$(basename "$(dirname "$plan")").svodpkg" >/dev/null \
      || echo "  could not pack $plan (skipped)"
  done
}

# Each target: the runtime sources it needs beyond svod/base/error.cpp and
# dtype.cpp, how it is seeded, and libFuzzer's input size and memory limits.
plan_sources=(svod/planfile/plan_parse.cpp svod/planfile/plan_parse_program.cpp svod/planfile/plan_parse_ops.cpp
              svod/planfile/buffer_role_names.cpp svod/planfile/json_text.cpp svod/program/launch_layout.cpp svod/base/file_read.cpp svod/program/program_spec.cpp
              svod/program/expr.cpp svod/program/expr_parse.cpp svod/comm/reduce.cpp svod/base/json_depth.cpp)
max_len=65536
limits=(-rss_limit_mb=2048 -malloc_limit_mb=1024)
case "$target" in
  plan_file) sources=("${plan_sources[@]}"); seed="seed_json svod_plan" ;;
  tune_file) sources=("${plan_sources[@]}" svod/tune/tune_file.cpp); seed="seed_json svod_tune" ;;
  npy) sources=(svod/base/npy.cpp svod/base/file_read.cpp svod/base/file_write.cpp); seed=seed_npy ;;
  expr) sources=(svod/program/expr.cpp svod/program/expr_parse.cpp); seed=: ;;
  object_cache) sources=(svod/cache/object_cache.cpp svod/cache/cache_key.cpp svod/compile/compiler.cpp
                         svod/compile/artifact_store.cpp svod/compile/compile_policy.cpp svod/base/hash.cpp svod/base/env.cpp svod/base/log.cpp
                         svod/base/cpu_features.cpp svod/base/file_read.cpp svod/base/file_write.cpp)
                seed=: ;;
  elf_loader) sources=($(cd "$root" && echo svod/loader/*.cpp) svod/base/file_read.cpp); seed=seed_objects
              limits=(-rss_limit_mb=4096) ;;
  package) sources=(svod/package/package_format.cpp svod/base/hash.cpp svod/base/json_depth.cpp); seed=seed_packages
           max_len=262144; limits=(-rss_limit_mb=4096) ;;
  *)
    echo "usage: scripts/fuzz.sh $targets [seconds]" >&2
    exit 2
    ;;
esac
sources+=(svod/base/error.cpp svod/base/dtype.cpp "fuzz/fuzz_$target.cpp")

work="${SVOD_FUZZ_DIR:-$(mktemp -d -t "svod-fuzz-$target.XXXXXX")}"
mkdir -p "$work/corpus" "$work/seeds" "$work/obj"
if [[ -z "${SVOD_FUZZ_DIR:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
fi

cxx="${CXX_FUZZ:-clang++-19}"
launcher=(${CMAKE_CXX_COMPILER_LAUNCHER:-})
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -DFMT_SHARED
       -I "$root")

echo "building fuzz_$target in $work"
objects=()
pids=()
for source in "${sources[@]}"; do
  object="$work/obj/$(echo "$source" | tr / _).o"
  objects+=("$object")
  if [[ ! -f "$object" || "$root/$source" -nt "$object" ]]; then
    "${launcher[@]}" "$cxx" "${flags[@]}" -c "$root/$source" -o "$object" &
    pids+=($!)
    # Two compiles at a time.
    if ((${#pids[@]} >= 2)); then
      wait "${pids[0]}"
      pids=("${pids[@]:1}")
    fi
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cxx" "${flags[@]}" "${objects[@]}" -o "$work/fuzz_$target" -lfmt -ldl

echo "seeding"
$seed
shopt -s nullglob
kept=("$root/fuzz/seeds/$target"/* "$root/fuzz/regressions/$target"/*)
shopt -u nullglob
if ((${#kept[@]})); then cp "${kept[@]}" "$work/seeds/"; fi
echo "$(ls "$work/seeds" | wc -l) seeds"

echo "fuzzing fuzz_$target for ${seconds}s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$work/fuzz_$target" "$work/corpus" "$work/seeds" -max_total_time="$seconds" -max_len="$max_len" "${limits[@]}" \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1 || status=$?
grep -v '^"' "$work/fuzz.log" | tail -n 40
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: fuzz_$target failed (status $status); the input is in $work" >&2
  trap - EXIT
  exit "$status"
fi
echo "fuzz.sh: fuzz_$target: no crash in ${seconds}s"
