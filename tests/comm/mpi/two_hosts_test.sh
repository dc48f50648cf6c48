#!/usr/bin/env bash
# Ranks on two hosts: two network namespaces joined by a veth pair stand for two machines, mpirun
# starts one rank in each (its launch agent enters the other namespace, as ssh would log into
# the other machine, with an environment as bare as ssh's), and the ranks talk over TCP across
# the link (OpenMPI's ob1/tcp: no shared memory, no loopback between them):
#  1. the all_reduce/broadcast plan (tests/planfile/data/collective.json) with `svod run`;
#  2. the data-parallel example plan (examples/data_parallel) with `svod run`;
#  3. the Python example on svod.comm.world() (examples/python/data_parallel.py), when the
#     build has the Python package;
# then each again with the link cut (`ip link set down`) while the ranks run: every rank must
# end with an error naming the other rank within SVOD_COMM_TIMEOUT (plus a margin), none may
# hang. mpirun itself cannot reach the other namespace's daemon once the link is down and waits
# for it; the test reads each rank's own status and output from files and then ends whatever
# is left in its namespaces. Traffic stays inside the namespaces the test makes: the root
# namespace gets no address, route or interface.
#
#   two_hosts_test.sh MPIRUN SVOD SOURCE_DIR [PYTHON_PACKAGE_DIR]
#
# Needs root (ip netns); where namespaces cannot be made, it prints "skipped: <why>" and exits 0.
set -uo pipefail

mpirun=$1 svod=$2 src=$3 python_dir=${4:-}
python=/usr/bin/python3
timeout_s=4   # SVOD_COMM_TIMEOUT for the cut runs
margin_s=8    # how much later than that a rank may end (start-up, a loaded machine)

skip() { echo "skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip command (iproute2)"

work=$(mktemp -d /tmp/svod-two-hosts.XXXXXX)
id=$$
ns_a=svod-a-$id ns_b=svod-b-$id
if_a=sva$id if_b=svb$id   # (interface names: at most 15 characters)
addr_a=10.77.0.1 addr_b=10.77.0.2

# Ends every process still in the namespaces (mpirun and a daemon cut off from it), then
# removes them (the veth pair goes with them) and the work folder.
cleanup() {
  local ns
  for ns in "$ns_a" "$ns_b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

if ! ip netns add "$ns_a" 2>"$work/err"; then skip "ip netns add: $(cat "$work/err")"; fi
ip netns add "$ns_b" || exit 1
ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$addr_a/24" dev "$if_a" && ip -n "$ns_b" addr add "$addr_b/24" dev "$if_b" || exit 1
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up || exit 1; done
ip -n "$ns_a" link set "$if_a" up && ip -n "$ns_b" link set "$if_b" up || exit 1
echo "two hosts: $addr_a in namespace $ns_a, $addr_b in namespace $ns_b, joined by $if_a-$if_b"

# mpirun's launch agent, called as "agent HOST COMMAND...": runs the daemon's command line in
# HOST's namespace with only PATH and OpenMPI's permission to run as root (ssh passes no more;
# mpirun forwards what the ranks need with -x).
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $addr_a) ns=$ns_a ;;
  $addr_b) ns=$ns_b ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" env -i PATH="\$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c "\$*"
EOF
# Each rank: its network namespace, then its command with output, status and end time in files
# of the run's folder (\$1), which the test reads also when mpirun cannot forward them.
cat >"$work/rank" <<'EOF'
#!/bin/sh
dir=$1; shift
r=$OMPI_COMM_WORLD_RANK
readlink /proc/self/ns/net >"$dir/rank$r.ns"
"$@" >"$dir/rank$r.out" 2>"$dir/rank$r.err"
rc=$?
echo "$rc $(date +%s%3N)" >"$dir/rank$r.status"
exit $rc
EOF
chmod +x "$work/agent" "$work/rank"
printf '%s slots=1\n%s slots=1\n' "$addr_a" "$addr_b" >"$work/hosts"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# What the ranks get from here (the agent passes nothing on): PATH, and the object cache and
# sanitizer options ctest sets.
forward=(-x PATH)
for var in SVOD_CACHE_DIR ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
  if [ -n "${!var:-}" ]; then forward+=(-x "$var"); fi
done
export OMPI_MCA_orte_tmpdir_base=$work
failures=0
fail() { echo "FAIL ($1): $2"; failures=$((failures + 1)); }
now() { date +%s%3N; }  # milliseconds

# start NAME COMM_TIMEOUT COMMAND...: starts mpirun in namespace A on the two hosts in the
# background (in a subshell of its own, so that ending mpirun does not end it); the run's files
# go to $work/NAME.
start() {
  local name=$1 comm_timeout=$2; shift 2
  dir=$work/$name
  mkdir -p "$dir"
  (cd "$dir" && ip netns exec "$ns_a" "$mpirun" --hostfile "$work/hosts" -np 2 \
     --mca plm_rsh_agent "$work/agent" --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 \
     -x SVOD_COMM_TIMEOUT="$comm_timeout" "${forward[@]}" \
     "$work/rank" "$dir" "$@" >"$dir/mpirun.log" 2>&1) 2>/dev/null &  # (the subshell's "Killed" line)
  mpirun_pid=$!
}
# waits until both ranks wrote a status or DEADLINE (now's milliseconds) passed; 0 when both did.
wait_ranks() {
  local deadline=$1
  while [ ! -f "$dir/rank0.status" ] || [ ! -f "$dir/rank1.status" ]; do
    if (($(now) > deadline)); then return 1; fi
    sleep 0.1
  done
}
show() {
  local r
  for r in 0 1; do
    echo "  rank $r: status $(cut -d' ' -f1 "$dir/rank$r.status" 2>/dev/null || echo none)"
    sed 's/^/    /' "$dir/rank$r.err" 2>/dev/null | tail -n 5
  done
}
# Both ranks ran, each in its own namespace (two hosts, not two processes of one).
check_two_hosts() {
  [ -s "$dir/rank0.ns" ] && [ -s "$dir/rank1.ns" ] && [ "$(cat "$dir/rank0.ns")" != "$(cat "$dir/rank1.ns")" ] ||
    fail "$1" "the ranks did not run in the two namespaces ($(cat "$dir"/rank*.ns 2>/dev/null | tr '\n' ' '))"
}

# expect_ok NAME PATTERN COMMAND...: the run passes on both hosts and rank 0's output has PATTERN.
expect_ok() {
  local name=$1 pattern=$2; shift 2
  start "$name" 60 "$@"
  if ! wait_ranks $(($(now) + 120000)); then fail "$name" "a rank did not end in 120 s"; show; return; fi
  wait "$mpirun_pid"; local rc=$?
  check_two_hosts "$name"
  if [ "$rc" != 0 ] || [ "$(cut -d' ' -f1 "$dir/rank0.status")" != 0 ] || [ "$(cut -d' ' -f1 "$dir/rank1.status")" != 0 ]; then
    fail "$name" "mpirun exited $rc"; show; sed 's/^/    /' "$dir/mpirun.log" | tail -n 20; return
  fi
  grep -qE "$pattern" "$dir/rank0.out" || { fail "$name" "rank 0 printed no '$pattern'"; cat "$dir/rank0.out"; return; }
  echo "ok ($name): both ranks passed across the link"
}

# expect_cut NAME PATTERN_RANK PROGRAM ARGS...: the link goes down while the ranks run: each rank
# ends, within SVOD_COMM_TIMEOUT and the margin, with a non-zero status and an error naming the
# other rank (PATTERN_RANK with %d for that rank).
expect_cut() {
  local name=$1 pattern=$2; shift 2
  start "$name" "$timeout_s" "$@"
  # Mid-run: the ranks exchange data (a TCP connection of the rank's own process is open
  # across the link, which OpenMPI opens at the first message between the two, after start-up)
  # and a second more passed.
  local deadline r other cut_at ended program
  deadline=$(($(now) + 120000))
  program=$(basename "$1")
  until ip netns exec "$ns_a" ss -tnpH state established dst "$addr_b" | grep -qF "users:((\"$program\""; do
    if (($(now) > deadline)); then fail "$name" "the ranks exchanged nothing in 120 s"; show; return; fi
    sleep 0.1
  done
  sleep 1
  if [ -f "$dir/rank0.status" ] || [ -f "$dir/rank1.status" ]; then
    fail "$name" "a rank ended before the cut"; show; return
  fi
  ip -n "$ns_a" link set "$if_a" down
  cut_at=$(now)
  if ! wait_ranks $((cut_at + (timeout_s + margin_s) * 1000)); then
    fail "$name" "a rank still runs $((timeout_s + margin_s)) s after the link was cut"; show
  else
    check_two_hosts "$name"
    for r in 0 1; do
      other=$((1 - r))
      ended=$(($(cut -d' ' -f2 "$dir/rank$r.status") - cut_at))
      if [ "$(cut -d' ' -f1 "$dir/rank$r.status")" = 0 ]; then
        fail "$name" "rank $r exited 0 after the cut"
      elif ! grep -qE "$(printf "$pattern" "$other")" "$dir/rank$r.err"; then
        fail "$name" "rank $r's error does not name rank $other:"; show
      else
        printf 'ok (%s): rank %d ended %d ms after the cut: %s\n' "$name" "$r" "$ended" \
          "$(grep -E "$(printf "$pattern" "$other")" "$dir/rank$r.err" | head -n 1 | cut -c 1-240)"
      fi
    done
  fi
  # mpirun waits for the daemon it can no longer reach: end it and everything else still in the
  # namespaces, and bring the link back for the next run.
  local ns
  for ns in "$ns_a" "$ns_b"; do ip netns pids "$ns" | xargs -r kill -9 2>/dev/null; done
  wait "$mpirun_pid"
  ip -n "$ns_a" link set "$if_a" up
}

plan=$src/tests/planfile/data/collective.json
example=$src/examples/data_parallel/plan.json
timed_out='timed out after [0-9]+ ms waiting for rank\(s\) %d'

expect_ok collective 'expect: ok' "$svod" run "$plan" --repeat 3 --var N=16
expect_ok data_parallel 'expect: ok' "$svod" run "$example"
expect_cut collective_cut "$timed_out" "$svod" run "$plan" --repeat 100000000 --var N=16
expect_cut data_parallel_cut "$timed_out" "$svod" run "$example" --repeat 100000000
if [ -n "$python_dir" ] && [ -x "$python" ]; then
  export PYTHONPATH=$python_dir
  forward+=(-x PYTHONPATH)
  script=$src/examples/python/data_parallel.py
  expect_ok python_world '2 ranks \(mpi\): weights bitwise identical' "$python" "$script" --steps 5
  expect_cut python_world_cut "$timed_out" "$python" "$script" --steps 100000000
else
  echo "(no Python package in this build: the svod.comm.world() example is not run)"
fi

if [ "$failures" != 0 ]; then
  echo "two_hosts_test: $failures failed"
  exit 1
fi
echo "two_hosts_test: all passed"
