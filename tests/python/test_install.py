"""`cmake --install` puts an importable svod package into the prefix's site-packages."""
import os
import pathlib
import subprocess
import sys

import pytest

BINARY_DIR = os.environ.get("SVOD_BINARY_DIR")


@pytest.mark.skipif(not BINARY_DIR, reason="needs SVOD_BINARY_DIR (set when ctest runs these tests)")
def test_installed_package_imports_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BINARY_DIR, "--prefix", str(prefix)], check=True, capture_output=True,
                   timeout=300)
    packages = list(prefix.glob("lib*/python3.*/site-packages/svod/__init__.py"))
    assert len(packages) == 1, list(prefix.rglob("svod"))
    site = packages[0].parent.parent
    assert list(site.glob("svod/_svod*.so")) and (site / "svod" / "__init__.pyi").exists()
    script = (
        "import numpy as np, svod\n"
        "assert svod.__file__.startswith(%r), svod.__file__\n"
        "p = svod.device('CPU').compile(source='void k(int* o) { o[0] = 42; }', entry='k',\n"
        "                               buffers=[{'name': 'o', 'access': 'write'}])\n"
        "o = np.zeros(1, np.int32); p(o); assert o[0] == 42\n" % str(site))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
