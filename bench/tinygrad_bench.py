"""TinyJit replays on svod's tinygrad device (issue 23's targets). tinygrad is taken from
SVOD_TINYGRAD_DIR (a checkout of tinygrad a9069c1; default shared/tinygrad beside the repository folder); run from the repository with the svod package on the path:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/tinygrad_bench.py [runs]

For each workload — 16 small kernels, an MLP, a CNN and a transformer block forward, and one
512×512 matmul threaded over core_id — the same jitted function is built on three tinygrad
devices in this process: SVOD (svod.tinygrad: batches replayed as one svod plan), CPU
(tinygrad's own C runtime) and NULL (tinygrad's engine with kernels that do nothing: the floor
no backend removes). Each replay is timed alone, device synchronised, the devices taking turns;
the table gives medians in µs:

  svod share  = SVOD − NULL, what svod adds to tinygrad's engine;
  kernels     = the replay's kernels' own run times (medians that svod.profile records);
  svod run    = the replay's svod plan executions and direct kernel calls (svod.profile medians);
  target      = share ≤ 1.3 × kernels + 5 µs (issue 23); CPU/SVOD is the speed-up over CPU.
"""
import json
import os
import pathlib
import statistics
import sys
import time

TINYGRAD_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "tinygrad"
sys.path.append(os.environ.get("SVOD_TINYGRAD_DIR", str(TINYGRAD_DIR)))

import numpy as np  # noqa: E402

import svod  # noqa: E402
import svod.tinygrad  # noqa: E402,F401  (registers the SVOD device)
from tinygrad import Device, Tensor, TinyJit  # noqa: E402

DEVICES = ("NULL", "CPU", "SVOD")


def _weights(dev, rng, *shape):
    return Tensor((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), device=dev).realize()


def small_kernels(dev, rng):
    """16 elementwise kernels on 1,024 floats, each its own kernel."""
    def f(x):
        for i in range(16): x = (x * 1.0001 + i).contiguous()
        return x
    return f, [Tensor(rng.standard_normal(1024).astype(np.float32), device=dev).realize()]


def mlp(dev, rng):
    w = [_weights(dev, rng, a, b) for a, b in ((784, 256), (256, 256), (256, 10))]
    def f(x): return (x @ w[0]).relu().matmul(w[1]).relu().matmul(w[2]).log_softmax()
    return f, [Tensor(rng.standard_normal((16, 784)).astype(np.float32), device=dev).realize()]


def cnn(dev, rng):
    c1, c2, fc = _weights(dev, rng, 8, 1, 3, 3), _weights(dev, rng, 16, 8, 3, 3), _weights(dev, rng, 400, 10)
    def f(x):
        x = x.conv2d(c1).relu().max_pool2d(2)
        x = x.conv2d(c2).relu().max_pool2d(2)
        return (x.reshape(x.shape[0], -1) @ fc).log_softmax()
    return f, [Tensor(rng.standard_normal((8, 1, 28, 28)).astype(np.float32), device=dev).realize()]


def transformer(dev, rng, d=64, heads=4, seq=32):
    qkv, proj = _weights(dev, rng, d, 3 * d), _weights(dev, rng, d, d)
    up, down = _weights(dev, rng, d, 4 * d), _weights(dev, rng, 4 * d, d)
    def f(x):
        q, k, v = (x.layernorm() @ qkv).reshape(1, seq, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        a = q.scaled_dot_product_attention(k, v, is_causal=True).permute(0, 2, 1, 3).reshape(1, seq, d)
        x = x + a @ proj
        return x + (x.layernorm() @ up).gelu() @ down
    return f, [Tensor(rng.standard_normal((1, seq, d)).astype(np.float32), device=dev).realize()]


def matmul(dev, rng):
    b = _weights(dev, rng, 512, 512)
    def f(a): return a @ b
    return f, [Tensor(rng.standard_normal((512, 512)).astype(np.float32), device=dev).realize()]


WORKLOADS = {"16 small kernels": small_kernels, "MLP": mlp, "CNN": cnn, "transformer": transformer,
             "matmul 512 (core_id)": matmul}


def replay_us(jits, runs, rounds=5):
    """{device: median µs of one jitted replay, synchronised}, for {device: (jit, inputs)}. The
    first calls capture each function; then the devices take turns, `runs` replays each in
    all, so that a change in the machine's load affects them alike."""
    times = {dev: [] for dev in jits}
    for dev, (jit, inputs) in jits.items():
        for _ in range(3):
            jit(*inputs)
            Device[dev].synchronize()
    for _ in range(rounds):
        for dev, (jit, inputs) in jits.items():
            device = Device[dev]
            for _ in range(max(1, runs // rounds)):
                start = time.perf_counter_ns()
                jit(*inputs)
                device.synchronize()
                times[dev].append(time.perf_counter_ns() - start)
    return {dev: statistics.median(t) / 1e3 for dev, t in times.items()}


def svod_work_us(jit, inputs, replays=100):
    """(kernels, plans): µs per replay that svod's profile records for the kernels' own runs and for
    whole plan executions."""
    with svod.profile() as p:
        for _ in range(replays): jit(*inputs)
    data = json.loads(p.json())
    kernels = sum(k["median_us"] * k["calls"] for k in data["kernels"]) / replays
    plans = data["run_us"]["median"] * data["runs"] / replays if data["runs"] else 0.0
    return kernels, plans


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"tinygrad TinyJit replays, median of {runs} (µs); {os.cpu_count()} cores")
    header = (f"{'workload':22} {'NULL':>8} {'CPU':>9} {'SVOD':>9} {'CPU/SVOD':>8} "
              f"{'svod share':>10} {'kernels':>8} {'svod run':>8} {'target':>8}")
    print(header)
    for name, build in WORKLOADS.items():
        jits = {}
        for dev in DEVICES:
            fn, inputs = build(dev, np.random.default_rng(0))
            jits[dev] = (TinyJit(fn), inputs)
        us = replay_us(jits, runs)
        kernels, plan = svod_work_us(*jits["SVOD"])
        share = us["SVOD"] - us["NULL"]
        target = 1.3 * kernels + 5
        print(f"{name:22} {us['NULL']:8.1f} {us['CPU']:9.1f} {us['SVOD']:9.1f} "
              f"{us['CPU'] / us['SVOD']:7.2f}x {share:10.1f} {kernels:8.1f} {plan:8.1f} "
              f"{'ok' if share <= target else 'over'} {target:.0f}")


if __name__ == "__main__":
    main()
