// WorkerThread: ordering, timeline waits, errors, and plans run through it.
#include "svod/base/worker_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/plan/execution_plan.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

template <typename Fn>
void expect_error(ErrorKind kind, Fn&& fn, std::string_view fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error with " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string_view(e.what()).find(fragment), std::string_view::npos) << e.what();
  }
}

std::shared_ptr<const Program> scale_kernel() {
  static auto program = cpu_device()->compile(test::c_kernel(
      "scale", "void scale(float* x, int n, int k) { for (int i = 0; i < n; ++i) x[i] *= k; }",
      {BufferParam{"x", Access::ReadWrite, DType::F32}}, {ScalarParam{"n"}, ScalarParam{"k"}}));
  return program;
}

TEST(WorkerThread, RunsCommandsInOrder) {
  WorkerThread queue;
  std::vector<int> seen;  // touched only by the worker until synchronize
  std::vector<uint64_t> values;
  for (int i = 0; i < 100; ++i) values.push_back(queue.submit([&seen, i] { seen.push_back(i); }));
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], i + 1);
  queue.synchronize();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(queue.last_completed(), 100u);
}

TEST(WorkerThread, SubmitterRunsAheadAndWaitsOnTimelineValues) {
  WorkerThread queue;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> done{0};
  const uint64_t first = queue.submit([gate, &done] {
    gate.wait();
    done = 1;
  });
  const uint64_t second = queue.submit([&done] { done = 2; });
  // Both submissions returned while the first command is still blocked.
  EXPECT_EQ(queue.last_submitted(), second);
  EXPECT_EQ(queue.last_completed(), 0u);
  EXPECT_EQ(done.load(), 0);
  release.set_value();
  queue.wait(first);
  EXPECT_GE(done.load(), 1);
  queue.wait(second);
  EXPECT_EQ(done.load(), 2);
  queue.wait(0);
  expect_error(ErrorKind::Validation, [&] { queue.wait(99); }, "only 2 commands");
}

TEST(WorkerThread, ErrorsSurfaceAtTheCoveringWaitAndSkipLaterCommands) {
  WorkerThread queue;
  std::atomic<bool> third_ran{false};
  const uint64_t ok = queue.submit([] {});
  const uint64_t bad = queue.submit([] { throw make_error(ErrorKind::Unsupported, "nope"); });
  const uint64_t third = queue.submit([&] { third_ran = true; });
  queue.wait(ok);  // the failure comes after the awaited value
  expect_error(ErrorKind::Unsupported, [&] { queue.wait(third); },
               "worker command 2 failed and the 1 command after it was skipped: nope");
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(third_ran.load());
  // Reported once; the queue works again.
  queue.wait(third);
  const uint64_t fourth = queue.submit([&] { third_ran = true; });
  queue.wait(fourth);
  EXPECT_TRUE(third_ran.load());
  // A launch that fails when it runs: a scalar outside its bounds.
  auto spec = test::c_kernel("bounded", "void bounded(float* x, int n) { x[0] = n; }",
                             {BufferParam{"x", Access::Write, DType::F32}}, {ScalarParam{"n", ScalarType::I32, 0, 5}});
  Buffer x = cpu_device()->allocate(DType::F32, 1);
  auto bounded = cpu_device()->compile(spec);
  queue.submit([&] {
    const int64_t n = 9;
    bounded->launch({&x, 1}, {&n, 1});
  });
  expect_error(ErrorKind::Validation, [&] { queue.synchronize(); }, "worker command 5 failed");
  expect_error(ErrorKind::Validation, [&] { queue.submit({}); }, "empty command");
  queue.submit([] { throw std::runtime_error("plain"); });
  expect_error(ErrorKind::Execution, [&] { queue.synchronize(); }, "plain");
}

TEST(WorkerThread, DestructorFinishesSubmittedWork) {
  std::atomic<int> count{0};
  {
    WorkerThread queue;
    for (int i = 0; i < 50; ++i) queue.submit([&] { ++count; });
  }
  EXPECT_EQ(count.load(), 50);
}

TEST(WorkerThread, ExecutesPlansAsynchronously) {
  auto device = cpu_device();
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(device->allocate(DType::F32, 4));
  b.add_variable(Variable{"K", 1, 100}, 1);
  b.add_op(CustomOp{"fill", {x}, {{"value", 1.0}}});
  b.add_op(KernelOp{scale_kernel(), {x}, {Expr::constant(4), Expr::parse("K")}, {}});
  ExecutionPlan plan = b.build();

  WorkerThread queue;
  std::vector<float> after_first;
  plan.execute_async(queue, {{"K", 5}});
  queue.submit([&] {
    auto s = plan.buffer(x).span<float>();
    after_first.assign(s.begin(), s.end());
  });
  const uint64_t last = plan.execute_async(queue, {{"K", 7}});
  queue.wait(last);
  EXPECT_EQ(after_first, std::vector<float>(4, 5.0f));
  EXPECT_EQ(std::vector<float>(plan.buffer(x).span<float>().begin(), plan.buffer(x).span<float>().end()),
            std::vector<float>(4, 7.0f));
  EXPECT_EQ(plan.variable("K"), 7);

  // Bad variables are refused at submission; nothing is queued.
  const uint64_t before = queue.last_submitted();
  expect_error(ErrorKind::Validation, [&] { plan.execute_async(queue, {{"K", 0}}); }, "K = 0");
  expect_error(ErrorKind::Validation, [&] { plan.execute_async(queue, {{"Q", 1}}); }, "unknown plan variable");
  EXPECT_EQ(queue.last_submitted(), before);
}

TEST(WorkerThread, AsyncPlanFailurePoisonsThePlan) {
  auto device = cpu_device();
  static std::once_flag once;
  std::call_once(once, [] {
    register_custom_function("queue_boom", {[](std::span<const Buffer>, const Attrs&, const VariableValues&) {
                                              throw std::runtime_error("queue boom");
                                            },
                                            [](std::span<const Buffer> b, const Attrs&) {
                                              return std::vector<Access>(b.size(), Access::Write);
                                            }});
  });
  ExecutionPlanBuilder b;
  b.add_buffer(device->allocate(DType::F32, 1));
  b.add_op(CustomOp{"queue_boom", {0}, {}}, {.id = "explode"});
  ExecutionPlan plan = b.build();
  WorkerThread queue;
  const uint64_t v = plan.execute_async(queue);
  expect_error(ErrorKind::Execution, [&] { queue.wait(v); }, "op 0 (explode) custom queue_boom");
  EXPECT_TRUE(plan.poisoned());
  const uint64_t again = plan.execute_async(queue);
  expect_error(ErrorKind::PlanPoisoned, [&] { queue.wait(again); }, "queue boom");
}

}  // namespace
}  // namespace svod
