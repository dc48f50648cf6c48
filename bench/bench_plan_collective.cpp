// Collective ops in plans on 2 local ranks: what a plan adds over calling the
// communicator directly (8 B and 64 MiB all_reduce), and how much of a
// collective independent work in the same plan hides (a 20 ms host op that
// waits, beside a 64 MiB all_reduce).
//
// Rank 0 is driven by the benchmark loop; rank 1 mirrors it on a persistent
// thread. Each iteration starts with a 4-byte broadcast that tells rank 1
// whether to go on, in every variant alike, so the variants differ only in
// what they measure.
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "svod/comm/communicator.h"
#include "svod/custom/custom_function.h"
#include "svod/registry/registry.h"
#include "svod/plan/execution_plan.h"

namespace {

using namespace svod;

constexpr size_t kBig = (size_t{64} << 20) / sizeof(float);

// "bench_wait" (writes its buffer): sleeps 20 ms, like host work that waits
// on I/O, without competing with the collective for the 2 cores.
void register_wait() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_custom_function(
        "bench_wait", {[](std::span<const Buffer>, const Attrs&, const VariableValues&) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(20));
                       },
                       [](std::span<const Buffer> buffers, const Attrs&) {
                         return std::vector<Access>(buffers.size(), Access::Write);
                       }});
  });
}

// Runs `step(rank's communicator)` once per benchmark iteration on both ranks.
void on_two_ranks(benchmark::State& state, const std::function<std::function<void()>(Communicator&)>& setup) {
  auto comms = create_local_communicators(2);
  auto cpu = open_device("CPU");
  std::function<void()> step1;
  std::thread peer([&] {
    step1 = setup(*comms[1]);
    Buffer go = cpu->allocate(DType::I32, 1);
    for (;;) {
      comms[1]->broadcast(go, 0);
      if (go.span<int32_t>()[0] == 0) return;
      step1();
    }
  });
  std::function<void()> step0 = setup(*comms[0]);
  Buffer go = cpu->allocate(DType::I32, 1);
  go.span<int32_t>()[0] = 1;
  for (auto _ : state) {
    comms[0]->broadcast(go, 0);
    step0();
  }
  go.span<int32_t>()[0] = 0;
  comms[0]->broadcast(go, 0);
  peer.join();
}

std::shared_ptr<Communicator> borrow(Communicator& comm) { return {std::shared_ptr<Communicator>{}, &comm}; }

void direct(benchmark::State& state, size_t count) {
  on_two_ranks(state, [count](Communicator& comm) -> std::function<void()> {
    Buffer buffer = open_device("CPU")->allocate(DType::F32, count);
    return [&comm, buffer] { comm.all_reduce(buffer, ReduceOp::Sum); };
  });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * count * sizeof(float)));
}

// A plan of `ops`: "all_reduce" (count floats) and/or "wait" (independent).
void plan(benchmark::State& state, size_t count, bool all_reduce, bool wait) {
  register_wait();
  on_two_ranks(state, [=](Communicator& comm) -> std::function<void()> {
    ExecutionPlanBuilder b;
    b.set_communicator(borrow(comm));
    const size_t g = b.add_buffer(open_device("CPU")->allocate(DType::F32, count));
    const size_t w = b.add_buffer(open_device("CPU")->allocate(DType::F32, 1));
    if (all_reduce) b.add_op(CollectiveOp{.kind = CollectiveKind::AllReduce, .buffers = {g}});
    if (wait) b.add_op(CustomOp{"bench_wait", {w}, {}});
    auto p = std::make_shared<ExecutionPlan>(b.build());
    return [p] { p->execute(); };
  });
  if (all_reduce) state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * count * sizeof(float)));
}

void BM_direct_all_reduce_8B(benchmark::State& state) { direct(state, 2); }
void BM_plan_all_reduce_8B(benchmark::State& state) { plan(state, 2, true, false); }
void BM_direct_all_reduce_64MiB(benchmark::State& state) { direct(state, kBig); }
void BM_plan_all_reduce_64MiB(benchmark::State& state) { plan(state, kBig, true, false); }
void BM_plan_wait_20ms(benchmark::State& state) { plan(state, 2, false, true); }
void BM_plan_all_reduce_64MiB_and_wait_20ms(benchmark::State& state) { plan(state, kBig, true, true); }

BENCHMARK(BM_direct_all_reduce_8B)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_plan_all_reduce_8B)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_direct_all_reduce_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_plan_all_reduce_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_plan_wait_20ms)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_plan_all_reduce_64MiB_and_wait_20ms)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
