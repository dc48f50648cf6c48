"""Python-side costs of the svod package (issue 12). Run with the package on the path:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/bench_python.py

Prints medians of per-call times (each sample is the mean of a batch of 1,000 calls, so a
batch hit by preemption on a busy machine is an outlier rather than part of every sample; the
calls compared in 1. and 4. take turns batch by batch, so drift of a shared machine hits them
alike):
  1. a call of an empty CPU kernel with two numpy arrays and one scalar, beside a raw ctypes
     call of the same loaded function (its entry address; pointers precomputed as ints) and
     beside ctypes taking the pointers from the arrays on every call;
  2. the same svod call with 4-byte arrays (staged through guarded copies, svod/guard/staging.h)
     and 64 MiB arrays (run in place), with
     svod.Buffer arguments, and with a per-call global_size= (issue 23);
  3. plan.execute() of a 1,000-op chain of empty kernels (and a 1-op plan) from Python,
     beside the C++ execute() timed inside svod (svod.benchmark on the plan). Both sides time
     single executions and take the median (the Python side less the cost of reading the
     clock twice), in five alternating rounds; the figures are the medians of the rounds;
  4. where tinygrad is found (SVOD_TINYGRAD_DIR, default shared/tinygrad beside the repository
     folder), the same empty kernel as tinygrad's runtimes hold it: called as tinygrad calls a
     runtime, prg(*buffers, vals=(n,)), on its CPU device (CPUProgram: ctypes) and on svod's
     SVOD device (SVODProgram: a svod.Program call, also timed alone), and loaded as tinygrad
     loads a kernel its compile cache holds (Device[...].runtime(TinyELF): tinygrad's own ELF
     loader in Python, svod's load_binary).
"""
import ctypes
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import svod

BATCH = 1000
SAMPLES = 301


def per_call_ns(fn, batch=BATCH, samples=SAMPLES):
    """Median over `samples` batches of the mean time per call, in ns."""
    for _ in range(batch // 10):
        fn()
    times = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter_ns() - start) / batch)
    return statistics.median(times)


def side_by_side_ns(fns, batch=BATCH, samples=SAMPLES):
    """{name: median per-call ns} for {name: fn}, as per_call_ns, the functions taking turns
    batch by batch."""
    for fn in fns.values():
        for _ in range(batch // 10):
            fn()
    times = {name: [] for name in fns}
    for _ in range(samples):
        for name, fn in fns.items():
            start = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            times[name].append((time.perf_counter_ns() - start) / batch)
    return {name: statistics.median(t) for name, t in times.items()}


def single_call_ns(fn, runs):
    """Median of `runs` individually timed calls, less the cost of the two clock reads."""
    clock = time.perf_counter_ns
    for _ in range(runs // 10):
        fn()
    empty, times = [], []
    for _ in range(runs):
        start = clock()
        empty.append(clock() - start)
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times) - statistics.median(empty)


def main():
    cpu = svod.device("CPU")
    empty = cpu.compile(source="void empty(float* o, const float* a, int n) {}", entry="empty",
                        buffers=[{"name": "o", "access": "write", "dtype": "f32"}, {"name": "a", "dtype": "f32"}],
                        scalars=[{"name": "n", "type": "i32"}])
    o = np.zeros(1024, np.float32)
    a = np.zeros(1024, np.float32)
    raw = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(empty.entry_address)
    po, pa = o.ctypes.data, a.ctypes.data

    loop = per_call_ns(lambda: None)
    calls = side_by_side_ns({"svod": lambda: empty(o, a, 1024), "svod keyword": lambda: empty(o, a, n=1024),
                             "ctypes": lambda: raw(po, pa, 1024),
                             "ctypes arrays": lambda: raw(o.ctypes.data, a.ctypes.data, 1024)})
    svod_ns, svod_kw_ns, ctypes_ns, ctypes_arrays_ns = calls.values()
    print(f"lambda loop overhead (subtracted from nothing below): {loop:.0f} ns")
    print(f"svod call, 2 numpy arrays + 1 scalar:        {svod_ns:7.0f} ns")
    print(f"svod call, scalar by keyword:                {svod_kw_ns:7.0f} ns")
    print(f"raw ctypes call, addresses precomputed:      {ctypes_ns:7.0f} ns   svod/ctypes = {svod_ns / ctypes_ns:.2f}")
    print(f"ctypes call, addresses from arrays per call: {ctypes_arrays_ns:7.0f} ns   svod/this = {svod_ns / ctypes_arrays_ns:.2f}")

    tiny_o, tiny_a = np.zeros(1, np.float32), np.zeros(1, np.float32)
    big_o, big_a = np.zeros(16 << 20, np.float32), np.zeros(16 << 20, np.float32)
    tiny = per_call_ns(lambda: empty(tiny_o, tiny_a, 1))
    big = per_call_ns(lambda: empty(big_o, big_a, 1))
    print(f"svod call with 4-byte arrays:                {tiny:7.0f} ns")
    print(f"svod call with 64 MiB arrays:                {big:7.0f} ns   ratio {big / tiny:.2f}")

    bo, ba = cpu.allocate("f32", 1024), cpu.allocate("f32", 1024)
    buffers = per_call_ns(lambda: empty(bo, ba, 1024))
    sized = per_call_ns(lambda: empty(bo, ba, 1024, global_size=(1, 1, 1)))
    print(f"svod call, 2 svod.Buffers + 1 scalar:        {buffers:7.0f} ns   buffers/arrays = {buffers / svod_ns:.2f}")
    print(f"the same with global_size=(1, 1, 1):         {sized:7.0f} ns   adds {sized - buffers:+.0f} ns")

    inc = cpu.compile(source="void nop(float* x, int n) {}", entry="nop",
                      buffers=[{"name": "x", "access": "readwrite", "dtype": "f32"}],
                      scalars=[{"name": "n", "type": "i32"}])
    for ops in (1, 1000):
        b = svod.PlanBuilder()
        slot = b.add_buffer(np.zeros(8, np.float32), "x")
        for _ in range(ops):
            b.run(inc, [slot], [8])
        plan = b.build()
        runs = 20000 if ops == 1 else 2000
        # Alternating rounds, so drift of a shared machine hits both sides alike.
        py, cpp = [], []
        for _ in range(5):
            py.append(single_call_ns(plan.execute, runs))
            cpp.append(svod.benchmark(plan, warmup=runs // 10, runs=runs).median)
        py, cpp = statistics.median(py), statistics.median(cpp)
        print(f"plan.execute(), {ops:4d} ops: Python {py / 1e3:8.2f} us, C++ execute {cpp / 1e3:8.2f} us, "
              f"Python overhead {(py - cpp) / 1e3:+.2f} us")

    tinygrad_runtimes()


TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", pathlib.Path(__file__).resolve().parents[2] / "shared" /
                                           "tinygrad"))
EMPTY = "void empty(float* o, const float* a, int n) {}"


def tinygrad_runtimes():
    """Part 4: the empty kernel through tinygrad's Program interface, on its CPU device and on SVOD."""
    sys.path.append(str(TINYGRAD_DIR))
    try:
        import svod.tinygrad  # noqa: F401 - registers the device SVOD
        from tinygrad import Device, dtypes
        from tinygrad.device import BufferSpec, TinyELF
    except ImportError as e:
        print(f"tinygrad's runtimes: not measured, tinygrad not found in {TINYGRAD_DIR} ({e})")
        return
    # Two 1,024-float buffers and the scalar n, as tinygrad's signature lists a kernel's parameters.
    signature = ((None, 0, dtypes.float32, (1024,)), (None, 1, dtypes.float32, (1024,)), ("n", 2, dtypes.int32, ()))
    devices = {}
    for name in ("CPU", "SVOD"):
        dev = Device[name]
        elf = TinyELF(dev.compiler.compile(EMPTY), "empty", dev.renderer.target, signature)
        prg = dev.runtime(elf)
        bufs = [dev.allocator.alloc(4096, BufferSpec()) for _ in range(2)]
        devices[name] = (dev, elf, prg, bufs)
    _, _, inner, inner_bufs = devices["SVOD"]
    calls = side_by_side_ns({**{name: (lambda prg=prg, bufs=bufs: prg(*bufs, vals=(1024,)))
                                for name, (_, _, prg, bufs) in devices.items()},
                             "svod": lambda: inner.prg(*inner_bufs, 1024)})
    print(f"tinygrad's runtime call, prg(*bufs, vals=(1024,)): CPU (CPUProgram) {calls['CPU']:7.0f} ns, "
          f"SVOD (SVODProgram) {calls['SVOD']:7.0f} ns   SVOD/CPU = {calls['SVOD'] / calls['CPU']:.2f}")
    print(f"the svod.Program inside SVODProgram, called directly: {calls['svod']:7.0f} ns   "
          f"svod/CPU = {calls['svod'] / calls['CPU']:.2f}")
    loads = side_by_side_ns({name: (lambda dev=dev, elf=elf: dev.runtime(elf))
                             for name, (dev, elf, _, _) in devices.items()}, batch=20, samples=101)
    print(f"tinygrad's runtime load, Device.runtime(TinyELF): CPU {loads['CPU'] / 1e3:7.1f} us, "
          f"SVOD {loads['SVOD'] / 1e3:7.1f} us   SVOD/CPU = {loads['SVOD'] / loads['CPU']:.2f}")


if __name__ == "__main__":
    main()
