// comm_mpi_bench: svod's mpi all_reduce against MPI_Allreduce of the same
// buffer in the same run, under mpirun:
//   mpirun --oversubscribe -np 2 build/release/bench/comm_mpi_bench
// 64 MiB f32 (bandwidth: buffer bytes / time) and 8 bytes (latency). The two
// are interleaved call by call so that both see the same machine load; rank 0
// prints the medians.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "svod/comm/communicator.h"
#include "svod/device/device.h"
#include "svod/registry/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of svod's and MPI's all_reduce, `batch` calls per sample.
void measure(svod::Communicator& comm, size_t count, int samples, int batch, double& svod_s, double& mpi_s) {
  svod::Buffer buffer = svod::open_device("CPU")->allocate(svod::DType::F32, count);
  std::vector<float> raw(count, 0.0f);
  std::vector<double> ours, theirs;
  for (int s = 0; s < samples + 1; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    for (int i = 0; i < batch; ++i) comm.all_reduce(buffer, svod::ReduceOp::Sum);
    auto t1 = Clock::now();
    MPI_Barrier(MPI_COMM_WORLD);
    auto t2 = Clock::now();
    for (int i = 0; i < batch; ++i)
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    auto t3 = Clock::now();
    if (s == 0) continue;  // warm-up: first touches, connection set-up
    ours.push_back(std::chrono::duration<double>(t1 - t0).count() / batch);
    theirs.push_back(std::chrono::duration<double>(t3 - t2).count() / batch);
  }
  svod_s = median(ours);
  mpi_s = median(theirs);
}

}  // namespace

int main() {
  svod::Communicator& comm = svod::world_communicator("mpi");
  const size_t big = (size_t{64} << 20) / sizeof(float);
  double svod_big = 0, mpi_big = 0, svod_small = 0, mpi_small = 0;
  measure(comm, big, 15, 1, svod_big, mpi_big);
  measure(comm, 2, 21, 1000, svod_small, mpi_small);
  if (comm.rank() == 0) {
    const double gib = static_cast<double>(big * sizeof(float)) / (1 << 30);
    std::printf("ranks %d\n", comm.size());
    std::printf("all_reduce 64 MiB f32: svod %.2f ms (%.2f GiB/s), MPI_Allreduce %.2f ms (%.2f GiB/s), ratio %.2f\n",
                svod_big * 1e3, gib / svod_big, mpi_big * 1e3, gib / mpi_big, mpi_big / svod_big);
    std::printf("all_reduce 8 B: svod %.2f us, MPI_Allreduce %.2f us\n", svod_small * 1e6, mpi_small * 1e6);
  }
  return 0;
}
