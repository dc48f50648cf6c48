"""tinygrad's BEAM search on DEV=SVOD (svod/tinygrad_search.py): svod's loop finds a kernel that
computes what the kernel without search computes, compiles and times its candidates with svod
(its counters move, tinygrad's own timing is never called), leaves the result in tinygrad's beam
cache for the next process, leaves kernels whose default schedule is fast enough unsearched under
SVOD_BEAM_SKIP_BELOW, and SVOD_BEAM=0 gives tinygrad's own loop back.

Each search runs in a fresh process with its own tinygrad cache database and svod object cache.
tinygrad is the checkout at SVOD_TINYGRAD_DIR (default shared/tinygrad beside the repository
folder); without it these tests skip."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
if not (TINYGRAD_DIR / "tinygrad" / "__init__.py").is_file():
    pytest.skip(f"tinygrad is not at {TINYGRAD_DIR} (set SVOD_TINYGRAD_DIR)", allow_module_level=True)

# A 32 x 48 by 48 x 24 matmul of small integers in float32: every partial sum is exact, so any
# schedule the search picks gives the same bits as the one without search.
CHILD = r"""
import json, os
import numpy as np
import svod.tinygrad, svod.tinygrad_search
from tinygrad import Context, Tensor
from tinygrad.codegen.opt import search
tinygrad_timed = 0
time_program = search._time_program
def counting(*args, **kwargs):
    global tinygrad_timed
    tinygrad_timed += 1
    return time_program(*args, **kwargs)
search._time_program = counting
rng = np.random.default_rng(0)
a = Tensor(rng.integers(-4, 5, (32, 48)).astype(np.float32), device="SVOD").realize()
b = Tensor(rng.integers(-4, 5, (48, 24)).astype(np.float32), device="SVOD").realize()
with Context(BEAM=0):
    want = (a @ b).numpy()
with Context(BEAM=int(os.environ["TEST_BEAM"])):
    got = (a @ b).contiguous().numpy()  # another kernel than the first: searched
print(json.dumps({"same": got.tobytes() == want.tobytes(), "exact": bool((want == a.numpy() @ b.numpy()).all()),
                  "stats": svod.tinygrad_search.stats, "tinygrad_timed": tinygrad_timed}))
"""


def search(tmp_path, beam: int = 1, parallel: int = 0, **env) -> dict:
    child_env = {k: v for k, v in os.environ.items() if k not in ("BEAM", "DEBUG", "IGNORE_BEAM_CACHE", "SVOD_BEAM", "SVOD_BEAM_SKIP_BELOW")}
    child_env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(TINYGRAD_DIR), os.environ.get("PYTHONPATH")])),
                     CACHEDB=str(tmp_path / "tinygrad.db"), SVOD_CACHE_DIR=str(tmp_path / "svod"),
                     PARALLEL=str(parallel), TEST_BEAM=str(beam), **env)
    done = subprocess.run([sys.executable, "-c", CHILD], env=child_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_svods_loop_finds_a_kernel_with_the_same_outputs_and_does_the_compiling_and_timing(tmp_path):
    first = search(tmp_path, beam=2)
    assert first["exact"] and first["same"]
    stats = first["stats"]
    assert stats["searches"] == 1 and stats["cached"] == 0, stats
    assert stats["rounds"] >= 1 and stats["rendered"] >= stats["compiled"] >= stats["timed"] > 0, stats
    assert first["tinygrad_timed"] == 0  # tinygrad's timing of candidates never ran

    # The next process finds the search's result in tinygrad's beam cache: no search.
    again = search(tmp_path, beam=2)
    assert again["same"]
    assert again["stats"]["searches"] == 0 and again["stats"]["cached"] == 1, again["stats"]


def test_each_thread_count_gets_a_search_of_its_own(tmp_path):
    # A one-thread search's schedules cannot split a kernel into core_id slices: at two threads the
    # kernel is searched again, and a later two-thread process finds that search.
    one = search(tmp_path, beam=1, NUM_CPU_THREADS="1")
    assert one["same"] and one["stats"]["searches"] == 1, one["stats"]
    two = search(tmp_path, beam=1, NUM_CPU_THREADS="2")
    assert two["same"] and two["stats"]["searches"] == 1 and two["stats"]["cached"] == 0, two["stats"]
    again = search(tmp_path, beam=1, NUM_CPU_THREADS="2")
    assert again["same"] and again["stats"]["searches"] == 0 and again["stats"]["cached"] == 1, again["stats"]


def test_a_kernel_faster_than_the_skip_limit_is_not_searched_and_the_next_process_does_not_time_it(tmp_path):
    first = search(tmp_path, beam=2, SVOD_BEAM_SKIP_BELOW="60")
    assert first["same"]
    stats = first["stats"]
    assert stats["skipped"] == 1 and stats["searches"] == 0 and stats["rounds"] == 0, stats
    assert stats["timed"] == 1, stats  # the default schedule, and nothing else

    again = search(tmp_path, beam=2, SVOD_BEAM_SKIP_BELOW="60")
    assert again["same"]
    assert again["stats"]["skipped_cached"] == 1 and again["stats"]["timed"] == 0, again["stats"]

    # Another limit is another decision: this one (a nanosecond) searches the kernel.
    searched = search(tmp_path, beam=2, SVOD_BEAM_SKIP_BELOW="1e-9")
    assert searched["same"]
    assert searched["stats"]["searches"] == 1 and searched["stats"]["skipped"] == 0, searched["stats"]


def test_tables_an_earlier_svod_wrote_are_left_alone(tmp_path):
    # An earlier svod kept its results in tables of the same database under other names, one of
    # them with a key of fewer fields (no thread count); tinygrad's diskcache cannot store a key
    # with another field in such a table. svod's tables now carry a version: the kernel is timed
    # and its decision stored again, and the earlier tables are not read.
    earlier = ("from tinygrad.helpers import diskcache_put; "
               "diskcache_put('svod_beam_skipped', {'ast': 'x', 'amt': 2, 'skip_below': 60.0}, True); "
               "diskcache_put('svod_beam_search', {'ast': 'x', 'amt': 2, 'global_max': '()'}, [])")
    env = dict(os.environ, PYTHONPATH=str(TINYGRAD_DIR), CACHEDB=str(tmp_path / "tinygrad.db"))
    subprocess.run([sys.executable, "-c", earlier], env=env, check=True, timeout=120)
    first = search(tmp_path, beam=2, SVOD_BEAM_SKIP_BELOW="60")
    assert first["same"] and first["stats"]["skipped"] == 1, first["stats"]
    again = search(tmp_path, beam=2, SVOD_BEAM_SKIP_BELOW="60")
    assert again["same"] and again["stats"]["skipped_cached"] == 1, again["stats"]


def test_svods_loop_renders_in_tinygrads_worker_processes(tmp_path):
    # tinygrad's pool of spawned workers renders the candidates with svod's source renderer, which
    # they unpickle (importing svod.tinygrad_search); the compile and timing stay here.
    result = search(tmp_path, beam=1, parallel=2)
    assert result["same"]
    assert result["stats"]["searches"] == 1 and result["stats"]["timed"] > 0, result["stats"]
    assert result["tinygrad_timed"] == 0


def test_svod_beam_off_gives_tinygrads_own_loop(tmp_path):
    result = search(tmp_path, beam=1, SVOD_BEAM="0")
    assert result["same"]
    assert result["stats"]["searches"] == 0 and result["stats"]["timed"] == 0, result["stats"]
    assert result["tinygrad_timed"] > 0


def test_a_malformed_svod_beam_is_a_validation_error(tmp_path):
    with pytest.raises(AssertionError, match=r'SVOD_BEAM="sometimes": expected 1 or 0'):
        search(tmp_path, beam=1, SVOD_BEAM="sometimes")
    with pytest.raises(AssertionError, match=r'SVOD_BEAM_SKIP_BELOW="soon": expected a positive number of seconds'):
        search(tmp_path, beam=1, SVOD_BEAM_SKIP_BELOW="soon")
