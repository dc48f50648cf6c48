"""`cmake --install` puts an importable svod package where the interpreter looks under the prefix.

(scripts/test-install.sh, run by CI, installs with pip and as a Debian package.)
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

BINARY_DIR = os.environ.get("SVOD_BINARY_DIR")
SITE_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "cmake" / "svod_python_site.py"
VERSION = "python%d.%d" % sys.version_info[:2]

CHECK = (
    "import numpy as np, svod\n"
    "assert svod.__file__.startswith(%r), svod.__file__\n"
    "p = svod.device('CPU').compile(source='void k(int* o) { o[0] = 42; }', entry='k',\n"
    "                               buffers=[{'name': 'o', 'access': 'write'}])\n"
    "o = np.zeros(1, np.int32); p(o); assert o[0] == 42\n")


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


@pytest.mark.skipif(not BINARY_DIR, reason="needs SVOD_BINARY_DIR (set when ctest runs these tests)")
def test_installed_into_a_virtual_environment_imports_without_pythonpath(tmp_path):
    # The environment's interpreter looks in <venv>/lib/python3.X/site-packages, and the
    # installed extension finds <venv>/lib/libsvod_runtime.so through its RPATH.
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip("no venv module: %s" % made.stderr.strip())
    python = venv / "bin" / "python"
    subprocess.run(["cmake", "--install", BINARY_DIR, "--prefix", str(venv)], check=True, capture_output=True,
                   timeout=300)
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                                       check=True, capture_output=True, text=True).stdout.strip())
    assert list(site.glob("svod/_svod*.so")), list(venv.rglob("_svod*"))
    result = subprocess.run([str(python), "-c", CHECK % str(site)], env=without_pythonpath(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
