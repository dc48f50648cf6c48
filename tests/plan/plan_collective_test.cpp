// Collective ops in plans: real local ranks (threads) with their own plans,
// real kernels before and after the collectives, failures on one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "svod/comm/communicator.h"
#include "svod/plan/execution_plan.h"
#include "tests/plan/plan_test_support.h"
#include "tests/support/comm_checks.h"

namespace svod {
namespace {

using test::expect_error;
using test::host_buffer;
using Kind = CollectiveKind;
using Clock = std::chrono::steady_clock;

Buffer filled(size_t count, float value) {
  Buffer b = host_buffer(DType::F32, count);
  for (float& x : b.span<float>()) x = value;
  return b;
}

Buffer arange(size_t count, float start) {
  Buffer b = host_buffer(DType::F32, count);
  for (size_t i = 0; i < count; ++i) b.span<float>()[i] = start + float(i);
  return b;
}

std::vector<float> floats(const Buffer& b) {
  auto s = b.span<float>();
  return {s.begin(), s.end()};
}

// Custom functions for the overlap and failure tests:
//  "gate" (writes its buffer): waits, bounded, until "signal" ran; throws if
//      it did not.
//  "signal" (reads its buffer): lets "gate" through.
//  "fail" (writes its buffer): throws Error(Unsupported).
std::atomic<bool> signalled{false};

void register_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto all = [](Access a) {
      return [a](std::span<const Buffer> buffers, const Attrs&) { return std::vector<Access>(buffers.size(), a); };
    };
    register_custom_function("gate",
                             {[](std::span<const Buffer>, const Attrs&, const VariableValues&) {
                                const auto deadline = Clock::now() + std::chrono::seconds(10);
                                while (!signalled.load() && Clock::now() < deadline)
                                  std::this_thread::sleep_for(std::chrono::microseconds(100));
                                if (!signalled.load()) throw make_error(ErrorKind::Execution, "the gate never opened");
                              },
                              all(Access::Write)});
    register_custom_function("signal",
                             {[](std::span<const Buffer>, const Attrs&, const VariableValues&) { signalled = true; },
                              all(Access::Read)});
    register_custom_function("fail",
                             {[](std::span<const Buffer>, const Attrs&, const VariableValues&) {
                                throw make_error(ErrorKind::Unsupported, "planned failure");
                              },
                              all(Access::Write)});
  });
}

class PlanCollective : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { register_functions(); }
};

// Per rank r of n: a kernel sets g = r + 1, all_reduce(sum) makes it
// n(n+1)/2, a kernel after it writes h = g + 1; all_gather of a 2-element
// part, reduce_scatter(max) of a 3n-element whole, broadcast from the last
// rank. Parallel and sequential runs, repeated, give the same results.
TEST_P(PlanCollective, KernelsAndCollectivesGiveTheSameResultsOnEveryRank) {
  const int n = GetParam();
  const size_t ranks = static_cast<size_t>(n);
  auto set = test::set_kernel();
  auto add = test::add_const_kernel();
  run_local_ranks(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        ExecutionPlanBuilder b;
        b.set_communicator(borrowed(comm));
        const size_t g = b.add_buffer(host_buffer(DType::F32, 4), "g");
        const size_t h = b.add_buffer(host_buffer(DType::F32, 4), "h");
        const size_t mine = b.add_buffer(filled(2, float(10 * r)), "mine");
        const size_t all = b.add_buffer(host_buffer(DType::F32, 2 * ranks), "all");
        const size_t full = b.add_buffer(arange(3 * ranks, float(r)), "full");
        const size_t part = b.add_buffer(host_buffer(DType::F32, 3), "part");
        const size_t w = b.add_buffer(filled(5, float(r)), "w");
        b.add_op(KernelOp{set, {g}, {Expr::constant(4), Expr::constant(r + 1)}, {}});
        b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}, .op = ReduceOp::Sum});
        b.add_op(KernelOp{add, {g, h}, {Expr::constant(4), Expr::constant(1)}, {}});
        b.add_op(CollectiveOp{.kind = Kind::AllGather, .src = mine, .dst = all});
        b.add_op(CollectiveOp{.kind = Kind::ReduceScatter, .src = full, .dst = part, .op = ReduceOp::Max});
        b.add_op(CollectiveOp{.kind = Kind::Broadcast, .buffers = {w}, .root = n - 1});
        ExecutionPlan plan = b.build();
        // Collectives are chained in op order, whatever their buffers.
        EXPECT_EQ(plan.predecessors()[4], (std::vector<size_t>{3}));
        EXPECT_EQ(plan.predecessors()[5], (std::vector<size_t>{4}));
        for (bool sequential : {false, true, false}) {
          plan.execute({.sequential = sequential});
          const float sum = float(n * (n + 1) / 2);
          EXPECT_EQ(floats(plan.buffer(g)), std::vector<float>(4, sum));
          EXPECT_EQ(floats(plan.buffer(h)), std::vector<float>(4, sum + 1));
          std::vector<float> gathered;
          for (int k = 0; k < n; ++k) gathered.insert(gathered.end(), 2, float(10 * k));
          EXPECT_EQ(floats(plan.buffer(all)), gathered);
          // Part r of rank k's `full` is k + 3r + j; the max is over k = n - 1.
          std::vector<float> part_max;
          for (int j = 0; j < 3; ++j) part_max.push_back(float(n - 1 + 3 * r + j));
          EXPECT_EQ(floats(plan.buffer(part)), part_max);
          EXPECT_EQ(floats(plan.buffer(w)), std::vector<float>(5, float(n - 1)));
        }
      },
      test::quick_comm_options());
}

// Ranks sharing the two-thread pool, each with kernels after every
// collective, many runs: a collective never holds a pool thread, so no rank
// starves the others.
TEST_P(PlanCollective, RanksSharingThePoolDoNotStarve) {
  const int n = GetParam();
  auto set = test::set_kernel();
  auto add = test::add_const_kernel();
  run_local_ranks(
      n,
      [&](Communicator& comm) {
        ExecutionPlanBuilder b;
        b.set_communicator(borrowed(comm));
        const size_t a = b.add_buffer(host_buffer(DType::F32, 8));
        const size_t c = b.add_buffer(host_buffer(DType::F32, 8));
        const size_t d = b.add_buffer(host_buffer(DType::F32, 8));
        b.add_op(KernelOp{set, {a}, {Expr::constant(8), Expr::constant(comm.rank())}, {}});
        b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {a}, .op = ReduceOp::Max});
        b.add_op(KernelOp{add, {a, c}, {Expr::constant(8), Expr::constant(1)}, {}});
        b.add_op(KernelOp{add, {a, d}, {Expr::constant(8), Expr::constant(2)}, {}});
        b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {c, d}, .op = ReduceOp::Sum});
        ExecutionPlan plan = b.build();
        for (int run = 0; run < 50; ++run) plan.execute();
        EXPECT_EQ(floats(plan.buffer(c)), std::vector<float>(8, float(n * n)));
        EXPECT_EQ(floats(plan.buffer(d)), std::vector<float>(8, float(n * (n + 1))));
      },
      test::quick_comm_options());
}

// One rank fails in a kernel-free op before its first collective: every
// other rank's run fails with an error naming it, long before the timeout.
class PlanCollectiveFailure : public PlanCollective {};

TEST_P(PlanCollectiveFailure, AFailedRankFailsTheOthersNamingIt) {
  const int n = GetParam();
  const int bad = n - 1;
  std::atomic<int> poisoned{0};
  const auto start = Clock::now();
  const auto errors = test::local_rank_errors(
      n,
      [&](Communicator& comm) {
        ExecutionPlanBuilder b;
        b.set_communicator(borrowed(comm));
        const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
        const size_t g = b.add_buffer(host_buffer(DType::F32, 4));
        OpOptions after;
        if (comm.rank() == bad) {
          b.add_op(CustomOp{"fail", {x}, {}}, {.id = "breaks"});
          after.after_ids = {"breaks"};
        }
        b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}}, after);
        ExecutionPlan plan = b.build();
        try {
          plan.execute();
        } catch (const Error&) {
          if (plan.poisoned()) ++poisoned;
          throw;
        }
      },
      CommOptions{.timeout = std::chrono::seconds(60)});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30)) << "the ranks waited for the timeout";
  EXPECT_EQ(poisoned.load(), n);
  for (int k = 0; k < n; ++k) {
    ASSERT_TRUE(errors[size_t(k)]) << "rank " << k << " did not fail";
    const Error& e = *errors[size_t(k)];
    const std::string message = e.what();
    EXPECT_EQ(e.kind(), k == bad ? ErrorKind::Unsupported : ErrorKind::Execution) << message;
    EXPECT_NE(message.find("planned failure"), std::string::npos) << message;
    if (k == bad) continue;
    EXPECT_NE(message.find(fmt::format("because rank {} failed", bad)), std::string::npos) << message;
    EXPECT_NE(message.find("collective all_reduce"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PlanCollective, ::testing::Values(1, 2, 4));
INSTANTIATE_TEST_SUITE_P(Ranks, PlanCollectiveFailure, ::testing::Values(2, 4));

// Rank 0 runs "gate" (op 0) and an all_reduce (op 1) that do not depend on
// each other; rank 1 opens the gate only after its all_reduce finished,
// which needs rank 0's. So rank 0 passes only if its collective was in
// flight while its gate op was running.
TEST(PlanCollectiveOverlap, IndependentLocalWorkOverlapsACollective) {
  register_functions();
  signalled = false;
  run_local_ranks(
      2,
      [&](Communicator& comm) {
        ExecutionPlanBuilder b;
        b.set_communicator(borrowed(comm));
        const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
        const size_t g = b.add_buffer(filled(4, 1));
        if (comm.rank() == 0) {
          b.add_op(CustomOp{"gate", {x}, {}});
          b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}});
        } else {
          b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}});
          b.add_op(CustomOp{"signal", {g}, {}});  // reads g: after the all_reduce
        }
        ExecutionPlan plan = b.build();
        EXPECT_TRUE(plan.predecessors()[1].empty() == (comm.rank() == 0));
        plan.execute();
        EXPECT_EQ(floats(plan.buffer(g)), std::vector<float>(4, 2.0f));
      },
      test::quick_comm_options());
}

// A rank that returns without issuing its collective: the others fail at
// once naming it (they used to wait for the communicator's timeout).
TEST(PlanCollectiveTimeout, ARankThatFinishesWithoutItsCollectiveFailsTheOthersAtOnce) {
  std::string message;
  ErrorKind kind = ErrorKind::Validation;
  const auto start = Clock::now();
  run_local_ranks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return;  // gone without a word
        ExecutionPlanBuilder b;
        b.set_communicator(borrowed(comm));
        const size_t g = b.add_buffer(host_buffer(DType::F32, 4));
        b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}}, {.id = "reduce"});
        ExecutionPlan plan = b.build();
        try {
          plan.execute();
        } catch (const Error& e) {
          kind = e.kind();
          message = e.what();
        }
      },
      CommOptions{.timeout = std::chrono::seconds(60)});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(kind, ErrorKind::Execution) << message;
  EXPECT_NE(message.find("op 0 (reduce) collective all_reduce failed"), std::string::npos) << message;
  EXPECT_NE(message.find("rank(s) 1 finished their work without joining it"), std::string::npos) << message;
}

TEST(PlanCollectiveBuild, HazardsOrderCollectivesAgainstOtherOps) {
  register_functions();
  test::register_access_functions();
  ExecutionPlanBuilder b;
  const size_t g = b.add_buffer(host_buffer(DType::F32, 8));
  const size_t mine = b.add_view(g, 0, 16, DType::F32);   // elements 0-3 of g
  const size_t all = b.add_buffer(host_buffer(DType::F32, 4));
  const size_t other = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(CustomOp{"test_write", {mine}, {}});                      // 0
  b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}});          // 1: reads and writes g
  b.add_op(CustomOp{"test_read", {g}, {}});                          // 2
  b.add_op(CustomOp{"test_write", {other}, {}});                     // 3: independent
  b.add_op(CollectiveOp{.kind = Kind::AllGather, .src = mine, .dst = all});  // 4: reads mine, writes all
  b.add_op(CustomOp{"test_read", {all}, {}});                        // 5
  b.add_op(CustomOp{"test_write", {mine}, {}});                      // 6
  ExecutionPlan plan = b.build();
  const auto& preds = plan.predecessors();
  EXPECT_EQ(preds[1], (std::vector<size_t>{0}));     // RAW on g's first half
  EXPECT_EQ(preds[2], (std::vector<size_t>{1}));     // RAW
  EXPECT_TRUE(preds[3].empty());
  EXPECT_EQ(preds[4], (std::vector<size_t>{1}));     // the previous collective (and RAW)
  EXPECT_EQ(preds[5], (std::vector<size_t>{4}));     // RAW on all
  // WAR on mine (the WAW on op 1 follows through op 2).
  EXPECT_TRUE(std::ranges::includes(preds[6], std::vector<size_t>{2, 4}));
  // Without a communicator the plan gets one rank of its own.
  ASSERT_NE(plan.communicator(), nullptr);
  EXPECT_EQ(plan.communicator()->size(), 1);
  EXPECT_EQ(plan.communicator()->transport(), "local");
  plan.execute();
  expect_error(ErrorKind::Unsupported, [&] { (void)plan.replicate(); }, {"collectives"});
}

TEST(PlanCollectiveBuild, PlansWithoutCollectivesHaveNoCommunicator) {
  ExecutionPlanBuilder b;
  const size_t a = b.add_buffer(host_buffer(DType::F32, 4));
  const size_t c = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(CopyOp{c, a});
  b.set_communicator(std::move(create_local_communicators(1).front()));
  ExecutionPlan plan = b.build();
  EXPECT_EQ(plan.communicator(), nullptr);
  (void)plan.replicate();
}

TEST(PlanCollectiveBuild, BadCollectivesAreRejectedNamingTheOp) {
  auto comms = create_local_communicators(2);
  std::shared_ptr<Communicator> comm = std::move(comms[0]);
  auto build = [&](CollectiveOp c, DType dst_dtype = DType::F32, size_t dst_count = 8) {
    ExecutionPlanBuilder b;
    b.set_communicator(comm);
    b.add_buffer(host_buffer(DType::F32, 4), "a");
    b.add_buffer(host_buffer(dst_dtype, dst_count), "b");
    b.add_op(std::move(c), {.id = "coll"});
    return b.build();
  };
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::AllReduce}); }, {"op 0 (coll)", "no buffers"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::AllReduce, .buffers = {0, 7}}); },
               {"buffer 1 is buffer 7", "2 buffers"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::Broadcast, .buffers = {0}, .root = 2}); },
               {"collective broadcast", "root 2 is out of range", "ranks 0 to 1"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::Broadcast, .buffers = {0}, .root = -1}); },
               {"root -1"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::AllGather, .src = 0, .dst = 1}, DType::F32, 6); },
               {"collective all_gather", "buffer 1 (\"b\") holds 6 elements but must hold 2 ranks x 4", "= 8"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::AllGather, .src = 0, .dst = 1}, DType::I32); },
               {"dtypes must match"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::ReduceScatter, .src = 0, .dst = 1}, DType::F32, 4); },
               {"collective reduce_scatter", "buffer 0 (\"a\") holds 4 elements but must hold 2 ranks x 4"});
  expect_error(ErrorKind::Validation, [&] { build({.kind = Kind::AllGather, .src = 0, .dst = 9}); },
               {"the destination is buffer 9"});
  for (Kind kind : {Kind::Barrier, Kind::Send})
    expect_error(ErrorKind::Validation, [&] { build({.kind = kind, .buffers = {0}}); },
                 {"op 0 (coll) collective ", "a plan's collectives are all_reduce, broadcast, all_gather and "
                                             "reduce_scatter"});
  // A reduce_scatter whose source is twice its destination is fine on 2 ranks.
  ExecutionPlan ok = build({.kind = Kind::ReduceScatter, .src = 1, .dst = 0, .op = ReduceOp::Min});
  EXPECT_EQ(ok.communicator(), comm);
}

TEST(PlanCollectiveBuild, MismatchedCollectivesAcrossRanksFailEveryRank) {
  const auto errors = test::local_rank_errors(2, [&](Communicator& comm) {
    ExecutionPlanBuilder b;
    b.set_communicator(borrowed(comm));
    const size_t g = b.add_buffer(host_buffer(DType::F32, comm.rank() == 0 ? 4 : 8));
    b.add_op(CollectiveOp{.kind = Kind::AllReduce, .buffers = {g}});
    b.build().execute();
  });
  for (const auto& error : errors) {
    ASSERT_TRUE(error);
    EXPECT_EQ(error->kind(), ErrorKind::Validation) << error->what();
    const std::string m = error->what();
    EXPECT_NE(m.find("op 0 collective all_reduce failed"), std::string::npos) << m;
    EXPECT_NE(m.find("f32 x 4"), std::string::npos) << m;
    EXPECT_NE(m.find("f32 x 8"), std::string::npos) << m;
  }
}

TEST(PlanCollectiveBuild, ReadOnlyVariablesCannotBeSet) {
  ExecutionPlanBuilder b;
  b.add_buffer(host_buffer(DType::F32, 4));
  b.add_variable(Variable{"rank", 1, 1, true}, 1);
  b.add_variable(Variable{"n", 0, 10}, 3);
  ExecutionPlan plan = b.build();
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"rank", 1}}); }, {"\"rank\" is read-only"});
  plan.execute_with_vars({{"n", 4}});
  EXPECT_EQ(plan.variable("n"), 4);
}

}  // namespace
}  // namespace svod
