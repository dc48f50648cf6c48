// Soak: a tiny plan executed many times with a profiler attached, a variable
// that changes every run and a buffer rebound every few runs, must keep the
// process's memory flat. Its own binary and ctest label ("soak"), so it can
// be run alone: `ctest --test-dir build/release -L soak`. SVOD_SOAK_RUNS
// overrides the number of runs (default 1,000,000).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "svod/planfile/plan_file.h"
#include "svod/profile/profile.h"
#include "tests/support/rss.h"

namespace svod {
namespace {

constexpr const char* kPlan = R"J({
  "svod_plan": 1,
  "variables": { "N": { "min": 1, "max": 64, "value": 64 } },
  "buffers": {
    "a":   { "dtype": "f32", "count": 64, "init": { "arange": { "start": 0, "step": 1 } } },
    "out": { "dtype": "f32", "count": 64 }
  },
  "programs": {
    "scale": { "language": "c", "entry": "scale",
               "source": "void scale(float* restrict o, const float* restrict a, int n) { for (int i = 0; i < n; i++) o[i] = 2 * a[i]; }",
               "buffers": [ { "name": "o", "access": "write" }, { "name": "a" } ],
               "scalars": [ { "name": "n", "type": "i32" } ], "flops": "n", "bytes": "8*n" }
  },
  "ops": [ { "run": "scale", "buffers": ["out", "a"], "scalars": { "n": "N" } } ]
})J";

uint64_t soak_runs() {
  const char* text = std::getenv("SVOD_SOAK_RUNS");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : 1'000'000;
}

TEST(Soak, AMillionRunsWithRebindingAndVariablesKeepMemoryFlat) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "RSS under AddressSanitizer includes its quarantine";
  const uint64_t runs = soak_runs();
  constexpr uint64_t kWarmRuns = 1000;
  ASSERT_GT(runs, kWarmRuns);
  LoadedPlan loaded = load_plan(parse_plan_text(kPlan, ".", "soak.json"));
  ExecutionPlan& plan = loaded.plan;
  const size_t out = *plan.find_buffer("out");
  // Two output buffers to alternate between: the plan's own and a twin.
  const Buffer outputs[] = {plan.buffer(out), plan.buffer(out).device().allocate(DType::F32, 64)};

  Profiler profiler(plan);
  std::map<std::string, int64_t> vars{{"N", 64}};
  uint64_t rss_warm = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t r = 0; r < runs; ++r) {
    if (r % 16 == 0) plan.rebind(out, outputs[(r / 16) % 2]);
    vars["N"] = static_cast<int64_t>(1 + r % 64);
    profiler.execute_with_vars(plan, vars);
    if (r + 1 == kWarmRuns) rss_warm = test::resident_bytes();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t rss_end = test::resident_bytes();

  // The last run wrote 2 * a[i] for its N into the buffer bound then.
  const uint64_t last = runs - 1;
  const auto values = outputs[(last / 16) % 2].span<const float>();
  const int64_t n = static_cast<int64_t>(1 + last % 64);
  EXPECT_EQ(values[n - 1], 2.0f * static_cast<float>(n - 1));
  EXPECT_EQ(profiler.profile().run_count(), runs);
  EXPECT_EQ(aggregate(profiler.profile()).at(0).calls, runs);

  const double grown_mib = (static_cast<double>(rss_end) - static_cast<double>(rss_warm)) / (1 << 20);
  std::printf("%llu runs in %.1f s (%.2f us each); RSS after %llu runs %.1f MiB, at the end %.1f MiB (%+.2f MiB)\n",
              static_cast<unsigned long long>(runs), seconds, seconds * 1e6 / static_cast<double>(runs),
              static_cast<unsigned long long>(kWarmRuns), rss_warm / 1048576.0, rss_end / 1048576.0, grown_mib);
  EXPECT_LT(grown_mib, 4.0) << "RSS grew from " << rss_warm << " to " << rss_end << " bytes";
}

}  // namespace
}  // namespace svod
