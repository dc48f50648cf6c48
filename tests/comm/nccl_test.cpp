// The nccl communicator's parts that need no GPU: loading NCCL, its version,
// the unique-id exchange over a local host communicator, the dtype and op
// mapping, opening without a CUDA device, and the Communicator hook through
// which a transport takes device buffers without staging. The collectives on
// CUDA memory are in tests/cuda/nccl_gpu_test.cpp (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/comm/nccl_communicator.h"
#include "svod/registry/registry.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::cuda_device_present;
using test::expect_error;
using test::ScopedEnv;

CommOptions short_timeout() {
  CommOptions options;
  options.timeout = std::chrono::seconds(20);
  return options;
}

// ---- the library ------------------------------------------------------------------

TEST(NcclLibrary, OpensAndReportsVersion2) {
  SVOD_SKIP_WITHOUT(detail::nccl_api(), "NCCL");
  const detail::NcclApi& api = detail::nccl_api();
  EXPECT_FALSE(api.path.empty());
  const std::string version = detail::nccl_version_text(api.version);
  EXPECT_EQ(version.rfind("2.", 0), 0u) << version;
  EXPECT_GE(api.version, 20700) << version;
  // The same table on every call.
  EXPECT_EQ(&detail::nccl_api(), &api);
  EXPECT_NE(detail::nccl_status_text(api, 5).find("ncclInvalidUsage (5): invalid usage"), std::string::npos)
      << detail::nccl_status_text(api, 5);
}

TEST(NcclLibrary, MissingLibraryIsUnavailable) {
  ScopedEnv library("SVOD_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  const Error e = expect_error([] { detail::nccl_api(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  const std::string message = e.what();
  EXPECT_NE(message.find("no NCCL"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/libnccl.so.2"), std::string::npos) << message;
  EXPECT_NE(message.find("SVOD_NCCL_LIBRARY"), std::string::npos) << message;
  // Opening a communicator says the same, on every rank.
  run_local_ranks(2, [](Communicator& host) {
    const Error open = expect_error([&] { open_nccl_communicator(host, "CUDA:0", short_timeout()); });
    EXPECT_EQ(open.kind(), ErrorKind::DeviceUnavailable);
    EXPECT_NE(std::string(open.what()).find("no NCCL"), std::string::npos) << open.what();
    EXPECT_NE(std::string(open.what()).find(fmt::format("rank {} of 2", host.rank())), std::string::npos)
        << open.what();
  });
}

TEST(NcclLibrary, ALibraryThatIsNotNcclIsUnavailable) {
  ScopedEnv library("SVOD_NCCL_LIBRARY", "libm.so.6");
  const Error e = expect_error([] { detail::nccl_api(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(e.what()).find("libm.so.6 has no ncclGetVersion"), std::string::npos) << e.what();
}

TEST(NcclLibrary, VersionText) {
  EXPECT_EQ(detail::nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(detail::nccl_version_text(21903), "2.19.3");
  EXPECT_EQ(detail::nccl_version_text(2708), "2.7.8");  // the encoding up to 2.8
}

// ---- dtypes and ops ---------------------------------------------------------------

TEST(NcclMapping, DTypesFollowNcclH) {
  EXPECT_EQ(detail::nccl_data_type(DType::I8), 0);
  EXPECT_EQ(detail::nccl_data_type(DType::U8), 1);
  EXPECT_EQ(detail::nccl_data_type(DType::Bool), 1);
  EXPECT_EQ(detail::nccl_data_type(DType::I32), 2);
  EXPECT_EQ(detail::nccl_data_type(DType::U32), 3);
  EXPECT_EQ(detail::nccl_data_type(DType::I64), 4);
  EXPECT_EQ(detail::nccl_data_type(DType::U64), 5);
  EXPECT_EQ(detail::nccl_data_type(DType::F16), 6);
  EXPECT_EQ(detail::nccl_data_type(DType::F32), 7);
  EXPECT_EQ(detail::nccl_data_type(DType::F64), 8);
  EXPECT_EQ(detail::nccl_data_type(DType::BF16), 9);
  for (DType lacking : {DType::I16, DType::U16}) {
    const Error e = expect_error([&] { detail::nccl_data_type(lacking); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find(to_string(lacking)), std::string::npos) << e.what();
    EXPECT_FALSE(detail::nccl_supports(lacking));
    EXPECT_EQ(expect_error([&] { detail::nccl_reduce_op(lacking, ReduceOp::Sum); }).kind(), ErrorKind::Unsupported);
  }
  int supported = 0;
  for (DType dtype : kAllDTypes) supported += detail::nccl_supports(dtype);
  EXPECT_EQ(supported, 11);
}

TEST(NcclMapping, OpsAndBoolLogic) {
  // ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3.
  EXPECT_EQ(detail::nccl_reduce_op(DType::F32, ReduceOp::Sum), 0);
  EXPECT_EQ(detail::nccl_reduce_op(DType::F32, ReduceOp::Prod), 1);
  EXPECT_EQ(detail::nccl_reduce_op(DType::F32, ReduceOp::Max), 2);
  EXPECT_EQ(detail::nccl_reduce_op(DType::F32, ReduceOp::Min), 3);
  EXPECT_EQ(detail::nccl_reduce_op(DType::U8, ReduceOp::Sum), 0);
  // svod's bool sum is "or" and prod "and": max and min on 0/1 bytes.
  EXPECT_EQ(detail::nccl_reduce_op(DType::Bool, ReduceOp::Sum), 2);
  EXPECT_EQ(detail::nccl_reduce_op(DType::Bool, ReduceOp::Max), 2);
  EXPECT_EQ(detail::nccl_reduce_op(DType::Bool, ReduceOp::Prod), 3);
  EXPECT_EQ(detail::nccl_reduce_op(DType::Bool, ReduceOp::Min), 3);
}

// ---- the unique-id exchange -------------------------------------------------------

detail::NcclUniqueId pattern(uint8_t seed) {
  detail::NcclUniqueId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed + 7 * i);
  return id;
}

TEST(NcclUniqueIdExchange, EveryRankGetsRankZerosId) {
  for (int ranks : {1, 2, 3, 4}) {
    std::mutex mutex;
    std::vector<detail::NcclUniqueId> got(ranks);
    std::atomic<int> made{0};
    run_local_ranks(ranks, [&](Communicator& host) {
      const detail::NcclUniqueId id = detail::exchange_nccl_unique_id(host, [&] {
        ++made;
        return pattern(static_cast<uint8_t>(40 + host.rank()));
      });
      std::lock_guard lock(mutex);
      got[host.rank()] = id;
    });
    EXPECT_EQ(made.load(), 1) << ranks << " ranks";
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(got[r], pattern(40)) << "rank " << r << " of " << ranks;
  }
}

TEST(NcclUniqueIdExchange, WithNcclsOwnId) {
  SVOD_SKIP_WITHOUT(detail::nccl_api(), "NCCL");
  const detail::NcclApi& api = detail::nccl_api();
  std::mutex mutex;
  std::vector<detail::NcclUniqueId> got(3);
  run_local_ranks(3, [&](Communicator& host) {
    const detail::NcclUniqueId id = detail::exchange_nccl_unique_id(host, [&] {
      detail::NcclIdValue value{};
      const int status = api.ncclGetUniqueId(&value);
      if (status != 0) throw Error(ErrorKind::DeviceUnavailable, detail::nccl_status_text(api, status));
      detail::NcclUniqueId out;
      std::memcpy(out.data(), value.internal, out.size());
      return out;
    });
    std::lock_guard lock(mutex);
    got[host.rank()] = id;
  });
  EXPECT_NE(got[0], detail::NcclUniqueId{}) << "ncclGetUniqueId gave an all-zero id";
  EXPECT_EQ(got[1], got[0]);
  EXPECT_EQ(got[2], got[0]);
}

TEST(NcclUniqueIdExchange, RankZerosFailureReachesEveryRank) {
  std::mutex mutex;
  std::vector<std::string> errors(3);
  run_local_ranks(3, [&](Communicator& host) {
    const Error e = expect_error([&] {
      detail::exchange_nccl_unique_id(host, []() -> detail::NcclUniqueId {
        throw Error(ErrorKind::DeviceUnavailable, "ncclGetUniqueId: no network");
      });
    });
    EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
    std::lock_guard lock(mutex);
    errors[host.rank()] = e.what();
  });
  EXPECT_EQ(errors[0], "ncclGetUniqueId: no network");
  for (int r : {1, 2}) EXPECT_NE(errors[r].find("rank 0 could not make the NCCL unique id"), std::string::npos) << errors[r];
}

// ---- opening ----------------------------------------------------------------------

TEST(NcclOpen, WithoutACudaDeviceIsUnavailableOnEveryRank) {
  SVOD_SKIP_WITHOUT(detail::nccl_api(), "NCCL");
  if (cuda_device_present()) GTEST_SKIP() << "this machine has a CUDA device";
  for (int ranks : {1, 2}) {
    run_local_ranks(ranks, [&](Communicator& host) {
      const Error e = expect_error([&] { open_nccl_communicator(host, "CUDA:0", short_timeout()); });
      EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
      const std::string message = e.what();
      EXPECT_NE(message.find(fmt::format("nccl communicator (rank {} of {})", host.rank(), ranks)), std::string::npos)
          << message;
      EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
      // The host communicator is still usable.
      host.barrier();
    });
  }
}

TEST(NcclOpen, ADeviceThatIsNotCudaIsRefused) {
  SVOD_SKIP_WITHOUT(detail::nccl_api(), "NCCL");
  run_local_ranks(2, [&](Communicator& host) {
    const Error e = expect_error([&] { open_nccl_communicator(host, cpu_device(), short_timeout()); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("is not a CUDA device"), std::string::npos) << e.what();
    const Error none = expect_error([&] { open_nccl_communicator(host, std::shared_ptr<Device>{}, short_timeout()); });
    EXPECT_EQ(none.kind(), ErrorKind::Validation);
  });
}

// ---- the hook: a transport that takes some buffers as they are ---------------------

// One rank; takes the buffers whose storage it was told about "natively"
// (their own host address, standing in for a device address) and records
// what run_* got.
class NativeRecorder final : public Communicator {
 public:
  NativeRecorder() : Communicator(0, 1, CommOptions{}) {}
  std::string_view transport() const noexcept override { return "recorder"; }

  std::set<uint64_t> native_storages;
  std::vector<detail::CallDesc> descs;
  std::vector<const void*> pointers;

 protected:
  void* native_address(const Buffer& buffer) const noexcept override {
    return native_storages.count(buffer.storage().id()) ? buffer.data() : nullptr;
  }
  void record(const detail::CallDesc& desc, std::initializer_list<const void*> ptrs) {
    descs.push_back(desc);
    pointers.assign(ptrs);
  }
  void run_barrier(const detail::CallDesc& desc) override { record(desc, {}); }
  void run_all_reduce(const detail::CallDesc& desc, void* data) override { record(desc, {data}); }
  void run_all_gather(const detail::CallDesc& desc, const void* src, void* dst) override { record(desc, {src, dst}); }
  void run_reduce_scatter(const detail::CallDesc& desc, const void* src, void* dst) override {
    record(desc, {src, dst});
  }
  void run_broadcast(const detail::CallDesc& desc, void* data) override { record(desc, {data}); }
  void run_send(const detail::CallDesc& desc, const void* data, int) override { record(desc, {data}); }
  void run_recv(const detail::CallDesc& desc, void* data, int) override { record(desc, {data}); }
  void run_abort(const std::string&) override {}
};

TEST(CommunicatorNativeHook, OperandsTheTransportTakesAreNotStaged) {
  NativeRecorder comm;
  Buffer native = cpu_device()->allocate(DType::F32, 4);
  Buffer native_too = cpu_device()->allocate(DType::F32, 4);
  Buffer plain = cpu_device()->allocate(DType::F32, 4);
  comm.native_storages = {native.storage().id(), native_too.storage().id()};

  comm.all_reduce(native, ReduceOp::Sum);
  ASSERT_EQ(comm.descs.size(), 1u);
  EXPECT_TRUE(comm.descs.back().native);
  EXPECT_EQ(comm.pointers, std::vector<const void*>{native.data()});

  comm.all_reduce(plain, ReduceOp::Sum);
  EXPECT_FALSE(comm.descs.back().native);

  // Every operand must be taken, or none is.
  comm.all_gather(native, native_too);
  EXPECT_TRUE(comm.descs.back().native);
  comm.all_gather(native, plain);
  EXPECT_FALSE(comm.descs.back().native);
  EXPECT_EQ(comm.pointers, (std::vector<const void*>{native.data(), plain.data()}));

  comm.barrier();
  EXPECT_FALSE(comm.descs.back().native);
}

TEST(CommunicatorNativeHook, RanksDisagreeingOnNativeIsAMismatch) {
  detail::CallDesc host{.count = 16, .kind = CollectiveKind::AllReduce, .dtype = DType::F32};
  detail::CallDesc device = host;
  device.native = true;
  EXPECT_EQ(detail::describe(device), "all_reduce(f32 x 16, sum) on device memory");
  const detail::CallDesc descs[] = {host, device};
  const std::optional<std::string> mismatch = detail::find_mismatch(descs);
  ASSERT_TRUE(mismatch);
  EXPECT_NE(mismatch->find("rank 1 called all_reduce(f32 x 16, sum) on device memory"), std::string::npos) << *mismatch;
}

}  // namespace
}  // namespace svod
