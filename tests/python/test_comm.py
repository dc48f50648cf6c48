"""svod.comm: collectives from Python on numpy arrays, DLPack tensors and svod.Buffers, ranks as threads
(run_local) and as processes (mpirun, over shared memory and over TCP only), plans with collectives, and the
data-parallel example's bits on 1, 2 and 4 ranks."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import svod
import svod.comm
from conftest import REPO, python_exits_cleanly

PLANS = REPO / "tests" / "planfile" / "data"
EXAMPLE = REPO / "examples" / "python" / "data_parallel.py"


def in_rank_order(parts, op):
    """What svod's reductions promise: element i combined left to right in rank order, in the dtype."""
    out = parts[0].copy()
    for p in parts[1:]:
        out = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op](out, p)
    return out


def contribution(rank, n=37, dtype=np.float32):
    rng = np.random.default_rng(rank)
    return (rng.standard_normal(n) * 10 ** rank).astype(dtype)


def test_world_without_a_launcher_is_one_local_rank():
    c = svod.comm.world()
    assert (c.rank, c.world_size, c.transport) == (0, 1, "local")
    assert c.backend == "local"  # transport's old name
    assert "rank 0 of 1" in repr(c)
    x = np.arange(5, dtype=np.float32)
    assert c.all_reduce(x) is x
    np.testing.assert_array_equal(x, np.arange(5))
    assert svod.comm.world().rank == 0
    with pytest.raises(svod.ValidationError, match="unknown communicator transport"):
        svod.comm.world("nccl")
    # backend= is transport='s old name; both given must agree.
    assert svod.comm.world(backend="local").transport == "local"
    assert svod.comm.world("local", backend="local").transport == "local"
    with pytest.raises(svod.ValidationError, match=r'world: transport="local" and backend="mpi" differ \(backend is '
                                                   r'the old name of transport\): give one'):
        svod.comm.world("local", backend="mpi")
    with pytest.raises(svod.ArgumentTypeError, match="cannot be created directly"):
        svod.comm.Communicator()


@pytest.mark.parametrize("op", svod.comm.REDUCE_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.float16])
def test_all_reduce_is_rank_order_bit_for_bit(op, dtype):
    ranks = 4
    parts = [contribution(r, dtype=np.float64).astype(dtype) for r in range(ranks)]

    def rank(c):
        x = parts[c.rank].copy()
        c.all_reduce(x, op=op)
        return x

    expected = in_rank_order(parts, op) if dtype != np.float16 else None
    results = svod.comm.run_local(ranks, rank)
    for x in results:
        assert x.tobytes() == results[0].tobytes()  # the same bits on every rank
    if expected is not None:
        assert results[0].tobytes() == expected.tobytes()
    else:  # f16 is combined in f32 and rounded once
        f32 = in_rank_order([p.astype(np.float32) for p in parts], op)
        with np.errstate(over="ignore"):  # products past f16's range become inf, in svod too
            assert results[0].tobytes() == f32.astype(np.float16).tobytes()


def test_every_collective_on_numpy_buffers_and_dlpack():
    ranks = 3
    cpu = svod.device("CPU")

    class DLPackOnly:  # a producer that is neither numpy nor svod
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    def rank(c):
        r, n = c.rank, c.world_size
        out = {}
        # all_gather: a new array of shape (world_size, *x.shape), or the given out.
        g = c.all_gather(np.full((2, 2), r, np.int32))
        out["gather"] = g
        buf = cpu.allocate("f32", (n, 3))
        assert c.all_gather(np.full(3, r + 0.5, np.float32), out=buf) is buf
        out["gather_buffer"] = buf.numpy().copy()
        # reduce_scatter: part k of every rank's x, summed, lands on rank k.
        out["scatter"] = c.reduce_scatter(np.arange(2 * n, dtype=np.float64) * (r + 1))
        # broadcast from the last rank, in place on a svod.Buffer.
        b = cpu.allocate("i64", 4)
        b.numpy()[:] = r
        c.broadcast(b, root=n - 1)
        out["broadcast"] = b.numpy().copy()
        # all_reduce on a DLPack producer: its memory changes in place.
        d = np.full(4, r, np.float32)
        c.all_reduce(DLPackOnly(d), op="max")
        out["dlpack"] = d
        # send/recv around a ring.
        msg = np.full(2, r, np.int16)
        got = np.empty(2, np.int16)
        if r % 2 == 0:
            c.send(msg, dest=(r + 1) % n, tag=7)
            c.recv(got, source=(r - 1) % n, tag=7)
        else:
            c.recv(got, source=(r - 1) % n, tag=7)
            c.send(msg, dest=(r + 1) % n, tag=7)
        out["ring"] = got
        c.barrier()
        return out

    results = svod.comm.run_local(ranks, rank)
    for r, out in enumerate(results):
        assert out["gather"].shape == (ranks, 2, 2)
        np.testing.assert_array_equal(out["gather"][:, 0, 0], range(ranks))
        np.testing.assert_array_equal(out["gather_buffer"][:, 0], [k + 0.5 for k in range(ranks)])
        total = sum(np.arange(2 * ranks, dtype=np.float64) * (k + 1) for k in range(ranks))
        np.testing.assert_array_equal(out["scatter"], total[2 * r:2 * r + 2])
        np.testing.assert_array_equal(out["broadcast"], [ranks - 1] * 4)
        np.testing.assert_array_equal(out["dlpack"], [ranks - 1] * 4)
        np.testing.assert_array_equal(out["ring"], [(r - 1) % ranks] * 2)


def test_mismatched_calls_fail_on_every_rank():
    def rank(c):
        try:
            c.all_reduce(np.zeros(4 + c.rank, np.float32))
        except svod.ValidationError as e:
            return str(e)
        return "no error"

    messages = svod.comm.run_local(2, rank)
    for m in messages:
        assert "ranks disagree on call #0: rank 0 called all_reduce(f32 x 4, sum) but rank 1 called " \
               "all_reduce(f32 x 5, sum)" in m, messages


def test_a_failing_rank_is_named_and_its_exception_raised():
    def rank(c):
        if c.rank == 1:
            raise KeyError("rank one gave up")
        try:
            c.barrier()
        except svod.ExecutionError as e:
            assert "rank 1" in str(e) and "rank one gave up" in str(e)
            return "named"
        return "not named"

    with pytest.raises(KeyError, match="rank one gave up"):
        svod.comm.run_local(3, rank)


def test_bad_arguments():
    def rank(c):
        with pytest.raises(svod.ValidationError, match="sum, prod, min|unknown|reduce"):
            c.all_reduce(np.zeros(2, np.float32), op="mean")
        with pytest.raises(svod.ArgumentTypeError, match="all_reduce: x"):
            c.all_reduce([1.0, 2.0])
        with pytest.raises(svod.ArgumentTypeError, match="broadcast: root"):
            c.broadcast(np.zeros(2), root="0")
        read_only = np.zeros(2, np.float32)
        read_only.flags.writeable = False
        with pytest.raises(svod.ValidationError, match="all_reduce: x"):
            c.all_reduce(read_only)
        with pytest.raises(svod.ValidationError, match="all_reduce: x"):
            c.all_reduce(np.zeros((4, 4), np.float32)[:, 0])  # not contiguous
        # Views of one array are separate wraps of the same memory.
        whole = np.zeros(2 * c.world_size, np.float32)
        with pytest.raises(svod.ValidationError, match="all_gather: the source and destination overlap"):
            c.all_gather(whole[:2], out=whole)
        with pytest.raises(svod.ValidationError, match="reduce_scatter: the source and destination overlap"):
            c.reduce_scatter(whole, out=whole[2:])
        return True

    # Each rank's own argument errors: no collective ran, so the ranks stay in step.
    assert svod.comm.run_local(2, rank) == [True, True]
    with pytest.raises(svod.ValidationError, match="run_local: ranks = 0"):
        svod.comm.run_local(0, lambda c: None)
    with pytest.raises(svod.ArgumentTypeError, match="run_local: fn"):
        svod.comm.run_local(2, 5)
    with pytest.raises(svod.ArgumentTypeError, match="load_plan: comm"):
        svod.load_plan(PLANS / "collective.json", comm="world")


def test_a_plan_with_collectives_runs_on_the_given_ranks():
    def rank(c):
        plan = svod.load_plan(PLANS / "collective.json", vars={"N": 16}, comm=c)
        outputs = plan.run()
        return {k: np.asarray(v).copy() for k, v in outputs.items()}

    for ranks in (1, 2, 4):
        for out in svod.comm.run_local(ranks, rank):
            np.testing.assert_array_equal(out["part"], [120])
            np.testing.assert_array_equal(out["w"], [0, 1, 2, 3])
            np.testing.assert_array_equal(out["mean"], [1, 1, 1, 1])


def test_local_rank_and_a_plan_on_the_ranks_local_device(tmp_path):
    world = svod.comm.world()
    assert (world.local_rank, world.local_size) == (0, 1)
    assert svod.comm.run_local(3, lambda c: (c.rank, c.local_rank, c.local_size)) == [(0, 0, 3), (1, 1, 3), (2, 2, 3)]
    # "CPU:local" is the CPU on every rank; "CL:local" (when there is OpenCL)
    # is CL:(local_rank % count): one plan file for every rank.
    names = ["CPU:local"] + (["CL:local"] if any(d.name.startswith("CL:") and d.available for d in svod.devices())
                             else [])
    for name in names:
        plan_file = tmp_path / "local.json"
        plan_file.write_text(json.dumps({
            "svod_plan": 1, "device": name,
            "buffers": {"g": {"dtype": "f32", "count": 4, "init": {"fill": 1}}},
            "ops": [{"collective": {"kind": "all_reduce", "buffers": ["g"], "op": "sum"}}]}))

        def rank(c):
            plan = svod.load_plan(plan_file, comm=c)
            plan.execute()
            return plan.buffers["g"].device

        devices = svod.comm.run_local(2, rank)
        count = sum(d.name.startswith("CL:") and d.available for d in svod.devices())
        assert devices == (["CPU", "CPU"] if name == "CPU:local" else [f"CL:{r % count}" for r in range(2)])
    plan_file.write_text(json.dumps({"svod_plan": 1, "device": "CL:foo",
                                     "buffers": {"g": {"dtype": "f32", "count": 4}}, "ops": []}))
    with pytest.raises(svod.ValidationError, match=r'device: device "CL:foo": expected KIND, KIND:INDEX or KIND:local'):
        svod.load_plan(plan_file)


def test_a_plan_keeps_its_local_communicator_after_run_local():
    plans = svod.comm.run_local(1, lambda c: svod.load_plan(PLANS / "collective.json", comm=c))
    np.testing.assert_array_equal(np.asarray(plans[0].run()["part"]), [120])


def example(*args, launcher=(), env=None):
    result = subprocess.run([*launcher, sys.executable, str(EXAMPLE), "--steps", "12", *args],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    digest = re.search(r"weights sha256 ([0-9a-f]{64})", result.stdout)
    assert digest and "bitwise identical on every rank" in result.stdout, result.stdout
    return digest.group(1), result.stdout


def test_data_parallel_example_gives_the_same_bits_on_1_2_and_4_local_ranks():
    one, out = example("--ranks", "1")
    assert "1 ranks (local)" in out
    assert [example("--ranks", str(n))[0] for n in (2, 4)] == [one, one]


MPIRUN = shutil.which("mpirun")
PLUGIN = os.path.join(os.environ.get("SVOD_BINARY_DIR", ""), "runtime", "libsvod_comm_mpi.so")


def mpirun_env(tmp_path):
    """The environment of an mpirun: as root, the svod under test, its session files in tmp_path (two
    mpiruns starting at once, from other tests, both make /tmp/ompi.HOST.UID and one fails)."""
    package_root = os.path.dirname(os.path.dirname(svod.__file__))
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", SVOD_COMM_TIMEOUT="120",
                OMPI_MCA_orte_tmpdir_base=str(tmp_path),
                PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))


@pytest.mark.skipif(MPIRUN is None or not os.path.exists(PLUGIN),
                    reason="needs OpenMPI's mpirun and svod's mpi plugin (SVOD_BINARY_DIR)")
def test_data_parallel_example_under_mpirun_over_shared_memory_and_tcp(tmp_path):
    env = mpirun_env(tmp_path)
    one, _ = example("--ranks", "1", env=env)
    tcp = dict(env, OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo")
    for ranks, transport in ((2, env), (4, env), (2, tcp)):
        digest, out = example(launcher=(MPIRUN, "--oversubscribe", "-np", str(ranks)), env=transport)
        assert f"{ranks} ranks (mpi)" in out, out
        assert digest == one, (ranks, transport.get("OMPI_MCA_btl"))


@pytest.mark.skipif(MPIRUN is None or not os.path.exists(PLUGIN),
                    reason="needs OpenMPI's mpirun and svod's mpi plugin (SVOD_BINARY_DIR)")
def test_an_uncaught_exception_on_one_mpi_rank_fails_the_others_at_once(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("""
import time, svod.comm
c = svod.comm.world()
if c.rank == 1:
    raise RuntimeError("rank one gave up")
start = time.monotonic()
try:
    c.barrier()
except svod.ExecutionError as e:
    print(f"rank 0: {e} after {time.monotonic() - start:.0f} s")
""")
    env = mpirun_env(tmp_path)
    result = subprocess.run([MPIRUN, "--oversubscribe", "-np", "2", sys.executable, str(script)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode != 0
    assert "RuntimeError: rank one gave up" in result.stderr  # rank 1's traceback, printed first
    assert re.search(r"rank 0: .*barrier\(\) failed because rank 1 failed: RuntimeError: rank one gave up "
                     r"after [0-9] s", result.stdout), result.stdout + result.stderr


def test_a_failed_plan_leaves_the_one_rank_world_usable(tmp_path):
    plan_file = tmp_path / "touch.json"
    plan_file.write_text("""{
      "svod_plan": 1,
      "variables": { "N": { "min": 0, "max": 4, "value": 0 } },
      "buffers": { "g": { "dtype": "f32", "count": 4, "init": { "fill": 1 } } },
      "programs": { "touch": { "language": "c", "entry": "touch",
                               "source": "void touch(float* g, int r) { if (r) g[0] = __builtin_nanf(\\"\\"); }",
                               "buffers": [ { "name": "g", "access": "readwrite" } ],
                               "scalars": [ { "name": "r", "type": "i32" } ] } },
      "ops": [ { "run": "touch", "buffers": ["g"], "scalars": { "r": "N" } },
               { "collective": { "kind": "all_reduce", "buffers": ["g"], "op": "sum" } } ],
      "outputs": { "g": { } }
    }""")
    world = svod.comm.world()
    plan = svod.load_plan(plan_file, comm=world)
    with svod.checked("nan"), pytest.raises(svod.ExecutionError, match="NaN"):
        plan.run(vars={"N": 1})  # fails in its first op
    np.testing.assert_array_equal(world.all_reduce(np.ones(2, np.float32)), [1, 1])


def test_run_local_in_a_daemon_thread_lets_the_interpreter_exit():
    # The main thread leaves while both ranks loop in collectives: CPython ends them as it finalizes,
    # which used to abort the interpreter ("PyGILState_Release: thread state must be current", issue 40).
    code = ("import threading, time, numpy as np, svod.comm\n"
            "def rank(c):\n"
            "    x = np.ones(1000, np.float32)\n"
            "    while True:\n"
            "        c.all_reduce(x)\n"
            "threading.Thread(target=lambda: svod.comm.run_local(2, rank), daemon=True).start()\n"
            "time.sleep(0.3)\n")
    python_exits_cleanly(code, 8)
