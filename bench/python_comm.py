"""svod.comm's cost from Python (issue 27), two figures:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_comm.py
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=build/release/python \\
        mpirun --oversubscribe -np 2 /usr/bin/python3 bench/python_comm.py --mpi

1. Without --mpi: the per-call time of c.all_reduce(x) from Python on a one-rank communicator and a
   4-byte numpy array (the array wrapped on every call, the GIL released and taken back), beside
   the same call from C++ on a svod::Buffer (bench_comm's BM_local_all_reduce_4B_1rank, run in
   this script), and their difference: what Python adds.
2. With --mpi, under mpirun: a 64 MiB f32 all_reduce from Python against MPI_Allreduce of the same
   numpy array in the same processes (called through ctypes on the libmpi svod loaded), in
   alternating rounds; rank 0 prints the medians and the bandwidth ratio.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import time

import numpy as np

import svod
import svod.comm

BINARY_DIR = os.environ.get("SVOD_BINARY_DIR", os.path.join(os.path.dirname(__file__), "..", "build", "release"))


def python_call_ns(batch=1000, samples=301):
    c = svod.comm.world("local")
    x = np.zeros(1, np.float32)
    for _ in range(batch):
        c.all_reduce(x)
    times = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        for _ in range(batch):
            c.all_reduce(x)
        times.append((time.perf_counter_ns() - start) / batch)
    return statistics.median(times)


def cpp_call_ns():
    out = subprocess.run([os.path.join(BINARY_DIR, "bench", "bench_comm"), "--benchmark_filter=1rank",
                          "--benchmark_repetitions=5", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("aggregate_name") == "median"]
    return runs[0]["real_time"]


def overhead():
    cpp = cpp_call_ns()
    py = python_call_ns()
    cpp_after = cpp_call_ns()
    cpp = statistics.median([cpp, cpp_after])
    print(f"all_reduce of 4 bytes on one rank: Python {py:.0f} ns, C++ {cpp:.0f} ns, "
          f"Python adds {py - cpp:.0f} ns (target <= 1000)")


def mpi_bandwidth(rounds=5, reps=5):
    c = svod.comm.world("mpi")
    mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)  # the one svod's plugin loaded

    def handle(name):  # OpenMPI's predefined handles are the addresses of these objects
        return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(mpi, name)))

    in_place, f32, total, world = ctypes.c_void_p(1), handle("ompi_mpi_float"), handle("ompi_mpi_op_sum"), \
        handle("ompi_mpi_comm_world")
    x = np.ones((64 << 20) // 4, np.float32)

    def svod_once():
        c.all_reduce(x)

    def mpi_once():
        rc = mpi.MPI_Allreduce(in_place, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(x.size), f32, total, world)
        assert rc == 0, rc

    def timed(fn):
        samples = []
        for _ in range(reps):
            c.barrier()
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    svod_once(), mpi_once()  # first touches
    svod_s, mpi_s = [], []
    for _ in range(rounds):
        svod_s.append(timed(svod_once))
        mpi_s.append(timed(mpi_once))
    if c.rank == 0:
        s, m = statistics.median(svod_s), statistics.median(mpi_s)
        gib = x.nbytes / 2**30
        print(f"all_reduce 64 MiB f32 on {c.world_size} ranks: svod from Python {s * 1e3:.2f} ms "
              f"({gib / s:.2f} GiB/s), MPI_Allreduce {m * 1e3:.2f} ms ({gib / m:.2f} GiB/s), "
              f"svod / MPI bandwidth {m / s:.2f} (target >= 0.9)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mpi", action="store_true", help="the 64 MiB bandwidth under mpirun")
    mpi_bandwidth() if parser.parse_args().mpi else overhead()
