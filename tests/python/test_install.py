"""`cmake --install` puts an importable svod package where the interpreter looks under the prefix,
and with it the .pth file through which tinygrad finds the device SVOD with nothing but DEV=SVOD.

(scripts/test-install.sh, run by CI, installs with pip and as a Debian package.)
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

BINARY_DIR = os.environ.get("SVOD_BINARY_DIR")
REPO = pathlib.Path(__file__).resolve().parents[2]
SITE_SCRIPT = REPO / "cmake" / "svod_python_site.py"
# A tinygrad checkout (tests/python/test_tinygrad_ops.py says which).
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
HAS_TINYGRAD = (TINYGRAD_DIR / "tinygrad" / "__init__.py").is_file()
VERSION = "python%d.%d" % sys.version_info[:2]

CHECK = (
    "import numpy as np, svod\n"
    "assert svod.__file__.startswith(%r), svod.__file__\n"
    "p = svod.device('CPU').compile(source='void k(int* o) { o[0] = 42; }', entry='k',\n"
    "                               buffers=[{'name': 'o', 'access': 'write'}])\n"
    "o = np.zeros(1, np.int32); p(o); assert o[0] == 42\n")

# tinygrad on DEV=SVOD with no import of svod: the interpreter's site folder has svod_tinygrad.pth,
# whose finder makes tinygrad's import of tinygrad.runtime.ops_svod load svod.tinygrad from the
# installed package (%r: its folder).
DEV_SVOD_CHECK = (
    "import sys\n"
    "from tinygrad import Device, Tensor\n"
    "assert Device.DEFAULT == 'SVOD', Device.DEFAULT\n"
    "assert (Tensor([1., 2.]) + 1).numpy().tolist() == [2., 3.]\n"
    "import svod.tinygrad\n"
    "assert sys.modules['tinygrad.runtime.ops_svod'] is svod.tinygrad\n"
    "assert svod.tinygrad.__file__.startswith(%r), svod.tinygrad.__file__\n")

# An interpreter with the .pth file: the finder is in sys.meta_path, and imports of missing modules
# fail as ever (tinygrad's device module too where tinygrad is absent).
STARTUP_CHECK = (
    "import importlib.util, sys\n"
    "assert [f for f in sys.meta_path if type(f) is type and f.__name__ == 'SvodTinygradFinder'], sys.meta_path\n"
    "names = ['no_such_module_anywhere', 'json.no_such_module']\n"
    "if importlib.util.find_spec('tinygrad') is None: names.append('tinygrad.runtime.ops_svod')\n"
    "for name in names:\n"
    "    try: __import__(name)\n"
    "    except ModuleNotFoundError: pass\n"
    "    else: raise AssertionError(name)\n")


def site_folder(prefix):
    result = subprocess.run([sys.executable, "-I", str(SITE_SCRIPT), str(prefix)], check=True, capture_output=True,
                            text=True, timeout=60)
    return result.stdout.strip()


def without_pythonpath():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def test_site_folder_is_one_the_interpreter_looks_in():
    # This interpreter's own prefix: Debian's /usr gives lib/python3/dist-packages, a virtual
    # environment its lib/python3.X/site-packages; either way a folder on sys.path.
    folder = os.path.join(sys.prefix, site_folder(sys.prefix))
    assert folder in [os.path.normpath(p) for p in sys.path], (folder, sys.path)


def test_site_folder_for_a_prefix_never_looked_in(tmp_path):
    assert site_folder(tmp_path / "prefix") == os.path.join("lib", VERSION, "site-packages")


@pytest.mark.skipif("/usr/local/lib/%s/dist-packages" % VERSION not in sys.path, reason="not Debian's interpreter")
def test_site_folder_debian_local():
    assert site_folder("/usr/local") == os.path.join("lib", VERSION, "dist-packages")
    assert site_folder("/usr") == os.path.join("lib", "python3", "dist-packages")


@pytest.mark.skipif(not BINARY_DIR, reason="needs SVOD_BINARY_DIR (set when ctest runs these tests)")
def test_installed_into_a_prefix_never_looked_in_imports_with_pythonpath(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BINARY_DIR, "--prefix", str(prefix)], check=True, capture_output=True,
                   timeout=300)
    site = prefix / "lib" / VERSION / "site-packages"
    assert (site / "svod" / "__init__.py").exists(), list(prefix.rglob("svod"))
    assert list(site.glob("svod/_svod*.so")) and (site / "svod" / "__init__.pyi").exists()
    # Every module of python/svod is installed.
    modules = {p.name for p in (SITE_SCRIPT.parents[1] / "python" / "svod").glob("*.py")}
    assert modules <= {p.name for p in (site / "svod").glob("*.py")}
    # So is the .pth file for tinygrad, though Python runs none in a PYTHONPATH folder.
    assert (site / "svod_tinygrad.pth").is_file() and (site / "_svod_tinygrad_hook.py").is_file()
    # The manual page, the licence and the documents the command's help points at.
    assert (prefix / "share" / "man" / "man1" / "svod.1").read_text().startswith(".\\\" Made by")
    docs = prefix / "share" / "doc" / "svod"
    for name in ("LICENSE", "copyright", "README.md", "PLAN_FORMAT.md", "TUNE_FORMAT.md", "SECURITY.md"):
        assert (docs / name).is_file(), name
    env = without_pythonpath()
    env["PYTHONPATH"] = str(site)
    result = subprocess.run([sys.executable, "-c", CHECK % str(site)], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # The command: <prefix>/bin/svod opens <prefix>/lib/libsvod_command.so (its RUNPATH
    # $ORIGIN/../lib), which runs a plan with the runtime beside it.
    plan = SITE_SCRIPT.parents[1] / "examples" / "mlp" / "plan.json"
    env = dict(without_pythonpath(), LD_DEBUG="files", SVOD_CACHE="0")
    result = subprocess.run([str(prefix / "bin" / "svod"), "run", str(plan)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = {os.path.realpath(path) for path in re.findall(r"calling init: (\S+)", result.stderr)}
    for library in ("libsvod_command.so", "libsvod_runtime.so.0"):
        assert os.path.realpath(prefix / "lib" / library) in loaded, (library, loaded)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A virtual environment (seeing Debian's numpy) that BINARY_DIR is installed into with
    `cmake --install`: (its interpreter, its site folder)."""
    if not BINARY_DIR:
        pytest.skip("needs SVOD_BINARY_DIR (set when ctest runs these tests)")
    venv = tmp_path_factory.mktemp("install") / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip("no venv module: %s" % made.stderr.strip())
    python = venv / "bin" / "python"
    subprocess.run(["cmake", "--install", BINARY_DIR, "--prefix", str(venv)], check=True, capture_output=True,
                   timeout=300)
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                                       check=True, capture_output=True, text=True).stdout.strip())
    return python, site


def test_installed_into_a_virtual_environment_imports_without_pythonpath(venv, tmp_path):
    # The environment's interpreter looks in <venv>/lib/python3.X/site-packages, and the
    # installed extension finds <venv>/lib/libsvod_runtime.so through its RPATH.
    python, site = venv
    assert list(site.glob("svod/_svod*.so")), list(site.parents[2].rglob("_svod*"))
    result = subprocess.run([str(python), "-c", CHECK % str(site)], env=without_pythonpath(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(not HAS_TINYGRAD, reason=f"tinygrad is not at {TINYGRAD_DIR} (SVOD_TINYGRAD_DIR)")
def test_installed_tinygrad_finds_svod_with_nothing_but_dev_svod(venv, tmp_path):
    python, site = venv
    assert (site / "svod_tinygrad.pth").is_file() and (site / "_svod_tinygrad_hook.py").is_file()
    # tinygrad from its checkout (read-only: no byte code written there), svod from the
    # environment; the program imports only tinygrad.
    env = dict(without_pythonpath(), PYTHONPATH=str(TINYGRAD_DIR), PYTHONDONTWRITEBYTECODE="1", DEV="SVOD")
    env.pop("DEBUG", None)
    result = subprocess.run([str(python), "-c", DEV_SVOD_CHECK % str(site / "svod")], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_installed_pth_file_costs_no_import_at_start(venv, tmp_path):
    python, _ = venv
    env = dict(without_pythonpath(), PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run([str(python), "-c", STARTUP_CHECK], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # A program that never uses tinygrad imports nothing of svod, numpy or tinygrad, nor the
    # finder's module (-X importtime lists every import, found or not).
    result = subprocess.run([str(python), "-X", "importtime", "-c", "pass"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "site" in imported, result.stderr
    loaded = sorted(m for m in imported if m.split(".")[0] in ("svod", "_svod_tinygrad_hook", "numpy", "tinygrad"))
    assert not loaded, loaded


# setup.py builds the wheel in SVOD_CMAKE_BUILD_DIR when given; a build folder of another source
# tree would put that tree's libraries beside this tree's Python files, so it is refused before
# anything is built. A CMakeCache.txt is all setup.py reads of it.
def fake_build_dir(folder, source_tree, build_python="ON"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\n"
        f"CMAKE_HOME_DIRECTORY:INTERNAL={source_tree}\n"
        f"svod_SOURCE_DIR:STATIC={source_tree}\n"
        f"SVOD_PYTHON:FILEPATH={sys.executable}\n"
        f"SVOD_BUILD_PYTHON:BOOL={build_python}\n")
    return folder


def setup_build_ext(build_dir):
    env = dict(without_pythonpath(), SVOD_CMAKE_BUILD_DIR=str(build_dir))
    return subprocess.run([sys.executable, str(REPO / "setup.py"), "build_ext", "--build-temp",
                           str(build_dir / "temp"), "--build-lib", str(build_dir / "lib")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_setup_refuses_a_build_folder_of_another_source_tree(tmp_path):
    other_tree = tmp_path / "other-svod"
    other_tree.mkdir()
    build_dir = fake_build_dir(tmp_path / "build", other_tree)
    result = setup_build_ext(build_dir)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"SVOD_CMAKE_BUILD_DIR={build_dir} is a build of {other_tree}, not of {REPO}" in output, output
    assert "a wheel of it would mix the two trees" in output
    # Nothing was configured or built there.
    assert sorted(p.name for p in build_dir.iterdir()) == ["CMakeCache.txt"]


def test_setup_takes_this_tree_named_through_a_link(tmp_path):
    # The same tree through a symbolic link is this tree: the check passes, and the next one (a
    # folder configured without the Python extension) is what stops the build.
    link = tmp_path / "link-to-svod"
    link.symlink_to(REPO)
    build_dir = fake_build_dir(tmp_path / "build", link, build_python="OFF")
    result = setup_build_ext(build_dir)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "is configured with SVOD_BUILD_PYTHON=OFF" in output, output
    assert "is a build of" not in output
