// UnifiedExecutor and ExecutionGraph: dependencies from buffer hazards, wait
// kinds between devices, CPU + OpenCL graphs and plans through the one plan
// runner, overlap of independent work, failures and poisoning. OpenCL parts
// skip when there is no platform.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/subprocess.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/registry/registry.h"
#include "svod/executor/executor.h"
#include "svod/planfile/plan_file.h"
#if SVOD_HAVE_OPENCL
#include "svod/backends/opencl/opencl_device.h"
#include "tests/support/test_support.h"
#endif

namespace svod {
namespace {

using namespace std::chrono_literals;
using Preds = std::vector<std::vector<size_t>>;

Buffer host_buffer(size_t count, DType dtype = DType::F32) { return cpu_device()->allocate(dtype, count); }

std::shared_ptr<const Program> c_program(const std::string& source, const std::string& entry,
                                         std::vector<BufferParam> buffers, std::vector<ScalarParam> scalars = {},
                                         const std::string& slices = "1") {
  ProgramSpec spec;
  spec.source = source;
  spec.entry = entry;
  spec.buffers = std::move(buffers);
  spec.scalars = std::move(scalars);
  spec.global_size[0] = Expr::parse(slices);
  return cpu_device()->compile(spec);
}

using test::kind_of;

BufferAccess reads(const Buffer& b) { return {b, Access::Read}; }
BufferAccess writes(const Buffer& b) { return {b, Access::Write}; }

// ---- graph structure (CPU only) ----------------------------------------------

TEST(ExecutionGraph, GroupsOfEmptyChainAndDiamond) {
  ExecutionGraph empty;
  EXPECT_TRUE(empty.parallel_groups().empty());
  UnifiedExecutor executor;
  executor.execute(empty);

  Buffer a = host_buffer(4), b = host_buffer(4), c = host_buffer(4), d = host_buffer(4);
  ExecutionGraph single;
  single.add_host([] {}, {writes(a)});
  EXPECT_EQ(single.parallel_groups(), Preds({{0}}));

  ExecutionGraph chain;  // a -> b -> c through RAW hazards
  chain.add_host([] {}, {writes(a)});
  chain.add_host([] {}, {reads(a), writes(b)});
  chain.add_host([] {}, {reads(b), writes(c)});
  EXPECT_EQ(chain.parallel_groups(), Preds({{0}, {1}, {2}}));
  EXPECT_EQ(chain.predecessors(), Preds({{}, {0}, {1}}));

  ExecutionGraph diamond;  // 0 writes a; 1 and 2 read it; 3 reads both results
  diamond.add_host([] {}, {writes(a)});
  diamond.add_host([] {}, {reads(a), writes(b)});
  diamond.add_host([] {}, {reads(a), writes(c)});
  diamond.add_host([] {}, {reads(b), reads(c), writes(d)});
  EXPECT_EQ(diamond.parallel_groups(), Preds({{0}, {1, 2}, {3}}));
  EXPECT_EQ(diamond.order(), std::vector<size_t>({0, 1, 2, 3}));
}

TEST(ExecutionGraph, HazardsFollowByteRangesAndExplicitEdges) {
  Buffer arena = host_buffer(100);
  ExecutionGraph g;
  g.add_host([] {}, {writes(arena.view(0, 50))});
  g.add_host([] {}, {writes(arena.view(50, 50))});    // disjoint: independent
  g.add_host([] {}, {reads(arena.view(40, 20))});     // RAW on both
  g.add_host([] {}, {writes(arena.view(0, 10))});     // WAR on 2? no overlap with [40,60); WAW on 0
  g.add_host([] {}, {}, NodeOptions{.label = "fence", .after = {1}});
  EXPECT_EQ(g.predecessors(), Preds({{}, {}, {0, 1}, {0}, {1}}));
  EXPECT_EQ(kind_of([&] { g.add_host([] {}, {}, NodeOptions{.after = {5}}); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { g.plan().op(9); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { g.add_copy(host_buffer(3), host_buffer(4)); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { g.add_host([] {}, {writes(arena), writes(Buffer())}); }), ErrorKind::Validation);
  EXPECT_EQ(g.size(), 5u);  // refused nodes add nothing
  EXPECT_EQ(g.plan().buffer_count(), 4u);  // one slot per buffer a node names
  // Node i is op i of the plan; a node's label names it in errors.
  g.add_host([] { throw make_error(ErrorKind::Execution, "no"); }, {}, NodeOptions{.label = "fence"});
  EXPECT_EQ(g.plan().op_count(), 6u);
  EXPECT_TRUE(std::holds_alternative<CustomOp>(g.plan().op(5)));
  try {
    global_executor().execute(g);
    ADD_FAILURE() << "the failing node ran without an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op 5 (fence)"), std::string::npos) << e.what();
  }
}

TEST(ExecutionGraph, KernelNodesCheckCountsAndDeriveAccesses) {
  auto add = c_program("void add(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] += a[i]; }",
                       "add", {{"o", Access::ReadWrite}, {"a"}}, {{"n", ScalarType::I32}});
  Buffer o = host_buffer(8), a = host_buffer(8);
  ExecutionGraph g;
  EXPECT_EQ(kind_of([&] { g.add_kernel(add, {{o}, {8}}); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { g.add_kernel(add, {{o, a}, {}}); }), ErrorKind::Validation);
  const size_t id = g.add_kernel(add, {{o, a}, {8}});
  const auto& kernel = std::get<KernelOp>(g.plan().op(id));
  EXPECT_EQ(kernel.program, add);
  ASSERT_EQ(kernel.buffers.size(), 2u);
  EXPECT_EQ(g.plan().buffer(kernel.buffers[0]).storage_id(), o.storage_id());
  EXPECT_EQ(g.plan().op_device(id)->name(), "CPU");
  // The accesses come from the parameters: a later reader of `o` follows it.
  g.add_host([] {}, {reads(o)});
  EXPECT_EQ(g.predecessors()[1], std::vector<size_t>{id});
  for (int i = 0; i < 8; ++i) a.span<float>()[i] = float(i);
  UnifiedExecutor executor;
  executor.execute(g);
  executor.execute(g);  // graphs are reusable
  EXPECT_EQ(o.span<float>()[7], 14.0f);
}

TEST(UnifiedExecutor, RunsHostWorkInParallelAndInOrder) {
  // 16 independent increments and a final node that depends on all of them.
  constexpr int kNodes = 16;
  std::vector<Buffer> cells;
  ExecutionGraph g;
  std::atomic<int> ran{0};
  for (int i = 0; i < kNodes; ++i) {
    cells.push_back(host_buffer(1, DType::I32));
    g.add_host([&, b = cells.back()] { b.span<int32_t>()[0] += 1; ran++; }, {{cells.back(), Access::ReadWrite}});
  }
  Buffer total = host_buffer(1, DType::I32);
  std::vector<BufferAccess> all;
  for (const auto& c : cells) all.push_back(reads(c));
  all.push_back(writes(total));
  g.add_host([&] {
    int32_t sum = 0;
    for (const auto& c : cells) sum += c.span<int32_t>()[0];
    total.span<int32_t>()[0] = sum;
  }, all);
  for (int round = 1; round <= 5; ++round) {
    global_executor().execute(g);
    EXPECT_EQ(total.span<int32_t>()[0], kNodes * round);
  }
  global_executor().execute(g, GraphRunOptions{.sequential = true});
  EXPECT_EQ(total.span<int32_t>()[0], kNodes * 6);
  EXPECT_EQ(ran.load(), kNodes * 6);
}

TEST(UnifiedExecutor, FailuresNameTheNodeStopLaterWorkAndPoisonTheGraph) {
  Buffer a = host_buffer(1);
  for (bool sequential : {false, true}) {
    bool later_ran = false;
    ExecutionGraph g;
    g.add_host([] { throw make_error(ErrorKind::Execution, "the disk is on fire"); }, {writes(a)},
               NodeOptions{.label = "burn"});
    g.add_host([&] { later_ran = true; }, {reads(a)});
    std::string message;
    EXPECT_EQ(kind_of([&] { global_executor().execute(g, GraphRunOptions{.sequential = sequential}); }, &message),
              ErrorKind::Execution);
    EXPECT_NE(message.find("op 0 (burn) custom host function failed: the disk is on fire"),
              std::string::npos)
        << message;
    EXPECT_FALSE(later_ran);
    // The next run refuses, naming the failure, until the graph changes.
    EXPECT_EQ(kind_of([&] { global_executor().execute(g); }, &message), ErrorKind::PlanPoisoned);
    EXPECT_NE(message.find("the disk is on fire"), std::string::npos) << message;
    g.add_host([] {}, {});
    EXPECT_EQ(kind_of([&] { global_executor().execute(g); }), ErrorKind::Execution);
  }
}

TEST(UnifiedExecutor, ObserverSeesEveryNode) {
  struct Counter final : PlanObserver {
    std::atomic<int> started{0}, finished{0};
    void op_started(size_t) noexcept override { started++; }
    void op_finished(size_t) noexcept override { finished++; }
  } counter;
  Buffer a = host_buffer(4), b = host_buffer(4);
  ExecutionGraph g;
  g.add_host([] {}, {writes(a)});
  g.add_copy(b, a);
  g.add_host([] {}, {reads(b)});
  global_executor().execute(g, GraphRunOptions{.observer = &counter});
  EXPECT_EQ(counter.started.load(), 3);
  EXPECT_EQ(counter.finished.load(), 3);
}

TEST(UnifiedExecutor, CpuWorkRunsOnTheHost) {
  // The runner runs work of a queue that runs inline on the host, after its
  // predecessors finished: there is nothing to wait on.
  Device& cpu = *cpu_device();
  EXPECT_TRUE(cpu.queue().runs_inline());
}

TEST(UnifiedExecutor, KernelNodesTakeExplicitSliceCounts) {
  // global[0] = 4 core_id slices for a kernel whose spec says 1.
  auto mark = c_program("void mark(int* o, int core_id) { o[core_id] = core_id + 1; }", "mark",
                        {{"o", Access::Write, DType::I32}}, {{"core_id", ScalarType::I32}});
  Buffer o = host_buffer(4, DType::I32);
  ExecutionGraph g;
  g.add_kernel(mark, {{o}, {}, LaunchDims{{4, 1, 1}, {1, 1, 1}}});
  global_executor().execute(g);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o.span<int32_t>()[i], i + 1);
}

// ---- CPU and OpenCL --------------------------------------------------------------

#if SVOD_HAVE_OPENCL

class CrossDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      cl_ = std::static_pointer_cast<OpenClDevice>(open_device("CL:0"));
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
      GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
  }

  std::shared_ptr<const Program> cl_program(OpenClDevice& device, const std::string& source, const std::string& entry,
                                            std::vector<BufferParam> buffers, std::vector<ScalarParam> scalars,
                                            const std::string& groups) {
    ProgramSpec spec;
    spec.language = Language("opencl");
    spec.source = source;
    spec.entry = entry;
    spec.buffers = std::move(buffers);
    spec.scalars = std::move(scalars);
    spec.global_size[0] = Expr::parse(groups);
    spec.local_size[0] = Expr::constant(16);
    return device.compile(spec);
  }
  // o[i] = a[i] * k + c over n elements.
  std::shared_ptr<const Program> affine(OpenClDevice& device) {
    return cl_program(device,
                      "__kernel void affine(__global float* o, __global const float* a, int n, int k, int c) {\n"
                      "  int i = get_global_id(0);\n"
                      "  if (i < n) o[i] = a[i] * k + c;\n"
                      "}\n",
                      "affine", {{"o", Access::Write}, {"a"}},
                      {{"n", ScalarType::I32}, {"k", ScalarType::I32}, {"c", ScalarType::I32}}, "(n+15)/16");
  }

  std::shared_ptr<OpenClDevice> cl_;
};

TEST_F(CrossDevice, QueuesSayWhatTheyCanWaitOn) {
  // What the runner asks before it lets one queue wait for another on the
  // device (SyncStrategy::DeviceEvents) instead of on the host.
  Device& cpu = *cpu_device();
  EXPECT_FALSE(cl_->queue().runs_inline());
  EXPECT_TRUE(cl_->queue().can_wait_on(cl_->queue()));
  EXPECT_FALSE(cl_->queue().can_wait_on(cpu.queue()));
  // A second queue on the same device: one context, so events work.
  OpenClDevice second(cl_->index());
  EXPECT_TRUE(second.queue().can_wait_on(cl_->queue()));
  EXPECT_TRUE(cl_->queue().can_wait_on(second.queue()));
}

TEST_F(CrossDevice, ProduceOnCpuConsumeOnOpenClAndBack) {
  constexpr int kN = 100;
  auto square = c_program("void square(float* o, const float* x, int n) { for (int i = 0; i < n; i++) o[i] = x[i] * x[i]; }",
                          "square", {{"o", Access::Write}, {"x"}}, {{"n", ScalarType::I32}});
  auto total = c_program("void total(float* t, const float* x, int n) { float s = 0; for (int i = 0; i < n; i++) s += x[i]; t[0] = s; }",
                         "total", {{"t", Access::Write}, {"x"}}, {{"n", ScalarType::I32}});
  Buffer x = host_buffer(kN), sq = host_buffer(kN), back = host_buffer(kN), sum = host_buffer(1);
  Buffer d_sq = cl_->allocate(DType::F32, kN), d_out = cl_->allocate(DType::F32, kN);
  ExecutionGraph g;
  g.add_kernel(square, {{sq, x}, {kN}});                  // 0 CPU
  g.add_copy(d_sq, sq);                                 // 1 host -> CL
  g.add_kernel(affine(*cl_), {{d_out, d_sq}, {kN, 2, 1}});  // 2 CL
  g.add_copy(back, d_out);                              // 3 CL -> host
  g.add_kernel(total, {{sum, back}, {kN}});               // 4 CPU
  EXPECT_EQ(g.predecessors(), Preds({{}, {0}, {1}, {2}, {3}}));
  EXPECT_EQ(g.plan().op_device(1), cl_.get());  // direct copies run on the CL queue
  EXPECT_EQ(g.plan().op_device(3), cl_.get());
  float want = 0;
  for (int i = 0; i < kN; ++i) want += 2.0f * float(i * i) + 1.0f;
  int round = 0;
  for (auto strategy : {SyncStrategy::DeviceEvents, SyncStrategy::BlockingHostWait}) {
    for (bool sequential : {false, true}) {
      for (int i = 0; i < kN; ++i) x.span<float>()[i] = float(i);
      sum.span<float>()[0] = -1;
      global_executor().execute(g, GraphRunOptions{.strategy = strategy, .sequential = sequential});
      EXPECT_EQ(sum.span<float>()[0], want) << "round " << round++;
      EXPECT_EQ(back.span<float>()[3], 19.0f);
    }
  }
}

TEST_F(CrossDevice, HazardsAcrossDevicesKeepHostMemoryUntilTheDeviceReadIt) {
  // The CL queue reads `h` (node 0) while the host overwrites it next (node 1,
  // a WAR hazard across devices): the host must wait for the read to finish.
  constexpr int kN = 4096;
  Buffer h = host_buffer(kN), r = host_buffer(kN);
  Buffer d_x = cl_->allocate(DType::F32, kN), d_y = cl_->allocate(DType::F32, kN);
  ExecutionGraph g;
  g.add_copy(d_x, h);                                      // 0 reads h
  g.add_host([&] { std::fill_n(h.span<float>().begin(), kN, 999.0f); }, {writes(h)});  // 1 WAR
  g.add_kernel(affine(*cl_), {{d_y, d_x}, {kN, 1, 1}});       // 2 reads d_x
  g.add_copy(r, d_y);                                      // 3
  EXPECT_EQ(g.predecessors(), Preds({{}, {0}, {0}, {2}}));
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < kN; ++i) h.span<float>()[i] = float(i + round);
    global_executor().execute(g);
    for (int i = 0; i < kN; i += 511) ASSERT_EQ(r.span<float>()[i], float(i + round + 1)) << round;
    EXPECT_EQ(h.span<float>()[0], 999.0f);
  }
}

TEST_F(CrossDevice, DeviceEventsOrderTwoQueues) {
  // Two queues in one context: the consumer on the second waits on the
  // producer's event, with no host wait in between.
  OpenClDevice second(cl_->index());
  constexpr int kN = 2048;
  Buffer h = host_buffer(kN), r = host_buffer(kN);
  Buffer d_a = cl_->allocate(DType::F32, kN), d_b = cl_->allocate(DType::F32, kN), d_c = cl_->allocate(DType::F32, kN);
  ExecutionGraph g;
  g.add_copy(d_a, h);
  g.add_kernel(affine(*cl_), {{d_b, d_a}, {kN, 3, 0}});
  g.add_kernel(affine(second), {{d_c, d_b}, {kN, 1, 5}});
  g.add_copy(r, d_c);
  EXPECT_EQ(g.plan().op_device(2), &second);
  EXPECT_TRUE(g.plan().op_device(2)->queue().can_wait_on(g.plan().op_device(1)->queue()));
  UnifiedExecutor executor;
  for (auto strategy : {SyncStrategy::DeviceEvents, SyncStrategy::BlockingHostWait}) {
    for (int round = 0; round < 5; ++round) {
      for (int i = 0; i < kN; ++i) h.span<float>()[i] = float(i % 100 + round);
      executor.execute(g, GraphRunOptions{.strategy = strategy});
      for (int i = 0; i < kN; i += 97) ASSERT_EQ(r.span<float>()[i], 3.0f * float(i % 100 + round) + 5.0f);
    }
  }
  second.synchronize();
}

TEST_F(CrossDevice, IndependentWorkOnTheTwoDevicesOverlaps) {
  // Node 0 runs on the host and waits (bounded) until the value that OpenCL
  // work (nodes 1-3, independent of node 0) writes into host memory shows
  // up. If the executor ran the host node to completion before submitting
  // the OpenCL work, the wait would run out.
  constexpr int kN = 256;
  Buffer seed = host_buffer(kN), flag = host_buffer(kN);
  for (int i = 0; i < kN; ++i) seed.span<float>()[i] = 20.0f;
  Buffer d_seed = cl_->allocate(DType::F32, kN), d_out = cl_->allocate(DType::F32, kN);
  for (auto strategy : {SyncStrategy::DeviceEvents, SyncStrategy::BlockingHostWait}) {
    flag.span<float>()[kN - 1] = 0;
    std::atomic<bool> saw{false};
    ExecutionGraph g;
    g.add_host([&] {
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      std::atomic_ref<float> cell(flag.span<float>()[kN - 1]);
      while (std::chrono::steady_clock::now() < deadline) {
        if (cell.load() == 42.0f) {
          saw = true;
          return;
        }
        std::this_thread::sleep_for(1ms);
      }
    }, {});
    g.add_copy(d_seed, seed);
    g.add_kernel(affine(*cl_), {{d_out, d_seed}, {kN, 2, 2}});
    g.add_copy(flag, d_out);
    EXPECT_TRUE(g.predecessors()[0].empty());
    EXPECT_TRUE(g.predecessors()[1].empty());
    global_executor().execute(g, GraphRunOptions{.strategy = strategy});
    EXPECT_TRUE(saw.load()) << "the host node did not see the OpenCL result while it ran (" << to_string(strategy)
                            << ")";
  }
}

TEST_F(CrossDevice, OpenClFailuresNameTheNode) {
  Buffer small = cl_->allocate(DType::F32, 4);
  Buffer host = host_buffer(4);
  ExecutionGraph g;
  // Scalars out of the kernel's declared range fail when enqueued.
  g.add_kernel(affine(*cl_), {{small, small}, {4, int64_t{1} << 40, 0}}, NodeOptions{.label = "bad scalar"});
  bool ran = false;
  g.add_host([&] { ran = true; }, {reads(small), writes(host)});
  std::string message;
  EXPECT_EQ(kind_of([&] { global_executor().execute(g); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("op 0 (bad scalar) kernel affine"), std::string::npos) << message;
  EXPECT_FALSE(ran);
}

TEST_F(CrossDevice, AFailedDeviceCommandPoisonsThePlan) {
  // The copy is submitted to the CL queue, the kernel after it fails when
  // it is enqueued (a view at an offset OpenCL cannot pass): the run waits
  // for the copy, reports the kernel and poisons the plan.
  constexpr int kN = 64;
  Buffer h = host_buffer(kN);
  Buffer d = cl_->allocate(DType::F32, kN);
  ExecutionPlanBuilder builder;
  const size_t hs = builder.add_buffer(h, "h");
  const size_t ds = builder.add_buffer(d, "d");
  const size_t odd = builder.add_view(ds, 4, 32 * 4, DType::F32, "odd");
  const size_t out = builder.add_buffer(cl_->allocate(DType::F32, 32), "out");
  builder.add_op(CopyOp{ds, hs});
  builder.add_op(KernelOp{affine(*cl_), {out, odd}, {Expr::constant(32), Expr::constant(1), Expr::constant(0)}, {}},
                 OpOptions{.id = "misaligned"});
  ExecutionPlan plan = builder.build();
  std::string message;
  EXPECT_EQ(kind_of([&] { plan.execute(); }, &message), ErrorKind::Unsupported);
  EXPECT_NE(message.find("op 1 (misaligned)"), std::string::npos) << message;
  EXPECT_TRUE(plan.poisoned());
  EXPECT_EQ(kind_of([&] { plan.execute(); }), ErrorKind::PlanPoisoned);
}

TEST_F(CrossDevice, PlansWithOpsOnBothDevices) {
  auto square = c_program(
      "void square(float* o, const float* x, int n, int core_id) {\n"
      "  int per = (n + 3) / 4, b = core_id * per, e = b + per < n ? b + per : n;\n"
      "  for (int i = b; i < e; i++) o[i] = x[i] * x[i];\n"
      "}\n",
      "square", {{"o", Access::Write}, {"x"}}, {{"n", ScalarType::I32}, {"core_id", ScalarType::I32}}, "S");
  ProgramSpec spec;  // launch sizes over a plan variable the kernel does not take
  spec.language = Language("opencl");
  spec.source =
      "__kernel void add1(__global float* o, __global const float* a, int n) {\n"
      "  int i = get_global_id(0); if (i < n) o[i] = a[i] + 1.0f; }\n";
  spec.entry = "add1";
  spec.buffers = {{"o", Access::Write}, {"a"}};
  spec.scalars = {{"n", ScalarType::I32}};
  spec.global_size[0] = Expr::parse("(N+7)/8");
  spec.local_size[0] = Expr::parse("L");
  auto add1 = cl_->compile(spec);

  constexpr int kN = 300;
  ExecutionPlanBuilder builder;
  builder.add_variable({"N", 1, kN}, kN);
  builder.add_variable({"L", 8, 8}, 8);
  builder.add_variable({"S", 1, 4}, 4);  // core_id slices of the CPU kernel
  const size_t x = builder.add_buffer(host_buffer(kN), "x");
  const size_t sq = builder.add_buffer(host_buffer(kN), "sq");
  const size_t d_sq = builder.add_buffer(cl_->allocate(DType::F32, kN), "d_sq");
  const size_t d_out = builder.add_buffer(cl_->allocate(DType::F32, kN), "d_out");
  const size_t out = builder.add_buffer(host_buffer(kN), "out");
  builder.add_op(KernelOp{square, {sq, x}, {Expr::parse("N")}, {}});
  builder.add_op(CopyOp{d_sq, sq});
  builder.add_op(KernelOp{add1, {d_out, d_sq}, {Expr::parse("N")}, {}}, OpOptions{.id = "add1"});
  builder.add_op(CopyOp{out, d_out});
  builder.add_output(out);
  ExecutionPlan plan = builder.build();
  for (int i = 0; i < kN; ++i) plan.buffer(x).span<float>()[i] = float(i);
  EXPECT_TRUE(plan.uses_devices());

  for (auto strategy : {SyncStrategy::DeviceEvents, SyncStrategy::BlockingHostWait}) {
    for (bool sequential : {false, true}) {
      std::fill_n(plan.buffer(out).span<float>().begin(), kN, 0.0f);
      plan.execute(ExecuteOptions{.sequential = sequential, .strategy = strategy});
      for (int i = 0; i < kN; ++i) ASSERT_EQ(plan.buffer(out).span<float>()[i], float(i * i + 1)) << i;
    }
  }
}

TEST_F(CrossDevice, CrossDevicePlanFileRuns) {
  const std::filesystem::path path = std::filesystem::path(SVOD_SOURCE_DIR) / "examples/cross_device/plan.json";
  LoadedPlan loaded = load_plan(parse_plan_file(path));
  EXPECT_TRUE(loaded.uses_devices);
  for (int run = 0; run < 3; ++run) {
    loaded.execute();
    for (const auto& out : loaded.outputs) {
      const Buffer& b = loaded.plan.buffer(out.slot);
      const auto check = check_output(out, b.dtype(), std::as_bytes(b.span<std::byte>()));
      EXPECT_TRUE(check.passed()) << out.name << ": " << check.mismatches << " mismatches";
    }
  }
  const ProcessResult result =
      run_process({std::string(SVOD_BINARY_DIR) + "/svod", "run", path.string(), "--repeat", "3"}, "", 120s);
  EXPECT_TRUE(result.ok()) << result.out << result.err;
  EXPECT_NE(result.out.find("total: f32 [1] [1.11196e+07]"), std::string::npos) << result.out;
}

TEST_F(CrossDevice, PlanFileOutputsMustBeHostBuffers) {
  const std::string text = R"J({
    "svod_plan": 1,
    "buffers": { "d": { "dtype": "f32", "count": 4, "device": "CL:0", "init": { "fill": 2 } } },
    "programs": {}, "ops": [],
    "outputs": { "d": { "expect": { "values": [2, 2, 2, 2] } } }
  })J";
  std::string message;
  EXPECT_EQ(kind_of([&] { load_plan(parse_plan_text(text, ".", "t.json")); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("outputs.d: the buffer is in CL:0 memory"), std::string::npos) << message;
}

#endif  // SVOD_HAVE_OPENCL

}  // namespace
}  // namespace svod
