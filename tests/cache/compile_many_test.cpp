// compile_many: per-spec results in order, duplicates compiled once, failures
// confined to their own position.
#include "svod/device/compile_many.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

using test::add_kernel;
using test::CountingCompiler;
using test::run_add_kernel;

class CompileManyTest : public ::testing::Test {
 protected:
  test::ScopedObjectCache no_disk_{nullptr};
  std::shared_ptr<CountingCompiler> compiler = std::make_shared<CountingCompiler>();
  std::shared_ptr<CpuDevice> device = std::make_shared<CpuDevice>(compiler);
};

TEST_F(CompileManyTest, ResultsInOrderWithDuplicatesCompiledOnce) {
  std::vector<ProgramSpec> specs;
  for (int step = 0; step < 6; ++step) specs.push_back(add_kernel(step));
  specs.push_back(add_kernel(2));  // duplicates of earlier positions
  specs.push_back(add_kernel(4));
  specs.push_back(test::c_kernel("broken", "void broken(void) { nope }"));
  specs.push_back(add_kernel(2));

  std::vector<CompileResult> results = compile_many(*device, specs);
  ASSERT_EQ(results.size(), specs.size());
  EXPECT_EQ(compiler->compiles(), 7);  // 6 distinct good ones + the broken one

  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(i);
    if (specs[i].entry == "broken") {
      ASSERT_TRUE(std::holds_alternative<Error>(results[i]));
      EXPECT_EQ(std::get<Error>(results[i]).kind(), ErrorKind::Compile);
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const Program>>(results[i]));
    const auto& p = std::get<std::shared_ptr<const Program>>(results[i]);
    EXPECT_EQ(p->spec().source, specs[i].source);
  }
  auto program = [&](size_t i) { return std::get<std::shared_ptr<const Program>>(results[i]); };
  EXPECT_EQ(program(6), program(2));
  EXPECT_EQ(program(7), program(4));
  EXPECT_EQ(program(9), program(2));
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *program(5)), 8.0f);

  // A second batch is served from the kernel cache.
  std::vector<CompileResult> again = compile_many(*device, std::span(specs).first(6));
  EXPECT_EQ(compiler->compiles(), 7);
  EXPECT_EQ(std::get<std::shared_ptr<const Program>>(again[3]), program(3));
}

TEST_F(CompileManyTest, CallbackReportsEveryPositionOnce) {
  std::vector<ProgramSpec> specs = {add_kernel(11), add_kernel(12), add_kernel(11),
                                    test::c_kernel("broken", "void broken(void) { nope }")};
  std::mutex mutex;
  std::vector<int> calls(specs.size(), 0);
  std::vector<CompileResult> results = compile_many(*device, specs, [&](size_t position) {
    const std::lock_guard lock(mutex);
    ASSERT_LT(position, specs.size());
    ++calls[position];
  });
  EXPECT_EQ(calls, (std::vector<int>{1, 1, 1, 1}));  // the duplicate and the failure too
  EXPECT_TRUE(std::holds_alternative<Error>(results[3]));
}

TEST_F(CompileManyTest, StartedOncePerDistinctSpecBeforeItsResult) {
  std::vector<ProgramSpec> specs = {add_kernel(21), add_kernel(22), add_kernel(21),
                                    test::c_kernel("broken", "void broken(void) { nope }")};
  std::mutex mutex;
  std::vector<std::string> events;
  compile_many(
      *device, specs,
      [&](size_t position) {
        const std::lock_guard lock(mutex);
        events.push_back("done " + std::to_string(position));
      },
      [&](size_t position) {
        const std::lock_guard lock(mutex);
        events.push_back("start " + std::to_string(position));
      });
  auto at = [&](const std::string& event) {
    return std::find(events.begin(), events.end(), event) - events.begin();
  };
  EXPECT_EQ(events.size(), 7u);  // three distinct specs start, four positions end
  EXPECT_EQ(std::count(events.begin(), events.end(), "start 2"), 0);  // a duplicate of position 0
  for (const int position : {0, 1, 3}) {
    EXPECT_LT(at("start " + std::to_string(position)), at("done " + std::to_string(position)));
  }
  EXPECT_LT(at("start 0"), at("done 2"));
}

TEST_F(CompileManyTest, EmptyBatch) { EXPECT_TRUE(compile_many(*device, {}).empty()); }

}  // namespace
}  // namespace svod
