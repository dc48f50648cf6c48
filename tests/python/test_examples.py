"""Every script in examples/python runs to the end (each asserts its own results)."""
import os
import subprocess
import sys

import pytest

import svod
from conftest import REPO

EXAMPLES = sorted((REPO / "examples" / "python").glob("*.py"))


def test_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"kernels_on_numpy.py", "mlp_plan.py", "codegen.py", "dlpack_exchange.py"}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    env = os.environ.copy()
    package_root = os.path.dirname(os.path.dirname(svod.__file__))  # the svod under test
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
