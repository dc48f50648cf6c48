"""svod.load_package: ahead-of-time packages from bytes and from a path, as the Plan load_plan gives."""
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import svod
from conftest import REPO

MLP = REPO / "examples" / "mlp" / "plan.json"
BINARY_DIR = os.environ.get("SVOD_BINARY_DIR")

pytestmark = pytest.mark.skipif(not BINARY_DIR, reason="needs SVOD_BINARY_DIR for `svod pack` (set when ctest runs these tests)")


@pytest.fixture(scope="module")
def mlp_package(tmp_path_factory):
    """The MLP example packed by the svod CLI of this build: (path, bytes)."""
    path = tmp_path_factory.mktemp("package") / "mlp.svodpkg"
    subprocess.run([str(pathlib.Path(BINARY_DIR) / "svod"), "pack", str(MLP), "-o", str(path)], check=True,
                   capture_output=True, timeout=300)
    return path, path.read_bytes()


def sections(data):
    """{name: (offset, size)} from the package's section table (docs/PACKAGE_FORMAT.md)."""
    count = struct.unpack_from("<I", data, 12)[0]
    out = {}
    for i in range(count):
        entry = 64 + 128 * i
        name = data[entry:entry + 96].rstrip(b"\0").decode()
        out[name] = struct.unpack_from("<QQ", data, entry + 96)
    return out


@pytest.fixture(scope="module")
def plan_outputs():
    return svod.load_plan(MLP).run(check=True)


@pytest.mark.parametrize("source", ["bytes", "bytearray", "memoryview", "path", "str"])
def test_outputs_equal_the_plan_run_without_compiling(mlp_package, plan_outputs, source):
    path, data = mlp_package
    package = {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data), "path": path,
               "str": str(path)}[source]
    before = svod._svod._compile_count()
    plan = svod.load_package(package)
    out = plan.run(check=True)  # the packaged expectations hold
    assert svod._svod._compile_count() == before
    assert isinstance(plan, svod.Plan)
    assert set(out) == set(plan_outputs) == {"logits", "probs"}
    for name, values in plan_outputs.items():
        np.testing.assert_array_equal(out[name], values)
    assert plan.buffers["x"].shape == (64, 256)


def test_a_package_plan_binds_and_executes_like_a_plan(mlp_package, plan_outputs):
    path, data = mlp_package
    plan = svod.load_package(data)
    x = plan.buffers["x"].to_numpy()
    probs = np.empty_like(plan_outputs["probs"])
    plan.bind(probs=probs)  # the caller's array, written in place
    plan.execute()
    np.testing.assert_array_equal(probs, plan_outputs["probs"])
    out = plan.run(x=np.zeros_like(x))
    assert not np.array_equal(out["probs"], plan_outputs["probs"])
    # The bytes were only read during the call: the plan owns copies.
    mutable = bytearray(data)
    other = svod.load_package(mutable)
    mutable[:] = bytes(len(mutable))
    np.testing.assert_array_equal(other.run(check=True)["probs"], plan_outputs["probs"])


def test_from_a_path_the_file_is_used_copy_on_write(mlp_package, plan_outputs):
    path, data = mlp_package
    plan = svod.load_package(path)
    plan.buffers["w1"].numpy()[:] = 0  # private to this plan: neither the file nor other loads change
    assert path.read_bytes() == data
    np.testing.assert_array_equal(svod.load_package(path).run()["probs"], plan_outputs["probs"])


def test_runs_with_compiling_forbidden(mlp_package, tmp_path):
    path, _ = mlp_package
    script = (f"import svod\nplan = svod.load_package({str(path)!r})\nplan.run(check=True)\n"
              "print(svod._svod._compile_count())\n")
    env = dict(os.environ, SVOD_COMPILE="0", SVOD_CACHE_DIR=str(tmp_path / "empty-cache"))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
    # The plan itself needs the compiler, which SVOD_COMPILE=0 forbids.
    script = f"import svod\nsvod.load_plan({str(MLP)!r})\n"
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "UnsupportedError" in result.stderr, result.stderr


def test_damaged_packages_raise_load_errors_naming_the_section(mlp_package):
    _, data = mlp_package
    table = sections(data)
    assert {"manifest", "plan", "init/w1", "expect/probs"} <= set(table)
    for name in ("manifest", "plan", "init/w1"):
        offset, size = table[name]
        bad = bytearray(data)
        bad[offset + size // 2] ^= 1
        with pytest.raises(svod.LoadError, match=f'"{name}".*digest mismatch') as info:
            svod.load_package(bytes(bad))
        assert info.value.kind == "load"
    with pytest.raises(svod.LoadError, match="truncated"):
        svod.load_package(data[:-1])
    with pytest.raises(svod.ValidationError, match="not an svod package"):
        svod.load_package(b"PK\x03\x04" + data[4:])
    with pytest.raises(svod.ValidationError, match="not an svod package"):
        svod.load_package(MLP)  # a plan file is not a package


def test_bad_arguments(mlp_package, tmp_path):
    _, data = mlp_package
    with pytest.raises(svod.IoError, match="missing.svodpkg"):
        svod.load_package(tmp_path / "missing.svodpkg")
    with pytest.raises(svod.ValidationError, match="expected the package's bytes or a path, got int"):
        svod.load_package(3)
    with pytest.raises(svod.ValidationError, match="not one contiguous block"):
        svod.load_package(np.frombuffer(data, np.uint8)[::2])
    with pytest.raises(svod.ValidationError, match="no variable named"):
        svod.load_package(data, vars={"nope": 1})
    with pytest.raises(svod.ValidationError, match="expected an integer"):
        svod.load_package(data, vars={"nope": "1"})
