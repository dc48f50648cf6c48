"""Every figure docs/BENCHMARKS.md quotes, each measured in the same run as what it is compared
with, by topic. Run from the repository after building (cmake --build --preset release):

    /usr/bin/python3 bench/measure_all.py [--quick] [topic ...]

Topics, in order (all by default): launch plans compile startup python tinygrad collectives
containment. The script runs the bench programs of bench/ and prints what they print; for the
Google Benchmark programs it prints each pair it compares as "svod | the other | svod/other", the
medians of repetitions that run interleaved at random (--benchmark_enable_random_interleaving),
so that the two sides of a pair alternate. The Python and shell benches alternate their sides
themselves. The machine's load average is printed before every topic: on a shared machine read
the ratios, whose two sides saw the same load.

--quick runs every bench once and briefly and leaves out tinygrad's LLM and BEAM search (minutes
each): a smoke test that everything still runs, not figures to quote. The whole set takes about
20 minutes on two cores, --quick about 2.

tinygrad is taken from SVOD_TINYGRAD_DIR (default shared/tinygrad beside the repository folder);
mpirun from PATH. A bench that cannot run here (no OpenCL device, no mpirun) reports so and the
rest goes on.
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = REPO / "build" / "release"  # the bench programs' own paths point into it too
PYTHON = "/usr/bin/python3"  # Debian's, with numpy
SETTING = re.compile(r"(real_time|manual_time|(min_time|repeats|iterations|threads):.*)$")
# bench_plan's plans of 1,000 empty kernels, whose times are per 1,000 ops.
PLAN_OPS = {"BM_ChainPlan/sequential:0": "plan op, chain of 1,000 empty kernels",
            "BM_ChainPlan/sequential:1": "the same chain, sequential runner",
            "BM_IndependentPlan/sequential:0": "plan op, 1,000 independent empty kernels",
            "BM_IndependentPlan/sequential:1": "the same, sequential runner"}


class Run:
    """The mode and the environment every bench runs with."""

    def __init__(self, quick: bool, cache: str):
        self.quick = quick
        self.env = dict(os.environ, SVOD_CACHE_DIR=cache, PYTHONPATH=str(BUILD / "python"))
        for name in ("SVOD_CPU_COMPILER", "SVOD_CPU_BACKEND", "SVOD_CACHE", "SVOD_PROFILE", "SVOD_OP_TIMEOUT",
                     "SVOD_CHECK", "DEBUG"):
            self.env.pop(name, None)
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # OpenMPI refuses root without these
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def bench(self, name: str) -> str:
        return str(BUILD / "bench" / name)

    def show(self, argv: list[str], env: dict | None = None, timeout: int = 3600):
        """Runs a bench program and prints its output under its command line."""
        print(f"$ {shlex.join(argv)}", flush=True)
        done = subprocess.run(argv, cwd=REPO, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        print(done.stdout.rstrip())
        if done.returncode != 0:
            print(f"(exit status {done.returncode})")
        print(flush=True)

    def gbench(self, binary: str, filter_: str = ".", repetitions: int = 5, env: dict | None = None) -> dict:
        """{benchmark name: its median repetition} of a Google Benchmark program, the repetitions of
        all its benchmarks interleaved at random: Google Benchmark's JSON fields (the counters
        among them) and "ns", the real time in ns."""
        reps, min_time = (1, 0.05) if self.quick else (repetitions, 0.5)
        argv = [self.bench(binary), f"--benchmark_filter={filter_}", f"--benchmark_repetitions={reps}",
                f"--benchmark_min_time={min_time}", "--benchmark_enable_random_interleaving=true",
                "--benchmark_format=json"]
        print(f"$ {shlex.join(argv)}", flush=True)
        done = subprocess.run(argv, cwd=REPO, env=env or self.env, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"(exit status {done.returncode}) {done.stderr.strip()[-500:]}")
            return {}
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
        results, samples = {}, {}
        for b in json.loads(done.stdout)["benchmarks"]:
            # BM_Add/repeats:5/real_time -> BM_Add: the name without the run's settings.
            name = "/".join(part for part in b["run_name"].split("/") if not SETTING.match(part))
            if b.get("error_occurred"):
                print(f"{name}: {b.get('error_message')}")
                continue
            value = dict(b, ns=b["real_time"] * scale[b["time_unit"]])
            if b.get("aggregate_name") == "median":
                results[name] = value
            elif b.get("run_type") == "iteration":
                samples.setdefault(name, []).append(value)
        for name, runs in samples.items():  # no median aggregate (one repetition)
            results.setdefault(name, runs[len(runs) // 2])
        return results


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def human(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns < 100 * scale else f"{ns / scale:.0f} {unit}"
    return f"{ns:.3g} ns"


def pairs(results: dict, rows: list[tuple[str, str, str, str]], per: int = 1):
    """Prints each (what svod does, its benchmark, the other, its benchmark) with both medians and
    svod/other; `per` divides the times (operations per iteration)."""
    for what, ours, other_what, other in rows:
        if ours not in results or other not in results:
            print(f"{what}: not measured ({ours if ours not in results else other} missing)")
            continue
        a, b = results[ours]["ns"] / per, results[other]["ns"] / per
        print(f"  {what:58s} {human(a):>9s} | {other_what:50s} {human(b):>9s} | svod/other {a / b:6.3g}")


def launch(run: Run):
    r = run.gbench("bench_launch", "BM_ProgramLaunchEmpty|BM_CpuProgramRunEmpty|BM_DirectCallEmpty")
    pairs(r, [("Program::launch, empty kernel, every check", "BM_ProgramLaunchEmpty",
               "direct call of the same loaded function", "BM_DirectCallEmpty"),
              ("CpuProgram::run (checked before: plan ops, Python)", "BM_CpuProgramRunEmpty",
               "direct call of the same loaded function", "BM_DirectCallEmpty")])
    r = run.gbench("bench_capi")
    pairs(r, [("svod_program_launch (C API), empty kernel", "BM_CApiLaunchEmpty",
               "Program::launch (C++) of the same kernel", "BM_ProgramLaunchEmpty")])


def plans(run: Run):
    r = run.gbench("bench_plan")
    pairs(r, [(what, name, "the kernel called 1,000 times (CpuProgram::run)", "BM_ChainDirectCalls")
              for name, what in PLAN_OPS.items()], per=1000)
    if "BM_EightOneMsKernels" in r:
        c = r["BM_EightOneMsKernels"]
        print(f"  {'8 independent 1 ms kernels, execute() (best run)':58s} {c['best_parallel_ms']:.2f} ms | "
              f"{'the same, execute_sequential()':50s} {c['best_sequential_ms']:.2f} ms | "
              f"speed-up {c['best_sequential_ms'] / c['best_parallel_ms']:.2f}")
    r = run.gbench("bench_profile", "BM_ChainProfiling")
    pairs(r, [("plan op with profiling on (chain of 1,000)", "BM_ChainProfilingOn",
               "profiling off", "BM_ChainProfilingOff")], per=1000)


def compile_(run: Run):
    r = run.gbench("bench_backends", "Compile|Kernel", repetitions=3)
    for language in ("C", "LlvmIr"):
        pairs(r, [(f"compile a small {language} kernel in-process (llvm)", f"BM_Compile_{language}/backend:1",
                   "a clang-19 process", f"BM_Compile_{language}/backend:0"),
                  (f"compile the {language} kernel as a shared library (dlopen)", f"BM_Compile_{language}/backend:2",
                   "a clang-19 process", f"BM_Compile_{language}/backend:0")])
    for kernel in ("Add1M", "Matmul128"):
        pairs(r, [(f"{kernel} built in-process (llvm), run", f"BM_Kernel_{kernel}/backend:1",
                   "built by a clang-19 process, run", f"BM_Kernel_{kernel}/backend:0"),
                  (f"{kernel} built as a shared library (dlopen), run", f"BM_Kernel_{kernel}/backend:2",
                   "built by a clang-19 process, run", f"BM_Kernel_{kernel}/backend:0")])
    r = run.gbench("bench_add")
    pairs(r, [("1M f32 add loaded by svod", "BM_SvodAdd1M", "the same loop linked into the binary",
               "BM_NativeAdd1M")])
    run.show(["taskset", "-c", "1", run.bench("bench_corpus"), "1" if run.quick else "3"])


def startup(run: Run):
    r = run.gbench("bench_backends", "Load", repetitions=5)
    pairs(r, [("svod's ELF loader, a small kernel", "BM_Load_ElfLoader",
               "dlopen of it as a shared library (file)", "BM_Load_Dlopen")])
    r = run.gbench("bench_package", "ColdStart")
    pairs(r, [("svod run MLP.svodpkg (SVOD_CACHE=0), a process", "ColdStart/package",
               "svod run plan.json, empty cache (4 compiles)", "ColdStart/plan")])
    run.show([PYTHON, "bench/startup.py", "3" if run.quick else "20", str(BUILD)])
    run.show([PYTHON, "bench/bench_cold_start.py", "2" if run.quick else "15"])


def python(run: Run):
    run.show([PYTHON, "bench/bench_python.py"])


def tinygrad(run: Run):
    run.show([PYTHON, "bench/tinygrad_bench.py", "20" if run.quick else "200"])
    if run.quick:
        print("(--quick: tinygrad's LLM and BEAM search left out)\n")
        return
    run.show([PYTHON, "bench/tinygrad_search_llm.py", "llm", "--rounds", "3"])
    run.show([PYTHON, "bench/tinygrad_search_llm.py", "llm", "--rounds", "3", "--load"])
    run.show([PYTHON, "bench/tinygrad_search_llm.py", "beam", "--rounds", "3"])


def collectives(run: Run):
    r = run.gbench("bench_comm", "64MiB|8B")
    pairs(r, [("all_reduce 64 MiB f32, 2 local ranks (threads)", "BM_local_all_reduce_64MiB_2ranks",
               "memcpy of 64 MiB, one thread", "BM_memcpy_64MiB"),
              ("the same, each buffer in OpenCL memory (PoCL)", "BM_local_all_reduce_64MiB_2ranks_opencl",
               "in host memory", "BM_local_all_reduce_64MiB_2ranks")])
    if shutil.which("mpirun") is None:
        print("mpirun not found: the comparisons with MPI_Allreduce are not measured\n")
    else:
        mpirun = ["mpirun", "--oversubscribe", "-np", "2"]
        for _ in range(1 if run.quick else 3):
            run.show(mpirun + [run.bench("comm_mpi_bench")])
        run.show(mpirun + [PYTHON, "bench/python_comm.py", "--mpi"])
    run.show([PYTHON, "bench/python_comm.py"], env=dict(run.env, SVOD_BINARY_DIR=str(BUILD)))


def containment(run: Run):
    r = run.gbench("bench_fault", repetitions=3)
    pairs(r, [("a launch whose kernel faults, caught as KernelFault", "BM_LaunchThatFaults",
               "the same launch, a kernel that does not fault", "BM_LaunchThatDoesNotFault"),
              ("a launch whose kernel calls _exit(), stopped there", "BM_LaunchThatCallsExit",
               "the same launch, a kernel that does not fault", "BM_LaunchThatDoesNotFault")])
    if "BM_StopASpinningKernel" in r:
        print(f"  {'a spinning kernel stopped: request to exception':58s} "
              f"{human(r['BM_StopASpinningKernel']['ns']):>9s} | (no comparator)")
    # A time limit on every plan op: bench_plan with SVOD_OP_TIMEOUT=60 and without, in turns.
    limited, plain = {}, {}
    for _ in range(1 if run.quick else 3):
        for side, env in ((limited, dict(run.env, SVOD_OP_TIMEOUT="60")), (plain, run.env)):
            for name, value in run.gbench("bench_plan", "BM_ChainPlan|BM_IndependentPlan", 1, env).items():
                side.setdefault(name, []).append(value["ns"])
    both = {**{f"{k} (limit)": {"ns": statistics.median(v)} for k, v in limited.items()},
            **{k: {"ns": statistics.median(v)} for k, v in plain.items()}}
    pairs(both, [(f"{what}, SVOD_OP_TIMEOUT=60", f"{name} (limit)", "the same, no time limit", name)
                 for name, what in PLAN_OPS.items()], per=1000)
    print()
    run.show(["bash", "bench/checked_mode.sh", str(BUILD), "1" if run.quick else "5"])


TOPICS = {"launch": launch, "plans": plans, "compile": compile_, "startup": startup, "python": python,
          "tinygrad": tinygrad, "collectives": collectives, "containment": containment}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("topics", nargs="*", help=f"any of {', '.join(TOPICS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="each bench once, briefly (a smoke test)")
    args = parser.parse_args()
    if unknown := set(args.topics) - set(TOPICS):
        parser.error(f"unknown topic {', '.join(sorted(unknown))}: the topics are {', '.join(TOPICS)}")
    uname = os.uname()
    print(f"svod benchmarks {time.strftime('%Y-%m-%d %H:%M %Z')}, {uname.nodename} {uname.machine}, "
          f"{os.cpu_count()} cores, build {BUILD}{', quick' if args.quick else ''}\n")
    with tempfile.TemporaryDirectory(prefix="svod-measure-") as cache:
        run = Run(args.quick, cache)
        for topic, measure in TOPICS.items():
            if not args.topics or topic in args.topics:
                start = time.monotonic()
                print(f"== {topic} (load average {load_average()})", flush=True)
                measure(run)
                print(f"== {topic}: {time.monotonic() - start:.0f} s, load average {load_average()}\n", flush=True)


if __name__ == "__main__":
    main()
