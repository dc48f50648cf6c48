// Profiles of plan executions: when each op of each run started and ended,
// on which thread and device, and what that adds up to per kernel.
//
// A Profiler is a PlanObserver: pass it as ExecuteOptions::observer (or call
// Profiler::execute) and it stamps every op with the steady clock on the
// thread that runs it. Nothing is recorded, and nothing costs anything, for
// executions that run without it: profiling is per plan and off by default.
// SVOD_PROFILE=1 does not attach a profiler inside the library; commands that
// run plans (svod run) read profile_requested() and attach one themselves.
//
// What was recorded (a PlanProfile) renders as tables sorted by total time,
// as a Chrome trace (Perfetto, chrome://tracing) with one track per device
// and thread, and as JSON for scripts. The module never prints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/plan/execution_plan.h"
#include "svod/plan/op_description.h"

namespace svod {

// One op in one run. Times are nanoseconds on the steady clock since the
// profiler's origin; `thread` is a small process-wide number per thread (1, 2, ...),
// 0 when the op did not run in that run (svod bench times one op per run);
// such spans are left out of aggregations and traces.
struct OpSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t thread = 0;
  bool ran() const noexcept { return thread != 0; }
};

// One execution of the plan: its own start and end, and ops[i] for op i.
struct RunProfile {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<OpSpan> ops;
};

// Count, sum and extremes of some durations, in nanoseconds.
struct DurationSummary {
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  void add(int64_t ns) noexcept;
};

// What a Profiler recorded. `runs` holds the most recent runs in full, oldest
// first; a Profiler keeps at most 2 × its keep_runs of them, so a plan run a
// million times uses bounded memory. Runs it let go of are folded into the
// `earlier_*` summaries: calls, totals, minimums and maximums cover every run,
// medians and traces the runs kept.
struct PlanProfile {
  std::vector<OpDescription> ops;
  std::vector<RunProfile> runs;
  uint64_t earlier_runs = 0;                 // runs folded into the summaries below
  DurationSummary earlier_run_times;         // their whole-run times
  std::vector<DurationSummary> earlier_ops;  // per op: its spans in those runs that ran (empty: none)

  uint64_t run_count() const noexcept { return earlier_runs + runs.size(); }
};

// Whole-run times over every run, in microseconds; the median is over the
// runs kept.
struct RunTimes {
  uint64_t runs = 0;
  double min_us = 0;
  double median_us = 0;
  double max_us = 0;
};
RunTimes run_times(const PlanProfile& profile);

// Every call of one kernel (ops that share name, kind and device) over all
// runs. Times are microseconds per call; the rates divide the work of all
// calls by their total time, and are absent when the program gives no flops
// or bytes expression (or the time is zero).
struct KernelProfile {
  std::string name;
  OpKind kind = OpKind::Kernel;
  std::string device;
  size_t calls = 0;
  double total_us = 0;
  double min_us = 0;
  double median_us = 0;
  double max_us = 0;
  double share = 0;  // of the summed time of every kernel in the aggregation, 0..1
  std::optional<double> gflops;
  std::optional<double> gbps;
};

// Collects RunProfiles. Between begin_run() and end_run() exactly one
// execution of the described plan may report to it (each op then has one
// writer: its own slot); end_run() keeps that run. Observing costs two
// clock reads and two stores per op. Once 2 × keep_runs runs are kept, the
// oldest keep_runs are folded into the profile's summaries (PlanProfile).
class Profiler final : public PlanObserver {
 public:
  static constexpr size_t kDefaultKeepRuns = 10000;

  explicit Profiler(const ExecutionPlan& plan, size_t keep_runs = kDefaultKeepRuns);
  explicit Profiler(std::vector<OpDescription> ops, size_t keep_runs = kDefaultKeepRuns);

  void begin_run();
  void end_run();
  // begin_run(), plan.execute() with this profiler as observer, end_run();
  // a run that throws is not kept.
  void execute(ExecutionPlan& plan, ExecuteOptions options = {});
  void execute_with_vars(ExecutionPlan& plan, const std::map<std::string, int64_t>& vars, ExecuteOptions options = {});

  void op_started(size_t op) noexcept override;
  void op_finished(size_t op) noexcept override;

  const PlanProfile& profile() const noexcept { return profile_; }

 private:
  int64_t ticks() const noexcept;
  void fold_oldest_runs();

  PlanProfile profile_;
  size_t keep_runs_;
  RunProfile current_;  // in ticks until end_run() converts it
  bool use_tsc_;
  int64_t origin_ticks_;
};

// Per kernel over every run, sorted by total time (largest first); medians
// over the runs kept.
std::vector<KernelProfile> aggregate(const PlanProfile& profile);
// Per op (in op order) over every run: each op is its own row, named by its
// title (ExecutionPlan::op_title).
std::vector<KernelProfile> aggregate_ops(const PlanProfile& profile);

// A text table: name, kind, device, calls, total ms, min/median/max us,
// share, GFLOP/s, GB/s. `title` names the first column.
std::string render_table(const std::vector<KernelProfile>& rows, std::string_view title = "kernel");

// The Chrome trace event format: "X" events per op per run (named by the
// kernel, args: run, op, id, title, kind, device, buffers, flops, bytes) and
// per run (category "plan"), on one process per device with one track per
// thread, named through "M" metadata events. Only the runs kept are traced;
// "run" numbers count the runs folded away too.
std::string chrome_trace(const PlanProfile& profile);
// Writes chrome_trace() to `path`; throws Error(Io) when it cannot.
void write_chrome_trace(const PlanProfile& profile, const std::filesystem::path& path);

// JSON for scripts: {"runs": N (every run), "run_us": {min, median, max}, "kernels":
// [aggregate() rows], "ops": [aggregate_ops() rows with op index and id]}.
std::string profile_json(const PlanProfile& profile);

// SVOD_PROFILE, a switch (read once; off when unset). Error(Validation)
// naming it for a value that is not a switch word.
bool profile_requested();

}  // namespace svod
