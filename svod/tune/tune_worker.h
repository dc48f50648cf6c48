// The tuner's worker: runs in a child process (`svod tune --worker`) so that
// a candidate that crashes or hangs takes down the worker, not the tuner.
//
// A job (JSON on stdin) names the tune file, the candidates (value indices
// per parameter), the private folder of reference outputs, whether the first
// candidate writes them (the start of the search), the best median known so
// far, the compiler of the CPU devices ("" for the default) and whether the
// search is sandboxed. The worker loads the plan and runs the ops before the
// tuned op, so its buffers hold what the op sees in a real run, and
// snapshots them. It compiles all candidates at once (compile_many, through
// the caches), then takes them one at a time: restores the op's buffers,
// runs the candidate once and compares what it wrote with the reference (the
// tune file's tolerances), restores again and times it (benchmark_operation,
// which stops early only once the candidate has lost for certain to the best
// median so far: timing_lost(), benchmark.h; the check run counts as one
// warm-up run). An interval timer armed around each candidate's runs kills
// the worker with SIGALRM when they pass the tune file's timeout.
//
// Sandboxed (TuneOptions::sandbox), the worker runs none of the tune file's
// code: it compiles every program confined (load_confined, several at a
// time, never through the caches), runs the ops before the tuned one in a
// sandbox helper, and each candidate as a plan of one op in a helper of its
// own over copies of the op's buffers, which it restores and reads in the
// shared memory. The sandbox's wall-clock limit (the tune file's timeout)
// ends a hung run instead of the timer, and a candidate that breaks a rule
// or hangs is reported ("crashed", "timeout", with the sandbox's message)
// while the worker goes on.
//
// Events go to stdout as JSON lines, flushed one by one, so the tuner knows
// which candidate was in flight when the worker died:
//   {"event":"start","candidate":K}
//   {"event":"result","candidate":K,"status":"ok","median_ns":…,"min_ns":…,"runs":…,"stopped_early":…}
//   {"event":"result","candidate":K,"status":"wrong"|"compile_error"|"crashed"|"timeout"|"error","message":"…"}
//   {"event":"error","kind":"…","message":"…"}   setup failed (exit status 2)
//   {"event":"done"}
#pragma once

#include <cstdio>
#include <string_view>

namespace svod {

// Runs one job and returns the process exit status (0 after "done", 2 after
// "error").
int run_tune_worker(std::string_view job_json, std::FILE* events);

}  // namespace svod
