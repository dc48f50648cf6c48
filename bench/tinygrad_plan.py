"""Writes one workload of bench/tinygrad_bench.py as an svod plan file: the kernels TinyJit
captures on the SVOD device, their C source, launch sizes and tinygrad's own flop and byte
estimates, so that `svod bench PLAN --plot roofline.svg` can time and plot them:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/tinygrad_plan.py transformer tf.json
    build/release/svod bench tf.json --plot roofline.svg

tinygrad comes from SVOD_TINYGRAD_DIR, as for tinygrad_bench.py. Every tinygrad buffer becomes
an untyped (u8) plan buffer filled with zeros, and a sub-buffer a view of it: the values are
not the workload's, the work and the memory traffic are.
"""
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tinygrad_bench  # noqa: E402  (puts tinygrad on the path)

import svod.tinygrad  # noqa: E402
from tinygrad import TinyJit  # noqa: E402
from tinygrad.uop.ops import Ops  # noqa: E402


def captured_graphs(workload: str) -> list:
    """The SVODGraphs TinyJit builds for `workload` (its batches of kernels and copies)."""
    graphs = []
    init = svod.tinygrad.SVODGraph.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        graphs.append(self)

    svod.tinygrad.SVODGraph.__init__ = recording_init
    try:
        fn, inputs = tinygrad_bench.WORKLOADS[workload]("SVOD", np.random.default_rng(0))
        jit = TinyJit(fn)
        for _ in range(3): jit(*inputs)  # the third call replays the captured graphs
    finally:
        svod.tinygrad.SVODGraph.__init__ = init
    return graphs


def plan_of(workload: str) -> dict:
    buffers, programs, ops, names = {}, {}, [], {}

    def buffer_name(buf) -> str:
        base = buf._base if buf._base is not None else buf
        if id(base) not in names:
            names[id(base)] = f"b{len(names)}"
            buffers[names[id(base)]] = {"dtype": "u8", "count": base.nbytes, "init": "zeros"}
        if base is buf: return names[id(base)]
        view = f"{names[id(base)]}_at{buf.offset}_{buf.nbytes}"
        buffers.setdefault(view, {"view": names[id(base)], "offset": buf.offset, "count": buf.nbytes})
        return view

    for graph in captured_graphs(workload):
        for _, ast, bufs, _ in graph.calls:
            if ast.op is Ops.COPY:
                ops.append({"copy": {"dst": buffer_name(bufs[0]), "src": buffer_name(bufs[1])}})
                continue
            info = ast.arg
            source = next(u.arg for u in ast.src if u.op is Ops.SOURCE)
            estimates = ast.src[0].arg.estimates
            # tinygrad gives kernels of different shapes the same name: one program per source.
            name = next((n for n, p in programs.items() if p["source"] == source), None)
            if name is None:
                name = info.function_name
                if name in programs: name = f"{name}_{len(programs)}"
                programs[name] = {
                    "language": "c", "source": source, "entry": info.function_name,
                    "buffers": [{"name": f"data{i}", "access": "readwrite"} for i in range(len(info.globals))],
                    "scalars": [{"name": v.expr, "type": "i32"} for v in info.vars],
                    "global_size": list(info.launch_dims({})[0]),
                    "flops": int(estimates.ops), "bytes": int(estimates.mem)}
            ops.append({"run": name, "buffers": [buffer_name(bufs[i]) for i in info.globals]})
    return {"svod_plan": 1, "device": "CPU",
            "description": f"tinygrad {workload} (bench/tinygrad_bench.py) as TinyJit captures it on SVOD",
            "buffers": buffers, "programs": programs, "ops": ops}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in tinygrad_bench.WORKLOADS:
        sys.exit(f"usage: tinygrad_plan.py WORKLOAD PLAN.json  (WORKLOAD: {', '.join(tinygrad_bench.WORKLOADS)})")
    plan = plan_of(sys.argv[1])
    pathlib.Path(sys.argv[2]).write_text(json.dumps(plan, indent=1) + "\n")
    print(f"wrote {sys.argv[2]}: {len(plan['ops'])} ops, {len(plan['programs'])} programs")


if __name__ == "__main__":
    main()
