// `svod tune TUNE.json`: beam-search the parameters of one op of a plan file
// (svod/tune/tune_file.h, svod/tune/tuner.h). Candidates run in worker
// processes, which are this same binary started as `svod tune --worker`.
//
// --sandbox compiles the tune file's sources confined and runs every kernel
// in svod's sandbox (svod::TuneOptions::sandbox).
//
// --plot FILE.svg draws every candidate's time by round (tune_plot.h).
// --json FILE writes every candidate:
//   {"tune_file", "plan", "op", "program", "parameters": [names], "beam",
//    "rounds", "seconds", "best": index,
//    "candidates": [{"index", "round", "params": {name: value}, "status",
//                    "median_ns", "min_ns", "runs", "stopped_early", "speedup"
//                    (when ok) | "message" (otherwise)}]}
// Status is ok, wrong (output differs from the start candidate's),
// compile_error, crashed, timeout or error.
//
// Progress goes to stderr: a bar redrawn in place when stderr is a terminal,
// otherwise one line per round, e.g.
//   round 2: 12 candidates, 11 compiled, 10 timed, 2 failed; best 77.12 us (ORDER=1 TJ=64)
// The best there is the best by the pick rule (svod/tune/tuner.h), the one
// the table marks when the search ends.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include "svod/base/error.h"
#include "svod/sandbox/sandbox.h"
#include "svod/tune/time_scale.h"
#include "svod/tune/tune_worker.h"
#include "svod/tune/tuner.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"
#include "tools/svod/tune_plot.h"

namespace svod::cli {
namespace {

// When stderr is a terminal: a one-line bar redrawn in place, short enough
// not to wrap (which would leave copies of it behind).
void draw_progress(const TuneProgress& p) {
  constexpr size_t kWidth = 30;
  const size_t filled = p.total == 0 ? kWidth : p.done * kWidth / p.total;
  fmt::print(stderr, "\r\033[Kround {} [{}{}] {}/{}  {} failed  best {}", p.round, std::string(filled, '#'),
             std::string(kWidth - filled, '.'), p.done, p.total, p.failed,
             p.best_median_ns ? format_time(*p.best_median_ns) : std::string("-"));
  std::fflush(stderr);
}

// Otherwise (a pipe, a file, a CI log): one plain line when a round is over.
void print_round(const TuneFile& file, const TuneProgress& p) {
  if (p.done != p.total) return;
  const std::string best =
      p.best_median_ns ? fmt::format("{} ({})", format_time(*p.best_median_ns), file.describe(p.best_point)) : "-";
  fmt::print(stderr, "round {}{}: {} candidate{}, {} compiled, {} timed, {} failed; best {}\n", p.round,
             p.round == 0 ? " (start)" : "", p.total, p.total == 1 ? "" : "s", p.compiled, p.timed, p.failed, best);
  std::fflush(stderr);
}

}  // namespace

int tune_worker() {
  const std::string job{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  return run_tune_worker(job, stdout);
}

int tune(const TuneOptions& options) {
  try {
    // Before the search: its results can be written when it is done.
    check_outputs({{"--json", options.json}, {"--plot", options.plot}});
    svod::TuneOptions run;
    run.cpu_compiler = cpu_compiler_option(options.cpu_compiler);  // the workers compile
    run.sandbox = options.sandbox;
    const TuneFile file = parse_tune_file(options.tune_file);
    // Workers are this very binary.
    std::error_code no_link;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", no_link);
    run.worker_command = {no_link ? std::string("/proc/self/exe") : self.string(), "tune", "--worker"};
    const bool bar = ::isatty(STDERR_FILENO) != 0;
    run.on_progress = [&file, bar](const TuneProgress& p) { bar ? draw_progress(p) : print_round(file, p); };
    fmt::print("tuning {} (ops[{}], program \"{}\") of {}\n", options.tune_file, file.op, file.program().name,
               file.plan.source_name);
    // Here first, so that a machine without the sandbox is told before any worker starts.
    if (options.sandbox)
      fmt::print("sandbox: {}; sources compiled confined; times include a round trip to the helper\n",
                 probe_sandbox().describe());
    // Before the progress on stderr, where both go to one log.
    std::fflush(stdout);
    TuneReport report = svod::tune(file, run);
    if (bar) fmt::print(stderr, "\r\033[K");
    fmt::print("{}", render_tune_table(file, report));
    const TuneCandidate& best = report.candidates[report.best];
    fmt::print("best: {}  median {}, {:.2f}x the start ({})\n", file.describe(best.point), format_time(best.median_ns),
               report.speedup(report.best), file.describe(report.candidates.front().point));
    fmt::print("{} candidates in {} rounds, {:.2f} s ({:.1f} candidates/s)\n", report.candidates.size(),
               report.rounds + 1, report.seconds, double(report.candidates.size()) / report.seconds);
    if (!options.json.empty()) {
      write_tune_json(file, report, options.json);
      fmt::print("wrote {}\n", options.json);
    }
    if (!options.plot.empty()) {
      write_tune_svg(file, report, options.plot);
      fmt::print("wrote {}\n", options.plot);
    }
  } catch (const Error& e) {
    return fail("tune", e);
  }
  return 0;
}

}  // namespace svod::cli
