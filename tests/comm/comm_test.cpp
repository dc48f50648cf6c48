// The local communicator (ranks as threads) on 1, 2 and 4 ranks, the rank-order
// reduction, and the failure paths: mismatches, a failed rank, a missing rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

#include "svod/base/dtype.h"
#include "svod/comm/communicator.h"
#include "svod/comm/mpi_plugin.h"
#include "svod/comm/reduce.h"
#include "svod/device/device.h"
#include "svod/registry/registry.h"
#include "tests/support/comm_checks.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using namespace std::chrono_literals;

CommOptions with_timeout(std::chrono::milliseconds timeout) {
  CommOptions options;
  options.timeout = timeout;
  return options;
}

// The reduction into one output.
void reduce_into(DType dtype, ReduceOp op, std::span<const void* const> inputs, void* out, size_t count) {
  void* const outputs[] = {out};
  detail::reduce_in_rank_order(dtype, op, inputs, outputs, count);
}

TEST(ChunkRange, CoversEveryElementOnceInRankOrder) {
  for (size_t count : {0, 1, 3, 4, 1001}) {
    for (int ranks : {1, 2, 3, 4}) {
      size_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const detail::ChunkRange chunk = detail::chunk_range(count, ranks, r);
        EXPECT_EQ(chunk.offset, next);
        EXPECT_LE(chunk.count, count / ranks + 1);
        next += chunk.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// The combination is left to right in rank order: (1e8 + 1) - 1e8 is 0 in
// f32 (1e8 + 1 rounds to 1e8), while (1e8 - 1e8) + 1 is 1.
TEST(ReduceInRankOrder, CombinesLeftToRight) {
  const float a[] = {1e8f}, b[] = {1.0f}, c[] = {-1e8f};
  float out = -1;
  const void* inputs[] = {a, b, c};
  reduce_into(DType::F32, ReduceOp::Sum, inputs, &out, 1);
  EXPECT_EQ(out, 0.0f);
  const void* reordered[] = {a, c, b};
  reduce_into(DType::F32, ReduceOp::Sum, reordered, &out, 1);
  EXPECT_EQ(out, 1.0f);
}

// 2048 + 1 + 1 in f16 arithmetic stays 2048 (2049 rounds to even); combined in
// f32 and rounded once it is 2050.
TEST(ReduceInRankOrder, HalfPrecisionAccumulatesInF32) {
  const uint16_t big[] = {float_to_f16(2048.0f)}, one[] = {float_to_f16(1.0f)};
  uint16_t out = 0;
  const void* inputs[] = {big, one, one};
  reduce_into(DType::F16, ReduceOp::Sum, inputs, &out, 1);
  EXPECT_EQ(f16_to_float(out), 2050.0f);
  const uint16_t bbig[] = {float_to_bf16(256.0f)}, bone[] = {float_to_bf16(1.0f)};
  const void* binputs[] = {bbig, bone, bone};
  reduce_into(DType::BF16, ReduceOp::Sum, binputs, &out, 1);
  EXPECT_EQ(bf16_to_float(out), 258.0f);
}

TEST(ReduceInRankOrder, IntegersWrapBoolsAreLogicalNanWins) {
  const int8_t a[] = {100, -128}, b[] = {100, -1};
  int8_t out8[2];
  const void* ints[] = {a, b};
  reduce_into(DType::I8, ReduceOp::Sum, ints, out8, 2);
  EXPECT_EQ(out8[0], -56);
  EXPECT_EQ(out8[1], 127);
  const uint16_t u[] = {300}, v[] = {300};
  uint16_t out16 = 0;
  const void* shorts[] = {u, v};
  reduce_into(DType::U16, ReduceOp::Prod, shorts, &out16, 1);
  EXPECT_EQ(out16, static_cast<uint16_t>(90000));

  const uint8_t t[] = {2, 0}, f[] = {0, 0};
  uint8_t bools[2];
  const void* logical[] = {t, f};
  reduce_into(DType::Bool, ReduceOp::Sum, logical, bools, 2);
  EXPECT_EQ(bools[0], 1);
  EXPECT_EQ(bools[1], 0);
  reduce_into(DType::Bool, ReduceOp::Min, logical, bools, 2);
  EXPECT_EQ(bools[0], 0);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float x[] = {1.0f, nan}, y[] = {nan, 2.0f};
  float out[2];
  const void* floats[] = {x, y};
  reduce_into(DType::F32, ReduceOp::Max, floats, out, 2);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

// The local transport writes each chunk's result straight into every rank's
// buffer, the inputs themselves: blocks past the first must still see the
// original inputs.
TEST(ReduceInRankOrder, WritesEveryOutputEvenWhenTheyAreTheInputs) {
  std::vector<double> a(5000), b(5000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i), b[i] = 0.5;
  const void* inputs[] = {a.data(), b.data()};
  void* const outputs[] = {a.data(), b.data()};
  detail::reduce_in_rank_order(DType::F64, ReduceOp::Sum, inputs, outputs, a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], static_cast<double>(i) + 0.5) << i;
    ASSERT_EQ(b[i], a[i]) << i;
  }
}

class LocalRanks : public ::testing::TestWithParam<int> {};

TEST_P(LocalRanks, AllReduceIsExactForEveryDTypeAndOp) {
  std::atomic<int> checked{0};
  run_local_ranks(GetParam(), [&](Communicator& comm) {
    EXPECT_EQ(comm.transport(), "local");
    checked += test::check_all_reduce_exact(comm);
  });
  EXPECT_EQ(checked.load(), GetParam() * 13 * 4 * 4);
}

TEST_P(LocalRanks, AllReduceIsBitwiseTheSameOnEveryRankAndRun) {
  for (int run = 0; run < 3; ++run)
    run_local_ranks(GetParam(), [&](Communicator& comm) {
      test::check_all_reduce_bitwise(comm, 7);
      test::check_all_reduce_bitwise(comm, 20011);
    });
}

TEST_P(LocalRanks, MovesData) {
  run_local_ranks(GetParam(), [&](Communicator& comm) { test::check_movement(comm); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalRanks, ::testing::Values(1, 2, 4));

TEST(LocalCommunicator, MismatchesFailOnEveryRank) {
  for (int ranks : {2, 4}) {
    std::atomic<int> ranks_done{0};
    run_local_ranks(ranks, [&](Communicator& comm) {
      test::check_mismatches(comm);
      ++ranks_done;
    });
    EXPECT_EQ(ranks_done.load(), ranks);
  }
}

TEST(LocalCommunicator, SendRecvMismatchFailsBothSides) {
  std::atomic<int> failures{0};
  run_local_ranks(2, [&](Communicator& comm) {
    Buffer buffer = open_device("CPU")->allocate(DType::F32, comm.rank() == 0 ? 4 : 5);
    Error error = test::expect_error([&] {
      if (comm.rank() == 0)
        comm.send(buffer, 1, 3);
      else
        comm.recv(buffer, 0, 3);
    });
    EXPECT_EQ(error.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(error.what()).find("local rank 0 sent send/recv(f32 x 4, tag 3) to rank 1, which expected"),
              std::string::npos)
        << error.what();
    ++failures;
  });
  EXPECT_EQ(failures.load(), 2);
}

TEST(LocalCommunicator, PointToPointArgumentsAreChecked) {
  auto comms = create_local_communicators(2);
  Buffer buffer = open_device("CPU")->allocate(DType::F32, 4);
  EXPECT_EQ(test::expect_error([&] { comms[0]->send(buffer, 0); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(test::expect_error([&] { comms[0]->recv(buffer, 2); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(test::expect_error([&] { comms[0]->send(buffer, 1, -1); }).kind(), ErrorKind::Validation);
  // A collective with a bad argument still meets the other ranks (so that
  // they fail too): alone in its group, it fails at once.
  auto alone = create_local_communicators(1);
  EXPECT_EQ(test::expect_error([&] { alone[0]->all_reduce(Buffer(), ReduceOp::Sum); }).kind(), ErrorKind::Validation);
}

// A rank whose body throws is aborted; the others fail naming it, well before
// the (long) timeout, and the first failure is what run_local_ranks rethrows.
TEST(LocalCommunicator, FailedRankFailsTheOthers) {
  std::atomic<int> named{0};
  Error error = test::expect_error([&] {
    run_local_ranks(4, [&](Communicator& comm) {
      if (comm.rank() == 2) throw Error(ErrorKind::Io, "rank 2 could not read its shard");
      Buffer buffer = open_device("CPU")->allocate(DType::F32, 10000);
      try {
        comm.all_reduce(buffer, ReduceOp::Sum);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Execution &&
            std::string(e.what()).find("because rank 2 failed: rank 2 could not read its shard") != std::string::npos)
          ++named;
        throw;
      }
    }, with_timeout(600s));
  });
  EXPECT_EQ(error.kind(), ErrorKind::Io);
  EXPECT_EQ(named.load(), 3);
}

TEST(LocalCommunicator, MissingRankTimesOutNamingIt) {
  std::atomic<int> timeouts{0};
  auto comms = create_local_communicators(3, with_timeout(200ms));
  // Rank 2 never arrives; ranks 0 and 1 wait for it.
  std::thread one([&] {
    Error e = test::expect_error([&] { comms[1]->barrier(); });
    if (e.kind() == ErrorKind::Timeout && std::string(e.what()).find("waiting for rank(s) 2") != std::string::npos)
      ++timeouts;
  });
  Error e = test::expect_error([&] { comms[0]->barrier(); });
  one.join();
  // Whichever saw the timeout first, both report it naming rank 2.
  EXPECT_EQ(timeouts.load(), 1);
  EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
  EXPECT_NE(std::string(e.what()).find("waiting for rank(s) 2"), std::string::npos) << e.what();
  // The communicator is broken afterwards.
  Error again = test::expect_error([&] { comms[0]->barrier(); });
  EXPECT_EQ(again.kind(), ErrorKind::Execution);
  EXPECT_NE(std::string(again.what()).find("unusable after an earlier failure"), std::string::npos) << again.what();
}

// run_local_ranks: a rank whose body returned cannot join a call any more;
// the ranks waiting for it fail at once naming it, in collectives and in a
// receive from it (issue 35). A rank that calls in again is back.
TEST(LocalCommunicator, ARankThatFinishedFailsTheCallsWaitingForItAtOnce) {
  for (const bool p2p : {false, true}) {
    std::string message;
    ErrorKind kind = ErrorKind::Validation;
    const auto start = std::chrono::steady_clock::now();
    run_local_ranks(
        3,
        [&](Communicator& comm) {
          if (comm.rank() == 2) return;
          Buffer b = open_device("CPU")->allocate(DType::F32, 4);
          try {
            if (!p2p) comm.all_reduce(b, ReduceOp::Sum);
            else if (comm.rank() == 0) comm.recv(b, 2);
            else return;
          } catch (const Error& e) {
            if (comm.rank() == 0) {
              kind = e.kind();
              message = e.what();
            }
          }
        },
        with_timeout(60s));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
    EXPECT_EQ(kind, ErrorKind::Execution) << message;
    EXPECT_NE(message.find("rank(s) 2 finished their work without joining it"), std::string::npos) << message;
  }
  // A group the caller keeps: the ranks that finished are back in its next run.
  auto comms = create_local_communicators(2, with_timeout(60s));
  std::vector<Communicator*> group = {comms[0].get(), comms[1].get()};
  for (int run = 0; run < 2; ++run) {
    run_local_ranks(group, [&](Communicator& comm) {
      Buffer b = open_device("CPU")->allocate(DType::F32, 4);
      comm.all_reduce(b, ReduceOp::Sum);
    });
  }
}

TEST(LocalCommunicator, TimeoutsNameEachMissingRankOnce) {
  EXPECT_EQ(detail::rank_list({3, 1, 1, 2, 3}), "1, 2, 3");
  EXPECT_EQ(detail::rank_list({1, 1}), "1");  // an MPI peer's unfinished receive and send
  EXPECT_EQ(detail::rank_list({}), "");
  auto comms = create_local_communicators(4, with_timeout(200ms));
  // Ranks 1 and 3 never arrive.
  std::string other;
  std::thread two([&] { other = test::expect_error([&] { comms[2]->barrier(); }).what(); });
  Error e = test::expect_error([&] { comms[0]->barrier(); });
  two.join();
  EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
  for (const std::string& message : {std::string(e.what()), other})
    EXPECT_NE(message.find("waiting for rank(s) 1, 3"), std::string::npos) << message;
}

TEST(LocalCommunicator, GroupsHaveAtMostMaxLocalRanks) {
  Error e = test::expect_error([] { create_local_communicators(kMaxLocalRanks + 1); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("1025 local ranks: a local group has at most 1024"), std::string::npos)
      << e.what();
  std::atomic<int> ran{0};
  e = test::expect_error([&] { run_local_ranks(100000, [&](Communicator&) { ++ran; }); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation) << e.what();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(create_local_communicators(kMaxLocalRanks).size(), size_t(kMaxLocalRanks));
}

// A group the caller keeps runs several times (what holds a communicator,
// svod.comm.run_local's Python objects, outlives each run); no group is an
// error.
TEST(LocalCommunicator, RunsOnAGroupTheCallerKeeps) {
  auto comms = create_local_communicators(3);
  std::vector<Communicator*> group;
  for (const auto& comm : comms) group.push_back(comm.get());
  auto cpu = open_device("CPU");
  std::vector<Buffer> counters;
  for (int r = 0; r < 3; ++r) counters.push_back(cpu->allocate(DType::I32, 1));
  for (int run = 0; run < 2; ++run) {
    run_local_ranks(group, [&](Communicator& comm) {
      const Buffer& x = counters[static_cast<size_t>(comm.rank())];
      x.span<int32_t>()[0] = comm.rank() + 1;
      comm.all_reduce(x, ReduceOp::Sum);
    });
    for (const Buffer& x : counters) EXPECT_EQ(x.span<int32_t>()[0], 6);
  }
  Error e = test::expect_error([] { run_local_ranks(std::span<Communicator* const>{}, [](Communicator&) {}); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("no communicators"), std::string::npos) << e.what();
}

// Runs in a child process: 1024 local ranks with too little address space
// for their stacks. Exits 0 when run_local_ranks threw Error(Execution) and
// the ranks that did start failed at once naming the refusal.
[[noreturn]] void run_ranks_without_room_for_threads() {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t in_use = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
  const rlimit limit{in_use + (rlim_t{256} << 20), in_use + (rlim_t{256} << 20)};
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(2);
  std::atomic<int> named{0};
  const auto start = std::chrono::steady_clock::now();
  try {
    run_local_ranks(
        kMaxLocalRanks,
        [&](Communicator& comm) {
          try {
            comm.barrier();
          } catch (const Error& e) {
            if (e.kind() == ErrorKind::Execution && std::string(e.what()).find("refused a thread") != std::string::npos)
              ++named;
            throw;
          }
        },
        with_timeout(300s));
  } catch (const Error& e) {
    const bool fast = std::chrono::steady_clock::now() - start < 60s;
    std::fprintf(stderr, "%s: %s (%d ranks named it, fast: %d)\n", std::string(to_string(e.kind())).c_str(), e.what(),
                 named.load(), int(fast));
    std::_Exit(e.kind() == ErrorKind::Execution && named.load() > 0 && fast ? 0 : 1);
  }
  std::fprintf(stderr, "all %d threads started\n", kMaxLocalRanks);
  std::_Exit(3);
}

// When the system refuses a thread, run_local_ranks throws Error(Execution),
// and the ranks that did start fail at once naming the missing one instead of
// waiting for it until their timeout. In a child process, so that the limit
// reaches no other test.
TEST(LocalCommunicatorDeathTest, RefusedThreadsBecomeAnErrorAndStopTheStartedRanks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_ranks_without_room_for_threads(), ::testing::ExitedWithCode(0),
              "execution: the system refused a thread for local rank [0-9]+ of 1024: ");
}

// Device buffers are staged through the host.
TEST(LocalCommunicator, StagesOpenClBuffers) {
  std::shared_ptr<Device> device;
  try {
    device = open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  run_local_ranks(2, [&](Communicator& comm) {
    Buffer host = open_device("CPU")->allocate(DType::F32, 3000);
    for (size_t i = 0; i < 3000; ++i) host.span<float>()[i] = static_cast<float>(comm.rank() + i);
    Buffer on_device = device->allocate(DType::F32, 3000);
    device->copy(on_device, host);
    comm.all_reduce(on_device, ReduceOp::Sum);
    Buffer back = open_device("CPU")->allocate(DType::F32, 3000);
    device->copy(back, on_device);
    for (size_t i = 0; i < 3000; ++i) ASSERT_EQ(back.span<float>()[i], static_cast<float>(1 + 2 * i)) << i;
  });
}

// Local ranks are threads of one process, so all on one machine: the local
// rank is the rank, on a group run_local_ranks makes and on one the caller
// keeps.
// Calls of two parts and more (detail::split_call) on host memory, on
// OpenCL memory staged part by part through the device's queue, and mixed:
// even ranks on the host, odd ranks on the device.
TEST(LocalCommunicator, SplitCallsOnHostDeviceAndMixedMemory) {
  std::shared_ptr<Device> cl;
  try {
    cl = open_device("CL:0");
  } catch (const Error& e) {
    std::printf("no OpenCL device (%s): host memory only\n", e.what());
  }
  const CommOptions options{.timeout = std::chrono::seconds(60), .part_bytes = 64 << 10};
  for (int ranks : {2, 3}) {
    run_local_ranks(ranks, [&](Communicator& comm) { test::check_split_calls(comm, nullptr); }, options);
    if (!cl) continue;
    run_local_ranks(ranks, [&](Communicator& comm) { test::check_split_calls(comm, cl.get()); }, options);
    run_local_ranks(
        ranks, [&](Communicator& comm) { test::check_split_calls(comm, comm.rank() % 2 == 1 ? cl.get() : nullptr); },
        options);
  }
  // The default parts (16 MiB): one all_reduce of 40 MiB staged on every rank.
  if (cl) run_local_ranks(2, [&](Communicator& comm) { test::check_split_calls(comm, cl.get()); });
}

TEST(SplitCall, PartsOfOneOperandCallsFromTheDescriptorAlone) {
  using detail::CallDesc;
  constexpr size_t kPart = 4 << 20;
  const size_t per_part = kPart / sizeof(float);
  const CallDesc big{.seq = 4, .count = per_part * 3 + 5, .kind = CollectiveKind::AllReduce, .dtype = DType::F32};
  const detail::CallParts parts = detail::split_call(big, kPart);
  ASSERT_EQ(parts.size(), 3u);
  uint64_t next = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const CallDesc part = parts[k];
    EXPECT_EQ(part.seq, 4u);  // one call: one number
    EXPECT_EQ(part.whole, big.count);
    EXPECT_EQ(part.offset, next);
    next += part.count;
  }
  EXPECT_EQ(next, big.count);
  EXPECT_EQ(parts[2].count, per_part + 5);  // the last part takes the rest
  EXPECT_EQ(detail::describe(parts[1]),
            fmt::format("all_reduce(f32 x {}, sum), the part of elements {} to {}", big.count, per_part,
                        2 * per_part - 1));
  // Not split: under two parts, two-operand kinds, native or invalid calls.
  for (CallDesc whole : {CallDesc{.count = per_part * 2 - 1, .kind = CollectiveKind::AllReduce, .dtype = DType::F32},
                         CallDesc{.count = per_part * 4, .kind = CollectiveKind::AllGather, .dtype = DType::F32},
                         CallDesc{.count = per_part * 4, .kind = CollectiveKind::ReduceScatter, .dtype = DType::F32},
                         CallDesc{.count = per_part * 4, .kind = CollectiveKind::Barrier},
                         CallDesc{.count = per_part * 4, .kind = CollectiveKind::Broadcast, .native = true},
                         CallDesc{.count = per_part * 4, .kind = CollectiveKind::Send, .invalid = true}}) {
    const detail::CallParts one = detail::split_call(whole, kPart);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0], whole);
  }
  // Counted in bytes: 4 MiB parts of u8 and of f64; parts of at least one element.
  EXPECT_EQ(detail::split_call({.count = kPart * 2, .kind = CollectiveKind::Send}, kPart).size(), 2u);
  EXPECT_EQ(detail::split_call({.count = per_part, .kind = CollectiveKind::Broadcast, .dtype = DType::F64}, kPart).size(),
            2u);
  EXPECT_EQ(detail::split_call({.count = 3, .kind = CollectiveKind::AllReduce, .dtype = DType::F64}, 1).size(), 3u);
}

TEST(LocalCommunicator, LocalRankIsTheRank) {
  std::vector<int> local_ranks(4, -1), local_sizes(4, -1);
  run_local_ranks(4, [&](Communicator& comm) {
    local_ranks[static_cast<size_t>(comm.rank())] = comm.local_rank();
    local_sizes[static_cast<size_t>(comm.rank())] = comm.local_size();
  });
  EXPECT_EQ(local_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(local_sizes, (std::vector<int>{4, 4, 4, 4}));
  auto comms = create_local_communicators(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(comms[static_cast<size_t>(r)]->local_rank(), r);
    EXPECT_EQ(comms[static_cast<size_t>(r)]->local_size(), 3);
  }
}

TEST(WorldCommunicator, IsOneLocalRankWithoutALauncher) {
  if (launched_by_mpi()) GTEST_SKIP() << "started by an MPI launcher";
  Communicator& world = world_communicator();
  EXPECT_EQ(world.transport(), "local");
  EXPECT_EQ(world.rank(), 0);
  EXPECT_EQ(world.size(), 1);
  EXPECT_EQ(world.local_rank(), 0);
  EXPECT_EQ(world.local_size(), 1);
  Buffer buffer = open_device("CPU")->allocate(DType::I32, 3);
  buffer.span<int32_t>()[1] = 41;
  world.all_reduce(buffer, ReduceOp::Max);
  EXPECT_EQ(buffer.span<int32_t>()[1], 41);
  EXPECT_EQ(test::expect_error([] { world_communicator("nccl"); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(test::expect_error([] { world_communicator("mpi"); }).kind(), ErrorKind::Validation);
}

TEST(MpiPlugin, MissingPluginIsDeviceUnavailableNamingIt) {
  test::ScopedEnv env("SVOD_COMM_MPI_PLUGIN", "/nonexistent/libsvod_comm_mpi.so");
  Error error = test::expect_error([] { open_mpi_communicator(CommOptions{}); });
  EXPECT_EQ(error.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(error.what()).find("/nonexistent/libsvod_comm_mpi.so"), std::string::npos) << error.what();
}

TEST(CommOptions, TimeoutComesFromTheEnvironment) {
  {
    test::ScopedEnv env("SVOD_COMM_TIMEOUT", "5");
    EXPECT_EQ(default_comm_options().timeout, 5s);
  }
  {
    test::ScopedEnv env("SVOD_COMM_TIMEOUT", "0.25");  // seconds as for SVOD_OP_TIMEOUT: fractions too
    EXPECT_EQ(default_comm_options().timeout, 250ms);
  }
  for (const char* bad : {"0", "9223372036854775807"}) {  // the largest used to time out "after -1000 ms"
    test::ScopedEnv env("SVOD_COMM_TIMEOUT", bad);
    const Error e = test::expect_error([] { default_comm_options(); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation) << bad;
    EXPECT_EQ(std::string(e.what()),
              fmt::format("SVOD_COMM_TIMEOUT=\"{}\": expected a positive number of seconds, at most 1000000000", bad));
  }
  EXPECT_EQ(test::expect_error([] { parse_reduce_op("avg"); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(parse_reduce_op("prod"), ReduceOp::Prod);
}

TEST(CommOptions, PartBytesComeFromTheEnvironment) {
  EXPECT_EQ(default_comm_options().part_bytes, size_t{16} << 20);
  {
    test::ScopedEnv env("SVOD_COMM_PART_BYTES", "65536");
    EXPECT_EQ(default_comm_options().part_bytes, 65536u);
  }
  for (const char* bad : {"0", "-4", "lots"}) {
    test::ScopedEnv env("SVOD_COMM_PART_BYTES", bad);
    EXPECT_EQ(test::expect_error([] { default_comm_options(); }).kind(), ErrorKind::Validation) << bad;
  }
}

}  // namespace
}  // namespace svod
