// Running plans: real kernels and custom functions, real threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "svod/base/thread_pool.h"
#include "svod/plan/execution_plan.h"
#include "tests/plan/plan_test_support.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;
using test::host_buffer;
using Clock = std::chrono::steady_clock;

CustomOp call(std::string name, std::vector<size_t> buffers, Attrs attrs = {}) {
  return CustomOp{std::move(name), std::move(buffers), std::move(attrs)};
}

std::vector<float> floats(const Buffer& b) {
  auto s = b.span<float>();
  return {s.begin(), s.end()};
}

// Test custom functions, registered once:
//  "rendezvous" (reads its buffers): waits, bounded, until `attrs.group`
//      peers have arrived; counts the calls that met all their peers.
//  "stamp" (writes its buffers): records entry and exit times per `attrs.op`.
//  "boom" (writes its buffers): throws; attr kind "std" throws
//      std::runtime_error, otherwise Error(Unsupported).
struct Probe {
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  std::mutex mutex;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> stamps{64};
};
Probe& probe() {
  static Probe p;
  return p;
}

void register_probe_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto all = [](Access a) {
      return [a](std::span<const Buffer> buffers, const Attrs&) { return std::vector<Access>(buffers.size(), a); };
    };
    register_custom_function(
        "rendezvous",
        {[](std::span<const Buffer>, const Attrs& attrs, const VariableValues&) {
           const int group = static_cast<int>(attr_int("rendezvous", attrs, "group"));
           Probe& p = probe();
           ++p.arrived;
           const auto deadline = Clock::now() + std::chrono::seconds(10);
           while (p.arrived.load() < group && Clock::now() < deadline) std::this_thread::yield();
           if (p.arrived.load() >= group) ++p.met;
         },
         all(Access::Read)});
    register_custom_function("stamp",
                             {[](std::span<const Buffer>, const Attrs& attrs, const VariableValues&) {
                                const auto op = static_cast<size_t>(attr_int("stamp", attrs, "op"));
                                const auto start = Clock::now();
                                std::this_thread::sleep_for(std::chrono::microseconds(200));
                                probe().stamps[op] = {start, Clock::now()};
                              },
                              all(Access::Write)});
    register_custom_function("boom",
                             {[](std::span<const Buffer>, const Attrs& attrs, const VariableValues&) {
                                if (attrs.contains("kind")) throw std::runtime_error("std boom");
                                throw make_error(ErrorKind::Unsupported, "typed boom");
                              },
                              all(Access::Write)});
  });
}

class PlanExecute : public ::testing::Test {
 protected:
  void SetUp() override {
    register_probe_functions();
    test::register_access_functions();
  }
};

TEST_F(PlanExecute, IndependentOpsRunAtTheSameTime) {
  if (thread_count() < 2) GTEST_SKIP() << "needs two pool threads";
  ExecutionPlanBuilder b;
  const size_t shared = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(call("rendezvous", {shared}, {{"group", int64_t{2}}}));
  b.add_op(call("rendezvous", {shared}, {{"group", int64_t{2}}}));
  ExecutionPlan plan = b.build();
  ASSERT_TRUE(plan.predecessors()[1].empty());
  probe().arrived = 0;
  probe().met = 0;
  plan.execute();
  EXPECT_EQ(probe().met.load(), 2) << "the two readers did not overlap";
}

TEST_F(PlanExecute, IndependentKernelsRunAtTheSameTime) {
  if (thread_count() < 2) GTEST_SKIP() << "needs two pool threads";
  // Each kernel bumps a shared counter, then spins (bounded) until both did.
  // The counter is declared read-only so the plan sees no hazard between them.
  auto spec = test::c_kernel("meet",
                             "void meet(int* counter, int* met) {\n"
                             "  __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);\n"
                             "  for (long i = 0; i < 4000000000L; ++i)\n"
                             "    if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) >= 2) { met[0] = 1; return; }\n"
                             "}\n",
                             {BufferParam{"counter", Access::Read, DType::I32},
                              BufferParam{"met", Access::Write, DType::I32}});
  auto program = cpu_device()->compile(spec);
  ExecutionPlanBuilder b;
  const size_t counter = b.add_buffer(host_buffer(DType::I32, 1));
  const size_t met0 = b.add_buffer(host_buffer(DType::I32, 1));
  const size_t met1 = b.add_buffer(host_buffer(DType::I32, 1));
  b.add_op(KernelOp{program, {counter, met0}, {}, {}});
  b.add_op(KernelOp{program, {counter, met1}, {}, {}});
  ExecutionPlan plan = b.build();
  plan.execute();
  EXPECT_EQ(plan.buffer(met0).span<int>()[0], 1);
  EXPECT_EQ(plan.buffer(met1).span<int>()[0], 1);
}

TEST_F(PlanExecute, DependentOpsNeverOverlap) {
  // Overlapping views of one arena chain the ops; disjoint ones may overlap.
  ExecutionPlanBuilder b;
  const size_t arena = b.add_buffer(host_buffer(DType::F32, 64));
  std::vector<size_t> views;
  for (size_t i = 0; i < 8; ++i) views.push_back(b.add_view(arena, i * 24, 32, DType::F32));  // each overlaps the next
  for (size_t i = 0; i < 8; ++i) b.add_op(call("stamp", {views[i]}, {{"op", static_cast<int64_t>(i)}}));
  ExecutionPlan plan = b.build();
  for (int rep = 0; rep < 3; ++rep) {
    for (bool sequential : {false, true}) {
      plan.execute({.sequential = sequential});
      for (size_t i = 0; i < 8; ++i) {
        ASSERT_EQ(plan.predecessors()[i], i == 0 ? std::vector<size_t>{} : std::vector<size_t>{i - 1});
        if (i > 0) EXPECT_LE(probe().stamps[i - 1].second, probe().stamps[i].first) << "op " << i;
      }
    }
  }
}

TEST_F(PlanExecute, KernelsCopiesAndViewsComputeTheRightValues) {
  auto add = test::add_const_kernel();
  ExecutionPlanBuilder b;
  const size_t in = b.add_buffer(host_buffer(DType::F32, 4), "in");
  const size_t mid = b.add_buffer(host_buffer(DType::F32, 4), "mid");
  const size_t arena = b.add_buffer(host_buffer(DType::F32, 8), "arena");
  const size_t hi = b.add_view(arena, 16, 16, DType::F32, "hi");
  b.add_op(KernelOp{add, {in, mid}, {Expr::constant(4), Expr::constant(10)}, {}}, {.id = "add"});
  b.add_op(CopyOp{hi, mid}, {.id = "copy"});
  b.add_output(arena);
  ExecutionPlan plan = b.build();
  auto input = plan.buffer(in).span<float>();
  for (int i = 0; i < 4; ++i) input[i] = static_cast<float>(i + 1);
  plan.execute();
  EXPECT_EQ(floats(plan.buffer(arena)), (std::vector<float>{0, 0, 0, 0, 11, 12, 13, 14}));
  EXPECT_EQ(plan.predecessors()[1], std::vector<size_t>{0});
}

TEST_F(PlanExecute, ViewOpDefinesASlot) {
  ExecutionPlanBuilder b;
  const size_t base = b.add_buffer(host_buffer(DType::F32, 8));
  const size_t view = b.add_buffer(Buffer{});
  b.add_op(ViewOp{view, base, 8, 12, DType::F32}, {.id = "v"});
  b.add_op(call("fill", {view}, {{"value", 2.5}}), {.after_ids = {"v"}});
  ExecutionPlan plan = b.build();
  EXPECT_EQ(plan.buffer(view).byte_offset(), 8u);
  plan.execute();
  EXPECT_EQ(floats(plan.buffer(base)), (std::vector<float>{0, 0, 2.5, 2.5, 2.5, 0, 0, 0}));
}

TEST_F(PlanExecute, VariablesDriveScalarsAndLaunchSizes) {
  ExecutionPlanBuilder b;
  const size_t out = b.add_buffer(host_buffer(DType::F32, 10));
  const size_t fixed_out = b.add_buffer(host_buffer(DType::F32, 10));
  const size_t slots = b.add_buffer(host_buffer(DType::I64, 16));
  const size_t slots_n = b.add_buffer(host_buffer(DType::I64, 16));
  b.add_variable(Variable{"N", 1, 16}, 2);
  auto set = test::set_kernel();
  // set(out, n = N, v = N * 2 + 1) and the same with N fixed at 3.
  b.add_op(KernelOp{set, {out}, {Expr::parse("N"), Expr::parse("N * 2 + 1")}, {}}, {.id = "set"});
  b.add_op(KernelOp{set, {fixed_out}, {Expr::parse("N"), Expr::parse("N * 2 + 1")}, {{"N", 3}}});
  // put: global_size = N, a plan variable; put_n: global_size = n, its scalar.
  b.add_op(KernelOp{test::put_kernel(), {slots}, {}, {}});
  b.add_op(KernelOp{test::put_n_kernel(), {slots_n}, {Expr::parse("N - 1")}, {}});
  ExecutionPlan plan = b.build();

  plan.execute_with_vars({{"N", 4}});
  EXPECT_EQ(floats(plan.buffer(out)), (std::vector<float>{9, 9, 9, 9, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(floats(plan.buffer(fixed_out)), (std::vector<float>{7, 7, 7, 0, 0, 0, 0, 0, 0, 0}));
  auto s = plan.buffer(slots).span<int64_t>();
  auto sn = plan.buffer(slots_n).span<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.begin() + 5), (std::vector<int64_t>{1, 2, 3, 4, 0}));
  EXPECT_EQ(std::vector<int64_t>(sn.begin(), sn.begin() + 4), (std::vector<int64_t>{1, 2, 3, 0}));

  // A later value grows the launch without rebuilding; N stays for plain execute().
  plan.execute_with_vars({{"N", 6}});
  EXPECT_EQ(s[5], 6);
  EXPECT_EQ(plan.variable("N"), 6);
  std::ranges::fill(s, 0);
  plan.execute();
  EXPECT_EQ(s[5], 6);

  // Out of the variable's bounds, out of a kernel scalar's bounds (n <= 10),
  // or unknown: refused before anything runs, and nothing changes.
  std::ranges::fill(s, 0);
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"N", 17}}); }, {"N = 17", "[1, 16]"});
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"N", 12}}); },
               {"op 0 (set)", "n = 12", "[0, 10]"});
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"M", 1}}); }, {"unknown plan variable \"M\""});
  EXPECT_EQ(s[0], 0) << "a refused run must not start any op";
  EXPECT_EQ(plan.variable("N"), 6);
  EXPECT_FALSE(plan.poisoned());
  plan.execute();
  EXPECT_EQ(s[5], 6);
  EXPECT_EQ(s[6], 0);
}

// set_variables: the values the next run (or a sandbox's host_launch) uses,
// checked as execute_with_vars checks them, and nothing runs.
TEST_F(PlanExecute, SetVariablesChecksAndRunsNothing) {
  ExecutionPlanBuilder b;
  const size_t slots = b.add_buffer(host_buffer(DType::I64, 16));
  b.add_variable(Variable{"N", 1, 16}, 2);
  b.add_op(KernelOp{test::put_kernel(), {slots}, {}, {}});
  ExecutionPlan plan = b.build();
  auto s = plan.buffer(slots).span<int64_t>();
  plan.set_variables({{"N", 5}});
  EXPECT_EQ(plan.variable("N"), 5);
  EXPECT_EQ(s[0], 0) << "set_variables ran an op";
  EXPECT_EQ(plan.host_launch(0).slices, 5);
  expect_error(ErrorKind::Validation, [&] { plan.set_variables({{"N", 17}}); }, {"N = 17", "[1, 16]"});
  expect_error(ErrorKind::Validation, [&] { plan.set_variables({{"M", 1}}); }, {"unknown plan variable \"M\""});
  EXPECT_EQ(plan.variable("N"), 5);
  plan.execute();
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.begin() + 6), (std::vector<int64_t>{1, 2, 3, 4, 5, 0}));
}

TEST_F(PlanExecute, SliceCountsAreCheckedAgainstCoreIdWhenVariablesChange) {
  ExecutionPlanBuilder b;
  const size_t slots = b.add_buffer(host_buffer(DType::I64, 16));
  b.add_variable(Variable{"N", 1, int64_t{1} << 40}, 2);
  // put: global_size[0] = "N" slices, core_id an i32 without declared bounds.
  b.add_op(KernelOp{test::put_kernel(), {slots}, {}, {}}, {.id = "put"});
  // mark: core_id declared in [0, 3], its slices also from N.
  auto mark_spec = test::c_kernel("mark", "void mark(long long* out, int core_id) { out[core_id] = -1; }",
                                  {BufferParam{"out", Access::Write, DType::I64}},
                                  {ScalarParam{"core_id", ScalarType::I32, 0, 3}});
  mark_spec.global_size[0] = Expr::parse("min(N, 4)");
  b.add_op(KernelOp{cpu_device()->compile(mark_spec), {slots}, {}, {}}, {.id = "mark"});
  b.add_op(KernelOp{cpu_device()->compile(mark_spec), {slots}, {}, {}, std::array<Expr, 3>{
                              Expr::parse("N"), Expr::constant(1), Expr::constant(1)}},
           {.id = "mark_all"});
  ExecutionPlan plan = b.build();
  auto s = plan.buffer(slots).span<int64_t>();

  plan.execute_with_vars({{"N", 4}});
  EXPECT_EQ(s[3], -1);
  std::ranges::fill(s, 0);
  // 5 slices would pass core_id = 4 to mark_all; 2^31 + 1 would wrap put's
  // i32 core_id negative. Both refused before any op runs.
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"N", 5}}); },
               {"(mark_all) kernel mark", "5 core_id slices would pass core_id = 4, outside its bounds [0, 3]"});
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"N", (int64_t{1} << 31) + 1}}); },
               {"\"put\"", "core_id = 2147483648, outside its bounds [-2147483648, 2147483647]"});
  for (int64_t v : s) EXPECT_EQ(v, 0) << "a refused run must not start any op";
  EXPECT_EQ(plan.variable("N"), 4);
  EXPECT_FALSE(plan.poisoned());
}

TEST_F(PlanExecute, MinCountsWhoseBytesOverflowAreRefused) {
  auto spec = test::c_kernel("last", "void last(float* o, long long n) { o[n - 1] = 7.0f; }",
                             {BufferParam{"o", Access::Write, DType::F32, Expr::parse("n")}},
                             {ScalarParam{"n", ScalarType::I64}});
  ExecutionPlanBuilder b;
  const size_t all = b.add_buffer(host_buffer(DType::F32, 8), "all");
  const size_t tail = b.add_view(all, 16, 16, DType::F32, "tail");
  b.add_variable(Variable{"N", 1, int64_t{1} << 62}, 4);
  b.add_op(KernelOp{cpu_device()->compile(spec), {tail}, {Expr::parse("N")}, {}}, {.id = "last"});
  ExecutionPlan plan = b.build();
  // 2^62 floats are 2^64 bytes, which wrapped to 0 and let the kernel write before "tail".
  expect_error(ErrorKind::Validation, [&] { plan.execute_with_vars({{"N", int64_t{1} << 62}}); },
               {"\"last\"", "needs 2^62 f32 elements (min_count \"n\"): more bytes than fit in 64 bits"});
  for (float v : plan.buffer(all).span<float>()) EXPECT_EQ(v, 0.0f);
  plan.execute_with_vars({{"N", 4}});
  EXPECT_EQ(plan.buffer(all).span<float>()[7], 7.0f);
}

TEST_F(PlanExecute, CustomFunctionsSeeTheVariables) {
  static std::atomic<int64_t> seen{-1};
  static std::once_flag once;
  std::call_once(once, [] {
    register_custom_function("see_n", {[](std::span<const Buffer>, const Attrs&, const VariableValues& vars) {
                                         seen = vars.find("N").value_or(-2);
                                       },
                                       [](std::span<const Buffer> b, const Attrs&) {
                                         return std::vector<Access>(b.size(), Access::Read);
                                       }});
  });
  ExecutionPlanBuilder b;
  b.add_variable(Variable{"N", 0, 100}, 1);
  b.add_variable(Variable{"A", 0, 100}, 1);
  b.add_op(call("see_n", {}));
  ExecutionPlan plan = b.build();
  plan.execute_with_vars({{"N", 42}});
  EXPECT_EQ(seen.load(), 42);
}

TEST_F(PlanExecute, RebindingBuffersAndViews) {
  auto add = test::add_const_kernel();
  ExecutionPlanBuilder b;
  const size_t in = b.add_buffer(host_buffer(DType::F32, 4), "in");
  const size_t base = b.add_buffer(host_buffer(DType::F32, 8), "base");
  const size_t view = b.add_view(base, 16, 16, DType::F32, "view");
  b.add_op(KernelOp{add, {in, view}, {Expr::constant(4), Expr::constant(1)}, {}});
  ExecutionPlan plan = b.build();
  plan.execute();
  EXPECT_EQ(floats(plan.buffer(base)), (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1}));

  Buffer new_in = host_buffer(DType::F32, 4);
  for (int i = 0; i < 4; ++i) new_in.span<float>()[i] = 10.0f * static_cast<float>(i);
  Buffer new_base = host_buffer(DType::F32, 8);
  plan.rebind(in, new_in);
  plan.rebind(base, new_base);
  EXPECT_EQ(plan.buffer(view).storage_id(), new_base.storage_id());
  EXPECT_EQ(plan.buffer(view).byte_offset(), 16u);
  plan.execute();
  EXPECT_EQ(floats(new_base), (std::vector<float>{0, 0, 0, 0, 1, 11, 21, 31}));

  expect_error(ErrorKind::Validation, [&] { plan.rebind(in, host_buffer(DType::F32, 5)); }, {"16 bytes of f32"});
  expect_error(ErrorKind::Validation, [&] { plan.rebind(in, host_buffer(DType::I32, 4)); }, {"i32"});
  expect_error(ErrorKind::Validation, [&] { plan.rebind(view, host_buffer(DType::F32, 4)); },
               {"is a view of buffer 1", "rebind its base"});
  expect_error(ErrorKind::Validation, [&] { plan.rebind(7, new_in); }, {"buffer 7"});
}

TEST_F(PlanExecute, RebindingThatCreatesAliasingAddsEdges) {
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
  const size_t y = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(call("test_write", {x}));
  b.add_op(call("test_write", {y}));
  ExecutionPlan plan = b.build();
  EXPECT_TRUE(plan.predecessors()[1].empty());
  // y now shares bytes with x: the two writes must be ordered.
  Buffer arena = host_buffer(DType::F32, 8);
  plan.rebind(x, arena.view(0, 4));
  plan.rebind(y, arena.view(2, 4));
  EXPECT_EQ(plan.predecessors()[1], std::vector<size_t>{0});
  plan.rebind(y, arena.view(4, 4));
  EXPECT_TRUE(plan.predecessors()[1].empty());
  plan.execute();
}

TEST_F(PlanExecute, FailureReportsTheOpAndPoisonsThePlan) {
  for (bool sequential : {false, true}) {
    for (bool typed : {true, false}) {
      ExecutionPlanBuilder b;
      const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
      const size_t y = b.add_buffer(host_buffer(DType::F32, 4));
      Attrs boom_attrs;
      if (!typed) boom_attrs["kind"] = "std";
      b.add_op(call("fill", {x}, {{"value", int64_t{1}}}), {.id = "first"});
      b.add_op(call("boom", {x}, boom_attrs), {.id = "bad"});
      b.add_op(call("fill", {x, y}, {{"value", int64_t{3}}}), {.id = "after"});
      ExecutionPlan plan = b.build();
      expect_error(typed ? ErrorKind::Unsupported : ErrorKind::Execution,
                   [&] { plan.execute({.sequential = sequential}); },
                   {"op 1 (bad) custom boom failed", typed ? "typed boom" : "std boom"});
      EXPECT_EQ(floats(plan.buffer(x))[0], 1.0f);
      EXPECT_EQ(floats(plan.buffer(y))[0], 0.0f) << "an op after the failure ran";
      EXPECT_TRUE(plan.poisoned());
      expect_error(ErrorKind::PlanPoisoned, [&] { plan.execute(); }, {"op 1 (bad)"});
      expect_error(ErrorKind::PlanPoisoned, [&] { plan.execute_with_vars({}); });
      expect_error(ErrorKind::PlanPoisoned, [&] { plan.replicate(); });
      // A rebind lifts the poisoning: the plan runs again (and fails again at "bad").
      plan.rebind(y, host_buffer(DType::F32, 4));
      EXPECT_FALSE(plan.poisoned());
      expect_error(typed ? ErrorKind::Unsupported : ErrorKind::Execution, [&] { plan.execute(); },
                   {"op 1 (bad)"});
      EXPECT_TRUE(plan.poisoned());
    }
  }
}

TEST_F(PlanExecute, TimeOpRunsOneOpAloneWithTheCurrentVariables) {
  ExecutionPlanBuilder b;
  const size_t c = b.add_buffer(host_buffer(DType::I32, 1));
  const size_t out = b.add_buffer(host_buffer(DType::I64, 8));
  b.add_variable({"N", 1, 8}, 3);
  b.add_op(KernelOp{test::touch_kernel(), {c}, {}, {}});
  b.add_op(KernelOp{test::put_kernel(), {out}, {}, {}});
  ExecutionPlan plan = b.build();

  for (int i = 0; i < 3; ++i) EXPECT_GT(plan.time_op(0).count(), 0);
  EXPECT_EQ(plan.buffer(c).span<int32_t>()[0], 3);  // only op 0 ran, once per call
  EXPECT_EQ(plan.buffer(out).span<int64_t>()[0], 0);

  // Launch sizes follow the plan's variables: put fills N slots.
  plan.time_op(1);
  EXPECT_EQ(plan.buffer(out).span<int64_t>()[2], 3);
  EXPECT_EQ(plan.buffer(out).span<int64_t>()[3], 0);
  plan.execute_with_vars({{"N", 5}});
  std::fill_n(plan.buffer(out).span<int64_t>().begin(), 8, 0);
  plan.time_op(1);
  EXPECT_EQ(plan.buffer(out).span<int64_t>()[4], 5);

  expect_error(ErrorKind::Validation, [&] { plan.time_op(2); }, {"op 2 is out of range", "2 ops"});

  ExecutionPlanBuilder failing;
  const size_t x = failing.add_buffer(host_buffer(DType::F32, 4));
  failing.add_op(call("fill", {x}, {{"value", int64_t{1}}}));
  failing.add_op(call("boom", {x}), {.id = "bad"});
  ExecutionPlan bad = failing.build();
  expect_error(ErrorKind::Unsupported, [&] { bad.time_op(1); }, {"op 1 (bad)", "typed boom"});
  EXPECT_TRUE(bad.poisoned());
  expect_error(ErrorKind::PlanPoisoned, [&] { bad.time_op(0); });
}

TEST_F(PlanExecute, ReplicasShareInputsAndRunConcurrently) {
  auto add = test::add_const_kernel();
  ExecutionPlanBuilder b;
  const size_t in = b.add_buffer(host_buffer(DType::F32, 4), "in");
  const size_t arena = b.add_buffer(host_buffer(DType::F32, 8), "arena");
  const size_t lo = b.add_view(arena, 0, 16, DType::F32);
  const size_t hi = b.add_view(arena, 16, 16, DType::F32);
  b.add_variable(Variable{"K", 0, 1000}, 0);
  b.add_op(KernelOp{add, {in, lo}, {Expr::constant(4), Expr::parse("K")}, {}});
  b.add_op(KernelOp{add, {lo, hi}, {Expr::constant(4), Expr::parse("K")}, {}});
  ExecutionPlan original = b.build();
  for (int i = 0; i < 4; ++i) original.buffer(in).span<float>()[i] = static_cast<float>(i);
  original.execute_with_vars({{"K", 1}});

  ExecutionPlan replica = original.replicate();
  // Read-only input shared; the written arena forked with its contents, the
  // views still inside one (new) storage at their offsets.
  EXPECT_EQ(replica.buffer(in).storage_id(), original.buffer(in).storage_id());
  EXPECT_NE(replica.buffer(arena).storage_id(), original.buffer(arena).storage_id());
  EXPECT_EQ(replica.buffer(lo).storage_id(), replica.buffer(arena).storage_id());
  EXPECT_EQ(replica.buffer(hi).byte_offset(), 16u);
  EXPECT_EQ(floats(replica.buffer(arena)), floats(original.buffer(arena)));
  EXPECT_EQ(replica.variable("K"), 1);
  EXPECT_EQ(replica.predecessors(), original.predecessors());

  std::vector<ExecutionPlan> plans;
  plans.push_back(std::move(original));
  plans.push_back(std::move(replica));
  plans.push_back(plans[0].replicate());
  plans.push_back(plans[1].replicate());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < plans.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        const int64_t k = static_cast<int64_t>(t * 100 + rep);
        plans[t].execute_with_vars({{"K", k}}, {.sequential = rep % 2 == 1});
        auto out = plans[t].buffer(hi).span<float>();
        for (int i = 0; i < 4; ++i)
          if (out[i] != static_cast<float>(i + 2 * k)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(PlanExecute, ReplicasKeepTheResolvedCustomFunctions) {
  register_custom_function("short_lived", {[](std::span<const Buffer> b, const Attrs&, const VariableValues&) {
                                             b[0].span<float>()[0] += 1;
                                           },
                                           [](std::span<const Buffer> b, const Attrs&) {
                                             return std::vector<Access>(b.size(), Access::ReadWrite);
                                           }});
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(host_buffer(DType::F32, 1));
  b.add_op(call("short_lived", {x}));
  ExecutionPlan plan = b.build();
  ASSERT_TRUE(unregister_custom_function("short_lived"));
  plan.execute();
  ExecutionPlan replica = plan.replicate();
  replica.execute();
  EXPECT_EQ(floats(plan.buffer(x))[0], 1.0f);
  EXPECT_EQ(floats(replica.buffer(x))[0], 2.0f);  // forked with the original's contents
}

TEST_F(PlanExecute, OnePlanFromManyThreads) {
  ExecutionPlanBuilder b;
  const size_t c = b.add_buffer(host_buffer(DType::I32, 1));
  for (int i = 0; i < 10; ++i) b.add_op(KernelOp{test::touch_kernel(), {c}, {}, {}});
  ExecutionPlan plan = b.build();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 25; ++rep) plan.execute();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(plan.buffer(c).span<int>()[0], 4 * 25 * 10);
}

TEST_F(PlanExecute, ObserverSeesEveryOp) {
  struct Counter final : PlanObserver {
    std::atomic<int> started{0}, finished{0};
    void op_started(size_t) noexcept override { ++started; }
    void op_finished(size_t) noexcept override { ++finished; }
  } counter;
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
  for (int i = 0; i < 5; ++i) b.add_op(call("test_read", {x}));
  ExecutionPlan plan = b.build();
  plan.execute({.observer = &counter});
  plan.execute({.sequential = true, .observer = &counter});
  EXPECT_EQ(counter.started.load(), 10);
  EXPECT_EQ(counter.finished.load(), 10);
}

}  // namespace
}  // namespace svod
