"""Plan.save and Plan.pack on every kind of svod.Plan (captured, loaded from a plan file): what is
saved or packed loads back into a plan that computes bitwise the same, with its inputs by name."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import svod
from conftest import REPO

MLP = REPO / "examples" / "mlp" / "plan.json"


def captured_plan(cpu, add):
    """o = a + b over n elements, captured: a an input, b a constant, n a variable (at most 64)."""
    a, b, o = cpu.allocate("f32", 64), cpu.allocate("f32", 64), cpu.allocate("f32", 64)
    b.copy_from(np.linspace(-1, 1, 64, dtype=np.float32))
    with cpu.capture() as g:
        n = g.variable("n", 64, min=1, max=64)
        add(o, a, b, n)
    return g, a, b, o


def test_a_captured_plan_saves_and_packs_and_computes_bitwise_the_same(cpu, add, tmp_path):
    g, a, b, o = captured_plan(cpu, add)
    plan = g.plan
    # A capture's slots are byte storage: the input is typed by its dtype.
    inputs = {g.slot(a): {"dtype": "f32", "shape": ["n"]}}
    outputs = {g.slot(o): {"dtype": "f32", "shape": ["n"]}}
    plan.save(tmp_path / "saved", inputs=inputs, outputs=outputs)
    plan.pack(tmp_path / "model.svodpkg", inputs=inputs, outputs=outputs, exporter="test_save")

    x = np.arange(64, dtype=np.float32) * 0.5
    a.copy_from(x)
    plan.execute()
    expected = o.numpy().copy()
    saved = svod.load_plan(tmp_path / "saved" / "plan.json")
    packed = svod.load_package(tmp_path / "model.svodpkg")
    # The input keeps the name the capture gave its storage, with role "input" in the file.
    buffers = json.loads((tmp_path / "saved" / "plan.json").read_text())["buffers"]
    (input_name,) = [name for name, buffer in buffers.items() if buffer.get("role") == "input"]
    assert buffers[input_name]["shape"] == ["n"]
    for loaded in (saved, packed):
        (output,) = loaded.outputs
        assert input_name in loaded.buffers, loaded.buffers
        assert loaded.run(**{input_name: x})[output].tobytes() == expected.tobytes()
        # A smaller n computes the first elements only, as in the original.
        assert loaded.run(vars={"n": 5}, **{input_name: x})[output][:5].tobytes() == expected[:5].tobytes()


def test_a_plan_file_packs_with_its_input_named_and_refuses_what_it_cannot_save(tmp_path):
    plan = svod.load_plan(MLP)
    plan.pack(tmp_path / "mlp.svodpkg", inputs={"x": [64, 256]})
    packed = svod.load_package(tmp_path / "mlp.svodpkg")
    x = plan.buffers["x"].numpy().copy()
    assert packed.run(x=x)["probs"].tobytes() == plan.run()["probs"].tobytes()
    with pytest.raises(svod.ValidationError, match=r'inputs\[0\].*"x".*not the 65536 bytes'):
        plan.save(tmp_path / "bad", inputs={"x": [3, 3]})
    with pytest.raises(svod.ValidationError, match='no buffer named "nope"'):
        plan.save(tmp_path / "bad", inputs=["nope"])
    assert not (tmp_path / "bad").exists()


@pytest.mark.skipif(not os.environ.get("SVOD_BINARY_DIR"), reason="needs SVOD_BINARY_DIR for `svod pack --keygen`")
def test_a_signed_pack_names_its_signer(tmp_path):
    svod_cli = pathlib.Path(os.environ["SVOD_BINARY_DIR"]) / "svod"
    subprocess.run([str(svod_cli), "pack", "--keygen", str(tmp_path / "me")], check=True, capture_output=True)
    plan = svod.load_plan(MLP)
    plan.pack(tmp_path / "signed.svodpkg", inputs=["x"], sign=str(tmp_path / "me.key"), exporter="test_save")
    info = subprocess.run([str(svod_cli), "info", str(tmp_path / "signed.svodpkg")], check=True, capture_output=True,
                          text=True).stdout
    assert "signed by: key " in info and "exporter test_save" in info and "x  f32 [64, 256]" in info, info
    assert svod.load_package(tmp_path / "signed.svodpkg").run(x=plan.buffers["x"].numpy())["probs"].shape == (64, 10)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 CPU names")
def test_a_pack_for_another_cpu_is_refused_or_recompiled_and_sources_only_compiles(tmp_path):
    plan = svod.load_plan(MLP)
    x = plan.buffers["x"].numpy().copy()
    expected = plan.run()["probs"].tobytes()
    # Sapphire Rapids' AMX, where this CPU lacks it, is named.
    plan.pack(tmp_path / "spr.svodpkg", inputs=["x"], target_cpu="sapphirerapids")
    if " amx_tile" not in pathlib.Path("/proc/cpuinfo").read_text():
        with pytest.raises(svod.UnsupportedError, match=r"amx-tile.*which this CPU lacks; .*sapphirerapids"):
            svod.load_package(tmp_path / "spr.svodpkg", on_cpu_mismatch="refuse")
    recompiled = svod.load_package(tmp_path / "spr.svodpkg")  # "recompile" is the default
    assert recompiled.run(x=x)["probs"].tobytes() == expected

    plan.pack(tmp_path / "sources.svodpkg", inputs=["x"], sources_only=True)
    sources = svod.load_package(tmp_path / "sources.svodpkg", on_cpu_mismatch="refuse")
    assert sources.run(x=x)["probs"].tobytes() == expected
    with pytest.raises(svod.ValidationError, match='target CPU "nocpu"'):
        plan.pack(tmp_path / "bad.svodpkg", inputs=["x"], target_cpu="nocpu")
    with pytest.raises(svod.ValidationError, match="recompile"):
        svod.load_package(tmp_path / "sources.svodpkg", on_cpu_mismatch="sometimes")
