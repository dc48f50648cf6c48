"""Per-kernel variants from Python: Plan.choose_variants, svod.choose_variant, Program.recipe."""
import numpy as np
import pytest

import svod

SUM_SOURCE = """
void total(float* restrict o, const float* restrict x, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += x[i];
  o[0] = s;
}
"""
SUM_BUFFERS = [{"name": "o", "access": "write", "dtype": "f32"}, {"name": "x", "dtype": "f32"}]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SVOD_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_recipes_are_listed_default_first():
    assert svod.cpu_recipes[0] == svod.cpu_recipe == "O3"
    assert set(svod.cpu_recipes) == {"O3", "O2", "O3_reassoc"}


def test_choose_variant_keeps_exact_recipes_without_a_tolerance(cpu):
    prog = cpu.compile(SUM_SOURCE, entry="total", buffers=SUM_BUFFERS, scalars=[{"name": "n", "type": "i32"}])
    assert prog.recipe is None
    x = np.linspace(0, 1, 1 << 16, dtype=np.float32)
    o = np.zeros(1, np.float32)
    chosen, info = svod.choose_variant(prog, (o, x, x.size), rounds=3, cache=False)
    assert set(info["trials"]) == {"O2"}
    assert chosen.recipe in (None, "O2") and info["recipe"] == chosen.recipe
    assert o[0] == 0  # timed on copies


def test_plan_choose_variants_takes_the_inexact_recipe_within_the_tolerance(cpu):
    prog = cpu.compile(SUM_SOURCE, entry="total", buffers=SUM_BUFFERS, scalars=[{"name": "n", "type": "i32"}])
    x = np.linspace(0, 1, 1 << 16, dtype=np.float32)
    o = np.zeros(1, np.float32)
    b = svod.PlanBuilder()
    so, sx = b.add_buffer(o, "o"), b.add_buffer(x, "x")
    b.run(prog, [so, sx], [x.size])
    plan = b.build()
    plan.execute()
    exact = o[0]
    [choice] = plan.choose_variants((1e-2, 1e-3), rounds=3, cache=False)
    assert choice["op"] == 0 and choice["recipe"] == "O3_reassoc", choice
    assert choice["speedup"] > 1.5 and choice["trials"]["O3_reassoc"]["rejected"] is None
    o[0] = 0
    plan.execute()
    assert o[0] == pytest.approx(exact, rel=1e-3)


def test_a_bad_tolerance_is_a_validation_error(cpu):
    prog = cpu.compile(SUM_SOURCE, entry="total", buffers=SUM_BUFFERS, scalars=[{"name": "n", "type": "i32"}])
    x = np.ones(16, np.float32)
    with pytest.raises(svod.ValidationError, match="tolerance"):
        svod.choose_variant(prog, (np.zeros(1, np.float32), x, 16), (1e-3,))
    with pytest.raises(svod.ValidationError, match="must not be negative"):
        svod.choose_variant(prog, (np.zeros(1, np.float32), x, 16), (-1.0, 0.0))
