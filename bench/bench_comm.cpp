// The local communicator (ranks as threads): all_reduce of 64 MiB f32 on 2
// ranks against a single-threaded memcpy of the same buffer, the same on
// OpenCL buffers (staged through host memory), the 8-byte all_reduce
// latency, and a one-rank call's cost. The mpi transport's bench is
// bench/mpi/ (run under mpirun).
#include <benchmark/benchmark.h>

#include <cstring>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/device/device.h"
#include "svod/registry/registry.h"

namespace {

constexpr size_t kBytes = size_t{64} << 20;

void BM_memcpy_64MiB(benchmark::State& state) {
  std::vector<unsigned char> src(kBytes, 1), dst(kBytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_memcpy_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

// Two ranks on persistent threads: rank 1 mirrors rank 0's calls, which the
// benchmark loop drives; the per-iteration count is handed over through the
// communicator itself (a broadcast) so both ranks run the same calls.
void local_all_reduce(benchmark::State& state, size_t count, const char* device = "CPU") {
  std::shared_ptr<svod::Device> on;
  try {
    on = svod::open_device(device);
  } catch (const svod::Error& e) {
    state.SkipWithError(e.what());
    return;
  }
  auto comms = svod::create_local_communicators(2);
  auto cpu = svod::open_device("CPU");
  std::vector<svod::Buffer> buffers{on->allocate(svod::DType::F32, count), on->allocate(svod::DType::F32, count)};
  svod::Buffer go = cpu->allocate(svod::DType::I32, 1), go1 = cpu->allocate(svod::DType::I32, 1);
  std::thread peer([&] {
    for (;;) {
      comms[1]->broadcast(go1, 0);
      if (go1.span<int32_t>()[0] == 0) return;
      comms[1]->all_reduce(buffers[1], svod::ReduceOp::Sum);
    }
  });
  go.span<int32_t>()[0] = 1;
  for (auto _ : state) {
    comms[0]->broadcast(go, 0);
    comms[0]->all_reduce(buffers[0], svod::ReduceOp::Sum);
  }
  go.span<int32_t>()[0] = 0;
  comms[0]->broadcast(go, 0);
  peer.join();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * count * sizeof(float)));
}

void BM_local_all_reduce_64MiB_2ranks(benchmark::State& state) { local_all_reduce(state, kBytes / sizeof(float)); }
BENCHMARK(BM_local_all_reduce_64MiB_2ranks)->Unit(benchmark::kMillisecond)->UseRealTime();

// Each rank's buffer in OpenCL memory (PoCL here): the transport runs on host
// copies, which Communicator::call stages part by part through the device's
// queue so that the copies overlap the transport.
void BM_local_all_reduce_64MiB_2ranks_opencl(benchmark::State& state) {
  local_all_reduce(state, kBytes / sizeof(float), "CL:0");
}
BENCHMARK(BM_local_all_reduce_64MiB_2ranks_opencl)->Unit(benchmark::kMillisecond)->UseRealTime();

// Includes the broadcast that keeps the peer in step: about one more
// rendezvous.
void BM_local_all_reduce_8B_2ranks(benchmark::State& state) { local_all_reduce(state, 2); }
BENCHMARK(BM_local_all_reduce_8B_2ranks)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One rank (svod.comm.world() without a launcher): the cost of the call
// itself, beside which bench/python_comm.py puts the Python call's.
void BM_local_all_reduce_4B_1rank(benchmark::State& state) {
  const auto comm = std::move(svod::create_local_communicators(1).front());
  svod::Buffer x = svod::open_device("CPU")->allocate(svod::DType::F32, 1);
  for (auto _ : state) comm->all_reduce(x, svod::ReduceOp::Sum);
}
BENCHMARK(BM_local_all_reduce_4B_1rank)->Unit(benchmark::kNanosecond);

}  // namespace
