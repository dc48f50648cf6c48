#include "svod/tune/benchmark.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/guard/watchdog.h"

namespace svod {

namespace {

using Clock = std::chrono::steady_clock;

void validate(const BenchmarkConfig& c) {
  if (c.warmup_runs < 0) throw make_error(ErrorKind::Validation, "benchmark: warmup_runs = {} is negative", c.warmup_runs);
  if (c.min_runs < 1) throw make_error(ErrorKind::Validation, "benchmark: min_runs = {} must be at least 1", c.min_runs);
  if (c.max_runs < c.min_runs)
    throw make_error(ErrorKind::Validation, "benchmark: max_runs = {} is below min_runs = {}", c.max_runs, c.min_runs);
  if (!(c.early_stop_factor >= 1.0))
    throw make_error(ErrorKind::Validation, "benchmark: early_stop_factor = {} must be at least 1", c.early_stop_factor);
  if (c.timeout <= std::chrono::nanoseconds::zero())
    throw make_error(ErrorKind::Validation, "benchmark: the timeout must be positive");
  if (c.min_total < std::chrono::nanoseconds::zero())
    throw make_error(ErrorKind::Validation, "benchmark: min_total must not be negative");
  if (c.launch_timeout && *c.launch_timeout <= std::chrono::nanoseconds::zero())
    throw make_error(ErrorKind::Validation, "benchmark: the launch timeout must be positive");
}

// Runs `run` (one run of what is measured) under config.launch_timeout, when
// there is one.
template <typename Run>
auto limited(const BenchmarkConfig& config, Run&& run) {
  if (!config.launch_timeout) return run();
  TimeLimit limit(*config.launch_timeout, "a benchmark run");
  return run();
}

// Evicts the caches between timed runs by writing config.cache_flush_bytes:
// directly into host memory, or by a copy into device memory for a device
// whose buffers the host cannot see.
class CacheFlusher {
 public:
  CacheFlusher(Device& device, size_t bytes) {
    if (bytes == 0) return;
    scratch_ = device.allocate(DType::U8, bytes);
    if (!scratch_.is_host()) source_ = device.allocate_host(DType::U8, bytes);
  }
  void flush() {
    if (!scratch_.valid()) return;
    if (scratch_.is_host()) {
      std::memset(scratch_.data(), ++value_, scratch_.bytes());
    } else {
      scratch_.device().copy(scratch_, source_);
    }
  }

 private:
  Buffer scratch_;
  Buffer source_;
  unsigned char value_ = 0;
};

double total_of(const std::vector<double>& samples) { return std::accumulate(samples.begin(), samples.end(), 0.0); }

bool enough(const std::vector<double>& samples, const BenchmarkConfig& c) {
  return static_cast<int>(samples.size()) >= c.min_runs && total_of(samples) >= static_cast<double>(c.min_total.count());
}

void finish(BenchmarkResult& r) {
  r.runs = static_cast<int>(r.samples.size());
  r.stats = summarize(r.samples);
}

}  // namespace

BenchmarkStats summarize(std::span<const double> samples) {
  BenchmarkStats s;
  if (samples.empty()) return s;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.min = sorted.front();
  s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  double squares = 0;
  for (double x : sorted) squares += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(squares / static_cast<double>(n));
  return s;
}

double candidate_time(std::span<const double> samples) { return summarize(samples).median; }

bool timing_lost(std::span<const double> samples, double best_ns, const BenchmarkConfig& config) {
  const double bound = config.early_stop_factor * best_ns;
  const auto slower =
      static_cast<size_t>(std::count_if(samples.begin(), samples.end(), [&](double t) { return t > bound; }));
  const size_t owed = std::max(samples.size(), static_cast<size_t>(std::max(config.min_runs, 1)));
  return 2 * slower > owed;
}

BenchmarkResult benchmark_operation(const std::function<std::chrono::nanoseconds()>& run_once, Device& device,
                                    const BenchmarkConfig& config) {
  validate(config);
  const auto deadline = Clock::now() + config.timeout;
  CacheFlusher flusher(device, config.cache_flush_bytes);
  for (int i = 0; i < config.warmup_runs && Clock::now() < deadline; ++i) limited(config, run_once);

  BenchmarkResult r;
  while (static_cast<int>(r.samples.size()) < config.max_runs && !enough(r.samples, config)) {
    if (!r.samples.empty() && Clock::now() >= deadline) {
      r.timed_out = true;
      break;
    }
    flusher.flush();
    const double t = static_cast<double>(limited(config, run_once).count());
    r.samples.push_back(t);
    if (config.best_known && timing_lost(r.samples, static_cast<double>(config.best_known->count()), config)) {
      r.stopped_early = true;
      break;
    }
  }
  finish(r);
  return r;
}

BenchmarkResult benchmark_kernel(const Program& program, const KernelArgs& args, const BenchmarkConfig& config) {
  return benchmark_operation([&] { return program.time_launch(args.view()); }, program.device(), config);
}

RoundRobinResult benchmark_round_robin(std::span<const RoundRobinCandidate> candidates, const BenchmarkConfig& config) {
  validate(config);
  const size_t n = candidates.size();
  RoundRobinResult out;
  out.results.resize(n);
  out.errors.resize(n);
  out.retired.assign(n, false);
  const auto deadline = Clock::now() + config.timeout;

  auto live = [&](size_t i) { return !out.errors[i] && !out.retired[i]; };
  // Runs `body` for candidate i; an Error excludes the candidate for good.
  auto guarded = [&](size_t i, auto&& body) {
    try {
      body();
    } catch (const Error& e) {
      out.errors[i] = e.what();
    }
  };

  for (size_t i = 0; i < n; ++i) {
    if (!candidates[i].program) {
      out.errors[i] = "no program";
      continue;
    }
    guarded(i, [&] {
      const auto& c = candidates[i];
      for (int w = 0; w < config.warmup_runs; ++w) limited(config, [&] { c.program->launch(c.args.view()); });
    });
  }
  std::vector<std::unique_ptr<CacheFlusher>> flushers(n);
  for (size_t i = 0; i < n; ++i)
    if (live(i)) guarded(i, [&] { flushers[i] = std::make_unique<CacheFlusher>(candidates[i].program->device(), config.cache_flush_bytes); });

  for (int round = 0; round < config.max_runs; ++round) {
    bool all_done = true;
    for (size_t i = 0; i < n; ++i) all_done = all_done && (!live(i) || enough(out.results[i].samples, config));
    if (all_done) break;
    if (round > 0 && Clock::now() >= deadline) {
      for (size_t i = 0; i < n; ++i) out.results[i].timed_out = live(i) && !enough(out.results[i].samples, config);
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!live(i)) continue;
      guarded(i, [&] {
        flushers[i]->flush();
        const auto& c = candidates[i];
        const double t = static_cast<double>(limited(config, [&] { return c.program->time_launch(c.args.view()); }).count());
        out.results[i].samples.push_back(t);
      });
    }
    // The rule against the best as it stands now: the lowest time of every
    // candidate that ran, the retired included (none has lost to its own
    // time). A retired one it no longer holds for, because the best got
    // slower with more samples, is timed again, so every retired one is a
    // sure loser whenever the rounds end.
    double best = config.best_known ? static_cast<double>(config.best_known->count()) : INFINITY;
    for (size_t i = 0; i < n; ++i) {
      if (!out.errors[i] && !out.results[i].samples.empty())
        best = std::min(best, candidate_time(out.results[i].samples));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!out.errors[i])
        out.results[i].stopped_early = out.retired[i] = timing_lost(out.results[i].samples, best, config);
    }
  }

  double best = INFINITY;
  for (size_t i = 0; i < n; ++i) {
    finish(out.results[i]);
    if (live(i) && out.results[i].runs > 0 && candidate_time(out.results[i].samples) < best) {
      best = candidate_time(out.results[i].samples);
      out.best = i;
    }
  }
  return out;
}

int warmup_thread_pool() {
  // One task per pool slot, each waiting (bounded) until all have started:
  // they can only all start on distinct threads, so every worker gets created.
  const int n = thread_count();
  std::atomic<int> arrived{0};
  std::mutex mutex;
  std::set<std::thread::id> seen;
  parallel_for(static_cast<size_t>(n), [&](size_t) {
    {
      std::lock_guard lock(mutex);
      seen.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (arrived.load() < n && Clock::now() < give_up) std::this_thread::yield();
  });
  return static_cast<int>(seen.size());
}

}  // namespace svod
