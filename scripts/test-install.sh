#!/usr/bin/env bash
# Installs svod the ways README.md's "Install" gives, from a built tree, and runs the examples
# from each installed copy, in a folder outside the source tree:
#  - pip: `pip install --no-build-isolation --no-index .` (setup.py, reusing BUILD's compiled
#    files through SVOD_CMAKE_BUILD_DIR) for Debian's python3, into the system
#    (--break-system-packages) and into a virtual environment: python3 imports svod with no
#    PYTHONPATH and runs kernels and examples/python scripts, and the environment's bin/svod
#    (/usr/local/bin/svod, venv/bin/svod) runs the example plans with the C++ command shipped
#    in the package (svod/svod, compiling with the llvm plugin beside it), and tinygrad runs on
#    DEV=SVOD with no import of svod (the package's svod_tinygrad.pth);
#  - the Debian package of `cpack -G DEB`, installed with dpkg -i (so its Depends must already
#    be met: nothing is downloaded): its libraries in the multiarch folder
#    (/usr/lib/x86_64-linux-gnu), found by ldd with no RPATH, the svod command on the example
#    plans, a C++ program built against the installed CMake package, the C example built with
#    pkg-config, python3 importing svod from /usr/lib/python3/dist-packages, and tinygrad on
#    DEV=SVOD with no import of svod.
# tinygrad comes from the checkout SVOD_TINYGRAD_DIR (default: shared/tinygrad beside the source
# folder); without one the DEV=SVOD checks are skipped, saying so.
# (`cmake --install` into a prefix is tested by ctest: install_consumer, capi_consumer_*,
# tests/python/test_install.py.)
#
#   bash scripts/test-install.sh [BUILD]     BUILD: a built Release tree (default build/release)
#
# Needs root (dpkg). Everything it installs it removes again (pip uninstall, dpkg --purge), also
# when a step fails, and it refuses to start where svod is installed already, so the machine is
# left as it was found.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-build/release}" && pwd)
python=/usr/bin/python3
tinygrad=${SVOD_TINYGRAD_DIR:-$src/../shared/tinygrad}
export SVOD_CACHE=0  # compile every time, and leave ~/.cache/svod alone
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH PYTHONHOME

fail() { echo "test-install: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (pip into the system, dpkg -i)"
[ -x "$build/svod" ] || fail "$build is not a built tree (no $build/svod)"
if dpkg-query -W -f='${Status}' svod 2>/dev/null | grep -q 'ok installed'; then
  fail "the Debian package svod is installed already: remove it first (dpkg -r svod)"
fi
work=$(mktemp -d /tmp/svod-test-install.XXXXXX)
if found=$(cd "$work" && "$python" -c 'import svod; print(svod.__file__)' 2>/dev/null); then
  rm -rf "$work"
  fail "$python imports svod from $found already: uninstall it first"
fi
scripts=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')  # pip's bin/ (/usr/local/bin)
if [ -e "$scripts/svod" ]; then
  rm -rf "$work"
  fail "$scripts/svod is there already: remove it first"
fi
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch  # where the Debian package's libraries go

# setuptools' own byproducts in the source tree, removed at the end unless they were there before.
byproducts() {
  local f
  for f in "$src"/build/lib.linux-* "$src"/build/bdist.linux-* "$src"/build/temp.linux-* "$src"/build/*.egg-info \
           "$src"/*.egg-info; do
    [ ! -e "$f" ] || printf '%s\n' "$f"
  done
}
byproducts_before=$(byproducts)
pip_system=0
deb_installed=0
cleanup() {
  local rc=$?
  set +e
  if [ $pip_system = 1 ]; then "$python" -m pip uninstall -y -q --break-system-packages svod; fi
  if [ $deb_installed = 1 ]; then dpkg --purge svod >/dev/null; fi
  byproducts | while read -r f; do
    grep -qxF "$f" <<<"$byproducts_before" || rm -rf "$f"
  done
  rm -rf "$work"
  [ $rc = 0 ] && echo "test-install: all passed (${SECONDS}s)" || echo "test-install: FAILED (status $rc)" >&2
}
trap cleanup EXIT

step() { echo "== test-install (${SECONDS}s): $*"; }

# Runs as the installed package's user would, from $work: python3 imports svod from under
# PREFIX (the first argument), compiles with the llvm plugin, and runs the MLP plan.
check_python() {
  local interpreter=$1 prefix=$2
  (cd "$work" && SVOD_CPU_COMPILER=llvm "$interpreter" - "$prefix" "$src" <<'EOF'
import os, sys
import numpy as np
import svod
prefix, src = sys.argv[1], sys.argv[2]
assert svod.__file__.startswith(prefix), (svod.__file__, prefix)
assert not svod.__file__.startswith(src), svod.__file__
k = svod.device("CPU").compile(source="void k(int* o) { o[0] = 42; }", entry="k",
                               buffers=[{"name": "o", "access": "write"}])
o = np.zeros(1, np.int32)
k(o)
assert o[0] == 42
mlp = os.path.join(src, "examples", "mlp")
probs = svod.load_plan(os.path.join(mlp, "plan.json")).run(x=np.load(os.path.join(mlp, "x.npy")), check=True)["probs"]
assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)
print("test-install: svod", svod.__version__, "from", os.path.dirname(svod.__file__))
EOF
  )
  for example in kernels_on_numpy.py mlp_plan.py; do
    (cd "$work" && "$interpreter" "$src/examples/python/$example" >/dev/null)
  done
}

# tinygrad (from its checkout) on DEV=SVOD with no import of svod: the installation's
# svod_tinygrad.pth in the interpreter's site folder makes tinygrad's import of
# tinygrad.runtime.ops_svod load svod.tinygrad from under PREFIX (the second argument).
check_tinygrad() {
  local interpreter=$1 prefix=$2
  if [ ! -f "$tinygrad/tinygrad/__init__.py" ]; then
    echo "test-install: no tinygrad at $tinygrad (SVOD_TINYGRAD_DIR): DEV=SVOD not tried"
    return
  fi
  # (PYTHONDONTWRITEBYTECODE: the checkout may be read-only.)
  (cd "$work" && DEV=SVOD PYTHONPATH=$tinygrad PYTHONDONTWRITEBYTECODE=1 "$interpreter" - "$prefix" <<'EOF'
import sys
from tinygrad import Device, Tensor
assert Device.DEFAULT == "SVOD", Device.DEFAULT
assert (Tensor([1., 2.]) + 1).numpy().tolist() == [2., 3.]
import svod.tinygrad
assert sys.modules["tinygrad.runtime.ops_svod"] is svod.tinygrad
assert svod.tinygrad.__file__.startswith(sys.argv[1]), (svod.tinygrad.__file__, sys.argv[1])
print("test-install: tinygrad runs on DEV=SVOD with no import of svod")
EOF
  )
}

# ldd finds FILE's libsvod_runtime.so.0 in FOLDER (through /lib -> /usr/lib: realpath).
loads_runtime() {
  local file=$1 folder=$2 found
  found=$(ldd "$file" | awk '$1 == "libsvod_runtime.so.0" { print $3 }')
  [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$folder/libsvod_runtime.so.0")" ] ||
    fail "$file loads libsvod_runtime.so.0 from '$found', not from $folder"
}

# The launcher LAUNCHER (`svod`) opens the command's library libsvod_command.so from FOLDER.
opens_command() {
  local launcher=$1 folder=$2 found
  found=$(cd "$work" && LD_DEBUG=files "$launcher" info 2>&1 >/dev/null |
          grep -o 'calling init: [^ ]*libsvod_command\.so' | head -1 | cut -d' ' -f3)
  [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$folder/libsvod_command.so")" ] ||
    fail "$launcher opens libsvod_command.so from '$found', not from $folder"
}

# The environment's svod command COMMAND (pip's console script) runs the package's own
# svod/svod (PACKAGE/svod) from $work: that launcher opens the command's library beside it,
# which finds libsvod_runtime beside it, the llvm plugin is found beside the runtime
# (SVOD_CPU_COMPILER=llvm fails without it), the example plans run, and the exit status is the
# binary's. A copy of the launcher without the library beside it says so.
check_command() {
  local command=$1 package=$2 rc_command rc_binary rc_lonely
  [ -x "$command" ] || fail "no $command"
  [ -x "$package/svod" ] || fail "no $package/svod"
  if ldd "$package/svod" "$package/libsvod_command.so" | grep 'not found'; then fail "$package/svod misses a library"; fi
  loads_runtime "$package/libsvod_command.so" "$package"
  opens_command "$package/svod" "$package"
  [ "$(cd "$work" && "$command" --version)" = "$("$package/svod" --version)" ] || fail "$command --version differs"
  (cd "$work" && "$command" info) | grep -qF "$package/libsvod_llvm.so" ||
    fail "$command info names no llvm plugin in $package"
  (cd "$work" && SVOD_CPU_COMPILER=llvm "$command" run "$src/examples/mlp/plan.json" >/dev/null)
  (cd "$work" && SVOD_CPU_COMPILER=llvm "$command" run "$src/examples/features/plan.json" >/dev/null)
  (cd "$work" && "$command" run --ranks 2 "$src/examples/data_parallel/plan.json" >/dev/null)
  rc_command=0; (cd "$work" && "$command" run "$work/no-such-plan.json" 2>/dev/null) || rc_command=$?
  rc_binary=0; (cd "$work" && "$package/svod" run "$work/no-such-plan.json" 2>/dev/null) || rc_binary=$?
  [ "$rc_command" != 0 ] && [ "$rc_command" = "$rc_binary" ] ||
    fail "$command exited $rc_command on a missing plan, $package/svod $rc_binary"
  mkdir -p "$work/lonely"
  cp "$package/svod" "$work/lonely/svod"
  rc_lonely=0; "$work/lonely/svod" info 2>"$work/lonely/err" || rc_lonely=$?
  [ "$rc_lonely" = 127 ] && grep -qF "cannot open the svod command's library: libsvod_command.so" "$work/lonely/err" ||
    fail "svod without libsvod_command.so beside it exited $rc_lonely: $(cat "$work/lonely/err")"
  "$work/lonely/svod" --version | grep -q '^svod ' || fail "svod --version needs libsvod_command.so"
  rm -rf "$work/lonely"
  echo "test-install: $command runs $package/svod"
}

step "pip install --break-system-packages for $python (build reused from $build)"
SVOD_CMAKE_BUILD_DIR=$build "$python" -m pip install -q --no-build-isolation --no-index --break-system-packages "$src"
pip_system=1
site=$("$python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
check_python "$python" "$site/svod"
check_tinygrad "$python" "$site/svod"
ls "$site"/svod/libsvod_runtime.so.* "$site"/svod/libsvod_llvm.so "$site"/svod/svod-sandbox-helper >/dev/null
check_command "$scripts/svod" "$site/svod"
"$python" -m pip uninstall -y -q --break-system-packages svod
pip_system=0
[ ! -e "$site/svod" ] || fail "pip uninstall left $site/svod"
[ ! -e "$scripts/svod" ] || fail "pip uninstall left $scripts/svod"
for f in _svod_cli.py _svod_tinygrad_hook.py svod_tinygrad.pth; do
  [ ! -e "$site/$f" ] || fail "pip uninstall left $site/$f"
done

step "pip install into a virtual environment (--system-site-packages: Debian's numpy)"
"$python" -m venv --without-pip --system-site-packages "$work/venv"
SVOD_CMAKE_BUILD_DIR=$build "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-index "$src"
check_python "$work/venv/bin/python" "$work/venv/lib"
check_tinygrad "$work/venv/bin/python" "$work/venv/lib"
for f in share/man/man1/svod.1 share/doc/svod/LICENSE share/doc/svod/PLAN_FORMAT.md; do
  [ -f "$work/venv/$f" ] || fail "pip install put no $f into the virtual environment"
done
meta=$("$work/venv/bin/python" -m pip show svod)
for field in "License: MIT" "Author: the svod developers"; do
  grep -qxF "$field" <<<"$meta" || fail "pip show svod lacks \"$field\": $meta"
done
venv_site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
check_command "$work/venv/bin/svod" "$venv_site/svod"

step "cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/deb/svod_*.deb)
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends
step "dpkg -i $(basename "$deb")"
deb_installed=1
dpkg -i "$deb" >/dev/null
[ "$(command -v svod)" = /usr/bin/svod ] || fail "svod on PATH is $(command -v svod), not /usr/bin/svod"
step "the package's libraries in $libdir, found with no RPATH"
extension=$(ls /usr/lib/python3/dist-packages/svod/_svod*.so)
for f in "$libdir/libsvod_runtime.so.0" "$libdir/libsvod_c.so.1" "$libdir/libsvod_c.so" "$libdir/libsvod_llvm.so" \
         "$libdir/libsvod_command.so" "$libdir/svod-sandbox-helper" "$libdir/cmake/svod/svodConfig.cmake" "$libdir/cmake/svod/svodTargets.cmake" "$libdir/pkgconfig/svod.pc"; do
  dpkg -L svod | grep -qxF "$f" || fail "dpkg -L svod does not list $f"
done
for f in /usr/share/man/man1/svod.1 /usr/share/doc/svod/copyright /usr/share/doc/svod/README.md \
         /usr/share/doc/svod/PLAN_FORMAT.md; do
  dpkg -L svod | grep -qxF "$f" || fail "dpkg -L svod does not list $f"
done
if dpkg -L svod | grep -E '^/usr/lib/(libsvod|cmake|pkgconfig)'; then
  fail "the package puts the above into /usr/lib, not $libdir"
fi
if ldd /usr/bin/svod "$libdir/libsvod_command.so" "$libdir/libsvod_c.so.1" "$libdir/libsvod_llvm.so" "$extension" |
   grep 'not found'; then
  fail "the installed libraries miss a dependency"
fi
for f in "$libdir/libsvod_command.so" "$libdir/libsvod_c.so.1" "$extension"; do
  loads_runtime "$f" "$libdir"
done
for f in /usr/bin/svod "$libdir/libsvod_command.so" "$libdir/libsvod_c.so.1" "$extension"; do
  if readelf -d "$f" | grep -E 'RPATH|RUNPATH'; then fail "$f has an RPATH"; fi
done
opens_command /usr/bin/svod "$libdir"
[ "$(realpath -m "$(pkg-config --variable=libdir svod)")" = "$libdir" ] ||
  fail "pkg-config's libdir for svod is $(pkg-config --variable=libdir svod), not $libdir"

step "the installed svod command on the example plans"
cd "$work"
svod --version
svod info | grep -qF "lib/$multiarch/libsvod_llvm.so" || fail "svod info names no llvm plugin in $libdir"
SVOD_CPU_COMPILER=llvm svod run "$src/examples/mlp/plan.json" >/dev/null
svod run "$src/examples/features/plan.json" >/dev/null
svod run --ranks 2 "$src/examples/data_parallel/plan.json" --repeat 2 >/dev/null
svod sandbox-info | grep -qF "helper $libdir/svod-sandbox-helper" || fail "svod sandbox-info finds no helper in $libdir"
svod run --sandbox "$src/examples/mlp/plan.json" >/dev/null

step "a C++ program built against the installed CMake package (examples/consumer)"
cmake -S "$src/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
grep -qx "svod_DIR:PATH=$libdir/cmake/svod" "$work/consumer/CMakeCache.txt" || fail "find_package(svod) did not find $libdir/cmake/svod"
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"

step "the C example built with pkg-config (examples/c)"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror "$src/examples/c/main.c" $(pkg-config --cflags --libs svod) -lm -o "$work/c_example"
"$work/c_example" "$src/examples/mlp/plan.json" >/dev/null

step "python3 imports the installed package"
check_python "$python" /usr/lib/python3/dist-packages/svod
check_tinygrad "$python" /usr/lib/python3/dist-packages/svod
"$python" -c "import _svod_tinygrad_hook"  # byte code in dist-packages/__pycache__, for the prerm to remove

step "dpkg --purge svod"
dpkg --purge svod >/dev/null
deb_installed=0
for p in /usr/bin/svod "$libdir/libsvod_command.so" "$libdir/libsvod_runtime.so.0" "$libdir/cmake/svod" "$libdir/pkgconfig/svod.pc" \
         /usr/lib/python3/dist-packages/svod /usr/lib/python3/dist-packages/svod_tinygrad.pth \
         /usr/lib/python3/dist-packages/_svod_tinygrad_hook.py /usr/lib/python3/dist-packages/__pycache__/_svod_tinygrad_hook.*; do
  [ ! -e "$p" ] || fail "dpkg --purge left $p"
done
