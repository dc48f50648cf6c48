// Per-kernel variants (svod/tune/variants.h): the candidates, the checks
// against the default, the copies they run on, the cache, plans, and
// `svod tune --variants` in two processes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/subprocess.h"
#include "svod/cache/object_cache.h"
#include "svod/plan/execution_plan.h"
#include "svod/tune/variants.h"
#include "tests/cache/cache_test_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

// o[0] = the sum of x[0..n) in order: a serial float reduction, which only a
// reassociating recipe vectorises (and so sums in another order).
ProgramSpec sum_kernel(const std::string& tag = "") {
  return test::c_kernel("sum" + tag,
                        "void sum" + tag + "(float* restrict o, const float* restrict x, int n) {\n"
                        "  float s = 0.0f;\n  for (int i = 0; i < n; i++) s += x[i];\n  o[0] = s;\n}\n",
                        {{"o", Access::Write, DType::F32}, {"x", Access::Read, DType::F32}}, {{"n"}});
}

struct SumLaunch {
  Buffer o;
  Buffer x;
  KernelArgs args;
};

SumLaunch sum_launch(Device& device, const std::vector<float>& values) {
  SumLaunch launch{device.allocate(DType::F32, 1), device.allocate(DType::F32, values.size()), {}};
  std::memcpy(launch.x.data(), values.data(), values.size() * sizeof(float));
  launch.o.span<float>()[0] = -7.0f;
  launch.args.buffers = {launch.o, launch.x};
  launch.args.scalars = {static_cast<int64_t>(values.size())};
  return launch;
}

// What `spec` compiled by `recipe` writes into o[0] for `values`.
float sum_by(Device& device, ProgramSpec spec, const std::string& recipe, const std::vector<float>& values) {
  spec.recipe = recipe;
  SumLaunch launch = sum_launch(device, values);
  device.compile(spec)->launch(launch.args.view());
  return launch.o.span<float>()[0];
}

const VariantTrial* trial_of(const VariantChoice& choice, std::string_view recipe) {
  for (const VariantTrial& t : choice.trials)
    if (t.recipe == recipe) return &t;
  return nullptr;
}

class Variants : public ::testing::Test {
 protected:
  test::TempDir dir;
  test::ScopedObjectCache cache{test::object_cache_in(dir.path())};
  Device& cpu = *cpu_device();
  // Quick rounds: the differences these tests look for are large.
  VariantOptions quick(std::optional<VariantTolerance> tolerance = std::nullopt) {
    VariantOptions options;
    options.tolerance = tolerance;
    options.rounds = 3;
    options.round_time = std::chrono::microseconds(500);
    return options;
  }
  // Chooses for `spec` summing `values` within `tolerance` and expects the
  // inexact recipe rejected for a reason that names `why`.
  void expect_inexact_rejected(const ProgramSpec& spec, const std::vector<float>& values, VariantTolerance tolerance,
                               std::string_view why) {
    SumLaunch launch = sum_launch(cpu, values);
    const VariantChoice choice = choose_variant(cpu.compile(spec), launch.args, quick(tolerance));
    const VariantTrial* trial = trial_of(choice, "O3_reassoc");
    ASSERT_NE(trial, nullptr);
    EXPECT_NE(trial->rejected.find(why), std::string::npos) << trial->rejected;
    EXPECT_NE(choice.recipe, "O3_reassoc");
  }
};

TEST_F(Variants, ARecipeNamedBySpecCompilesAndAnUnknownOneIsRefused) {
  ProgramSpec spec = sum_kernel("_named");
  spec.recipe = "O2";
  EXPECT_EQ(cpu.compile(spec)->spec().recipe, "O2");
  spec.recipe = "O7";
  const Error e = test::expect_error([&] { cpu.compile(spec); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("O3, O2, O3_reassoc"), std::string::npos) << e.what();
  spec.recipe = "-O3";
  EXPECT_EQ(test::expect_error([&] { cpu.compile(spec); }).kind(), ErrorKind::Validation);
}

// Without a tolerance the inexact recipe is no candidate at all: never
// compiled, never timed.
TEST_F(Variants, WithoutAToleranceOnlyExactRecipesAreCandidates) {
  std::vector<float> values(4096, 0.25f);
  SumLaunch launch = sum_launch(cpu, values);
  const VariantChoice choice = choose_variant(cpu.compile(sum_kernel("_exact")), launch.args, quick());
  EXPECT_FALSE(choice.cached);
  ASSERT_EQ(choice.trials.size(), 1u);
  EXPECT_EQ(choice.trials[0].recipe, "O2");
  EXPECT_TRUE(choice.recipe.empty() || choice.recipe == "O2") << choice.recipe;
  EXPECT_EQ(choice.program->spec().recipe, choice.recipe);
}

// A long sum with cancellations: 1e8, 1, -1e8, 1, ... is 1 summed in order
// (each 1 after a 1e8 is lost) and n/2 summed in vector lanes. The
// reassociating recipe's result is far outside the tolerance and it is
// rejected, however much faster it is.
TEST_F(Variants, AnInexactVariantOutsideTheToleranceIsRejected) {
  std::vector<float> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 2 ? 1.0f : (i % 4 ? -1e8f : 1e8f);
  const ProgramSpec spec = sum_kernel("_cancel");
  ASSERT_EQ(sum_by(cpu, spec, "", values), 1.0f);
  ASSERT_NE(sum_by(cpu, spec, "O3_reassoc", values), 1.0f) << "the recipe does not reassociate";

  expect_inexact_rejected(spec, values, VariantTolerance{1e-3, 1e-3}, "\"o\"[0]");
}

// MAX, MAX, -MAX, -MAX: +inf summed in order, 0 when the lanes cancel. No
// tolerance, not even an infinite one, lets an infinity become a number.
TEST_F(Variants, AnInexactVariantThatLosesAnInfinityIsRejectedWhateverTheTolerance) {
  const float max = std::numeric_limits<float>::max();
  std::vector<float> values(4096, 0.0f);
  values[0] = values[1] = max;
  values[2] = values[3] = -max;
  const ProgramSpec spec = sum_kernel("_inf");
  ASSERT_EQ(sum_by(cpu, spec, "", values), std::numeric_limits<float>::infinity());
  ASSERT_TRUE(std::isfinite(sum_by(cpu, spec, "O3_reassoc", values))) << "the recipe does not reassociate";

  const double infinite = std::numeric_limits<double>::infinity();
  expect_inexact_rejected(spec, values, VariantTolerance{infinite, infinite}, "inf");
}

// A NaN where the default has a number (or the other way round) is as wrong.
TEST_F(Variants, ANanMismatchIsRejectedWhateverTheTolerance) {
  const float max = std::numeric_limits<float>::max();
  // In order: MAX + MAX = inf, then inf - MAX - MAX = inf, then + -inf = NaN... the
  // lanes instead hold MAX and -MAX apiece and -inf alone: -inf.
  std::vector<float> values(4096, 0.0f);
  values[0] = values[1] = max;
  values[2] = values[3] = -max;
  values[4] = -std::numeric_limits<float>::infinity();
  const ProgramSpec spec = sum_kernel("_nan");
  ASSERT_TRUE(std::isnan(sum_by(cpu, spec, "", values)));
  ASSERT_FALSE(std::isnan(sum_by(cpu, spec, "O3_reassoc", values))) << "the recipe does not reassociate";

  const double infinite = std::numeric_limits<double>::infinity();
  expect_inexact_rejected(spec, values, VariantTolerance{infinite, infinite}, "nan");
}

// A serial sum of 64K floats vectorises only by reassociation, many times
// faster, within a tolerance its inputs allow: it is chosen, and the choice
// comes from the cache the second time, with nothing timed.
TEST_F(Variants, AFasterInexactVariantWithinTheToleranceIsChosenAndCached) {
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) / 97.0f;
  SumLaunch launch = sum_launch(cpu, values);
  const ProgramSpec spec = sum_kernel("_fast");
  const VariantOptions options = quick(VariantTolerance{1e-2, 1e-3});
  const VariantChoice first = choose_variant(cpu.compile(spec), launch.args, options);
  EXPECT_EQ(first.recipe, "O3_reassoc");
  ASSERT_NE(trial_of(first, "O3_reassoc"), nullptr);
  EXPECT_GT(first.speedup(), 1.5);
  EXPECT_EQ(first.program->spec().recipe, "O3_reassoc");
  EXPECT_FALSE(first.cached);

  const uint64_t measured = variant_measurements();
  const VariantChoice second = choose_variant(cpu.compile(spec), launch.args, options);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.recipe, "O3_reassoc");
  EXPECT_EQ(second.program, first.program);  // the kernel cache's
  EXPECT_EQ(variant_measurements(), measured);

  // Another tolerance is another question; so is another bucket of sizes.
  EXPECT_FALSE(choose_variant(cpu.compile(spec), launch.args, quick(VariantTolerance{1e-2, 1e-2})).cached);
  KernelArgs fewer = launch.args;
  fewer.scalars = {1 << 10};
  EXPECT_FALSE(choose_variant(cpu.compile(spec), fewer, options).cached);
  // Without the cache nothing is read.
  VariantOptions uncached = options;
  uncached.use_cache = false;
  EXPECT_FALSE(choose_variant(cpu.compile(spec), launch.args, uncached).cached);
}

// A damaged entry is a miss, as the object cache treats every damaged entry:
// the choice is made again.
TEST_F(Variants, ADamagedCachedChoiceIsMadeAgain) {
  std::vector<float> values(1024, 0.5f);
  SumLaunch launch = sum_launch(cpu, values);
  const ProgramSpec spec = sum_kernel("_damaged");
  choose_variant(cpu.compile(spec), launch.args, quick());
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().extension() != ".svo") continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }
  const uint64_t measured = variant_measurements();
  EXPECT_FALSE(choose_variant(cpu.compile(spec), launch.args, quick()).cached);
  EXPECT_EQ(variant_measurements(), measured + 1);
}

// A kernel that accumulates into its buffer: choosing runs it many times,
// all on copies, and the caller's buffers keep their bytes.
TEST_F(Variants, AKernelThatWritesInPlaceLeavesTheCallersBuffersUntouched) {
  const ProgramSpec spec =
      test::c_kernel("accumulate",
                     "void accumulate(float* restrict acc, const float* restrict x, int n) {\n"
                     "  for (int i = 0; i < n; i++) acc[i] += x[i] * 0.5f;\n}\n",
                     {{"acc", Access::ReadWrite, DType::F32}, {"x", Access::Read, DType::F32}}, {{"n"}});
  const size_t n = 2048;
  // Both parameters are views of one storage, at offsets: the copies alias
  // as the originals do.
  Buffer storage = cpu.allocate(DType::F32, 2 * n + 16);
  for (size_t i = 0; i < 2 * n + 16; ++i) storage.span<float>()[i] = static_cast<float>(i);
  const std::vector<float> before(storage.span<float>().begin(), storage.span<float>().end());
  KernelArgs args;
  args.buffers = {storage.view_bytes(16 * sizeof(float), n * sizeof(float), DType::F32),
                  storage.view_bytes((16 + n) * sizeof(float), n * sizeof(float), DType::F32)};
  args.scalars = {static_cast<int64_t>(n)};
  const VariantChoice choice = choose_variant(cpu.compile(spec), args, quick(VariantTolerance{1e-5, 1e-5}));
  EXPECT_FALSE(choice.trials.empty());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), storage.span<float>().begin()));
}

// A plan's kernels are chosen for at its variables and run their choice
// from then on, with the same results.
TEST_F(Variants, APlanRunsTheVariantsChosenForItsKernels) {
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13) / 13.0f;
  SumLaunch launch = sum_launch(cpu, values);
  const ProgramSpec spec = sum_kernel("_plan");
  ExecutionPlanBuilder builder;
  const size_t o = builder.add_buffer(launch.o, "o");
  const size_t x = builder.add_buffer(launch.x, "x");
  builder.add_variable(Variable{"n", 1, 1 << 20}, static_cast<int64_t>(values.size()));
  builder.add_op(KernelOp{cpu.compile(spec), {o, x}, {Expr::parse("n")}, {}, {}, {}});
  ExecutionPlan plan = builder.build();
  plan.execute();
  const float exact = launch.o.span<float>()[0];

  const std::vector<VariantChoice> choices = choose_variants(plan, quick(VariantTolerance{1e-2, 1e-3}));
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].recipe, "O3_reassoc");
  EXPECT_EQ(std::get<KernelOp>(plan.op(0)).program->spec().recipe, "O3_reassoc");
  launch.o.span<float>()[0] = 0;
  plan.execute();
  EXPECT_NEAR(launch.o.span<float>()[0], exact, 1e-3 * std::fabs(exact));

  // Only a variant of the op's own program may take its place.
  const Error e = test::expect_error([&] { plan.replace_program(0, cpu.compile(sum_kernel("_other"))); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("not a variant"), std::string::npos) << e.what();
}

// `svod tune --variants` in two processes sharing a cache directory: the
// second times nothing and runs the same choices.
TEST(SvodTuneVariants, ASecondProcessTimesNothingAndChoosesTheSame) {
  test::TempDir dir;
  std::ofstream(dir.path() / "plan.json") << R"({
  "svod_plan": 1,
  "device": "CPU",
  "buffers": {"x": {"dtype": "f32", "count": 65536, "init": {"arange": {"start": 0, "step": 0.0001}}},
              "o": {"dtype": "f32", "count": 1}},
  "programs": {"sum": {"language": "c", "entry": "sum",
      "source": "void sum(float* restrict o, const float* restrict x) { float s = 0; for (int i = 0; i < 65536; i++) s += x[i]; o[0] = s; }",
      "buffers": [{"name": "o", "access": "write", "dtype": "f32"}, {"name": "x", "dtype": "f32"}]}},
  "ops": [{"run": "sum", "buffers": ["o", "x"]}]
})";
  auto tune = [&] {
    return run_process({"/usr/bin/env", "SVOD_CACHE_DIR=" + (dir.path() / "cache").string(),
                        SVOD_BINARY_DIR "/svod", "tune", "--variants", (dir.path() / "plan.json").string(),
                        "--tolerance", "1e-2,1e-3"},
                       "", std::chrono::minutes(2));
  };
  const ProcessResult first = tune();
  ASSERT_TRUE(first.ok()) << first.err;
  EXPECT_NE(first.out.find("1 measured"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("O3_reassoc"), std::string::npos) << first.out;
  const ProcessResult second = tune();
  ASSERT_TRUE(second.ok()) << second.err;
  EXPECT_NE(second.out.find("0 measured"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("from the cache"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("O3_reassoc"), std::string::npos) << second.out;

  // svod pack --variants packs the choice (from the cache) with its recipe,
  // which svod info counts.
  const std::string package = (dir.path() / "model.svodpkg").string();
  const ProcessResult pack =
      run_process({"/usr/bin/env", "SVOD_CACHE_DIR=" + (dir.path() / "cache").string(), SVOD_BINARY_DIR "/svod",
                   "pack", (dir.path() / "plan.json").string(), "-o", package, "--variants", "--tolerance", "1e-2,1e-3"},
                  "", std::chrono::minutes(2));
  ASSERT_TRUE(pack.ok()) << pack.err;
  EXPECT_NE(pack.out.find("from the cache"), std::string::npos) << pack.out;
  const ProcessResult info = run_process({SVOD_BINARY_DIR "/svod", "info", package}, "", std::chrono::minutes(1));
  ASSERT_TRUE(info.ok()) << info.err;
  EXPECT_NE(info.out.find("variants: 1 by O3_reassoc"), std::string::npos) << info.out;
}

TEST(VariantTolerance, IsTwoNumbersOfAtLeastZeroAndAnythingElseNamesWhatGaveIt) {
  const VariantTolerance t = parse_variant_tolerance("1e-5,2.5e-4", "test");
  EXPECT_EQ(t.atol, 1e-5);
  EXPECT_EQ(t.rtol, 2.5e-4);
  for (const char* bad : {"", "1e-5", "1e-5,", ",1e-4", "-1,0", "0,nan", "1e-5,1e-4,0", "a,b"}) {
    try {
      parse_variant_tolerance(bad, "--tolerance");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Validation);
      EXPECT_NE(std::string(e.what()).find("--tolerance: expected ATOL,RTOL"), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace svod
