"""svod.tinygrad against tinygrad's own operator suite, its TinyJit graph runner (with the kernels
it leaves to tinygrad) and the element types numpy lacks.

tinygrad is a checkout of commit a9069c1 (its `tinygrad/` package, `test/helpers.py` and
`test/backend/test_ops.py`) where SVOD_TINYGRAD_DIR points, by default `shared/tinygrad` beside
the repository folder (where the project's CI machines keep one). The 21 tests that fail on
tinygrad's own CPU device with Debian's PyTorch 1.13 are listed in
tinygrad_baseline_failures.txt beside this file. Without tinygrad or torch these tests skip and
say why.
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import svod

REPO = pathlib.Path(__file__).resolve().parents[2]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
SVOD_PYTHON = pathlib.Path(svod.__file__).resolve().parent.parent  # the folder that holds the svod package

if not (TINYGRAD_DIR / "tinygrad" / "__init__.py").is_file():
    pytest.skip(f"tinygrad is not at {TINYGRAD_DIR} (set SVOD_TINYGRAD_DIR to a tinygrad a9069c1 checkout)",
                allow_module_level=True)


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TINYGRAD_DIR), str(SVOD_PYTHON)]),
               PYTHONDONTWRITEBYTECODE="1", **extra)  # the tinygrad folder may be read-only
    env.pop("DEBUG", None)
    return env


# One shard of the suite: every n-th test from the k-th, with svod.tinygrad imported first (it
# registers the SVOD device); unittest's usual report.
_SHARD = """
import sys, unittest
import svod.tinygrad
k, n = int(sys.argv[1]), int(sys.argv[2])
def tests(suite):
    for t in suite:
        yield from (tests(t) if isinstance(t, unittest.TestSuite) else [t])
everything = list(tests(unittest.defaultTestLoader.loadTestsFromName("test.backend.test_ops")))
unittest.TextTestRunner().run(unittest.TestSuite(everything[k::n]))
"""

_RESULT = re.compile(r"^(ERROR|FAIL): (\S+) \((\S+)\)", re.MULTILINE)
_RAN = re.compile(r"^Ran (\d+) tests? in", re.MULTILINE)


def test_operator_suite_matches_tinygrads_cpu(capsys):
    """test/backend/test_ops.py on DEV=SVOD: every test that passes on tinygrad's CPU device passes.

    The suite runs in one process per core, each taking every n-th test. Each renders its
    kernels itself (PARALLEL=0): svod compiles in process, so tinygrad's pool of worker
    processes would only render, and starting them costs more than they save."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is missing: tinygrad's operator tests compare against PyTorch (Debian: python3-torch)")
    baseline = {line.split(" ", 1)[1] for line in (pathlib.Path(__file__).with_name("tinygrad_baseline_failures.txt")).read_text().splitlines()
                if line.strip()}

    shards = max(1, min(4, os.cpu_count() or 1))
    logs = [tempfile.TemporaryFile("w+") for _ in range(shards)]  # files: a pipe could fill while we wait
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _SHARD, str(k), str(shards)], cwd=TINYGRAD_DIR,
                              env=_env(DEV="SVOD", PARALLEL="0"), stdout=log, stderr=subprocess.STDOUT)
             for k, log in enumerate(logs)]
    for p in procs: p.wait(timeout=3600)
    seconds = time.perf_counter() - start
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()

    ran, failed = 0, set()
    for k, (proc, output) in enumerate(zip(procs, outputs)):
        count = _RAN.search(output)
        assert count, f"shard {k} of the suite did not finish (exit {proc.returncode}):\n{output[-4000:]}"
        ran += int(count[1])
        failed |= {f"{m[2]} ({m[3]})" for m in _RESULT.finditer(output)}
    with capsys.disabled():  # the suite's time shows in every run, captured or not
        print(f"\ntinygrad test_ops on SVOD: {ran} tests, {len(failed)} failing (all expected: "
              f"{failed <= baseline}), {shards} processes, {seconds:.1f} s")
    unexpected = sorted(failed - baseline)
    assert not unexpected, "fail on SVOD but pass on tinygrad's CPU device:\n" + "\n".join(unexpected) + "\n\n" + \
        "\n".join(o[-4000:] for o in outputs)


# ---------------------------------------------------------------------------------------------
# The graph runner, in this process.

@pytest.fixture(scope="module")
def tg():
    """tinygrad with the SVOD device registered; yields (Tensor, TinyJit, Variable, svod.tinygrad)."""
    sys.path.append(str(TINYGRAD_DIR))  # for good: tinygrad imports modules as it needs them
    import svod.tinygrad as backend
    from tinygrad import Tensor, TinyJit, Variable
    return Tensor, TinyJit, Variable, backend


@pytest.fixture
def graph_calls(tg, monkeypatch):
    """Counts the replays that ran as one svod plan."""
    backend = tg[3]
    calls = []
    run = backend.SVODGraph.__call__

    def counted(self, *args, **kwargs):
        calls.append(self)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(backend.SVODGraph, "__call__", counted)
    return calls


def test_jit_rebinds_inputs_on_every_call(tg, graph_calls):
    Tensor, TinyJit, _, _ = tg

    @TinyJit
    def f(a, b):
        x = (a + b).contiguous()  # three kernels, so that TinyJit batches them
        y = (x * 2).relu().contiguous()
        return y.sum(1) + x.mean()

    rng = np.random.default_rng(0)
    for _ in range(6):
        an, bn = (rng.standard_normal((16, 32), dtype=np.float32) for _ in range(2))
        out = f(Tensor(an, device="SVOD").realize(), Tensor(bn, device="SVOD").realize()).numpy()
        np.testing.assert_allclose(out, np.maximum((an + bn) * 2, 0).sum(1) + (an + bn).mean(), rtol=1e-5, atol=1e-5)
    assert len(graph_calls) >= 4  # captured on the second call, replayed as a plan from then on
    assert graph_calls[0].plan.op_count >= 2


def test_a_kernel_fault_in_a_jit_replay_raises_and_the_next_call_works(tg, graph_calls):
    """A kernel of a TinyJit replay that faults raises svod.KernelFault out of the tinygrad call, and
    the process, the jit and its next call go on (issue 35). The fault: an input that wraps an
    address nothing is mapped at (Tensor.from_blob), which the replay's first kernel reads."""
    Tensor, TinyJit, _, _ = tg
    from tinygrad import dtypes

    @TinyJit
    def f(a):
        x = (a + 1).contiguous()
        y = (x * 2).relu().contiguous()
        return y.sum() + x.max()

    values = np.arange(64, dtype=np.float32)
    expected = np.maximum((values + 1) * 2, 0).sum() + (values + 1).max()
    for _ in range(3):  # captured on the second call, replayed as a plan on the third
        assert f(Tensor(values, device="SVOD").realize()).item() == expected
    assert graph_calls
    replays = len(graph_calls)
    with pytest.raises(svod.KernelFault) as info:
        f(Tensor.from_blob(16, (64,), dtype=dtypes.float32, device="SVOD")).item()
    assert info.value.signal_name == "SIGSEGV" and info.value.cause == "null pointer"
    assert isinstance(info.value, RuntimeError)  # as tinygrad expects of a failed launch
    assert len(graph_calls) == replays + 1  # the fault was in the replay's plan
    for _ in range(2):
        assert f(Tensor(values, device="SVOD").realize()).item() == expected
    assert len(graph_calls) == replays + 3


def test_jit_passes_symbolic_variables(tg, graph_calls):
    Tensor, TinyJit, Variable, _ = tg

    @TinyJit
    def f(a, n):
        x = (a[:n] * 3).contiguous()
        return x.sum() + x.max()

    rng = np.random.default_rng(1)
    for i in [3, 5, 1, 20, 7, 12]:
        an = rng.standard_normal((20, 8), dtype=np.float32)
        out = f(Tensor(an, device="SVOD").realize(), Variable("n", 1, 20).bind(i)).item()
        np.testing.assert_allclose(out, (an[:i] * 3).sum() + (an[:i] * 3).max(), rtol=1e-5, atol=1e-5)
    assert len(graph_calls) >= 4


def test_jit_mlp_matches_numpy(tg, graph_calls):
    Tensor, TinyJit, _, _ = tg
    rng = np.random.default_rng(2)
    w1, w2 = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((32, 10), dtype=np.float32)
    t1, t2 = Tensor(w1, device="SVOD").realize(), Tensor(w2, device="SVOD").realize()

    @TinyJit
    def mlp(x):
        return (x @ t1).relu().contiguous().matmul(t2).softmax()

    for _ in range(5):
        x = rng.standard_normal((8, 64), dtype=np.float32)
        out = mlp(Tensor(x, device="SVOD").realize()).numpy()
        h = np.maximum(x @ w1, 0) @ w2
        ref = np.exp(h - h.max(1, keepdims=True))
        np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-4, atol=1e-5)
    assert graph_calls


def test_jit_replays_a_kernel_reading_an_input_through_a_view_in_its_plan(tg, graph_calls, monkeypatch):
    """A kernel that takes a fixed part of the jitted function's input (a SHRINK of it by constants)
    is recorded with a view of the input's slot, which follows the input when a call rebinds it: the
    whole function replays as plans, nothing runs alone, and every call gives the values of its own
    input. (SVODGraph left such a kernel to tinygrad, which ran it alone between two plans.)"""
    Tensor, TinyJit, _, backend = tg
    from tinygrad.engine.realize import get_call_arg_uops
    from tinygrad.uop.ops import Ops
    views, alone = [], []
    supports = backend.SVODGraph.supports_uop

    def recorded(batch_devs, call):
        views.extend(b for b in get_call_arg_uops(call) if b.op is Ops.SHRINK and b.src[0].op is Ops.PARAM)
        return supports(batch_devs, call)

    def counted(self, *args, **kwargs):  # a kernel tinygrad runs itself, not a plan
        alone.append(self.name)
        return call(self, *args, **kwargs)

    call = backend.SVODProgram.__call__
    monkeypatch.setattr(backend.SVODGraph, "supports_uop", staticmethod(recorded))
    monkeypatch.setattr(backend.SVODProgram, "__call__", counted)

    @TinyJit
    def f(a):
        x = (a * 2).contiguous()
        y = (x + 1).contiguous()
        z = (a[4:12].contiguous() + y[:8]).contiguous()  # a[4:12] reaches its kernel as a view of a
        w = (z * z).contiguous()
        return (w + x[8:]).contiguous()

    rng = np.random.default_rng(3)
    for i in range(5):
        an = rng.standard_normal(16, dtype=np.float32)
        alone.clear()
        out = f(Tensor(an, device="SVOD").realize()).numpy()
        x = an * 2
        np.testing.assert_allclose(out, (an[4:12] + x[:8] + 1) ** 2 + x[8:], rtol=1e-5, atol=1e-5)
        if i >= 2: assert alone == []  # a replay: every kernel in a plan
    assert views, "no kernel took a view of the input"
    assert len(graph_calls) >= 3


def test_launch_sizes_become_svod_expressions_that_compute_what_tinygrad_computes(tg):
    """Symbolic launch sizes (UOps over tinygrad's Variables) as svod size expressions: evaluated by a
    plan's kernel launch (the number of core_id slices that run), they equal tinygrad's sym_infer at
    every value of the variables; what svod cannot spell exactly raises SizeExpressionError."""
    Tensor, _, Variable, backend = tg
    from tinygrad.uop.ops import Ops
    n, m = Variable("n", 1, 40), Variable("m", 2, 9)
    sizes = [n, n + 3, (n + 3) // 4, n * m - 1, (n * 2) % 7 + 1, n.maximum(m * 3), n.alu(Ops.CDIV, m) + 1,
             (n - 20) // m + 22, (n - 20) // 6 + 5, (n - 20) % 6 + 1, n.alu(Ops.CMOD, m) + n, (n << 2) >> 1]
    cpu = svod.device("CPU")
    count = cpu.compile(source="void count(int* restrict hits, int core_id) { hits[core_id] = 1; }\n",
                        entry="count", buffers=[{"name": "hits", "access": "write", "dtype": "i32"}])
    for size in sizes:
        text = backend._size_expr(size, {"n": "n", "m": "m"})
        hits = cpu.allocate("i32", 1024)
        with cpu.capture() as g:
            g.variable("n", 1, min=1, max=40)
            g.variable("m", 2, min=2, max=9)
            count(hits, global_size=[text])
        for nv in (1, 2, 3, 17, 20, 33, 40):
            for mv in (2, 5, 9):
                hits.copy_from(np.zeros(1024, np.int32))
                g.plan.execute(vars={"n": nv, "m": mv})
                want = size.sym_infer({"n": nv, "m": mv})
                assert hits.numpy().sum() == want, (size.render(), text, nv, mv, want)
    for bad in [(n < m).where(n, m), n // (m - 2), n & 3]:
        with pytest.raises(backend.SizeExpressionError, match="launch size"):
            backend._size_expr(bad, {"n": "n", "m": "m"})
    with pytest.raises(backend.SizeExpressionError, match="variable k is not in the plan"):
        backend._size_expr(Variable("k", 1, 4) * 2, {"n": "n"})


# ---------------------------------------------------------------------------------------------
# Element types numpy lacks.

def test_buffer_sizes_are_declared_in_the_buffers_own_bytes(tg):
    """Every tinygrad element type is declared with svod's type of the same size (or as bytes),
    so that min_count asks for as many bytes as the buffer holds: 4 elements of bfloat16 are 8
    bytes, of an fp8 type 4 (tinygrad's numpy type for both is float32, 4 bytes an element)."""
    from tinygrad import dtypes
    backend = tg[3]
    cpu = svod.device("CPU")
    for dtype in [*dtypes.ints, *dtypes.floats, dtypes.bool]:
        param = backend._buffer_param(0, dtype, (4,))
        itemsize = cpu.allocate(param["dtype"], 1).nbytes if "dtype" in param else 1
        assert param["min_count"] * itemsize == 4 * dtype.itemsize, (dtype, param)
    assert backend._buffer_param(1, dtypes.bfloat16, (4,))["dtype"] == "bf16"


def test_bfloat16_through_kernels(tg):
    Tensor, _, _, _ = tg
    from tinygrad import dtypes
    values = np.arange(-8, 8, dtype=np.float32) / 4  # bfloat16 holds these and the results exactly
    t = Tensor(values, device="SVOD", dtype=dtypes.bfloat16)
    out = (t * 3 + 1).contiguous()
    assert out.dtype == dtypes.bfloat16
    np.testing.assert_array_equal(out.float().numpy(), values * 3 + 1)
    np.testing.assert_array_equal((t * t).sum().float().numpy(), (values * values).sum())
    np.testing.assert_array_equal(t.numpy(), values)  # out through tinygrad's copy as well


def test_from_blob_wraps_host_memory_in_place(tg):
    """Tensor.from_blob on SVOD: tinygrad's external_ptr is host memory the caller owns; the
    tensor reads it without a copy and writes through to it (it failed as "MemoryError:
    Allocation of 16 B failed", hiding the allocator's refusal)."""
    Tensor, _, _, _ = tg
    from tinygrad import dtypes
    blob = np.arange(4, dtype=np.float32)
    t = Tensor.from_blob(blob.ctypes.data, (4,), dtype=dtypes.float32, device="SVOD")
    np.testing.assert_array_equal((t * 2 + 1).numpy(), blob * 2 + 1)
    blob[:] = [10, 20, 30, 40]  # the same memory, not a copy taken at from_blob
    np.testing.assert_array_equal((t + 1).numpy(), blob + 1)
    t.assign(t * 3).realize()
    np.testing.assert_array_equal(blob, [30, 60, 90, 120])


def test_from_blob_of_no_address_names_the_address(tg):
    Tensor, _, _, _ = tg
    from tinygrad import dtypes
    with pytest.raises(ValueError, match="nonzero host address"):
        Tensor.from_blob(0, (4,), dtype=dtypes.float32, device="SVOD")


def test_tinygrads_disk_cache_holds_svod_binaries_so_a_second_process_compiles_nothing(tmp_path):
    # tinygrad's compile step is svod's (SVODCompiler): it caches program binaries in tinygrad's
    # own database. The second process has an empty svod object cache, compiling off in svod
    # (SVOD_COMPILE=0) and tinygrad's ASSERT_COMPILE: any compile would fail it.
    script = """
import svod.tinygrad
from tinygrad import Tensor
a = Tensor([[float(i * 4 + j) for j in range(4)] for i in range(3)], device="SVOD")
print(((a @ a.T) + 1).sum(axis=1).tolist())
"""
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           env=_env(CACHEDB=str(tmp_path / "tinygrad.db"), SVOD_CACHE_DIR=str(tmp_path / "svod1")))
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=_env(CACHEDB=str(tmp_path / "tinygrad.db"), SVOD_CACHE_DIR=str(tmp_path / "svod2"),
                                     SVOD_COMPILE="0", ASSERT_COMPILE="1"))
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout == "[117.0, 381.0, 645.0]\n"
    # A process without the first one's cache does compile: the check above can fail.
    third = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           env=_env(CACHEDB=str(tmp_path / "other.db"), SVOD_CACHE_DIR=str(tmp_path / "svod3"),
                                    ASSERT_COMPILE="1"))
    assert third.returncode != 0 and "tried to compile with ASSERT_COMPILE set" in third.stderr


VARIANTS_SCRIPT = """
import numpy as np, svod.tinygrad
from tinygrad import Tensor, TinyJit
rng = np.random.default_rng(3)
w = Tensor(rng.standard_normal((64, 32), dtype=np.float32), device="SVOD").realize()
@TinyJit
def f(x):
    return (x @ w).relu().contiguous().sum(1) + x.mean()
x = rng.standard_normal((8, 64), dtype=np.float32)
for _ in range(4): out = f(Tensor(x, device="SVOD").realize()).numpy()
print(out.tobytes().hex())
"""


def test_svod_variants_chooses_exact_variants_for_jitted_graphs_and_a_second_process_times_none(tmp_path):
    """SVOD_VARIANTS=1: every jitted graph's plan runs its kernels' exact variants, chosen by
    measurement when the graph is recorded; the outputs are those of the default recipe, and a
    second process sharing the cache times nothing (svod's SVOD_DEBUG lines say which)."""
    runs = []
    for switch in ["0", "1", "1"]:
        run = subprocess.run([sys.executable, "-c", VARIANTS_SCRIPT], capture_output=True, text=True, timeout=300,
                             env=_env(CACHEDB=str(tmp_path / "tinygrad.db"), SVOD_CACHE_DIR=str(tmp_path / "svod"),
                                      SVOD_VARIANTS=switch, SVOD_DEBUG="1"))
        assert run.returncode == 0, run.stderr
        runs.append(run)
    off, first, second = runs
    assert off.stdout == first.stdout == second.stdout  # exact variants: the same bits
    assert "variants of" not in off.stderr
    assert "variants of" in first.stderr and "(from the cache)" not in first.stderr, first.stderr
    chosen = [line for line in second.stderr.splitlines() if "variants of" in line]
    assert chosen and all("(from the cache)" in line for line in chosen), second.stderr


def test_svod_variants_tolerance_lets_inexact_variants_compete_and_turns_variants_on(tmp_path):
    """SVOD_VARIANTS_TOLERANCE=ATOL,RTOL alone chooses variants with the inexact recipe among the
    candidates (exact ones only without it); SVOD_VARIANTS=0 beside it keeps variants off, and a
    malformed tolerance is an error naming the variable."""
    def run(**env):
        return subprocess.run([sys.executable, "-c", VARIANTS_SCRIPT], capture_output=True, text=True, timeout=300,
                              env=_env(CACHEDB=str(tmp_path / "tinygrad.db"), SVOD_CACHE_DIR=str(tmp_path / "svod"),
                                       SVOD_DEBUG="1", **env))
    inexact = run(SVOD_VARIANTS_TOLERANCE="1e-3,1e-3")
    assert inexact.returncode == 0, inexact.stderr
    assert "variants of" in inexact.stderr and "O3_reassoc" in inexact.stderr, inexact.stderr
    exact = run(SVOD_VARIANTS="1")
    assert exact.returncode == 0 and "variants of" in exact.stderr and "O3_reassoc" not in exact.stderr, exact.stderr
    off = run(SVOD_VARIANTS="0", SVOD_VARIANTS_TOLERANCE="1e-3,1e-3")
    assert off.returncode == 0 and "variants of" not in off.stderr, off.stderr
    bad = run(SVOD_VARIANTS_TOLERANCE="close")
    assert bad.returncode != 0 and 'SVOD_VARIANTS_TOLERANCE="close": expected ATOL,RTOL' in bad.stderr, bad.stderr


def test_the_renderer_writes_a_stored_vector_element_by_element(tg, monkeypatch):
    """SVODRenderer stores a vector built from elements as one store per element, so that clang's
    SLP vectoriser may join a tile's stores into vectors as wide as the machine's; each element is
    computed as before (the operator suite above compares every operator's bits with tinygrad's
    CPU device)."""
    Tensor, _, _, backend = tg
    sources = []
    render = backend.SVODRenderer.render

    def recording(self, *args, **kwargs):
        sources.append(render(self, *args, **kwargs))
        return sources[-1]

    monkeypatch.setattr(backend.SVODRenderer, "render", recording)
    x = np.arange(64, dtype=np.float32)
    assert np.array_equal((Tensor(x, device="SVOD") * 2.5 - 0.75).numpy(), x * 2.5 - 0.75)
    (source,) = [s for s in sources if "data0_64" in s]
    assert "float4 val0 = (*((float4*)((data1_64" in source  # the kernel is tiled by 4: a float4 load
    assert "(float4*)((data0_64" not in source  # and no float4 store
    assert all(f"*((data0_64+alu0)+{i}) = " in source for i in range(4)), source


def test_tinygrads_disk_cache_keys_svod_binaries_by_the_cpu_recipe(tg):
    """A binary that another recipe built (svod built its kernels at -O2 before) is not taken from
    tinygrad's cache, as svod's object cache does not take its objects."""
    assert svod.cpu_recipe == "O3"
    assert tg[3].SVODCompiler().cachekey == \
        f"compile_svod_{svod.__version__}_{svod.program_binary_format}_{svod.cpu_recipe}"


def test_a_kernel_that_faults_is_a_runtime_error_for_tinygrad(tg):
    """tinygrad takes a RuntimeError from a launch as a failed kernel (BEAM search records the
    candidate as failed and goes on): a fault is both svod.KernelFault and RuntimeError."""
    from tinygrad import Device
    from tinygrad.device import TinyELF
    from tinygrad.dtype import dtypes
    backend = tg[3]
    source = "void bad(float* restrict data0) { *(volatile float*)(data0 - (1L << 40)) = 1.0f; }\n"
    binary = backend.SVODCompiler().compile(source)
    obj = TinyELF(lib=binary, name="bad", target=Device["SVOD"].renderer.target,
                  signature=(("data0", 0, dtypes.float32, (4,)),))
    program = backend.SVODProgram(Device["SVOD"], obj)
    with pytest.raises(RuntimeError) as info:
        program(svod.device("CPU").allocate("u8", 16), wait=True)
    assert isinstance(info.value, svod.KernelFault) and info.value.signal_name == "SIGSEGV"
    assert "bad" in str(info.value)



def test_a_candidate_past_tinygrads_timeout_is_a_runtime_error_and_the_next_call_runs(tg):
    """BEAM search times each candidate with timeout= (ms, its early stop): svod stops a kernel that
    runs past it (svod.time_limit), which tinygrad takes as a failed candidate."""
    from tinygrad import Device
    from tinygrad.device import TinyELF
    from tinygrad.dtype import dtypes
    backend = tg[3]
    source = "void spin(float* restrict data0) { while (*(volatile float*)data0 == 0.0f) { } }\n"
    obj = TinyELF(lib=backend.SVODCompiler().compile(source), name="spin", target=Device["SVOD"].renderer.target,
                  signature=(("data0", 0, dtypes.float32, (4,)),))
    program = backend.SVODProgram(Device["SVOD"], obj)
    data = svod.device("CPU").allocate("f32", 4)
    with pytest.raises(RuntimeError) as info:
        program(data, wait=True, timeout=50)
    assert isinstance(info.value, svod.TimeoutError) and "time limit of 0.05 s" in str(info.value)
    data.numpy()[0] = 1.0
    assert program(data, wait=True, timeout=50) < 1.0