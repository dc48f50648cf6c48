"""Cold start of `svod run` on the MLP example (issue 17): each run gets a fresh, empty
SVOD_CACHE_DIR, so every program is compiled. Alternates, round by round, this build with the
llvm compiler, this build with the clang compiler and, when given, a baseline: another build's
`svod` binary whose folder also holds the libsvod_runtime.so* and libsvod_llvm.so it was built
with (LD_LIBRARY_PATH points there, so it opens its own plugin too).

    /usr/bin/python3 bench/bench_cold_start.py [rounds=10] [baseline folder]

Each round also runs every variant a second time on the cache its cold run filled (a warm
start: nothing compiles, but the llvm compiler still opens its plugin for the cache key).
Prints each variant's median and range of wall time and its median user + system CPU time,
cold and warm, and the baseline's median wall times over this build's.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, "examples", "mlp", "plan.json")
SVOD = os.path.join(ROOT, "build", "release", "svod")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    variants = {}
    if len(sys.argv) > 2:
        folder = os.path.abspath(sys.argv[2])
        variants["baseline"] = ([os.path.join(folder, "svod"), "run", PLAN], {"LD_LIBRARY_PATH": folder})
    variants["this build"] = ([SVOD, "run", PLAN], {})
    variants["this build, clang"] = ([SVOD, "run", "--cpu-compiler", "clang", PLAN], {})
    kinds = ("cold", "warm")
    wall = {(name, kind): [] for name in variants for kind in kinds}
    cpu = {(name, kind): [] for name in variants for kind in kinds}
    for _ in range(rounds):
        for name, (argv, extra) in variants.items():
            cache = tempfile.mkdtemp(prefix="svod_cold_")
            env = dict(os.environ, SVOD_CACHE_DIR=cache, **extra)
            env.pop("SVOD_CPU_COMPILER", None)
            env.pop("SVOD_CPU_BACKEND", None)
            for kind in kinds:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
                wall[name, kind].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name, kind].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            shutil.rmtree(cache)
    for kind in kinds:
        for name in variants:
            w = wall[name, kind]
            print(f"{kind} {name:18s} wall median {statistics.median(w) * 1e3:6.1f} ms "
                  f"(range {min(w) * 1e3:.0f}-{max(w) * 1e3:.0f})  "
                  f"CPU median {statistics.median(cpu[name, kind]) * 1e3:6.1f} ms")
        if "baseline" in variants:
            ratio = statistics.median(wall["baseline", kind]) / statistics.median(wall["this build", kind])
            print(f"{kind}: baseline / this build (median wall): {ratio:.2f}x")


if __name__ == "__main__":
    main()
