"""Plans from Python: plan files with variables and rebinding, PlanBuilder, profiles."""
import json
import sys

import numpy as np
import pytest

import svod
from conftest import REPO

FEATURES = REPO / "examples" / "features" / "plan.json"
MLP = REPO / "examples" / "mlp" / "plan.json"


def test_features_plan_runs_and_checks():
    plan = svod.load_plan(FEATURES)
    out = plan.run(check=True)
    assert set(out) == {"z", "z_edge", "x", "shard0", "shard1", "noise"}
    np.testing.assert_array_equal(out["shard0"], [11, 12, 13, 14])
    assert plan.variables == {"N": 200}
    assert "arena" in plan.buffers and plan.buffers["src"].shape == (256,)


def test_cpu_compiler_picks_the_plans_cpu_compiler_at_any_time():
    """cpu_compiler= is the plan's own compiler, also after the process's CPU device opened with the
    default one, and svod leaves SVOD_CPU_COMPILER in the process's environment as it was."""
    import ctypes
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    before = getenv(b"SVOD_CPU_COMPILER")
    svod.device("CPU")
    for compiler in ("clang", "dlopen", "CLANG"):
        probs = svod.load_plan(MLP, cpu_compiler=compiler).run(check=True)["probs"]
        assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    assert getenv(b"SVOD_CPU_COMPILER") == before
    with pytest.raises(svod.ValidationError, match='unknown CPU compiler "gcc": expected clang, llvm or dlopen'):
        svod.load_plan(MLP, cpu_compiler="gcc")


def test_backend_is_the_old_name_of_cpu_compiler():
    """backend=, the keyword's name before cpu_compiler=, still picks the compiler, for load_plan and
    svod.device; given with cpu_compiler= it must name the same one."""
    probs = svod.load_plan(MLP, backend="clang").run(check=True)["probs"]
    assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    assert svod.device("CPU", backend="dlopen") is svod.device("CPU", "dlopen")
    assert svod.device("CPU", cpu_compiler="clang", backend="clang") is svod.device("CPU", cpu_compiler="clang")
    with pytest.raises(svod.ValidationError, match=r'load_plan: cpu_compiler="clang" and backend="llvm" differ '
                                                   r'\(backend is the old name of cpu_compiler\): give one'):
        svod.load_plan(MLP, cpu_compiler="clang", backend="llvm")
    with pytest.raises(svod.ValidationError, match=r'svod.device: cpu_compiler="llvm" and backend="dlopen" differ'):
        svod.device("CPU", "llvm", backend="dlopen")


def test_variables_at_load_and_run():
    plan = svod.load_plan(FEATURES, vars={"N": 64})
    assert plan.variables == {"N": 64}
    plan.execute()
    z = plan.buffers["z"].numpy()
    assert z[63] != 0 and z[64] == 0
    plan.execute(vars={"N": 128})
    assert plan.variables == {"N": 128}
    assert z[127] != 0 and z[128] == 0
    with pytest.raises(svod.ValidationError, match="N"):
        plan.execute(vars={"N": 1000})  # max 256
    with pytest.raises(svod.ValidationError):
        plan.execute(vars={"nope": 3})
    with pytest.raises(svod.ValidationError, match="N"):
        svod.load_plan(FEATURES, vars={"N": 0})
    assert plan.variables == {"N": 128}  # a refused run changes nothing


def test_rebinding_is_zero_copy():
    plan = svod.load_plan(FEATURES)
    src = np.arange(256, dtype=np.float32) * 2
    out = plan.run(src=src)
    assert plan.buffers["src"].data_ptr == src.ctypes.data
    np.testing.assert_allclose(out["z"][:4], [0.5 + 1, 0.5 + 7, 0.5 + 13, 0.5 + 19])
    # The array stays bound: writing it changes the next run's input.
    src[:] = 0
    out = plan.run()
    np.testing.assert_allclose(out["z"][:4], [1.5, 1.5, 1.5, 1.5])
    # Outputs bound to caller arrays are written in place.
    shard0 = np.array([1, 1, 1, 1], np.int32)
    shard1 = plan.buffers["shard1"].to_numpy()
    plan.run(shard0=shard0)
    np.testing.assert_array_equal(shard0, 1 + shard1)  # all_reduce sum wrote into the caller's array


def test_rebinding_checks():
    plan = svod.load_plan(FEATURES)
    with pytest.raises(svod.ValidationError, match='buffer "src": dtype f64 does not match the plan\'s f32'):
        plan.run(src=np.zeros(256))
    with pytest.raises(svod.ValidationError, match="255 elements given, the plan's buffer holds 256"):
        plan.run(src=np.zeros(255, np.float32))
    with pytest.raises(svod.ValidationError, match='no buffer named "nope"'):
        plan.run(nope=np.zeros(3))
    ro = np.zeros(4, np.int32)
    ro.flags.writeable = False
    with pytest.raises(svod.ValidationError, match="read-only"):
        plan.run(shard0=ro)
    with pytest.raises(svod.ValidationError, match="C-contiguous"):
        plan.run(src=np.zeros(512, np.float32)[::2])
    with pytest.raises(svod.ValidationError, match="expected a numpy array"):
        plan.run(src=[0.0] * 256)


def test_expectations_fail_loudly():
    plan = svod.load_plan(FEATURES)
    with pytest.raises(svod.ValidationError, match="outputs.shard0: 4 of 4 values differ"):
        plan.run(shard0=np.zeros(4, np.int32), shard1=np.zeros(4, np.int32), check=True)


def test_missing_plan_file():
    with pytest.raises(svod.IoError, match="missing.json"):
        svod.load_plan("missing.json")


def test_mlp_from_numpy():
    plan = svod.load_plan(MLP)
    x = np.load(MLP.parent / "x.npy")
    out = plan.run(x=x, check=True)
    np.testing.assert_allclose(out["probs"], np.load(MLP.parent / "expected_probs.npy"), rtol=1e-4, atol=1e-6)
    assert out["probs"].shape == (64, 10)


def chain(cpu, length):
    """A PlanBuilder plan of `length` kernels, each adding 1 to a buffer."""
    inc = cpu.compile(source="void inc(float* x, int n) { for (int i = 0; i < n; i++) x[i] += 1.0f; }",
                      entry="inc", buffers=[{"name": "x", "access": "readwrite", "dtype": "f32"}],
                      scalars=[{"name": "n", "type": "i32"}])
    x = np.zeros(8, np.float32)
    b = svod.PlanBuilder()
    slot = b.add_buffer(x, "x")
    b.add_variable("n", 8, min=1, max=8)
    for _ in range(length):
        b.run(inc, [slot], ["n"])
    b.add_output(slot)
    return b.build(), x


def test_plan_builder_chain(cpu):
    plan, x = chain(cpu, 100)
    assert plan.op_count == 100 and plan.outputs == ["x"]
    out = plan.run()
    np.testing.assert_array_equal(x, np.full(8, 100))  # the bound array itself is the buffer
    np.testing.assert_array_equal(out["x"], x)
    assert out["x"].ctypes.data != x.ctypes.data  # run() returns copies
    plan.execute(vars={"n": 4})
    np.testing.assert_array_equal(x, [200] * 4 + [100] * 4)
    plan.execute(sequential=True)  # n stays 4
    assert x[0] == 300 and x[7] == 100


def test_plan_builder_views_copies_custom_and_edges(cpu):
    b = svod.PlanBuilder()
    arena = b.add_buffer(cpu.allocate("f32", 8), "arena")
    lo = b.add_view(arena, 0, 16, "f32", "lo")
    hi = b.add_view(arena, 16, 16, "f32", "hi")
    b.custom("fill", [lo], {"value": 2.5}, id="fill")
    b.copy(hi, lo, after=["fill"])
    b.add_output(arena)
    plan = b.build()
    out = plan.run()
    np.testing.assert_array_equal(out["arena"], [2.5] * 8)
    with pytest.raises(svod.ValidationError):
        bad = svod.PlanBuilder()
        s = bad.add_buffer(np.zeros(4, np.float32))
        bad.copy(s, 7)
        bad.build()
    with pytest.raises(svod.ValidationError, match="nope"):
        bad = svod.PlanBuilder()
        bad.custom("nope", [bad.add_buffer(np.zeros(4, np.float32))])
        bad.build()


def test_build_empties_the_builder_and_an_empty_one_does_not_build(cpu):
    # A second build() used to return an empty plan without a word (issue 40).
    b = svod.PlanBuilder()
    b.custom("fill", [b.add_buffer(np.zeros(4, np.float32))], {"value": 1.0})
    assert b.build().op_count == 1
    with pytest.raises(svod.ValidationError, match="holds no buffers and no ops"):
        b.build()
    with pytest.raises(svod.ValidationError, match="holds no buffers and no ops"):
        svod.PlanBuilder().build()
    b.custom("fill", [b.add_buffer(np.zeros(4, np.float32))], {"value": 2.0})
    assert b.build().op_count == 1  # used again, it builds what was added since


def test_profile_collects_plans_and_calls(cpu, add, tmp_path):
    plan, _ = chain(cpu, 10)
    o, a, b = (np.zeros(8, np.float32) for _ in range(3))
    with svod.profile() as p:
        plan.execute()
        plan.execute()
        add(o, a, b, 8)
    plan.execute()  # outside: not recorded
    assert p.runs == 3
    table = p.table()
    assert "inc" in table and "add" in table
    trace = tmp_path / "trace.json"
    p.chrome_trace(trace)
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "inc" and e.get("ph") == "X") == 20
    assert json.loads(p.json())["runs"] == 3
    with svod.profile():
        with pytest.raises(svod.ValidationError, match="already open"):
            with svod.profile():
                pass


def test_benchmark_plan(cpu):
    plan, x = chain(cpu, 10)
    r = svod.benchmark(plan, runs=5)
    assert r.runs == 5 and r.median > 0
    assert x[0] == 60  # 1 warm-up + 5 runs of 10 increments


def test_plan_refcounts(cpu):
    plan, _ = chain(cpu, 3)
    x = np.zeros(8, np.float32)
    plan.run(x=x)
    before = sys.getrefcount(x)
    for _ in range(1000):
        plan.run(x=x)
    assert sys.getrefcount(x) == before
    plan.run(x=np.zeros(8, np.float32))
    assert sys.getrefcount(x) == before - 1  # unbound: the plan let go of it


def test_builder_arguments_of_the_wrong_type(cpu, add):
    b = svod.PlanBuilder()
    with pytest.raises(svod.ValidationError):
        b.run(add, ["o", "a", "b"], [4])  # slots are indices
    with pytest.raises(svod.ValidationError, match="expected a svod.Program"):
        b.run("add", [0], [4])
    with pytest.raises(svod.ValidationError, match="expected an integer or an expression string, got float"):
        b.run(add, [0, 0, 0], [1.5])
    with pytest.raises(svod.ValidationError, match=r'vars\["N"\]: expected an integer, got str'):
        svod.load_plan(FEATURES).execute(vars={"N": "x"})


def test_run_returns_copies_and_runs_from_many_threads_never_mix_inputs(cpu):
    """Plan.run from 8 threads, each binding its own input: every result is its own input's
    (binding, running and copying the outputs take turns), and a result stays as it was when
    the plan runs again."""
    import threading
    double = cpu.compile(source="void d(float* o, const float* x) { for (int i = 0; i < 256; i++) o[i] = 2 * x[i]; }",
                         entry="d", buffers=[{"name": "o", "access": "write", "dtype": "f32"},
                                             {"name": "x", "dtype": "f32"}])
    b = svod.PlanBuilder()
    o = b.add_buffer(np.zeros(256, np.float32), "o")
    x = b.add_buffer(np.zeros(256, np.float32), "x")
    b.run(double, [o, x])
    b.add_output(o)
    plan = b.build()
    wrong = []

    def worker(t):
        for r in range(10):
            value = float(t * 100 + r)
            out = plan.run(x=np.full(256, value, np.float32))["o"]
            if not (out == 2 * value).all():
                wrong.append((t, r))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert wrong == []
    first = plan.run(x=np.ones(256, np.float32))["o"]
    plan.run(x=np.full(256, 5, np.float32))
    assert (first == 2).all()


def test_two_slots_over_one_array_are_ordered_by_their_real_addresses(cpu):
    """Two add_buffer slots wrapping one numpy array are two storages over the same bytes: the
    op that reads through one waits for the op that writes through the other (issue 24)."""
    slow_write = cpu.compile(
        source="void w(float* o) { for (int r = 0; r < 2000; r++) for (int i = 0; i < 256; i++) o[i] = r + 1; }",
        entry="w", buffers=[{"name": "o", "access": "write", "dtype": "f32"}])
    read = cpu.compile(source="void r(float* o, const float* x) { for (int i = 0; i < 256; i++) o[i] = x[i]; }",
                       entry="r", buffers=[{"name": "o", "access": "write", "dtype": "f32"},
                                           {"name": "x", "dtype": "f32"}])
    shared = np.zeros(256, np.float32)
    b = svod.PlanBuilder()
    through_a = b.add_buffer(shared, "a")
    through_b = b.add_buffer(shared, "b")
    out = b.add_buffer(np.zeros(256, np.float32), "out")
    b.run(slow_write, [through_a])
    b.run(read, [out, through_b])
    b.add_output(out)
    plan = b.build()
    for _ in range(20):
        shared[:] = 0
        assert (plan.run()["out"] == 2000).all()


def test_profile_names_plan_builder_ops_by_their_ids(cpu, add):
    # Before: every PlanBuilder op was "op N" in the per-op table, its id nowhere.
    b = svod.PlanBuilder()
    o, a, c = (b.add_buffer(np.zeros(8, np.float32), name=n) for n in ("o", "a", "c"))
    b.run(add, [o, a, c], [8], id="first_sum")
    b.run(add, [c, o, a], [8])
    plan = b.build()
    with svod.profile() as p:
        plan.execute()
    table = p.table(per_op=True)
    assert "op 0 (first_sum) kernel add" in table
    assert "op 1 kernel add" in table
    trace = json.loads(p.json())
    assert "first_sum" in json.dumps(trace)
