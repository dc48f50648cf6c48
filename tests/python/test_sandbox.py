"""Sandboxed plans from Python: load_package/load_plan(sandbox=True) and Plan.sandbox() run the plan's kernels in
svod's sandbox (docs/SECURITY.md, "The sandbox"): the same outputs as in this process, arrays copied into the
sandbox's memory and counted, hostile kernels stopped with svod.SandboxViolation and a fresh helper next time."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import svod
from conftest import REPO

MLP = REPO / "examples" / "mlp" / "plan.json"
BINARY_DIR = os.environ.get("SVOD_BINARY_DIR")

# Reads y[0] from /etc/shadow's descriptor when `bad` is set, else writes 7: one program for a hostile run and a
# legitimate one after it.
PEEK_SOURCE = """
int open(const char*, int, ...);
void peek(float* y, int bad) { y[0] = bad ? open("/etc/shadow", 0) : 7; }
"""

SPIN_SOURCE = "void spin(float* y) { for (volatile long i = 0;; i++) y[0] = 1; }"


def peek_plan(cpu):
    """A PlanBuilder plan of one kernel that opens /etc/shadow while the variable "bad" is 1."""
    peek = cpu.compile(source=PEEK_SOURCE, entry="peek",
                       buffers=[{"name": "y", "access": "write", "dtype": "f32"}],
                       scalars=[{"name": "bad", "type": "i32"}])
    b = svod.PlanBuilder()
    y = b.add_buffer(np.zeros(4, np.float32), "y")
    b.add_variable("bad", 1, min=0, max=1)
    b.run(peek, [y], ["bad"])
    b.add_output(y)
    return b.build()


@pytest.fixture(scope="module")
def mlp_package(tmp_path_factory):
    if not BINARY_DIR:
        pytest.skip("needs SVOD_BINARY_DIR for `svod pack` (set when ctest runs these tests)")
    path = tmp_path_factory.mktemp("package") / "mlp.svodpkg"
    subprocess.run([str(pathlib.Path(BINARY_DIR) / "svod"), "pack", str(MLP), "-o", str(path)], check=True,
                   capture_output=True, timeout=300)
    return path


def test_a_package_gives_the_same_outputs_sandboxed(mlp_package):
    plain = svod.load_package(mlp_package)
    sandboxed = svod.load_package(mlp_package, sandbox=True, sandbox_wall_limit=30, sandbox_memory_limit=1 << 28)
    assert plain.sandbox_info is None
    info = sandboxed.sandbox_info
    assert "seccomp allow-list" in info["layers"] and info["helper_pid"] > 0
    assert info["moved_bytes"] > 0 and info["copied_bytes"] == 0 and info["copies"] == 0
    if "mount namespace (empty root)" in info["layers"]:  # where the machine allows it, nothing of its files shows
        assert os.listdir(f"/proc/{info['helper_pid']}/root") == []
    want = plain.run(check=True)
    got = sandboxed.run(check=True)
    assert set(got) == set(want) == {"logits", "probs"}
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])

    # An array given to run() is copied into the sandbox's memory and counted; the plain plan binds it in place.
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    got = sandboxed.run(x=x)
    want = plain.run(x=x.copy())
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    info = sandboxed.sandbox_info
    assert (info["copied_bytes"], info["copies"]) == (x.nbytes, 1)
    np.testing.assert_array_equal(sandboxed.buffers["x"].numpy(), x)  # the copy, in the sandbox's memory
    # The plan's own buffer given back is not copied.
    sandboxed.bind(x=sandboxed.buffers["x"])
    assert sandboxed.sandbox_info["copies"] == 1
    with pytest.raises(svod.UnsupportedError, match="stay in the memory it shares with its helper"):
        sandboxed.rebind("x", x)
    with pytest.raises(svod.UnsupportedError, match="timed in this process, and the plan is sandboxed"):
        sandboxed.choose_variants()
    assert svod.benchmark(sandboxed, runs=3).runs >= 3  # timed through the helper


def test_a_plan_file_gives_the_same_outputs_sandboxed():
    want = svod.load_plan(MLP).run(check=True)
    plan = svod.load_plan(MLP, sandbox=True)
    got = plan.run(check=True)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert plan.sandbox_info["helper_pid"] > 0


def stealing_plan(tmp_path) -> pathlib.Path:
    """A plan file whose one kernel #includes a secret file of the test's into its source."""
    secret = tmp_path / "secret.txt"
    secret.write_text("'s', 'e', 'c', 'r', 'e', 't', 'X', 'Y', 'Z'\n")
    source = f'const char stolen[] = {{\n#include "{secret}"\n}};\nvoid steal(float* out) {{ out[0] = stolen[0]; }}\n'
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({
        "svod_plan": 1, "device": "CPU", "buffers": {"out": {"dtype": "f32", "count": 4}},
        "programs": {"steal": {"language": "c", "entry": "steal", "source": source,
                               "buffers": [{"name": "out", "access": "write"}]}},
        "ops": [{"id": "steal", "run": "steal", "buffers": ["out"]}], "outputs": {"out": {}}}))
    return plan_file


def test_a_plan_files_sources_are_compiled_confined(tmp_path):
    # load_plan(sandbox=True) compiles the source confined, where the file cannot be read, so the load
    # fails naming the rule and nothing of the secret shows.
    plan_file = stealing_plan(tmp_path)
    assert svod.load_plan(plan_file).run()["out"][0] == ord("s")  # unsandboxed, the source reads the file
    with pytest.raises(svod.SandboxViolation, match="rule: the sandbox's compiler reads only the toolchain's files") as e:
        svod.load_plan(plan_file, sandbox=True)
    assert "XYZ" not in str(e.value)


def test_a_packages_sources_are_compiled_confined(tmp_path):
    # A package of sources only compiles its programs as it loads: with sandbox=True, confined.
    if not BINARY_DIR:
        pytest.skip("needs SVOD_BINARY_DIR for `svod pack` (set when ctest runs these tests)")
    package = tmp_path / "steal.svodpkg"
    subprocess.run([str(pathlib.Path(BINARY_DIR) / "svod"), "pack", "--sources-only", str(stealing_plan(tmp_path)),
                    "-o", str(package)], check=True, capture_output=True, timeout=300)
    assert svod.load_package(package).run()["out"][0] == ord("s")
    with pytest.raises(svod.SandboxViolation, match="rule: the sandbox's compiler reads only the toolchain's files") as e:
        svod.load_package(package, sandbox=True)
    assert "XYZ" not in str(e.value)


def test_compile_confined_gives_the_same_outputs_and_names_an_include(cpu, tmp_path):
    source = "void scale(float* y, const float* x, int n) { for (int i = 0; i < n; i++) y[i] = 3 * x[i] + 1; }"
    x = np.arange(16, dtype=np.float32)
    outputs = []
    for confined in (False, True):
        scale = cpu.compile(source=source, entry="scale", confined=confined)
        b = svod.PlanBuilder()
        y = b.add_buffer(np.zeros(16, np.float32), "y")
        b.run(scale, [y, b.add_buffer(x, "x")], [16])
        b.add_output(y)
        plan = b.build()
        if confined:
            plan.sandbox()
        outputs.append(plan.run()["y"])
    assert np.array_equal(outputs[0], outputs[1]) and np.array_equal(outputs[1], 3 * x + 1)
    secret = tmp_path / "secret.h"
    secret.write_text("the user's secret\n")
    leak = f'static const char s[] = {{\n#include "{secret}"\n}};\nvoid leak(float* y) {{ y[0] = s[0]; }}'
    with pytest.raises(svod.SandboxViolation, match=f'#include "{secret}"') as error:
        cpu.compile(source=leak, entry="leak", confined=True)
    assert "the user's secret" not in str(error.value)


def test_a_hostile_kernel_raises_and_the_next_run_gets_a_fresh_helper(cpu):
    plan = peek_plan(cpu).sandbox(wall_limit=20)
    first = plan.sandbox_info["helper_pid"]
    with pytest.raises(svod.SandboxViolation, match=r"openat.*\(rule: no files\)"):
        plan.execute()
    assert plan.sandbox_info["helper_pid"] == 0  # ended with the violation
    out = plan.run(vars={"bad": 0})
    np.testing.assert_array_equal(out["y"], [7, 0, 0, 0])
    assert plan.sandbox_info["helper_pid"] not in (0, first)


def test_a_hostile_package_raises(cpu, tmp_path):
    path = tmp_path / "peek.svodpkg"
    peek_plan(cpu).pack(path)
    plan = svod.load_package(path, sandbox=True)
    with pytest.raises(svod.SandboxViolation, match="rule: no files"):
        plan.run()
    np.testing.assert_array_equal(plan.run(vars={"bad": 0})["y"], [7, 0, 0, 0])


def test_a_kernel_past_the_wall_limit_is_killed(cpu):
    spin = cpu.compile(source=SPIN_SOURCE, entry="spin", buffers=[{"name": "y", "access": "write", "dtype": "f32"}])
    b = svod.PlanBuilder()
    b.run(spin, [b.add_buffer(np.zeros(1, np.float32), "y")])
    plan = b.build().sandbox(wall_limit=0.2)
    with pytest.raises(svod.SandboxViolation, match="wall-clock limit of 0.2 s"):
        plan.execute()


def test_every_copy_of_a_captured_plan_runs_sandboxed(cpu):
    """A capture's g.plan is a new object each time: sandboxing one sandboxes the plan they all are."""
    peek = cpu.compile(source=PEEK_SOURCE, entry="peek",
                       buffers=[{"name": "y", "access": "write", "dtype": "f32"}],
                       scalars=[{"name": "bad", "type": "i32"}])
    y = cpu.allocate("f32", 4)
    with cpu.capture() as g:
        peek(y, 1)
    g.plan.sandbox()
    assert g.plan.sandbox_info is not None
    with pytest.raises(svod.SandboxViolation, match="rule: no files"):
        g.plan.execute()


def test_what_cannot_be_sandboxed_is_refused_and_nothing_changes(cpu):
    b = svod.PlanBuilder()
    x = np.zeros(4, np.float32)
    b.custom("fill", [b.add_buffer(x, "x")], {"value": 3.0})
    plan = b.build()
    with pytest.raises(svod.UnsupportedError, match="host function \"fill\" would run in this process"):
        plan.sandbox()
    assert plan.sandbox_info is None
    plan.execute()  # still the plan it was, run here
    np.testing.assert_array_equal(x, [3, 3, 3, 3])


def test_bad_sandbox_arguments(cpu):
    with pytest.raises(svod.ValidationError, match="sandbox_wall_limit is given without sandbox=True"):
        svod.load_plan(MLP, sandbox_wall_limit=1)
    with pytest.raises(svod.ValidationError, match="memory_limit"):
        peek_plan(cpu).sandbox(memory_limit=0)
    with pytest.raises(svod.ValidationError, match="wall_limit"):
        peek_plan(cpu).sandbox(wall_limit=-1)
    plan = peek_plan(cpu).sandbox()
    with pytest.raises(svod.ValidationError, match="sandboxed already"):
        plan.sandbox()
