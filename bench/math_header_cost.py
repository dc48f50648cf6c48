"""What `#include <math.h>` costs an in-process compile (issue 26, item 3): the same small kernel
with a builtin and with the header, compiled 30 times each (a comment makes every source new, so
nothing comes from a cache), three rounds; prints the medians and their difference.

    SVOD_CACHE=0 PYTHONPATH=build/release/python /usr/bin/python3 bench/math_header_cost.py
"""
import statistics
import time

import svod

BUFFERS = [{"name": "o", "access": "write", "dtype": "f32"}, {"name": "a", "dtype": "f32"}]
SCALARS = [{"name": "n", "type": "i32"}]
NO_HEADER = "void k(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] = __builtin_sqrtf(a[i]); }"
MATH_H = "#include <math.h>\nvoid k(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] = sqrtf(a[i]); }"


def median_ms(cpu, source, compiles=30):
    times = []
    for i in range(compiles):
        start = time.perf_counter()
        cpu.compile(source=f"{source}\n// {i} {time.time()}\n", entry="k", buffers=BUFFERS, scalars=SCALARS)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    cpu = svod.device("CPU")
    median_ms(cpu, MATH_H, 3)  # the device's first compile, and the header's preamble
    for _ in range(3):
        plain = median_ms(cpu, NO_HEADER)
        header = median_ms(cpu, MATH_H)
        print(f"no header {plain:.2f} ms, <math.h> {header:.2f} ms, difference {header - plain:+.2f} ms")


if __name__ == "__main__":
    main()
