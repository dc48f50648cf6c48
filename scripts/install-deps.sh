#!/usr/bin/env bash
# Installs every Debian package svod needs to build, test and benchmark.
# Idempotent: packages already present are left alone; safe to run repeatedly.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  ccache  # .ci/run compiles through it, its cache outside the clone (README "Development")
  clang-19 llvm-19 llvm-19-dev llvm-19-tools lld-19 libclang-rt-19-dev
  libclang-cpp19-dev libclang-19-dev
  libzstd-dev  # LLVM's static archives (libsvod_llvm.so links them) call zstd
  libtbb-dev libfmt-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libsodium-dev  # Ed25519 package signatures (svod/package/signature.cpp)
  libseccomp-dev  # the sandbox helper's system-call filter (tools/sandbox_helper/)
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd
  python3-numpy python3-dev python3-pytest pybind11-dev libdlpack-dev
  python3-setuptools python3-wheel python3-pip python3-venv  # pip install . (setup.py; scripts/test-install.sh)
  file  # cpack -G DEB runs it on every file to find the binaries for dpkg-shlibdeps
  python3-torch  # what tinygrad's operator tests compare against (tests/python/test_tinygrad_ops.py)
  librsvg2-bin  # rsvg-convert: the roofline test renders `svod bench --plot` (tests/tune/svod_bench_roofline_test.cpp)
  libopenmpi-dev openmpi-bin
  g++-aarch64-linux-gnu qemu-user  # the AArch64 trap trampoline, built and run alone (tests/cpu/trampoline/)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
