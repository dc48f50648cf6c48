"""A chain of 2-slice CPU launches (about 52 us of work each), the mean time per launch over five
batches of 2,000, for comparing a quiet machine with one that a CPU-bound process shares:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/slices_under_load.py
    taskset -c 0,1 /usr/bin/python3 -c 'while 1: pass' &   # the load; kill it afterwards

SVOD_THREADS=1 gives the one-thread figure to compare with (issue 39, item 4).
"""
import os
import statistics
import time

import svod

cpu = svod.device("CPU")
N = 1 << 16
src = """
void k(float* o, const float* a, int core_id) {
  int n = %d / 2, s = core_id * n;
  for (int r = 0; r < 16; r++)
    for (int i = s; i < s + n; i++) o[i] = o[i] * 0.999f + a[i] * (float)r;
}""" % N
k = cpu.compile(source=src, entry="k",
                buffers=[{"name": "o", "access": "readwrite", "dtype": "f32"}, {"name": "a", "dtype": "f32"}],
                scalars=[{"name": "core_id", "type": "i32", "min": 0, "max": 1}], global_size=[2])
o = cpu.allocate("f32", N); a = cpu.allocate("f32", N)
for _ in range(50): k(o, a)
res = []
for rep in range(5):
    t = time.perf_counter()
    for _ in range(2000): k(o, a)
    res.append((time.perf_counter() - t) / 2000 * 1e6)
print(f"threads={os.environ.get('SVOD_THREADS','2')} us/launch median {statistics.median(res):.1f} all {[round(x,1) for x in res]}")
