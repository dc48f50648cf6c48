"""Python-side costs of the svod package (issue 12). Run with the package on the path:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/bench_python.py

Prints medians of per-call times (each sample is the mean of a batch of 1,000 calls, so a
batch hit by preemption on a busy machine is an outlier rather than part of every sample):
  1. a call of an empty CPU kernel with two numpy arrays and one scalar, beside a raw ctypes
     call of the same loaded function (its entry address; pointers precomputed as ints) and
     beside ctypes taking the pointers from the arrays on every call;
  2. the same svod call with 4-byte and 64 MiB arrays (no copy: the same cost), with
     svod.Buffer arguments, and with a per-call global_size= (issue 23);
  3. plan.execute() of a 1,000-op chain of empty kernels (and a 1-op plan) from Python,
     beside the C++ execute() timed inside svod (svod.benchmark on the plan). Both sides time
     single executions and take the median (the Python side less the cost of reading the
     clock twice), in five alternating rounds; the figures are the medians of the rounds.
"""
import ctypes
import statistics
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
    svod_ns = per_call_ns(lambda: empty(o, a, 1024))
    svod_kw_ns = per_call_ns(lambda: empty(o, a, n=1024))
    ctypes_ns = per_call_ns(lambda: raw(po, pa, 1024))
    ctypes_arrays_ns = per_call_ns(lambda: raw(o.ctypes.data, a.ctypes.data, 1024))
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

if __name__ == "__main__":
    main()
