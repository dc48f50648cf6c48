#!/usr/bin/env bash
# Launch and plan overhead of two builds measured in one run, alternating
# rounds so that drift of the machine hits both alike:
#   bash bench/ab_overhead.sh BASE_BUILD NEW_BUILD [ROUNDS]
# (each a build folder with bench/bench_launch and bench/bench_plan, e.g. a
# worktree of the commit to compare against). Prints the median of the rounds
# per benchmark and the ratio NEW/BASE.
set -euo pipefail
base=$1 new=$2 rounds=${3:-6}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for side in base new; do
    build=$base
    [[ $side == new ]] && build=$new
    "$build/bench/bench_launch" --benchmark_min_time=0.5 --benchmark_format=json >"$out/launch_${side}_$r.json"
    "$build/bench/bench_plan" --benchmark_min_time=0.5 --benchmark_filter='Chain|Independent' \
      --benchmark_format=json >"$out/plan_${side}_$r.json"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
times = collections.defaultdict(lambda: collections.defaultdict(list))
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    side = os.path.basename(path).split("_")[1]
    for b in json.load(open(path))["benchmarks"]:
        times[b["name"]][side].append(b["real_time"])
# bench_launch reports ns per call; bench_plan us per 1,000 ops, i.e. ns per op.
print(f"{'benchmark (ns per call or per op)':48s} {'base':>8s} {'new':>8s} {'new/base':>8s}")
for name, t in sorted(times.items()):
    base, new = statistics.median(t["base"]), statistics.median(t["new"])
    print(f"{name:48s} {base:8.1f} {new:8.1f} {new / base:8.2f}")
PY
