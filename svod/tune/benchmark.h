// Kernel timing for benchmarks and auto-tuning.
//
// benchmark_kernel() times one program on fixed arguments: warm-up runs, then
// timed runs until both the minimum run count and the minimum total time are
// reached (or the maximum run count, or the time budget). Each run is timed by
// Program::time_launch — device events where the device has them, the host's
// monotonic clock otherwise. A measurement that has already lost to the best
// time the caller knows ends early (timing_lost() below): a tuner need not
// time a candidate precisely to know it lost.
//
// benchmark_round_robin() times many candidates together, one run of each in
// turn, so that drift of the machine (frequency, other load) hits them alike.
//
// One rule ranks candidates and retires them, so that stopping early can
// never change which one wins: a candidate's time is the median of its
// samples (candidate_time()), the lowest time wins, and a candidate is
// retired only once that median is sure to lose (timing_lost()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "svod/device/device.h"

namespace svod {

struct BenchmarkConfig {
  int warmup_runs = 1;
  int min_runs = 3;     // timed runs at least (unless stopped early or out of time)
  int max_runs = 100;   // timed runs at most
  // Keep timing (up to max_runs) until the timed runs add up to this.
  std::chrono::nanoseconds min_total{0};
  // Stop once the measurement has lost to this factor of `best_known`
  // (timing_lost()).
  double early_stop_factor = 3.0;
  // The best time the caller knows (e.g. the tuner's best candidate so far);
  // none: no early stop.
  std::optional<std::chrono::nanoseconds> best_known;
  // Bytes written to a scratch buffer between timed runs to evict the
  // caches; 0 = off (the default, also on CPU). 16 MiB is a usual size.
  size_t cache_flush_bytes = 0;
  // Wall-clock budget for warm-up plus timed runs; once passed, no new run
  // starts (at least one timed run always completes). A run that never
  // returns cannot be stopped in-process: isolate such kernels in a child
  // process (the tuner does), or give launch_timeout.
  std::chrono::nanoseconds timeout = std::chrono::seconds(10);
  // Each run, warm-ups included, is stopped once it has run this long (a
  // TimeLimit, svod/guard/watchdog.h) and fails with Error(Timeout), which a
  // round robin records as that candidate's error; none: no limit. A kernel
  // in a system call or a library function cannot be stopped and runs to its
  // end.
  std::optional<std::chrono::nanoseconds> launch_timeout;
};

// Summary statistics of timed runs, in nanoseconds.
struct BenchmarkStats {
  double min = 0;
  double median = 0;
  double mean = 0;
  double stddev = 0;  // population standard deviation
};
// Statistics of `samples` (nanoseconds); all zero when empty.
BenchmarkStats summarize(std::span<const double> samples);

// The time candidates are ranked by: the median of `samples` (0 when empty).
double candidate_time(std::span<const double> samples);

// Whether a measurement has lost for certain: more than half of the samples
// it is owed — config.min_runs, or as many as it has taken when that is more
// — are each slower than config.early_stop_factor times `best_ns`. Then its
// median exceeds that bound both over the samples taken so far (the time it
// reports when it stops here) and over any min_runs it would have taken, so
// a measurement stopped by this rule never has the lowest candidate_time()
// when `best_ns` is the candidate_time() of another, and stopping changes no
// pick. One slow sample among min_runs >= 2 never stops a candidate: noise
// (a preempted run) costs a few runs, not the win.
bool timing_lost(std::span<const double> samples, double best_ns, const BenchmarkConfig& config);

struct BenchmarkResult {
  std::vector<double> samples;  // every timed run, nanoseconds, in order
  BenchmarkStats stats;
  int runs = 0;                 // samples.size()
  bool stopped_early = false;   // timing_lost() against best_known ended the timing
  bool timed_out = false;       // the budget ended the timing before min_runs/min_total
};

// Times `program` on `args`. Argument errors surface from the first launch
// as the launch's Error, before anything is timed.
BenchmarkResult benchmark_kernel(const Program& program, const KernelArgs& args, const BenchmarkConfig& config = {});

// The same measurement for any operation: `run_once` runs it once and
// returns its time (warm-up runs call it too and drop the time). Cache
// flushes, when configured, write memory of `device`.
BenchmarkResult benchmark_operation(const std::function<std::chrono::nanoseconds()>& run_once, Device& device,
                                    const BenchmarkConfig& config = {});

// One candidate of a round-robin measurement.
struct RoundRobinCandidate {
  std::shared_ptr<const Program> program;
  KernelArgs args;
};

struct RoundRobinResult {
  // Per candidate, in input order: its timing, or the error that excluded it
  // (its first failing launch; it is not run again). `retired` marks
  // candidates whose timing stopped early because timing_lost() against the
  // best time held for them when the measurement ended.
  std::vector<BenchmarkResult> results;
  std::vector<std::optional<std::string>> errors;
  std::vector<bool> retired;
  // The lowest candidate_time() among the candidates that ran (ties: the
  // first); never a retired one. SIZE_MAX when none ran.
  size_t best = SIZE_MAX;
};

// Warms up every candidate (config.warmup_runs each), then runs rounds — one
// timed run of each live candidate per round, in turn — until every live
// candidate has min_runs samples and min_total is reached, max_runs rounds
// have run, or the budget is spent. After each round, a candidate for which
// timing_lost() holds against the best time (the lowest candidate_time() of
// the live candidates, or config.best_known when lower) is retired, and a
// retired one for which it no longer holds (the best got slower as it took
// more samples) is timed again, so the retired are sure losers at the end.
RoundRobinResult benchmark_round_robin(std::span<const RoundRobinCandidate> candidates, const BenchmarkConfig& config = {});

// Starts and touches every thread of the pool (svod/base/thread_pool.h), so
// that the first timed run pays no thread start-up. Returns how many distinct
// threads ran a task (thread_count() unless a worker failed to start within
// seconds).
int warmup_thread_pool();

}  // namespace svod
