"""How tinygrad's tiles are stored, and what it costs: the same schedules of an N x N f32 matmul
rendered by svod's renderer (a stored vector written element by element) and by tinygrad's own
rule (one float4 store), compiled and timed by svod on the same buffers, the two taking turns:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/tinygrad_stores.py [--size 480] [--rounds 5]

Each schedule is a list of tinygrad opts (UPCAST of axis 1, the output's contiguous columns, and of
axis 0, its rows). A row gives the median over rounds of each rendering's time (svod's round robin,
tinygrad's three runs per candidate) and their ratio. One thread (NUM_CPU_THREADS=1).
"""
import argparse
import os
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
os.environ["NUM_CPU_THREADS"] = "1"
sys.path.append(str(TINYGRAD_DIR))

import math  # noqa: E402

import numpy as np  # noqa: E402
import svod.tinygrad  # noqa: E402,F401
import svod.tinygrad_search as svod_search  # noqa: E402
import tinygrad.codegen as codegen  # noqa: E402
from tinygrad import Device, Tensor  # noqa: E402
from tinygrad.codegen.opt import Opt, OptOps, search  # noqa: E402
from tinygrad.codegen.opt.postrange import Scheduler, args_from_ast  # noqa: E402
from tinygrad.renderer.cstyle import ClangRenderer  # noqa: E402

SCHEDULES = {
    "4 columns x 20 rows": [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 5), Opt(OptOps.UPCAST, 0, 4)],
    "16 columns x 4 rows": [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4)],
    "16 columns x 6 rows": [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 3), Opt(OptOps.UPCAST, 0, 2)],
    "32 columns x 5 rows": [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 5)],
}


class Float4Stores(svod_search._SourceRenderer):
    """svod's source renderer with tinygrad's own rules: a stored vector is one float4 store."""
    string_rewrite = ClangRenderer.string_rewrite


def matmul_ast(size: int):
    """The AST tinygrad makes of an N x N matmul on SVOD, recorded as tinygrad optimises it."""
    recorded, apply_opts = [], codegen.apply_opts

    def recording(ast, ren, beam=0):
        if ast.tag is None: recorded.append(ast)
        return apply_opts(ast, ren, beam)

    codegen.apply_opts = recording
    try:
        rng = np.random.default_rng(0)
        a, b = (Tensor(rng.uniform(-1, 1, (size, size)).astype(np.float32), device="SVOD") for _ in range(2))
        (a @ b).realize()
    finally:
        codegen.apply_opts = apply_opts
    return recorded[-1]


def time_schedule(ast, opts: list, renderer_class, rawbufs: list) -> float:
    """Seconds per run of the matmul under `opts`, rendered with `renderer_class`."""
    scheduler = Scheduler(ast, Device["SVOD"].renderer)
    scheduler.convert_loop_to_global()
    for opt in opts: scheduler.apply_opt(opt)
    plain = svod_search._source_renderer
    svod_search._source_renderer = lambda target: renderer_class(target)
    try:
        timed, _ = svod_search._timed_phases([scheduler], {}, set(), None, rawbufs, math.inf, False, Device["SVOD"])
    finally:
        svod_search._source_renderer = plain
    return timed[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=480)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ast = matmul_ast(args.size)
    rawbufs = search._ensure_buffer_alloc(args_from_ast(ast, "SVOD")[0])
    renderers = {"element stores (svod)": svod_search._SourceRenderer, "float4 stores (tinygrad)": Float4Stores}
    times = {(name, kind): [] for name in SCHEDULES for kind in renderers}
    for _ in range(args.rounds):
        for name, opts in SCHEDULES.items():
            for kind, renderer_class in renderers.items():
                times[(name, kind)].append(time_schedule(ast, opts, renderer_class, rawbufs))
    print(f"{args.size} x {args.size} f32 matmul, one thread, medians of {args.rounds} rounds (ms)")
    print(f"{'schedule':24s} {'element stores':>15s} {'float4 stores':>15s} {'ratio':>7s}")
    for name in SCHEDULES:
        element, float4 = (statistics.median(times[(name, kind)]) * 1e3 for kind in renderers)
        print(f"{name:24s} {element:15.3f} {float4:15.3f} {element / float4:7.2f}")


if __name__ == "__main__":
    main()
