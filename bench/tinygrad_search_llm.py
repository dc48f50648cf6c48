"""tinygrad's BEAM search and its LLM on DEV=SVOD against DEV=CPU (issue 39), each in fresh
processes, the devices taking turns round by round:

    PYTHONPATH=build/release/python /usr/bin/python3 bench/tinygrad_search_llm.py [beam|llm|all] \
        [--rounds 3] [--load]

tinygrad is taken from SVOD_TINYGRAD_DIR (default shared/tinygrad beside the repository folder).

- beam: `BEAM=2` search of a 256 x 256 f32 matmul from cold caches (an empty tinygrad cache
  database and svod object cache; IGNORE_BEAM_CACHE), then the median time of the kernel it found
  (TinyJit replays). The search's time is split as tinygrad's BEAM_DEBUG=2 lines give it: the
  worker processes' time per candidate (tinygrad's rendering, and the compile), and the main
  process's timing of candidates.
- llm: tinygrad's own Transformer (tinygrad/llm/model.py: 4 blocks, dim 512, random weights,
  greedy) generating 64 tokens from a 16-token prompt: the first token (prefill) and the decode
  rate, cold (empty caches) and warm (the caches of the round's cold process).

--load runs one CPU-bound process pinned to the same cores for the whole benchmark. Each line is
one measurement; the summary gives medians and CPU/SVOD ratios.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))

BEAM_CHILD = r"""
import json, statistics, sys, time, os
if os.environ["DEV"] == "SVOD": import svod.tinygrad
from tinygrad import Tensor, TinyJit, Device
import numpy as np
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()
b = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()
start = time.perf_counter()
(a @ b).realize()
search = time.perf_counter() - start
os.environ["BEAM"] = "0"
mm = TinyJit(lambda x, y: (x @ y).realize())
times = []
for _ in range(30):
    t = time.perf_counter(); mm(a, b); Device[os.environ["DEV"]].synchronize(); times.append(time.perf_counter() - t)
print(json.dumps({"search_s": search, "kernel_us": statistics.median(times[5:]) * 1e6}))
"""

LLM_CHILD = r"""
import json, sys, time, os
if os.environ["DEV"] == "SVOD": import svod.tinygrad
from tinygrad import Tensor, Device
from tinygrad.llm.model import Transformer, TransformerConfig
Tensor.manual_seed(0)
config = TransformerConfig(num_blocks=4, dim=512, hidden_dim=1408, n_heads=8, n_kv_heads=8, norm_eps=1e-5,
                           vocab_size=4096, head_dim=64, rope_theta=10000.0, rope_dim=64, v_head_dim=64,
                           max_context=96)
model = Transformer(config)
from tinygrad import nn
Tensor.realize(*nn.state.get_parameters(model))
tokens = list(range(1, 17))
start = time.perf_counter()
out, stamps = [], []
for tok in model.generate(tokens):
    out.append(tok); stamps.append(time.perf_counter())
    if len(out) == 64: break
first = stamps[0] - start
decode = (len(stamps) - 17) / (stamps[-1] - stamps[16])  # after the JIT captured (its third call)
print(json.dumps({"first_s": first, "decode_tok_s": decode, "tokens": out[:8]}))
"""


def run_child(code: str, dev: str, env: dict, timeout: int = 900) -> dict:
    env = dict(os.environ, **env, DEV=dev, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(TINYGRAD_DIR), os.environ.get("PYTHONPATH", "")]))
    env.pop("DEBUG", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0: raise RuntimeError(f"{dev}: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["stdout"] = done.stdout
    return result


def cache_env(folder: pathlib.Path) -> dict:
    return {"CACHEDB": str(folder / "tinygrad.db"), "SVOD_CACHE_DIR": str(folder / "svod")}


_TIME = re.compile(r"([\d.]+)(ms|us|s) compile/\s*([\d.]+)(ms|us|s) run")


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[unit]


def beam_split(output: str) -> tuple[int, float]:
    """(candidates timed, the workers' seconds for them) from BEAM_DEBUG=2's lines."""
    found = [_seconds(m[1], m[2]) for m in _TIME.finditer(re.sub(r"\x1b\[[0-9;]*m", "", output))]
    return len(found), sum(found)


def beam(rounds: int, work: pathlib.Path) -> dict:
    rows = {"CPU": [], "SVOD": []}
    for r in range(rounds):
        for dev in ("CPU", "SVOD"):
            folder = work / f"beam-{dev}-{r}"
            env = {**cache_env(folder), "BEAM": "2", "IGNORE_BEAM_CACHE": "1", "BEAM_DEBUG": "2"}
            result = run_child(BEAM_CHILD, dev, env)
            n, worker_s = beam_split(result["stdout"])
            result.update(candidates=n, worker_s=worker_s)
            rows[dev].append(result)
            print(f"beam round {r + 1} {dev:4}: search {result['search_s']:6.2f} s, found kernel "
                  f"{result['kernel_us']:7.1f} us, {n} candidates timed, workers {worker_s:5.1f} s", flush=True)
    return rows


def llm(rounds: int, work: pathlib.Path) -> dict:
    rows = {(dev, kind): [] for dev in ("CPU", "SVOD") for kind in ("cold", "warm")}
    for r in range(rounds):
        for dev in ("CPU", "SVOD"):
            folder = work / f"llm-{dev}-{r}"
            for kind in ("cold", "warm"):
                result = run_child(LLM_CHILD, dev, cache_env(folder))
                rows[(dev, kind)].append(result)
                print(f"llm round {r + 1} {dev:4} {kind}: first token {result['first_s']:5.2f} s, decode "
                      f"{result['decode_tok_s']:6.1f} tok/s, tokens {result['tokens']}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="all", choices=("beam", "llm", "all"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", action="store_true", help="one CPU-bound process on the same cores throughout")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; tinygrad from {TINYGRAD_DIR}; {'one competing CPU-bound process' if args.load else 'quiet'}")
    hog = None
    if args.load:
        cores = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        hog = subprocess.Popen(["taskset", "-c", cores, sys.executable, "-c", "while True: pass"])
    try:
        with tempfile.TemporaryDirectory(prefix="svod-tinygrad-bench-") as tmp:
            work = pathlib.Path(tmp)
            med = statistics.median
            if args.what in ("beam", "all"):
                rows = beam(args.rounds, work)
                c, s = rows["CPU"], rows["SVOD"]
                print(f"BEAM=2 256x256 matmul, cold: search CPU {med(x['search_s'] for x in c):.2f} s, SVOD "
                      f"{med(x['search_s'] for x in s):.2f} s = {med(x['search_s'] for x in c) / med(x['search_s'] for x in s):.2f}x; "
                      f"found kernel CPU {med(x['kernel_us'] for x in c):.0f} us, SVOD {med(x['kernel_us'] for x in s):.0f} us")
            if args.what in ("llm", "all"):
                rows = llm(args.rounds, work)
                for kind in ("cold", "warm"):
                    c, s = rows[("CPU", kind)], rows[("SVOD", kind)]
                    fc, fs = med(x["first_s"] for x in c), med(x["first_s"] for x in s)
                    dc, ds = med(x["decode_tok_s"] for x in c), med(x["decode_tok_s"] for x in s)
                    print(f"LLM {kind}: first token CPU {fc:.2f} s, SVOD {fs:.2f} s = {fs / fc:.2f}x CPU's; "
                          f"decode CPU {dc:.1f} tok/s, SVOD {ds:.1f} tok/s = {ds / dc:.2f}x")
    finally:
        if hog: hog.kill()


if __name__ == "__main__":
    main()
