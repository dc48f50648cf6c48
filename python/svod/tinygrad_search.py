"""tinygrad's BEAM search on svod (svod.tinygrad installs it; SVOD_BEAM=0 gives tinygrad's own loop back).

tinygrad's loop (tinygrad/codegen/opt/search.py, beam_search) renders and compiles each candidate in
its worker processes, one task a candidate, then loads and times each one in the main process with
tinygrad's own launch machinery. For a kernel of the SVOD device this module runs the same search
with svod doing svod's part:

- the same candidates: tinygrad's get_kernel_actions from the beam, rendered by tinygrad's own
  _try_compile (in its worker processes when it has them) with a renderer whose compile step is
  tinygrad's empty one, so a worker returns the C source as the candidate's binary; the same filters
  (a candidate that fails to render or has too many uops, a source already seen, more than 1000
  times the least compute);
- compiled together: every candidate of a round in one svod compile_many on svod's pool, in this
  process with the GIL released, through svod's kernel and object caches (a candidate compiled
  before, in any process, costs a cache lookup);
- timed together: one svod.benchmark_round_robin of the round's candidates on the search's buffers,
  three runs each as tinygrad's, with tinygrad's early stop (three times the beam's best so far) and, as tinygrad's BEAM_DEV_TIMEOUT
  asks, each run stopped past that too; a candidate's time is the median of its runs (svod's one
  rule, benchmark.h), times tinygrad's test-size factor;
- the same choice: the beam is the `amt` fastest, with tinygrad's rule for when to stop, and the
  result goes to tinygrad's beam cache under tinygrad's key, for tinygrad's own loop, and to a table
  of svod's under that key and the renderer's launch limits (NUM_CPU_THREADS on the CPU), which
  svod's loop reads: tinygrad's key leaves the thread count out, so a one-thread search's schedules
  would run single-threaded on two. A later process with the same threads searches nothing.

Two things tinygrad's loop does not do. The kernel's default schedule (tinygrad's
hand_coded_optimizations, what it runs without BEAM) is timed first, the same way, and the search's
result is never slower than it: where the search finds nothing faster, the default is the result.
And with SVOD_BEAM_SKIP_BELOW=SECONDS a kernel whose default takes less is not searched at all: a
model's time is mostly in a few kernels, and a search of every small one costs minutes of rendering
for microseconds of gain. That decision is cached too (in a table of its own, keyed by the limit),
so a later process neither searches nor times the kernel.

The chosen kernel is then built by tinygrad as any other (to_program), its correctness tinygrad's.
`stats` counts what the loop did, for tests and benchmarks.
"""
from __future__ import annotations

import copy
import functools
import math
import time

from tinygrad.codegen.opt import search
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.device import Compiler, Device
from tinygrad.engine.worker import get_worker_pool, terminate_worker_pool
from tinygrad.helpers import (CACHELEVEL, DEBUG, IGNORE_BEAM_CACHE, colored, diskcache_get, diskcache_put, flatten,
                              getenv, time_to_str)
from tinygrad.uop.ops import Ops, sym_infer

import svod
from svod.tinygrad import _CPU, SVODProgram, SVODRenderer, _parameters

# What the svod loop did in this process: searches run and answered by tinygrad's beam cache, kernels
# left unsearched under SVOD_BEAM_SKIP_BELOW (timed here, or answered by the cache), searches whose
# result is the default schedule because nothing found was faster, rounds, candidates rendered (after
# tinygrad's filters), compiled and timed, and the seconds of each phase (rendering in tinygrad's
# workers or here, svod's compile, svod's timing; the default schedule's counted in its phases too).
stats = {"searches": 0, "cached": 0, "skipped": 0, "skipped_cached": 0, "kept_default": 0, "rounds": 0,
         "rendered": 0, "compiled": 0, "timed": 0, "render_s": 0.0, "compile_s": 0.0, "time_s": 0.0}

_tinygrad_beam_search = search.beam_search

# svod's tables in tinygrad's cache database: a search's result and a kernel left unsearched. The
# version changes with what a result means (the candidates offered, how they are rendered) and with
# a key's fields: tinygrad's diskcache makes a table with the columns of the first key stored in it
# and fails to store a key with another field there.
_RESULTS, _SKIPPED = "svod_beam_search_v2", "svod_beam_skipped_v2"


class _SourceRenderer(SVODRenderer):
    """SVODRenderer whose compile step is tinygrad's empty one (Compiler(): the source's bytes, no
    cache), so that rendering a candidate leaves its compile to the round's compile_many. A class
    of its own: tinygrad's to_program cache keys on the renderer's type."""

    def __init__(self, target):
        super().__init__(target)
        self.compiler = Compiler()


@functools.cache
def _source_renderer(target) -> _SourceRenderer:
    return _SourceRenderer(target)


def _rendered(candidates: list, var_vals: dict, seen: set, pool) -> list[tuple[int, object]]:
    """(index, PROGRAM) of the candidates that tinygrad's loop would time: rendered by tinygrad's
    _try_compile (in its worker processes where it has a pool), without those that failed, whose
    source was seen before, or that take more than 1000 times the least compute so far."""
    renderer = _source_renderer(candidates[0].ren.target)
    tasks = []
    for i, candidate in enumerate(candidates):
        task = copy.copy(candidate)  # _try_compile copies it again before it applies anything
        task.ren = renderer
        tasks.append((i, task))
    kept, least = [], math.inf
    for i, proc in (map if pool is None else pool.imap_unordered)(search._try_compile, tasks):
        if proc is None: continue
        prg = proc[0]
        if (source := prg.src[3].arg) in seen: continue
        estimates = prg.src[0].arg.estimates
        least = min(ops := sym_infer(estimates.ops if estimates is not None else 0, var_vals), least)
        if least * 1000 < ops: continue
        seen.add(source)
        kept.append((i, prg))
    return kept


def _compiled(rendered: list, dev) -> list[tuple[int, object, SVODProgram]]:
    """(index, PROGRAM, SVODProgram) of the rendered candidates that compile, all compiled at once
    by svod's compile_many; one that fails is left out, as tinygrad's loop leaves it."""
    elves = [prg.to_elf() for _, prg in rendered]
    made = _CPU.compile_many([{"source": elf.lib.decode(), "entry": elf.name, "name": elf.name,
                               **_parameters(elf.signature)} for elf in elves], errors="return")
    return [(i, prg, SVODProgram(dev, elf, program))
            for (i, prg), elf, program in zip(rendered, elves, made) if not isinstance(program, svod.Error)]


def _timed(compiled: list, rawbufs: list, var_vals: dict, best: float, allow_test_size: bool) -> list[tuple[int, float]]:
    """(index, seconds) of each compiled candidate that ran, timed in one svod round robin on the
    search's buffers: 3 runs each and no warm-up, as tinygrad's (the median leaves out a cold first
    run), retired once sure to be over 3 times `best` (the beam's time so far), each run stopped past
    that when BEAM_DEV_TIMEOUT (in whole milliseconds, none under one, as tinygrad limits its launches)."""
    early_stop = best * 3
    limit_ms = int(early_stop * 1e3) if getenv("BEAM_DEV_TIMEOUT", 1) and early_stop < math.inf else 0
    runs, factors = [], []
    for _, prg, program in compiled:
        if allow_test_size:
            global_size, factor = search.get_test_global_size(prg.arg.global_size, 65536, var_vals)
        else:
            global_size, factor = prg.arg.launch_dims(var_vals)[0], 1
        args = [rawbufs[g]._buf for g in prg.arg.globals] + list(program.scalar_args(prg.arg.vals(var_vals)))
        runs.append((program.prg, args, tuple(global_size)))
        factors.append(factor)
    result = svod.benchmark_round_robin(runs, warmup=0, runs=3, early_stop=3.0,
                                        best_known=best if best < math.inf else None,
                                        launch_timeout=limit_ms / 1e3 if limit_ms else None)
    return [(i, r.median * 1e-9 * factor)
            for (i, _, _), r, error, factor in zip(compiled, result.results, result.errors, factors) if error is None]


def _timed_phases(candidates: list, var_vals: dict, seen: set, pool, rawbufs: list, best: float,
                  allow_test_size: bool, dev) -> tuple[list[tuple[int, float]], tuple[float, float, float]]:
    """(index, seconds) of the candidates that rendered, compiled and ran, and the seconds that
    rendering, compiling and timing them took; each counted in `stats`."""
    t0 = time.perf_counter()
    rendered = _rendered(candidates, var_vals, seen, pool) if candidates else []
    t1 = time.perf_counter()
    compiled = _compiled(rendered, dev) if rendered else []
    t2 = time.perf_counter()
    timed = _timed(compiled, rawbufs, var_vals, best, allow_test_size) if compiled else []
    t3 = time.perf_counter()
    stats["rendered"] += len(rendered)
    stats["compiled"] += len(compiled)
    stats["timed"] += len(timed)
    stats["render_s"] += t1 - t0
    stats["compile_s"] += t2 - t1
    stats["time_s"] += t3 - t2
    return timed, (t1 - t0, t2 - t1, t3 - t2)


def _default_schedule(s):
    """The schedule tinygrad gives the kernel without BEAM (apply_opts: hand-coded, none for staged kernels)."""
    return s.copy() if any(u.op is Ops.STAGE for u in s.ast.backward_slice) else hand_coded_optimizations(s)


def beam_search(s, rawbufs, var_vals, amt, allow_test_size=True, disable_cache=IGNORE_BEAM_CACHE.value):
    """tinygrad's beam_search, with svod compiling and timing the candidates of a kernel of the SVOD
    device (the module's docstring); any other device's search, or any with SVOD_BEAM=0, is
    tinygrad's own."""
    if not isinstance(s.ren, SVODRenderer) or not svod._svod._env_switch("SVOD_BEAM", True):
        return _tinygrad_beam_search(s, rawbufs, var_vals, amt, allow_test_size, disable_cache)
    key = {"ast": s.ast.key, "amt": amt, "allow_test_size": allow_test_size, "device": s.ren.target.device,
           "suffix": s.ren.suffix}
    # The launch limits bound the schedules a search may pick (the CPU renderer's first is
    # NUM_CPU_THREADS, the core_id slices a kernel may split into), so svod's loop keys its results
    # by them too: a one-thread search's schedule would run single-threaded on every thread count.
    threads_key = {**key, "global_max": str(tuple(s.ren.global_max or ()))}
    skip_below = svod._svod._env_seconds("SVOD_BEAM_SKIP_BELOW")
    skip_key = {**threads_key, "skip_below": skip_below}
    cached = not disable_cache and CACHELEVEL >= 1
    if cached and (val := diskcache_get(_RESULTS, threads_key)) is not None:
        stats["cached"] += 1
        ret = s.copy()
        for o in val[len(s.applied_opts):]: ret.apply_opt(o)
        return ret
    default = _default_schedule(s)
    if cached and skip_below is not None and diskcache_get(_SKIPPED, skip_key) is not None:
        stats["skipped_cached"] += 1
        return default

    rawbufs = search._ensure_buffer_alloc(rawbufs)
    dev = Device[s.ren.target.device]
    timed, _ = _timed_phases([default], var_vals, set(), None, rawbufs, math.inf, allow_test_size, dev)
    default_time = timed[0][1] if timed else math.inf
    if skip_below is not None and default_time < skip_below:
        stats["skipped"] += 1
        if cached: diskcache_put(_SKIPPED, skip_key, True)
        if DEBUG >= 2: print(f"svod: not searched, its default takes {time_to_str(default_time, w=0)}", default.colored_shape())
        return default
    stats["searches"] += 1

    pool = get_worker_pool()
    beam: list[tuple[object, float]] = [(s, math.inf)]
    seen: set = set()
    min_progress = getenv("BEAM_MIN_PROGRESS", 0.01) / 1e6
    start = time.perf_counter()
    try:
        exiting = False
        while not exiting:
            candidates = flatten([search.get_kernel_actions(si, include_0=False).values() for si, _ in beam])
            timed, phases = _timed_phases(candidates, var_vals, seen, pool, rawbufs, beam[0][1], allow_test_size, dev)
            stats["rounds"] += 1
            opts = sorted(((candidates[i], tm) for i, tm in timed), key=lambda x: x[1])
            exiting = len(opts) == 0 or (opts[0][1] < min_progress) or (len(beam) > 0 and ((beam[0][1] - opts[0][1]) < min_progress))
            if not exiting: beam = opts[:amt]
            elif len(opts) > 0 and opts[0][1] < beam[0][1]: beam = opts[:1]
            if DEBUG >= 2:
                print(f"\r{time.perf_counter() - start:7.2f}s:", colored(time_to_str(beam[0][1], w=12), "green" if exiting else None),
                      f"from {len(candidates):3d} -> {len(opts):3d} actions (svod: render {phases[0]:.2f} s, compile "
                      f"{phases[1]:.2f} s, time {phases[2]:.2f} s)\033[K", beam[0][0].colored_shape())
    except KeyboardInterrupt:
        terminate_worker_pool()
        raise

    if default_time <= beam[0][1]:
        stats["kept_default"] += 1
        beam = [(default, default_time)]
    if CACHELEVEL >= 1:
        diskcache_put(_RESULTS, threads_key, beam[0][0].applied_opts)
        diskcache_put("beam_search", key, beam[0][0].applied_opts)  # where tinygrad's own loop looks
    if search.BEAM_DEBUG:
        print(f"BEAM_SEARCH: final tm={time_to_str(beam[0][1], w=0)}, applied_opts={beam[0][0].applied_opts}")
    return beam[0][0]


# tinygrad's apply_opts imports beam_search from the module at each search, so it finds this one.
search.beam_search = beam_search
