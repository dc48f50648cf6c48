// The nccl communicator on CUDA memory: one rank on CUDA:0, and two ranks
// (threads of this process, one GPU each) when there are two GPUs. Skipped
// without a CUDA device or without NCCL; run by scripts/gpu-check.sh. What
// needs no GPU is in tests/comm/nccl_test.cpp.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cuda/cuda_device.h"
#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/comm/nccl_communicator.h"
#include "svod/registry/registry.h"
#include "tests/support/comm_checks.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;

std::shared_ptr<Device> cuda_or_null(int index) {
  try {
    return open_device(fmt::format("CUDA:{}", index));
  } catch (const Error&) {
    return nullptr;
  }
}

template <typename T>
Buffer upload(Device& gpu, DType dtype, const std::vector<T>& values) {
  Buffer host = cpu_device()->allocate(dtype, values.size());
  std::copy(values.begin(), values.end(), host.span<T>().begin());
  Buffer device = gpu.allocate(dtype, values.size());
  gpu.copy(device, host);
  return device;
}

template <typename T>
std::vector<T> download(Device& gpu, const Buffer& device) {
  Buffer host = cpu_device()->allocate(device.dtype(), device.count());
  gpu.copy(host, device);
  auto s = host.span<T>();
  return {s.begin(), s.end()};
}

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = cuda_or_null(0);
    if (!gpu_) GTEST_SKIP() << "no CUDA device";
    try {
      detail::nccl_api();
    } catch (const Error& e) {
      GTEST_SKIP() << "NCCL is not installed: " << e.what();
    }
  }
  std::shared_ptr<Device> gpu_;
};

TEST_F(NcclGpu, OneRankDoesEveryCollectiveOnDeviceMemory) {
  auto host = create_local_communicators(1);
  std::unique_ptr<Communicator> comm = open_nccl_communicator(*host[0], gpu_);
  EXPECT_EQ(comm->transport(), "nccl");
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  Device& gpu = *gpu_;

  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  Buffer data = upload(gpu, DType::F32, values);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
    comm->all_reduce(data, op);
    EXPECT_EQ(download<float>(gpu, data), values) << to_string(op);
  }
  Buffer flags = upload<uint8_t>(gpu, DType::Bool, {0, 1, 1, 0});
  comm->all_reduce(flags, ReduceOp::Sum);
  EXPECT_EQ(download<uint8_t>(gpu, flags), (std::vector<uint8_t>{0, 1, 1, 0}));

  Buffer gathered = gpu.allocate(DType::F32, values.size());
  comm->all_gather(data, gathered);
  EXPECT_EQ(download<float>(gpu, gathered), values);
  Buffer scattered = gpu.allocate(DType::F32, values.size());
  comm->reduce_scatter(data, scattered, ReduceOp::Sum);
  EXPECT_EQ(download<float>(gpu, scattered), values);
  comm->broadcast(data, 0);
  EXPECT_EQ(download<float>(gpu, data), values);
  comm->barrier();

  // Views are passed at their offset.
  Buffer big = upload<int64_t>(gpu, DType::I64, {1, 2, 3, 4, 5, 6});
  Buffer tail = gpu.allocate(DType::I64, 3);
  comm->all_gather(big.view(3, 3), tail);
  EXPECT_EQ(download<int64_t>(gpu, tail), (std::vector<int64_t>{4, 5, 6}));

  // What NCCL lacks (i16) and host buffers go through the host communicator.
  Buffer shorts = upload<int16_t>(gpu, DType::I16, {-3, 4});
  comm->all_reduce(shorts, ReduceOp::Sum);
  EXPECT_EQ(download<int16_t>(gpu, shorts), (std::vector<int16_t>{-3, 4}));
  Buffer on_host = cpu_device()->allocate(DType::F32, 2);
  on_host.span<float>()[1] = 5.0f;
  comm->all_reduce(on_host, ReduceOp::Max);
  EXPECT_EQ(on_host.span<float>()[1], 5.0f);
  // Bad arguments are still Validation errors, and leave it usable.
  EXPECT_EQ(expect_error([&] { comm->broadcast(data, 3); }).kind(), ErrorKind::Validation);
  comm->all_reduce(data, ReduceOp::Sum);
  EXPECT_EQ(download<float>(gpu, data), values);
}

TEST_F(NcclGpu, TwoRanksOnTwoGpus) {
  std::shared_ptr<Device> second = cuda_or_null(1);
  if (!second) GTEST_SKIP() << "one CUDA device only";
  const std::shared_ptr<Device> gpus[] = {gpu_, second};
  run_local_ranks(2, [&](Communicator& host) {
    const int r = host.rank();
    Device& gpu = *gpus[r];
    std::unique_ptr<Communicator> comm = open_nccl_communicator(host, gpus[r]);
    EXPECT_EQ(comm->rank(), r);
    EXPECT_EQ(comm->size(), 2);

    // Small integers: exact in any reduction order.
    std::vector<float> mine(1000);
    std::iota(mine.begin(), mine.end(), static_cast<float>(r));
    Buffer data = upload(gpu, DType::F32, mine);
    comm->all_reduce(data, ReduceOp::Sum);
    const std::vector<float> sum = download<float>(gpu, data);
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], static_cast<float>(2 * i + 1)) << i;

    Buffer flags = upload<uint8_t>(gpu, DType::Bool, {static_cast<uint8_t>(r), 1, 0});
    comm->all_reduce(flags, ReduceOp::Sum);  // or
    EXPECT_EQ(download<uint8_t>(gpu, flags), (std::vector<uint8_t>{1, 1, 0}));

    Buffer part = upload<int32_t>(gpu, DType::I32, {10 * r, 10 * r + 1});
    Buffer whole = gpu.allocate(DType::I32, 4);
    comm->all_gather(part, whole);
    EXPECT_EQ(download<int32_t>(gpu, whole), (std::vector<int32_t>{0, 1, 10, 11}));

    Buffer src = upload<int32_t>(gpu, DType::I32, {1 + r, 2 + r, 3 + r, 4 + r});
    Buffer dst = gpu.allocate(DType::I32, 2);
    comm->reduce_scatter(src, dst, ReduceOp::Max);
    EXPECT_EQ(download<int32_t>(gpu, dst), r == 0 ? (std::vector<int32_t>{2, 3}) : (std::vector<int32_t>{4, 5}));

    Buffer root = upload<double>(gpu, DType::F64, {r + 0.5, -1.0});
    comm->broadcast(root, 1);
    EXPECT_EQ(download<double>(gpu, root), (std::vector<double>{1.5, -1.0}));

    Buffer message = r == 0 ? upload<int64_t>(gpu, DType::I64, {7, 8, 9}) : gpu.allocate(DType::I64, 3);
    if (r == 0)
      comm->send(message, 1, 4);
    else
      comm->recv(message, 0, 4);
    EXPECT_EQ(download<int64_t>(gpu, message), (std::vector<int64_t>{7, 8, 9}));

    // A mismatch is caught before NCCL runs, on both ranks, and the
    // communicator stays usable.
    Buffer odd = gpu.allocate(DType::F32, r == 0 ? 4 : 5);
    EXPECT_EQ(expect_error([&] { comm->all_reduce(odd, ReduceOp::Sum); }).kind(), ErrorKind::Validation);
    // Device memory on one rank, host memory on the other.
    Buffer mixed = r == 0 ? gpu.allocate(DType::F32, 4) : cpu_device()->allocate(DType::F32, 4);
    EXPECT_EQ(expect_error([&] { comm->all_reduce(mixed, ReduceOp::Sum); }).kind(), ErrorKind::Validation);
    Buffer wrong = gpu.allocate(r == 0 ? DType::I64 : DType::F64, 3);
    const Error p2p = expect_error([&] {
      if (r == 0)
        comm->send(wrong, 1, 5);
      else
        comm->recv(wrong, 0, 5);
    });
    EXPECT_EQ(p2p.kind(), ErrorKind::Validation) << p2p.what();
    comm->barrier();

    // Host buffers on the same communicator: the host communicator's checks.
    test::check_movement(*comm);
    test::check_mismatches(*comm);
  });
}

}  // namespace
}  // namespace svod
