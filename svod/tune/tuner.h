// The beam-search auto-tuner behind `svod tune TUNE.json` (tune_file.h).
//
// tune() runs beam_search() (beam_search.h) with an evaluator that hands each
// round's candidates to worker processes (tune_worker.h): a worker compiles
// the round in parallel, then checks and times its candidates one by one.
// When a worker dies, the candidate it had in flight is recorded as crashed
// (or timed out, when the worker's timer or the tuner's safety limit ended
// it) and a fresh worker takes the rest of the round; if it died before any
// candidate was in flight, the rest of the round is recorded as failed with
// the reason. The start candidate writes the reference outputs into a
// private temporary folder, removed when tune() returns.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/tune/benchmark.h"
#include "svod/tune/tune_file.h"

namespace svod {

enum class TuneStatus { Ok, Wrong, CompileError, Crashed, Timeout, Error };
std::string_view to_string(TuneStatus status) noexcept;  // "ok", "wrong", "compile_error", …

struct TuneCandidate {
  TunePoint point;
  size_t round = 0;
  TuneStatus status = TuneStatus::Error;
  std::string message;         // why it failed; empty when ok
  double median_ns = 0;        // when ok: candidate_time() of its samples, what the pick compares
  double min_ns = 0;
  int runs = 0;
  // Timing stopped once it had lost for certain (timing_lost(), benchmark.h):
  // its median is then above the best's, so such a candidate is never the best.
  bool stopped_early = false;
};

// The pick rule, the only one: the ok candidate with the lowest median wins,
// the earlier of equal ones. The search ranks by it, the progress line's best
// is its best, and a worker stops timing a candidate only when this rule can
// no longer pick it (timing_lost() against the best median so far).
bool beats(const TuneCandidate& candidate, const TuneCandidate* best) noexcept;

struct TuneReport {
  std::vector<TuneCandidate> candidates;  // in evaluation order; [0] is the start
  size_t best = 0;                        // index into candidates: beats() every other one
  size_t rounds = 0;                      // rounds after the start
  double seconds = 0;                     // wall time of the whole search

  double speedup(size_t index) const;     // the start's median over this one's; 0 unless ok
};

struct TuneProgress {
  size_t round = 0;
  size_t done = 0;    // candidates of this round finished (done == total: the round is over)
  size_t total = 0;   // candidates in this round
  size_t evaluated = 0;                  // over all rounds, this one's finished included
  // Of this round's finished candidates: how many compiled (every one that
  // got to run, ok or not), were timed (ok) and failed (any other status).
  size_t compiled = 0;
  size_t timed = 0;
  size_t failed = 0;
  std::optional<double> best_median_ns;  // the best so far by beats(); none before one is ok
  TunePoint best_point;                  // its parameters; empty when none
};

struct TuneOptions {
  // How to start a worker: the svod binary and its arguments, e.g.
  // {"/usr/bin/svod", "tune", "--worker"}.
  std::vector<std::string> worker_command;
  // The compiler of the workers' CPU devices (LoadOptions::cpu_compiler;
  // empty: the workers' default), sent to them with each job.
  std::string cpu_compiler;
  // Whether every kernel of the search — the candidates and the ops before
  // the tuned one — is compiled confined (svod/sandbox/confined_compile.h)
  // and runs in svod's sandbox (svod/sandbox/sandbox.h), each candidate in a
  // helper of its own, so that the workers run none of the tune file's code.
  // A candidate's times then include one round trip to its helper. Where the
  // sandbox or confined compiles cannot be had, tune() fails with the
  // worker's Error(Unsupported) naming what is missing; nothing runs.
  bool sandbox = false;
  // Called after each finished candidate, on the calling thread; every
  // round ends with a call whose done equals total.
  std::function<void(const TuneProgress&)> on_progress;
};

// Tunes `file`'s op. Throws Error when the start candidate fails (it is the
// reference every other candidate is checked against; the error keeps the
// failure's kind where it has one, Execution otherwise) or a worker cannot
// load the plan (the worker's error, with its kind).
TuneReport tune(const TuneFile& file, const TuneOptions& options);

// The candidates as a table: one column per parameter, then median, min,
// speed-up over the start and status; the best row is marked.
std::string render_tune_table(const TuneFile& file, const TuneReport& report);

// Writes every candidate as JSON (see docs in tools/svod/tune.cpp).
void write_tune_json(const TuneFile& file, const TuneReport& report, const std::filesystem::path& path);

}  // namespace svod
