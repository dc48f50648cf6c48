"""Builds the Python package svod with CMake, for `pip install .` (pyproject.toml).

setuptools copies the Python files of python/svod (every module there), python/_svod_cli.py and
python/_svod_tinygrad_hook.py; build_py adds python/svod_tinygrad.pth beside the last two, at the
top of the wheel (the installed .pth file lets tinygrad find the device SVOD with nothing but
DEV=SVOD: _svod_tinygrad_hook.py says how); build_ext configures and builds the CMake target
svod_python_wheel (the extension svod._svod, libsvod_runtime, its plugins and the svod command)
and installs the CMake component svod_wheel into the wheel, which puts them side by side in
svod/: the command's launcher (svod/svod) finds its library libsvod_command.so there, that
library and the extension find the runtime beside them (RPATH $ORIGIN), and the runtime its
plugins beside itself, so the installed package needs no PYTHONPATH or LD_LIBRARY_PATH and works
from any folder. pip makes the console script <environment>/bin/svod (pyproject.toml), which
execs svod/svod.

Environment:
  SVOD_CMAKE_BUILD_DIR  a CMake build folder to build in (relative to this folder), e.g. an
                        existing build/release, so nothing is compiled twice; it must be a
                        build of this source tree (its CMakeCache.txt's svod_SOURCE_DIR, else
                        CMAKE_HOME_DIRECTORY, is this folder, links resolved: another tree's
                        build is refused) and build the extension for the interpreter running
                        pip (SVOD_PYTHON). Default: build/pip, configured here as a Release
                        build without tests.
  CMAKE_ARGS            more arguments for configuring (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CMAKE_BUILD_PARALLEL_LEVEL  parallel build jobs (CMake's own variable)
"""
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def project_version() -> str:
    found = re.search(r"project\(svod\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not found:
        raise RuntimeError("CMakeLists.txt: no project(svod VERSION ...)")
    return found.group(1)


def cache_value(cache: Path, name: str):
    for line in cache.read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return None


def same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def source_tree_of(cache: Path):
    """The source tree a CMake build folder builds: svod's own source folder (svod_SOURCE_DIR, right
    also when svod is a subproject of another), else the top of the configured tree
    (CMAKE_HOME_DIRECTORY); None when the cache names neither."""
    return cache_value(cache, "svod_SOURCE_DIR") or cache_value(cache, "CMAKE_HOME_DIRECTORY")


def check_build_dir_source(build_dir: Path, cache: Path) -> None:
    """Refuses a build folder configured from another source tree than this one: its libraries
    would go into a wheel with this tree's Python files (a wheel of two trees)."""
    tree = source_tree_of(cache)
    if tree is None:
        raise RuntimeError(f"svod: {cache} names no source folder (neither svod_SOURCE_DIR nor "
                           "CMAKE_HOME_DIRECTORY): it is not a CMake build of svod; unset SVOD_CMAKE_BUILD_DIR "
                           "or point it at a build of this tree")
    if not same_file(tree, str(ROOT)):
        raise RuntimeError(f"svod: SVOD_CMAKE_BUILD_DIR={build_dir} is a build of {os.path.realpath(tree)}, not of "
                           f"{ROOT} (this setup.py's tree): a wheel of it would mix the two trees; point "
                           "SVOD_CMAKE_BUILD_DIR at a build folder of this tree, or unset it to build in build/pip")


class BuildPy(build_py):
    """setuptools' build_py, and svod_tinygrad.pth into the wheel's top folder (setuptools installs
    modules and package data, never a .pth file of its own accord)."""
    PTH = "svod_tinygrad.pth"

    def run(self):
        super().run()
        self.copy_file(str(ROOT / "python" / self.PTH), os.path.join(self.build_lib, self.PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, self.PTH)]


class CMakeBuild(build_ext):
    def run(self):  # no compiler of setuptools' own is needed
        for ext in self.extensions:
            self.build_extension(ext)

    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("svod: cmake is not on PATH (run scripts/install-deps.sh)")
        requested = os.environ.get("SVOD_CMAKE_BUILD_DIR")
        build_dir = (ROOT / requested) if requested else ROOT / "build" / "pip"
        cache = build_dir / "CMakeCache.txt"
        extra_args = shlex.split(os.environ.get("CMAKE_ARGS", ""))
        if cache.exists() and not requested:
            tree = source_tree_of(cache)
            if tree is not None and not same_file(tree, str(ROOT)):
                cache.unlink()  # our own folder, moved here with a copy of the tree: configure it again
        if cache.exists():
            if requested:
                check_build_dir_source(build_dir, cache)
            python = cache_value(cache, "SVOD_PYTHON")
            if cache_value(cache, "SVOD_BUILD_PYTHON") in ("OFF", "0", "FALSE", "NO"):
                raise RuntimeError(f"svod: {build_dir} is configured with SVOD_BUILD_PYTHON=OFF")
            if python is None or not same_file(python, sys.executable):
                if requested:
                    raise RuntimeError(f"svod: {build_dir} builds the extension for {python} (SVOD_PYTHON), "
                                       f"not for {sys.executable}, which runs pip: use that interpreter, "
                                       "or unset SVOD_CMAKE_BUILD_DIR")
                cache.unlink()  # our own folder, configured for another interpreter: start again
        if not cache.exists() or (extra_args and not requested):
            generator = ["-G", "Ninja"] if shutil.which("ninja") and not cache.exists() else []
            self.spawn([cmake, "-S", str(ROOT), "-B", str(build_dir), *generator,
                        "-DCMAKE_BUILD_TYPE=Release", "-DSVOD_BUILD_TESTS=OFF", "-DSVOD_BUILD_BENCH=OFF",
                        "-DSVOD_BUILD_PYTHON=ON", f"-DSVOD_PYTHON={sys.executable}", *extra_args])
        build = [cmake, "--build", str(build_dir), "--target", "svod_python_wheel"]
        if self.parallel:
            build += ["--parallel", str(self.parallel)]
        self.spawn(build)

        # The extension's folder in the wheel's tree (or python/svod for --inplace).
        extension = Path(self.get_ext_fullpath(ext.name)).resolve()
        package = extension.parent
        package.mkdir(parents=True, exist_ok=True)
        for old in [*package.glob("_svod*.so"), *package.glob("libsvod_*.so*"), *package.glob("svod")]:
            old.unlink()  # what an earlier build left
        self.spawn([cmake, "--install", str(build_dir), "--component", "svod_wheel", "--prefix", str(package.parent),
                    "--strip"])
        # A wheel holds files, not links: libsvod_runtime.so.0 (the name the extension asks for)
        # becomes the library itself.
        for link in [p for p in package.iterdir() if p.is_symlink()]:
            target = link.resolve()
            link.unlink()
            if target.parent == package:
                target.rename(link)
            else:
                shutil.copy2(target, link)
        if not extension.exists():
            built = sorted(p.name for p in package.glob("_svod*"))
            raise RuntimeError(f"svod: CMake built {built}, not {extension.name}: the build folder {build_dir} "
                               f"was configured for another Python than {sys.executable}")
        for command in ("svod", "libsvod_command.so"):  # the launcher and the command it opens
            if not (package / command).is_file():
                raise RuntimeError(f"svod: `cmake --install {build_dir} --component svod_wheel` put no {command} "
                                   f"into {package}")
        # The manual page the build made from the command's help, for data_files below.
        WHEEL_DATA.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build_dir / "tools" / "svod" / "svod.1", WHEEL_DATA / "svod.1")


# What the wheel puts under the environment's share/, as the Debian package does under /usr/share:
# the manual page (made by the build: build_ext copies it here) and the licence, the README and the
# documents the command's help points at.
WHEEL_DATA = ROOT / "build" / "wheel-data"
DOCS = ["LICENSE", "README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

# setuptools' egg-info goes with its other byproducts under build/ (ignored by git), not beside this file.
(ROOT / "build").mkdir(exist_ok=True)
setup(
    options={"egg_info": {"egg_base": str(ROOT / "build")}},
    version=project_version(),
    ext_modules=[Extension("svod._svod", sources=[])],
    cmdclass={"build_py": BuildPy, "build_ext": CMakeBuild},
    data_files=[("share/man/man1", [str(WHEEL_DATA / "svod.1")]), ("share/doc/svod", DOCS)],
    zip_safe=False,
)
