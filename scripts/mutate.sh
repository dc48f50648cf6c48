#!/usr/bin/env bash
# The mutation campaign in full: mutated plans and packages through `svod run`
# (tests/robustness/mutate_test.py; ctest runs 100 of each).
#
#   scripts/mutate.sh [PLANS] [PACKAGES] [SEED]
#
# Defaults: 500 plans, 500 packages, seed 1; the same seed makes the same
# mutants. Every run must end cleanly: outputs printed and checked, a
# mismatch reported, or one clean error line; a kernel's own fault, exit() or
# endless loop is counted apart when svod names it. Anything else fails the
# script and keeps the input, with the mutation, the command and its stderr,
# in WORK/failures (failures.txt). Kept inputs of fuzz/regressions/svod_run
# run first. SVOD_CLI names the svod to test (default build/release/svod),
# SVOD_MUTATE_DIR keeps the work folder (default a temporary one, removed
# when nothing failed), JOBS the runs at a time (default 2), TIMEOUT each
# run's --timeout in seconds (default 10). One mutant again, with its output:
#   tests/robustness/mutate_test.py --svod build/release/svod --only plan:17
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
plans="${1:-500}"
packages="${2:-500}"
seed="${3:-1}"
cli="${SVOD_CLI:-$root/build/release/svod}"
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3

if [[ ! -x "$cli" ]]; then
  echo "mutate.sh: no svod at $cli (build svod_cli or set SVOD_CLI)" >&2
  exit 2
fi
args=(--svod "$cli" --plans "$plans" --packages "$packages" --seed "$seed" --jobs "${JOBS:-2}"
      --timeout "${TIMEOUT:-10}" --replay "$root/fuzz/regressions/svod_run")
if [[ -n "${SVOD_MUTATE_DIR:-}" ]]; then
  args+=(--work "$SVOD_MUTATE_DIR")
fi
exec "$python" "$root/tests/robustness/mutate_test.py" "${args[@]}"
