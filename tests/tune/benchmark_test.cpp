// benchmark_kernel, benchmark_round_robin and warmup_thread_pool on real
// kernels compiled for the CPU device.
#include "svod/tune/benchmark.h"

#include <gtest/gtest.h>

#include <cmath>

#include "svod/base/thread_pool.h"
#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using namespace std::chrono_literals;
using test::expect_error;

// spin(counter, n): n empty loop iterations, then counter[0] += 1, so a test
// can both scale a run's time and count the runs.
std::shared_ptr<const Program> spin_kernel(Device& device) {
  return device.compile(test::c_kernel("spin",
                                       "void spin(long* restrict counter, long n) {\n"
                                       "  for (long i = 0; i < n; i++) __asm__ volatile(\"\");\n"
                                       "  counter[0] += 1;\n}\n",
                                       {{"counter", Access::ReadWrite}}, {{"n", ScalarType::I64, 0, int64_t{1} << 40}}));
}

class BenchmarkTest : public ::testing::Test {
 protected:
  std::shared_ptr<CpuDevice> cpu = cpu_device();
  std::shared_ptr<const Program> spin = spin_kernel(*cpu);
  Buffer counter = cpu->allocate(DType::I64, 1);

  KernelArgs args(int64_t n) { return {{counter}, {n}}; }
  int64_t count() const { return counter.span<int64_t>()[0]; }
};

TEST(BenchmarkStats, KnownSamples) {
  const double odd[] = {5, 1, 3};
  BenchmarkStats s = summarize(odd);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(8.0 / 3.0));

  const double even[] = {4, 10, 2, 8};
  s = summarize(even);
  EXPECT_EQ(s.median, 6);
  EXPECT_DOUBLE_EQ(s.mean, 6);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(10.0));

  s = summarize({});
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.median, 0);
}

TEST_F(BenchmarkTest, DefaultsAreOneWarmupAndThreeTimedRuns) {
  BenchmarkResult r = benchmark_kernel(*spin, args(1000));
  EXPECT_EQ(r.runs, 3);
  ASSERT_EQ(r.samples.size(), 3u);
  EXPECT_EQ(count(), 4);  // the warm-up ran too
  for (double t : r.samples) EXPECT_GT(t, 0);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.stats.min, *std::min_element(r.samples.begin(), r.samples.end()));
}

TEST_F(BenchmarkTest, MinimumTotalTimeAddsRunsUpToTheMaximum) {
  BenchmarkConfig c;
  c.warmup_runs = 0;
  c.min_total = 5ms;
  c.max_runs = 100000;
  BenchmarkResult r = benchmark_kernel(*spin, args(100000), c);
  double total = 0;
  for (double t : r.samples) total += t;
  EXPECT_GE(total, 5e6);
  EXPECT_GT(r.runs, 3);
  EXPECT_LT(r.runs, c.max_runs);  // the total ended it, not the cap
  EXPECT_EQ(count(), r.runs);

  c.max_runs = 4;  // the cap wins over the total
  r = benchmark_kernel(*spin, args(10000), c);
  EXPECT_EQ(r.runs, 4);
}

TEST_F(BenchmarkTest, EarlyStopOnceMostOfTheOwedRunsLostToTheBestKnown) {
  BenchmarkConfig c;
  c.min_runs = 10;
  c.best_known = 1ns;  // nothing real is that fast: every timed run loses
  BenchmarkResult r = benchmark_kernel(*spin, args(100000), c);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.runs, 6);  // 6 of the 10 owed: the median has lost, whatever the other 4

  c.best_known = 10s;  // out of reach: no early stop
  r = benchmark_kernel(*spin, args(1000), c);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.runs, 10);
}

// The one rule (benchmark.h): a measurement is retired only when more than
// half of the samples it is owed lost, so its median — what the pick compares
// — is above the bound too.
TEST(TimingLost, DecidesOnTheMedianOfTheOwedSamples) {
  BenchmarkConfig c;
  c.min_runs = 3;
  c.early_stop_factor = 3;
  const double best = 100;  // bound: 300
  auto lost = [&](std::initializer_list<double> samples) { return timing_lost(std::vector<double>(samples), best, c); };
  EXPECT_FALSE(lost({}));
  EXPECT_FALSE(lost({900})) << "one slow sample of three owed";
  EXPECT_FALSE(lost({77, 900})) << "noise: a fast candidate with one preempted run";
  EXPECT_FALSE(lost({77, 77, 900}));
  EXPECT_TRUE(lost({900, 950})) << "two of three owed lost: the median has";
  EXPECT_TRUE(lost({77, 900, 950}));
  EXPECT_FALSE(lost({900, 300})) << "at the bound is not slower";
  // Past min_runs (min_total asks for more), the samples taken count.
  EXPECT_FALSE(lost({77, 77, 900, 900}));
  EXPECT_TRUE(lost({77, 900, 900, 900}));
  c.min_runs = 1;  // one sample is the whole measurement: it decides alone
  EXPECT_TRUE(lost({900}));
  EXPECT_FALSE(lost({77}));

  // Whenever it holds, the median is above the bound, so above the best: a
  // retired candidate can never be the pick. Over every 0/1 pattern of fast
  // (77) and slow (900, noisy: some runs at 5000) samples up to 7 long.
  for (int min_runs = 1; min_runs <= 7; ++min_runs) {
    c.min_runs = min_runs;
    for (int n = 1; n <= 7; ++n) {
      for (int bits = 0; bits < (1 << n); ++bits) {
        std::vector<double> samples;
        for (int k = 0; k < n; ++k) samples.push_back(bits >> k & 1 ? (k % 2 ? 5000 : 900) : 77);
        if (!timing_lost(samples, best, c)) continue;
        EXPECT_GT(candidate_time(samples), c.early_stop_factor * best) << "min_runs " << min_runs << " bits " << bits;
      }
    }
  }
}

// A fast candidate whose samples are noisy: one preempted run among the three
// it is owed. The old rule retired it on that one sample, yet reported (and
// so let the pick crown) its median of 77 against a best of 100.
TEST_F(BenchmarkTest, ANoisySampleDoesNotRetireAFastCandidate) {
  BenchmarkConfig c;
  c.warmup_runs = 0;
  c.min_runs = 3;
  c.max_runs = 3;
  c.best_known = 100ns;
  auto scripted = [](std::vector<int64_t> times) {
    return [times, next = size_t{0}]() mutable { return std::chrono::nanoseconds(times.at(next++ % times.size())); };
  };
  BenchmarkResult r = benchmark_operation(scripted({77, 77, 900}), *cpu, c);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(r.stats.median, 77);

  // A slow one stops as soon as its median has lost, and reports a median
  // above the bound.
  r = benchmark_operation(scripted({900, 77, 950}), *cpu, c);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(r.stats.median, 900);
  r = benchmark_operation(scripted({900, 950, 77}), *cpu, c);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.runs, 2);
  EXPECT_GT(r.stats.median, 300);

  // Whatever the order of the noise, stopped early means slower than the best.
  const std::vector<int64_t> noisy = {77, 900, 80, 5000, 75, 2000, 90, 78, 3000, 76};
  for (size_t shift = 0; shift < noisy.size(); ++shift) {
    std::vector<int64_t> times(noisy.begin() + static_cast<long>(shift), noisy.end());
    times.insert(times.end(), noisy.begin(), noisy.begin() + static_cast<long>(shift));
    for (int min_runs = 1; min_runs <= 5; ++min_runs) {
      c.min_runs = c.max_runs = min_runs;
      r = benchmark_operation(scripted(times), *cpu, c);
      if (r.stopped_early) EXPECT_GT(r.stats.median, 100) << "shift " << shift << " min_runs " << min_runs;
    }
  }
}

TEST_F(BenchmarkTest, TimeoutEndsTimingAfterAtLeastOneRun) {
  BenchmarkConfig c;
  c.warmup_runs = 0;
  c.min_runs = 1000;
  c.max_runs = 1000;
  c.timeout = 20ms;
  // About 1 ms or more per run: far fewer than 1000 fit into 20 ms.
  BenchmarkResult r = benchmark_kernel(*spin, args(3'000'000), c);
  EXPECT_TRUE(r.timed_out);
  EXPECT_GE(r.runs, 1);
  EXPECT_LT(r.runs, 1000);
}

TEST_F(BenchmarkTest, CacheFlushRunsBetweenTimedRuns) {
  BenchmarkConfig c;
  c.cache_flush_bytes = size_t{16} << 20;
  BenchmarkResult r = benchmark_kernel(*spin, args(1000), c);
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(count(), 4);
}

TEST_F(BenchmarkTest, BadConfigurationsAndArgumentsAreErrors) {
  BenchmarkConfig c;
  c.min_runs = 0;
  EXPECT_NE(std::string(expect_error([&] { benchmark_kernel(*spin, args(1), c); }).what()).find("min_runs"), std::string::npos);
  c = {};
  c.max_runs = 2;
  EXPECT_NE(std::string(expect_error([&] { benchmark_kernel(*spin, args(1), c); }).what()).find("max_runs = 2"), std::string::npos);
  c = {};
  c.early_stop_factor = 0.5;
  EXPECT_EQ(expect_error([&] { benchmark_kernel(*spin, args(1), c); }).kind(), ErrorKind::Validation);
  c = {};
  c.timeout = 0ns;
  EXPECT_EQ(expect_error([&] { benchmark_kernel(*spin, args(1), c); }).kind(), ErrorKind::Validation);

  KernelArgs missing{{}, {1}};
  EXPECT_EQ(expect_error([&] { benchmark_kernel(*spin, missing); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(count(), 0);
}

TEST_F(BenchmarkTest, RoundRobinExcludesFailuresAndRetiresSlowCandidates) {
  Buffer c1 = cpu->allocate(DType::I64, 1), c2 = cpu->allocate(DType::I64, 1);
  RoundRobinCandidate fast{spin, {{c1}, {1000}}};
  RoundRobinCandidate slow{spin, {{c2}, {2'000'000}}};  // about 2000 times the work
  RoundRobinCandidate broken{spin, {{}, {1000}}};       // no buffer: its launch fails
  RoundRobinCandidate none{nullptr, {}};
  const RoundRobinCandidate candidates[] = {slow, fast, broken, none};
  BenchmarkConfig config;
  config.min_runs = 5;
  RoundRobinResult r = benchmark_round_robin(candidates, config);

  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(r.best, 1u);
  EXPECT_FALSE(r.errors[0]);
  EXPECT_FALSE(r.errors[1]);
  ASSERT_TRUE(r.errors[2]);
  EXPECT_NE(r.errors[2]->find("buffers"), std::string::npos) << *r.errors[2];
  EXPECT_TRUE(r.errors[3]);
  EXPECT_EQ(r.results[2].runs, 0);

  // The slow one is retired once 3 of its 5 owed runs lost, the fast one goes on.
  EXPECT_TRUE(r.retired[0]);
  EXPECT_TRUE(r.results[0].stopped_early);
  EXPECT_EQ(r.results[0].runs, 3);
  EXPECT_FALSE(r.retired[1]);
  EXPECT_EQ(r.results[1].runs, 5);
  EXPECT_GT(r.results[0].stats.median, r.results[1].stats.median);
  // Each launch really ran: one warm-up plus the timed runs.
  EXPECT_EQ(c1.span<int64_t>()[0], 1 + 5);
  EXPECT_EQ(c2.span<int64_t>()[0], 1 + 3);
}

TEST_F(BenchmarkTest, RoundRobinGivesEveryCandidateItsRunsInTurn) {
  Buffer c1 = cpu->allocate(DType::I64, 1), c2 = cpu->allocate(DType::I64, 1);
  const RoundRobinCandidate candidates[] = {{spin, {{c1}, {1000}}}, {spin, {{c2}, {1100}}}};
  BenchmarkConfig config;
  config.warmup_runs = 0;
  config.min_runs = 7;
  config.early_stop_factor = 1000;  // similar candidates: nobody is retired
  RoundRobinResult r = benchmark_round_robin(candidates, config);
  EXPECT_EQ(r.results[0].runs, 7);
  EXPECT_EQ(r.results[1].runs, 7);
  EXPECT_NE(r.best, SIZE_MAX);
  EXPECT_EQ(c1.span<int64_t>()[0], 7);
}

// The warm-up runs a candidate as its timed runs do, with the launch sizes its
// arguments give (tinygrad's candidates take their core_id count so).
TEST_F(BenchmarkTest, RoundRobinWarmsUpWithTheCandidatesLaunchSizes) {
  auto spec = test::c_kernel("tick", "void tick(long* restrict hits, int core_id) { hits[core_id] += 1; }",
                             {{"hits", Access::ReadWrite, DType::I64}}, {ScalarParam{"core_id"}});
  const auto tick = cpu->compile(spec);
  Buffer hits = cpu->allocate(DType::I64, 4);
  KernelArgs args{{hits}, {}, LaunchDims{{4, 1, 1}}};
  const RoundRobinCandidate candidates[] = {{tick, args}};
  BenchmarkConfig config;
  config.min_runs = config.max_runs = 2;
  RoundRobinResult r = benchmark_round_robin(candidates, config);
  ASSERT_FALSE(r.errors[0]) << *r.errors[0];
  for (int64_t n : hits.span<int64_t>()) EXPECT_EQ(n, 1 + 2);  // every slice: the warm-up and two timed runs
}

// A run past launch_timeout is stopped: benchmark_kernel fails with the
// timeout, and a round robin drops that candidate and goes on with the rest.
TEST_F(BenchmarkTest, LaunchTimeoutStopsALongRun) {
  BenchmarkConfig c;
  c.launch_timeout = 50ms;
  const auto start = std::chrono::steady_clock::now();
  const Error e = expect_error([&] { benchmark_kernel(*spin, args(int64_t{1} << 40), c); });
  EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  Buffer c1 = cpu->allocate(DType::I64, 1), c2 = cpu->allocate(DType::I64, 1);
  const RoundRobinCandidate candidates[] = {{spin, {{c1}, {int64_t{1} << 40}}}, {spin, {{c2}, {1000}}}};
  c.warmup_runs = 0;
  RoundRobinResult r = benchmark_round_robin(candidates, c);
  ASSERT_TRUE(r.errors[0]);
  EXPECT_NE(r.errors[0]->find("time limit of 0.05 s"), std::string::npos) << *r.errors[0];
  EXPECT_FALSE(r.errors[1]);
  EXPECT_EQ(r.best, 1u);
  EXPECT_EQ(r.results[1].runs, 3);

  c.launch_timeout = 0ns;
  EXPECT_EQ(expect_error([&] { benchmark_kernel(*spin, args(1), c); }).kind(), ErrorKind::Validation);
}

TEST(ThreadPoolWarmup, TouchesEveryPoolThread) { EXPECT_EQ(warmup_thread_pool(), thread_count()); }

}  // namespace
}  // namespace svod
