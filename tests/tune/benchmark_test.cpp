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

TEST_F(BenchmarkTest, EarlyStopOnARunSlowerThanTheFactorOfTheBestKnown) {
  BenchmarkConfig c;
  c.min_runs = 10;
  c.best_known = 1ns;  // nothing real is that fast: the first timed run loses
  BenchmarkResult r = benchmark_kernel(*spin, args(100000), c);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.runs, 1);

  c.best_known = 10s;  // out of reach: no early stop
  r = benchmark_kernel(*spin, args(1000), c);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.runs, 10);
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

  // The slow one is retired after the second round, the fast one goes on.
  EXPECT_TRUE(r.retired[0]);
  EXPECT_TRUE(r.results[0].stopped_early);
  EXPECT_EQ(r.results[0].runs, 2);
  EXPECT_FALSE(r.retired[1]);
  EXPECT_EQ(r.results[1].runs, 5);
  // Each launch really ran: one warm-up plus the timed runs.
  EXPECT_EQ(c1.span<int64_t>()[0], 1 + 5);
  EXPECT_EQ(c2.span<int64_t>()[0], 1 + 2);
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

TEST(ThreadPoolWarmup, TouchesEveryPoolThread) { EXPECT_EQ(warmup_thread_pool(), thread_count()); }

}  // namespace
}  // namespace svod
