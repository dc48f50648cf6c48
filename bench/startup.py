"""Start-up of svod processes (issue 26): wall time of `svod --help`, `svod --version`, a run of
the MLP example packed (`SVOD_CACHE=0 SVOD_COMPILE=0`), a warm run of its plan file (the object
cache filled by a first run), runs of a one-kernel plan whose kernel is new in every round, so that
the process opens the compiler and compiles once (the object cache on: a preamble such as
`#include <math.h>` is precompiled in it from the first round; and with `SVOD_CACHE=0`, parsed in
every run), its source with and without `#include <math.h>`, and, for scale, `/bin/true`; rounds alternate the commands, and each
median is also given as a multiple of /bin/true's, with the median CPU time (user + system, every
thread): wall time well above it is time spent waiting (threads joined, the scheduler). With a baseline build folder, its `svod` runs
the same commands in the same rounds. Then Python (this build), each in a fresh interpreter:
`import numpy` (which svod needs), `import svod` after it and `svod.device("CPU")` after that.

    /usr/bin/python3 bench/startup.py [rounds=15] [build folder=build/release] [baseline build folder]
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

# One small kernel; {header} and {sqrt} make the <math.h> variant, {round} a new kernel in every round.
KERNEL_PLAN = """{{ "svod_plan": 1,
  "buffers": {{ "a": {{ "dtype": "f32", "count": 64, "init": {{ "fill": 4 }} }}, "o": {{ "dtype": "f32", "count": 64 }} }},
  "programs": {{ "k": {{ "language": "c", "entry": "k",
    "source": "{header}void k(float* o, const float* a) {{ for (int i = 0; i < 64; i++) o[i] = {sqrt}(a[i]) + {round} * 0.0f; }}",
    "buffers": [ {{ "name": "o", "access": "write" }}, {{ "name": "a" }} ] }} }},
  "ops": [ {{ "run": "k", "buffers": ["o", "a"] }} ],
  "outputs": {{ "o": {{ "expect": {{ "values": [2, 2], "prefix": true }} }} }} }}
"""

PYTHON_PROBE = """
import time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import svod
t2 = time.perf_counter()
svod.device("CPU")
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def wall(argv, env):
    """The command's wall time and its CPU time (user + system, all its threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    build = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "release"))
    builds = {"": build}
    if len(sys.argv) > 3:
        builds["baseline "] = os.path.abspath(sys.argv[3])
    work = tempfile.mkdtemp(prefix="svod_startup_")
    try:
        env = dict(os.environ, SVOD_CACHE_DIR=os.path.join(work, "cache"))
        env.pop("SVOD_CPU_COMPILER", None)
        env.pop("SVOD_CPU_BACKEND", None)
        env.pop("SVOD_CACHE", None)
        packaged = dict(env, SVOD_CACHE="0", SVOD_COMPILE="0")
        kernels = {name: (os.path.join(work, f"{name}.json"), header, sqrt) for name, header, sqrt in
                   (("kernel", "", "__builtin_sqrtf"), ("kernel+math.h", "#include <math.h>\\n", "sqrtf"))}

        def write_kernels(round_number):
            for plan, header, sqrt in kernels.values():
                with open(plan, "w") as f:
                    f.write(KERNEL_PLAN.format(header=header, sqrt=sqrt, round=round_number))

        commands = {"/bin/true": (["/bin/true"], env)}
        for tag, folder in builds.items():
            svod = os.path.join(folder, "svod")
            package = os.path.join(work, f"mlp{len(commands)}.svodpkg")
            subprocess.run([svod, "pack", PLAN, "-o", package], env=env, stdout=subprocess.DEVNULL, check=True)
            subprocess.run([svod, "run", PLAN], env=env, stdout=subprocess.DEVNULL, check=True)  # fills the cache
            commands.update({
                f"{tag}svod --help": ([svod, "--help"], env),
                f"{tag}svod --version": ([svod, "--version"], env),
                f"{tag}svod run MLP.svodpkg": ([svod, "run", package], packaged),
                f"{tag}svod run plan.json (warm)": ([svod, "run", PLAN], env),
                **{f"{tag}svod run {name} (compiles)": ([svod, "run", plan], env)
                   for name, (plan, _, _) in kernels.items()},
                **{f"{tag}svod run {name} (compiles, no cache)": ([svod, "run", plan], dict(env, SVOD_CACHE="0"))
                   for name, (plan, _, _) in kernels.items()},
            })
            write_kernels(-1)
            for plan, _, _ in kernels.values():  # precompiles the preamble into the cache
                subprocess.run([svod, "run", plan], env=env, stdout=subprocess.DEVNULL, check=True)
        times = {name: [] for name in commands}
        cpu = {name: [] for name in commands}
        for round_number in range(rounds):
            write_kernels(round_number)
            for name, (argv, e) in commands.items():
                t, c = wall(argv, e)
                times[name].append(t)
                cpu[name].append(c)
        base = statistics.median(times["/bin/true"])
        for name, t in times.items():
            m = statistics.median(t)
            print(f"{name:53s} median {m * 1e3:6.2f} ms  (range {min(t) * 1e3:.1f}-{max(t) * 1e3:.1f})  "
                  f"{m / base:5.2f}x /bin/true  cpu {statistics.median(cpu[name]) * 1e3:5.2f} ms")
        py_env = dict(env, PYTHONPATH=os.path.join(build, "python"))
        steps = {"python: import numpy": [], "python: import svod": [], "python: svod.device(CPU)": []}
        for _ in range(rounds):
            out = subprocess.run([sys.executable, "-c", PYTHON_PROBE], env=py_env, capture_output=True, text=True,
                                 check=True).stdout.split()
            for times, value in zip(steps.values(), out):
                times.append(float(value))
        for (name, times), after in zip(steps.items(), ("", " (after numpy)", " (after the import)")):
            print(f"{name:53s} median {statistics.median(times) * 1e3:6.2f} ms{after}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
