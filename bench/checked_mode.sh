#!/usr/bin/env bash
# What checked mode costs (issue 24): `svod run` of the MLP example and of a
# plan of 16 small kernels with checks off, memory, nan and all, alternating
# rounds so that drift hits every mode alike:
#   bash bench/checked_mode.sh [BUILD] [ROUNDS]
# Prints the median of the rounds' execution medians per mode and its ratio
# to "off" (build/release by default; --repeat 200 per round).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${1:-$root/build/release} rounds=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 16 small kernels in a chain, each writing 4096 floats its successor reads.
/usr/bin/python3 - "$work/chain.json" <<'PY'
import json, sys
n = 16
plan = {"svod_plan": 1,
        "buffers": {f"b{i}": {"dtype": "f32", "count": 4096, "init": {"fill": 1}} for i in range(n + 1)},
        "programs": {"step": {"language": "c", "entry": "step",
                              "source": "void step(float* restrict o, const float* restrict a) "
                                        "{ for (int i = 0; i < 4096; i++) o[i] = a[i] * 0.5f + 1.0f; }",
                              "buffers": [{"name": "o", "access": "write", "dtype": "f32"},
                                          {"name": "a", "dtype": "f32"}]}},
        "ops": [{"run": "step", "buffers": [f"b{i + 1}", f"b{i}"]} for i in range(n)],
        "outputs": {f"b{n}": {}}}
json.dump(plan, open(sys.argv[1], "w"))
PY
declare -A plans=([mlp]="$root/examples/mlp/plan.json" [chain16]="$work/chain.json")
for ((r = 1; r <= rounds; r++)); do
  for plan in mlp chain16; do
    for mode in off memory nan all; do
      check=()
      [[ $mode != off ]] && check=(--check="$mode")
      "$build/svod" run "${plans[$plan]}" --repeat 200 --sequential "${check[@]}" |
        sed -n 's/^execute (.*warm runs: median \([0-9.]*\) us.*/\1/p' >>"$work/$plan-$mode.txt"
    done
  done
done
/usr/bin/python3 - "$work" <<'PY'
import os, statistics, sys
print(f"{'plan':8s} {'mode':7s} {'median us':>10s} {'x off':>6s}")
for plan in ("mlp", "chain16"):
    off = None
    for mode in ("off", "memory", "nan", "all"):
        values = [float(v) for v in open(os.path.join(sys.argv[1], f"{plan}-{mode}.txt")).read().split()]
        m = statistics.median(values)
        off = off or m
        print(f"{plan:8s} {mode:7s} {m:10.1f} {m / off:6.2f}")
PY
