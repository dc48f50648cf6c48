#!/usr/bin/env bash
# The CUDA checks on a GPU machine: configures a release build (tests and
# benchmarks on, the Python package off: the GPU machine may lack pybind11),
# builds only the svod CLI, the CUDA, device and comm test binaries and the CUDA
# benchmark, then runs the CUDA tests (NCCL's on the GPU included), the device
# conformance suite on CUDA:0, NCCL's checks that need no GPU and the
# benchmark, and prints everything.
# Needs no network. Exits non-zero when the build or a test fails, or when
# nvidia-smi lists a GPU but every GPU test skipped (the device did not open).
#
#   scripts/gpu-check.sh [BUILD_DIR]     (default build/gpu-check)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/gpu-check}
jobs=$(nproc)
start=$SECONDS

section() { printf '\n==== %s (%ds)\n' "$1" $((SECONDS - start)); }

section "machine"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || true
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
else
  echo "nvidia-smi: not installed"
fi
echo "GPUs listed by nvidia-smi: $gpus"
ls -d /usr/local/cuda* 2>/dev/null || echo "no /usr/local/cuda*"

section "configure"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSVOD_BUILD_TESTS=ON -DSVOD_BUILD_BENCH=ON \
  -DSVOD_BUILD_PYTHON=OFF

section "build"
cmake --build "$build" -j "$jobs" --target svod_cli svod_test_cuda svod_test_device svod_test_comm cuda_bench

section "svod info"
"$build/svod" info

section "CUDA tests"
log="$build/cuda-tests.log"
status=0
# One process for the whole suite (the NcclGpu tests, tests/cuda/nccl_gpu_test.cpp,
# included); its object cache stays in the build tree.
SVOD_CACHE_DIR="$build/test-object-cache" timeout 300 "$build/tests/svod_test_cuda" 2>&1 | tee "$log" || status=$?
# The device conformance suite's CUDA:0 instances (the same checks CPU and CL:0 pass).
SVOD_CACHE_DIR="$build/test-object-cache" timeout 300 "$build/tests/svod_test_device" --gtest_filter='*/CUDA0' 2>&1 \
  | tee -a "$log" || status=$?
gpu_ran=$(grep -cE '^\[       OK \] (Cuda\.|NcclGpu\.|.*/CUDA0)' "$log" || true)
# Count the per-test lines (they end in the test's time), not gtest's summary list.
gpu_failed=$(grep -cE '^\[  FAILED  \] (Cuda\.|NcclGpu\.|.*/CUDA0).* \([0-9]+ ms\)$' "$log" || true)
gpu_skipped=$(grep -cE '^\[  SKIPPED \] (Cuda\.|NcclGpu\.|.*/CUDA0).* \([0-9]+ ms\)$' "$log" || true)
echo "GPU tests: $gpu_ran passed, $gpu_failed failed, $gpu_skipped skipped"

section "NCCL checks without a GPU"
# The library, the unique-id exchange, the dtype mapping (tests/comm/nccl_test.cpp).
timeout 120 "$build/tests/svod_test_comm" --gtest_filter='Nccl*:CommunicatorNativeHook.*' || status=$?

section "CUDA benchmark"
timeout 240 "$build/bench/cuda_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true || status=$?

section "result"
if [ "$status" -ne 0 ]; then
  echo "FAILED: a test or the benchmark failed (exit status $status)"
  exit "$status"
fi
if [ "$gpus" -gt 0 ] && [ "$gpu_ran" -eq 0 ]; then
  echo "FAILED: nvidia-smi lists $gpus GPU(s) but no GPU test ran (all skipped: the CUDA device did not open; see above)"
  exit 1
fi
echo "OK: $gpu_ran GPU tests passed in $((SECONDS - start))s"
