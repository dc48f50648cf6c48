// Communicators through the C API (svod_comm_*): every collective on local
// ranks run by threads, plans with collectives loaded on ranks, and the
// errors a C caller can reach — mismatches and arguments one rank gets wrong
// fail every rank at once, naming what and where, instead of a hang.
#include <svod/svod.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "svod/custom/custom_function.h"
#include "svod/package/package.h"
#include "tests/capi/capi_test_support.h"
#include "tests/support/temp_dir.h"

namespace {

using svod::test::TempDir;
using namespace svod::test::capi;

constexpr const char* kCollectivePlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective.json";
constexpr const char* kGatherPlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective4.json";
constexpr const char* kFailedRankPlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective_failed_rank.json";

// Nothing here waits for a peer that never comes: every failure reaches the
// other ranks long before the communicator timeout (60 s).
constexpr auto kWellBeforeTheTimeout = std::chrono::seconds(30);

// Runs body(comm) for every rank of a new local group of `ranks`, each on a
// thread of its own. `comm` is released when the body returns, unless the
// body released it itself (and cleared it). A rank whose body stopped at a
// fatal failure aborts its communicator, so that the other ranks fail
// instead of waiting for it.
void on_local_ranks(int ranks, const std::function<void(Comm& comm)>& body) {
  std::vector<svod_comm*> handles(static_cast<size_t>(ranks));
  ASSERT_OK(svod_comm_create_local(ranks, handles.data()));
  std::vector<std::thread> threads;
  for (svod_comm* handle : handles) {
    threads.emplace_back([&body, handle] {
      Comm comm;
      comm.handle = handle;
      body(comm);
      if (::testing::Test::HasFatalFailure() && comm.handle)
        svod_status_free(svod_comm_abort(comm.handle, "a check failed on this rank"));
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// A buffer handle over the caller's `values`.
template <typename T>
void wrap(Buffer& buffer, std::vector<T>& values, const char* dtype) {
  ASSERT_OK(svod_buffer_wrap_host(values.data(), dtype, values.size(), &buffer.handle));
}

TEST(CApiComm, EveryCollectiveOnLocalRanks) {
  constexpr int kRanks = 4;
  on_local_ranks(kRanks, [&](Comm& comm) {
    const int rank = svod_comm_rank(comm.handle);
    EXPECT_EQ(svod_comm_size(comm.handle), kRanks);
    EXPECT_EQ(svod_comm_local_rank(comm.handle), rank);  // local ranks share this machine
    EXPECT_EQ(svod_comm_local_size(comm.handle), kRanks);
    EXPECT_STREQ(svod_comm_transport(comm.handle), "local");
    EXPECT_STREQ(svod_comm_backend(comm.handle), "local");  // its name before 1.7
    ASSERT_OK(svod_comm_barrier(comm.handle));

    // all_reduce, in place in the caller's array.
    std::vector<float> x(5);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(10 * rank + i);
    Buffer bx;
    wrap(bx, x, "f32");
    ASSERT_OK(svod_comm_all_reduce(comm.handle, bx.handle, SVOD_REDUCE_SUM));
    EXPECT_EQ(x, (std::vector<float>{60, 64, 68, 72, 76})) << "rank " << rank;  // sum over r of 10 r + i

    // The other ops, on integers: rank + 1 and -(rank + 1).
    std::vector<int32_t> v(2);
    Buffer bv;
    wrap(bv, v, "i32");
    const struct {
      svod_reduce_op op;
      std::vector<int32_t> want;
    } ops[] = {{SVOD_REDUCE_PROD, {24, 24}}, {SVOD_REDUCE_MIN, {1, -4}}, {SVOD_REDUCE_MAX, {4, -1}}};
    for (const auto& [op, want] : ops) {
      v = {rank + 1, -(rank + 1)};
      ASSERT_OK(svod_comm_all_reduce(comm.handle, bv.handle, op));
      EXPECT_EQ(v, want) << "op " << op << ", rank " << rank;
    }

    // all_gather, between buffers svod allocated.
    Device cpu;
    Buffer mine, all;
    ASSERT_OK(svod_buffer_allocate(cpu.handle, "i32", 2, &mine.handle));
    ASSERT_OK(svod_buffer_allocate(cpu.handle, "i32", 2 * kRanks, &all.handle));
    const int32_t own[2] = {rank, rank * rank};
    ASSERT_OK(svod_buffer_copy_from_host(mine.handle, own, sizeof own));
    ASSERT_OK(svod_comm_all_gather(comm.handle, mine.handle, all.handle));
    int32_t gathered[2 * kRanks];
    ASSERT_OK(svod_buffer_copy_to_host(all.handle, gathered, sizeof gathered));
    EXPECT_EQ(std::vector<int32_t>(gathered, gathered + 2 * kRanks), (std::vector<int32_t>{0, 0, 1, 1, 2, 4, 3, 9}));

    // reduce_scatter: rank k gets the sums of part k (elements 2k, 2k + 1).
    std::vector<double> parts(2 * kRanks), part(2);
    for (size_t j = 0; j < parts.size(); ++j) parts[j] = rank + static_cast<double>(j);
    Buffer bparts, bpart;
    wrap(bparts, parts, "f64");
    wrap(bpart, part, "f64");
    ASSERT_OK(svod_comm_reduce_scatter(comm.handle, bparts.handle, bpart.handle, SVOD_REDUCE_SUM));
    EXPECT_EQ(part, (std::vector<double>{6.0 + 8 * rank, 10.0 + 8 * rank}));  // sum over r of r + 2 rank + m

    // broadcast, over a view into a byte buffer.
    Buffer bytes, view;
    ASSERT_OK(svod_buffer_allocate(cpu.handle, "u8", 32, &bytes.handle));
    ASSERT_OK(svod_buffer_view(bytes.handle, 8, "i64", 2, &view.handle));
    void* data = nullptr;
    ASSERT_OK(svod_buffer_data(view.handle, &data));
    auto* values = static_cast<int64_t*>(data);
    values[0] = 100 * rank;
    values[1] = rank;
    ASSERT_OK(svod_comm_broadcast(comm.handle, view.handle, 2));
    EXPECT_EQ(values[0], 200);
    EXPECT_EQ(values[1], 2);

    // send and recv around the ring: rank r passes 1000 r to rank r + 1. A
    // local send returns once the receiver has the message, so even ranks
    // send first and odd ranks receive first.
    std::vector<int32_t> token = {1000 * rank}, received = {-1};
    Buffer btoken, breceived;
    wrap(btoken, token, "i32");
    wrap(breceived, received, "i32");
    const int next = (rank + 1) % kRanks, previous = (rank + kRanks - 1) % kRanks;
    if (rank % 2 == 0) ASSERT_OK(svod_comm_send(comm.handle, btoken.handle, next, 7));
    ASSERT_OK(svod_comm_recv(comm.handle, breceived.handle, previous, 7));
    if (rank % 2 == 1) ASSERT_OK(svod_comm_send(comm.handle, btoken.handle, next, 7));
    EXPECT_EQ(received[0], 1000 * previous);
    ASSERT_OK(svod_comm_barrier(comm.handle));
  });
}

// The ranks compare every collective call: a mismatch, or an argument one
// rank gets wrong, is VALIDATION on every rank, nothing moves, and the
// communicator stays usable.
TEST(CApiComm, MismatchesAndBadArgumentsFailEveryRankAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  on_local_ranks(2, [](Comm& comm) {
    svod_comm* c = comm.handle;
    const int rank = svod_comm_rank(c);
    const int other = 1 - rank;
    std::vector<float> four(4, 1.0f), two(2, 1.0f);
    std::vector<int32_t> ints(4, 1);
    Buffer b4, b2, bi;
    wrap(b4, four, "f32");
    wrap(b2, two, "f32");
    wrap(bi, ints, "i32");

    expect_error(svod_comm_all_reduce(c, rank == 0 ? b4.handle : b2.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                 "svod_comm_all_reduce: local rank " + std::to_string(rank) +
                     ": ranks disagree on call #0: rank 0 called all_reduce(f32 x 4, sum) but rank 1 called "
                     "all_reduce(f32 x 2, sum)");
    expect_error(svod_comm_all_reduce(c, rank == 0 ? b4.handle : bi.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                 "rank 1 called all_reduce(i32 x 4, sum)");
    expect_error(svod_comm_all_reduce(c, b4.handle, rank == 0 ? SVOD_REDUCE_SUM : SVOD_REDUCE_MAX),
                 SVOD_ERROR_VALIDATION, "rank 1 called all_reduce(f32 x 4, max)");
    expect_error(svod_comm_broadcast(c, b4.handle, rank), SVOD_ERROR_VALIDATION,
                 "rank 0 called broadcast(f32 x 4, root 0) but rank 1 called broadcast(f32 x 4, root 1)");
    expect_error(svod_comm_all_gather(c, b4.handle, b4.handle), SVOD_ERROR_VALIDATION,
                 "svod_comm_all_gather: all_gather: the whole buffer must hold 2 ranks x 4 elements = 8, not 4");
    expect_error(svod_comm_reduce_scatter(c, b2.handle, bi.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                 "reduce_scatter: the buffers' dtypes differ (i32 and f32)");
    // Two wraps of one array overlap although they are different buffers.
    std::vector<float> eight(8, 1.0f);
    Buffer whole, part;
    wrap(whole, eight, "f32");
    ASSERT_OK(svod_buffer_wrap_host(eight.data() + 2, "f32", 4, &part.handle));
    expect_error(svod_comm_all_gather(c, part.handle, whole.handle), SVOD_ERROR_VALIDATION,
                 "svod_comm_all_gather: all_gather: the source and destination overlap");
    expect_error(svod_comm_reduce_scatter(c, whole.handle, part.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                 "svod_comm_reduce_scatter: reduce_scatter: the source and destination overlap");
    EXPECT_EQ(eight, std::vector<float>(8, 1.0f)) << "nothing moved";

    // Arguments one rank alone gets wrong: that rank says what is wrong, the
    // other names the rank.
    const std::string rejected_by_1 = "local rank 0: rank 1 rejected its own arguments to call #";
    const std::string rejected_by_0 = "local rank 1: rank 0 rejected its own arguments to call #";
    if (rank == 1)
      expect_error(svod_comm_all_reduce(c, b4.handle, static_cast<svod_reduce_op>(9)), SVOD_ERROR_VALIDATION,
                   "svod_comm_all_reduce: op 9 is not an svod_reduce_op (SVOD_REDUCE_SUM to SVOD_REDUCE_MAX)");
    else
      expect_error(svod_comm_all_reduce(c, b4.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION, rejected_by_1);
    EXPECT_EQ(four, std::vector<float>(4, 1.0f)) << "nothing moved";
    if (rank == 0)
      expect_error(svod_comm_reduce_scatter(c, b4.handle, b2.handle, static_cast<svod_reduce_op>(-1)),
                   SVOD_ERROR_VALIDATION, "svod_comm_reduce_scatter: op -1 is not an svod_reduce_op");
    else
      expect_error(svod_comm_reduce_scatter(c, b4.handle, b2.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                   rejected_by_0);
    expect_error(svod_comm_all_gather(c, b2.handle, rank == 0 ? nullptr : b4.handle), SVOD_ERROR_VALIDATION,
                 rank == 0 ? "svod_comm_all_gather: dst is NULL" : rejected_by_0);
    expect_error(svod_comm_all_reduce(c, rank == 1 ? nullptr : b4.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
                 rank == 1 ? "svod_comm_all_reduce: buffer is NULL" : rejected_by_1);
    expect_error(svod_comm_broadcast(c, b4.handle, rank == 1 ? 2 : 0), SVOD_ERROR_VALIDATION,
                 rank == 1 ? "svod_comm_broadcast: broadcast: root 2 is out of range (the job has ranks 0 to 1)"
                           : rejected_by_1);
    expect_error(svod_comm_broadcast(c, b4.handle, -1), SVOD_ERROR_VALIDATION, "root -1 is out of range");

    // send/recv: a mismatch fails both; bad peers, tags and handles this rank alone.
    if (rank == 0)
      expect_error(svod_comm_send(c, b4.handle, 1, 3), SVOD_ERROR_VALIDATION,
                   "local rank 0 sent send/recv(f32 x 4, tag 3) to rank 1, which expected send/recv(f32 x 2, tag 3)");
    else
      expect_error(svod_comm_recv(c, b2.handle, 0, 3), SVOD_ERROR_VALIDATION,
                   "svod_comm_recv: local rank 0 sent send/recv(f32 x 4, tag 3) to rank 1");
    const std::string self = "peer " + std::to_string(rank) + " is not another rank (this is rank " +
                             std::to_string(rank) + " of ranks 0 to 1)";
    expect_error(svod_comm_send(c, b4.handle, rank, 0), SVOD_ERROR_VALIDATION, "svod_comm_send: send: " + self);
    expect_error(svod_comm_recv(c, b4.handle, 2, 0), SVOD_ERROR_VALIDATION, "svod_comm_recv: recv: peer 2 is not");
    expect_error(svod_comm_send(c, b4.handle, other, 40000), SVOD_ERROR_VALIDATION, "tag 40000 is outside 0 to 32767");
    expect_error(svod_comm_send(c, nullptr, other, 0), SVOD_ERROR_VALIDATION, "svod_comm_send: buffer is NULL");
    expect_error(svod_comm_recv(c, nullptr, other, 0), SVOD_ERROR_VALIDATION, "svod_comm_recv: buffer is NULL");

    // Still usable, and still in step.
    ASSERT_OK(svod_comm_all_reduce(c, b4.handle, SVOD_REDUCE_SUM));
    EXPECT_EQ(four, std::vector<float>(4, 2.0f));
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWellBeforeTheTimeout);
}

// A rank that aborts fails the others' calls naming it and the reason; the
// communicator is broken after, on every rank.
TEST(CApiComm, AbortFailsThePeersNamingTheRank) {
  const auto start = std::chrono::steady_clock::now();
  on_local_ranks(3, [](Comm& comm) {
    svod_comm* c = comm.handle;
    const int rank = svod_comm_rank(c);
    if (rank == 1) {
      ASSERT_OK(svod_comm_abort(c, "rank 1 ran out of input"));
      EXPECT_OK(svod_comm_abort(c, "again"));  // once is enough
      expect_error(svod_comm_barrier(c), SVOD_ERROR_EXECUTION,
                   "unusable after an earlier failure: this rank aborted: rank 1 ran out of input");
      return;
    }
    expect_error(svod_comm_barrier(c), SVOD_ERROR_EXECUTION,
                 "svod_comm_barrier: local rank " + std::to_string(rank) +
                     ": barrier() failed because rank 1 failed: rank 1 ran out of input");
    std::vector<float> x(2);
    Buffer bx;
    wrap(bx, x, "f32");
    expect_error(svod_comm_all_reduce(c, bx.handle, SVOD_REDUCE_SUM), SVOD_ERROR_EXECUTION,
                 "local communicator rank " + std::to_string(rank) + " of 3: unusable after an earlier failure");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWellBeforeTheTimeout);
}

// Plans with collectives on local ranks: each rank loads the same plan on its
// communicator, which the plan keeps alive, and runs it.
TEST(CApiComm, PlansWithCollectivesOnLocalRanks) {
  on_local_ranks(2, [](Comm& comm) {
    Plan plan;
    ASSERT_OK(svod_plan_load_with_comm(kCollectivePlan, nullptr, comm.handle, &plan.handle));
    EXPECT_OK(svod_comm_release(comm.handle));
    comm.handle = nullptr;
    for (int run = 0; run < 2; ++run) {
      ASSERT_OK(svod_plan_execute(plan.handle));
      EXPECT_EQ(plan_values(plan.handle, "part"), std::vector<float>{120});  // the sum of 0 .. 15
      EXPECT_EQ(plan_values(plan.handle, "w"), (std::vector<float>{0, 1, 2, 3}));
      EXPECT_EQ(plan_values(plan.handle, "mean"), (std::vector<float>{1, 1, 1, 1}));
    }
    ASSERT_OK(svod_plan_set_var(plan.handle, "N", 8));
    ASSERT_OK(svod_plan_execute(plan.handle));
    EXPECT_EQ(plan_values(plan.handle, "part"), std::vector<float>{28});  // the sum of 0 .. 7
  });

  // all_gather and reduce_scatter on 4 ranks; the plan's buffers take part
  // in the caller's own collectives on the same communicator.
  on_local_ranks(4, [](Comm& comm) {
    Plan plan;
    ASSERT_OK(svod_plan_load_with_comm(kGatherPlan, nullptr, comm.handle, &plan.handle));
    ASSERT_OK(svod_plan_execute(plan.handle));
    EXPECT_EQ(plan_values<int32_t>(plan.handle, "all"), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(plan_values(plan.handle, "parts"), (std::vector<float>{0, 4, 8, 12, 16, 20, 24, 28}));
    Buffer mine;
    ASSERT_OK(svod_plan_buffer(plan.handle, "mine", &mine.handle));
    ASSERT_OK(svod_comm_all_reduce(comm.handle, mine.handle, SVOD_REDUCE_SUM));
    EXPECT_EQ(plan_values<int32_t>(plan.handle, "mine"), (std::vector<int32_t>{6, 6}));  // 0 + 1 + 2 + 3
  });
}

TEST(CApiComm, PackagesWithCollectivesOnLocalRanks) {
  const std::vector<std::byte> bytes = svod::pack_plan(kCollectivePlan);
  on_local_ranks(4, [&](Comm& comm) {
    Plan plan;
    ASSERT_OK(svod_plan_load_package_with_comm(bytes.data(), bytes.size(), R"({"N": 8})", comm.handle, &plan.handle));
    ASSERT_OK(svod_plan_execute(plan.handle));
    EXPECT_EQ(plan_values(plan.handle, "part"), std::vector<float>{28});
    EXPECT_EQ(plan_values(plan.handle, "w"), (std::vector<float>{0, 1, 2, 3}));
  });
  TempDir dir;
  const std::string path = (dir / "collective.svodpkg").string();
  svod::write_package(path, bytes);
  on_local_ranks(2, [&](Comm& comm) {
    Plan plan;
    ASSERT_OK(svod_plan_load_package_file_with_comm(path.c_str(), nullptr, comm.handle, &plan.handle));
    ASSERT_OK(svod_plan_execute(plan.handle));
    EXPECT_EQ(plan_values(plan.handle, "part"), std::vector<float>{120});
  });
}

// A load or a run that fails on one rank fails the others at once, naming
// it: ranks loading different variable values, a rank whose load fails
// before or after the ranks compared their plans, a rank whose run fails.
TEST(CApiComm, PlanFailuresReachEveryRank) {
  const auto start = std::chrono::steady_clock::now();
  on_local_ranks(2, [](Comm& comm) {
    const int rank = svod_comm_rank(comm.handle);
    svod_plan* none = nullptr;
    expect_error(svod_plan_load_with_comm(kCollectivePlan, rank == 1 ? R"({"N": 8})" : nullptr, comm.handle, &none),
                 SVOD_ERROR_VALIDATION,
                 "collective.json: the ranks load different plans or variable values: rank 1 differs from rank 0 "
                 "(this is rank " + std::to_string(rank) + " of 2)");
    EXPECT_EQ(none, nullptr);
  });
  on_local_ranks(2, [](Comm& comm) {
    svod_plan* none = nullptr;
    if (svod_comm_rank(comm.handle) == 1) {
      expect_error(svod_plan_load_with_comm("/nonexistent/plan.json", nullptr, comm.handle, &none), SVOD_ERROR_IO,
                   "svod_plan_load_with_comm: /nonexistent/plan.json");
    } else {
      expect_error(svod_plan_load_with_comm(kCollectivePlan, nullptr, comm.handle, &none), SVOD_ERROR_EXECUTION,
                   "because rank 1 failed: /nonexistent/plan.json");
    }
    EXPECT_EQ(none, nullptr);
  });
  // Rank 1 passes a scalar past its bounds: its load fails once the ranks
  // agreed, and rank 0's first run fails naming it.
  on_local_ranks(2, [](Comm& comm) {
    Plan plan;
    if (svod_comm_rank(comm.handle) == 1) {
      expect_error(svod_plan_load_with_comm(kFailedRankPlan, nullptr, comm.handle, &plan.handle),
                   SVOD_ERROR_VALIDATION, "program \"touch\": scalar r = 1 is outside its bounds");
      return;
    }
    ASSERT_OK(svod_plan_load_with_comm(kFailedRankPlan, nullptr, comm.handle, &plan.handle));
    expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_EXECUTION,
                 "op 1 collective all_reduce failed: local rank 0: all_reduce(f32 x 4, sum) failed because "
                 "rank 1 failed: " + std::string(kFailedRankPlan) + ": ops: op 0 kernel touch");
    expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_PLAN_POISONED, "");
  });
  // Rank 1's run fails in a host function before the all_reduce.
  svod::register_custom_function(
      "capi_comm_fail_on_rank_1",
      {[](std::span<const svod::Buffer>, const svod::Attrs&, const svod::VariableValues& vars) {
         if (vars.find("rank") == 1) throw std::runtime_error("rank 1's host function gave up");
       },
       [](std::span<const svod::Buffer> buffers, const svod::Attrs&) {
         return std::vector<svod::Access>(buffers.size(), svod::Access::ReadWrite);
       }});
  TempDir dir;
  const std::string path = dir.write("plan.json", R"({
    "svod_plan": 1,
    "buffers": { "g": { "dtype": "f32", "count": 4, "init": { "fill": 1 } } },
    "ops": [ { "custom": "capi_comm_fail_on_rank_1", "buffers": ["g"] },
             { "collective": { "kind": "all_reduce", "buffers": ["g"], "op": "sum" } } ]
  })").string();
  on_local_ranks(2, [&](Comm& comm) {
    Plan plan;
    ASSERT_OK(svod_plan_load_with_comm(path.c_str(), nullptr, comm.handle, &plan.handle));
    expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_EXECUTION,
                 svod_comm_rank(comm.handle) == 1 ? "rank 1's host function gave up"
                                                  : "failed because rank 1 failed");
    expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_PLAN_POISONED, "");
    expect_error(svod_comm_barrier(comm.handle), SVOD_ERROR_EXECUTION, "unusable after an earlier failure");
  });
  svod::unregister_custom_function("capi_comm_fail_on_rank_1");
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWellBeforeTheTimeout);
}

// The world communicator outside a launcher is rank 0 of 1, made once: its
// handles come and go, it stays.
TEST(CApiComm, TheWorldOutsideALauncherIsOneLocalRank) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK"))
    GTEST_SKIP() << "started by an MPI launcher";
  for (int round = 0; round < 2; ++round) {
    for (const char* transport : {"auto", "local"}) {
      Comm world;
      ASSERT_OK(svod_comm_world(transport, &world.handle));
      EXPECT_EQ(svod_comm_rank(world.handle), 0);
      EXPECT_EQ(svod_comm_size(world.handle), 1);
      EXPECT_EQ(svod_comm_local_rank(world.handle), 0);
      EXPECT_EQ(svod_comm_local_size(world.handle), 1);
      EXPECT_STREQ(svod_comm_transport(world.handle), "local");
      ASSERT_OK(svod_comm_barrier(world.handle));
      std::vector<float> x = {1, 2};
      Buffer bx;
      wrap(bx, x, "f32");
      ASSERT_OK(svod_comm_all_reduce(world.handle, bx.handle, SVOD_REDUCE_SUM));
      EXPECT_EQ(x, (std::vector<float>{1, 2}));  // one rank: unchanged
    }
  }
  svod_comm* none = nullptr;
  expect_error(svod_comm_world("mpi", &none), SVOD_ERROR_VALIDATION,
               "svod_comm_world: the world communicator of this process is already \"local\", not \"mpi\"");
  expect_error(svod_comm_world("tcp", &none), SVOD_ERROR_VALIDATION,
               "unknown communicator transport \"tcp\" (expected auto, mpi or local)");
  EXPECT_EQ(none, nullptr);

  // A plan on the world's one rank.
  Comm world;
  ASSERT_OK(svod_comm_world("auto", &world.handle));
  Plan plan;
  ASSERT_OK(svod_plan_load_with_comm(kCollectivePlan, nullptr, world.handle, &plan.handle));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "part"), std::vector<float>{120});
}

TEST(CApiComm, NullHandlesCountsAndRanksOutOfRange) {
  svod_comm* none = nullptr;
  svod_comm* group[2] = {};
  expect_error(svod_comm_world(nullptr, &none), SVOD_ERROR_VALIDATION, "svod_comm_world: transport is NULL");
  expect_error(svod_comm_world("local", nullptr), SVOD_ERROR_VALIDATION, "svod_comm_world: out is NULL");
  expect_error(svod_comm_create_local(2, nullptr), SVOD_ERROR_VALIDATION, "svod_comm_create_local: out is NULL");
  expect_error(svod_comm_create_local(0, group), SVOD_ERROR_VALIDATION,
               "svod_comm_create_local: a local group needs at least one rank, not 0");
  expect_error(svod_comm_create_local(-3, group), SVOD_ERROR_VALIDATION, "at least one rank, not -3");
  expect_error(svod_comm_create_local(1025, group), SVOD_ERROR_VALIDATION,
               "1025 local ranks: a local group has at most 1024");
  EXPECT_EQ(group[0], nullptr);  // out-parameters are written only on success
  EXPECT_EQ(svod_comm_rank(nullptr), -1);
  EXPECT_EQ(svod_comm_size(nullptr), 0);
  EXPECT_EQ(svod_comm_local_rank(nullptr), -1);
  EXPECT_EQ(svod_comm_local_size(nullptr), 0);
  EXPECT_EQ(svod_comm_transport(nullptr), nullptr);
  EXPECT_EQ(svod_comm_backend(nullptr), nullptr);

  Buffer buffer;
  std::vector<float> x(2);
  wrap(buffer, x, "f32");
  expect_error(svod_comm_barrier(nullptr), SVOD_ERROR_VALIDATION, "svod_comm_barrier: comm is NULL");
  expect_error(svod_comm_all_reduce(nullptr, buffer.handle, SVOD_REDUCE_SUM), SVOD_ERROR_VALIDATION,
               "svod_comm_all_reduce: comm is NULL");
  expect_error(svod_comm_all_gather(nullptr, buffer.handle, buffer.handle), SVOD_ERROR_VALIDATION, "comm is NULL");
  expect_error(svod_comm_reduce_scatter(nullptr, buffer.handle, buffer.handle, SVOD_REDUCE_SUM),
               SVOD_ERROR_VALIDATION, "comm is NULL");
  expect_error(svod_comm_broadcast(nullptr, buffer.handle, 0), SVOD_ERROR_VALIDATION, "comm is NULL");
  expect_error(svod_comm_send(nullptr, buffer.handle, 1, 0), SVOD_ERROR_VALIDATION, "comm is NULL");
  expect_error(svod_comm_recv(nullptr, buffer.handle, 1, 0), SVOD_ERROR_VALIDATION, "comm is NULL");
  expect_error(svod_comm_abort(nullptr, "why"), SVOD_ERROR_VALIDATION, "svod_comm_abort: comm is NULL");
  expect_error(svod_comm_release(nullptr), SVOD_ERROR_VALIDATION, "svod_comm_release: comm is NULL");
  svod_plan* plan = nullptr;
  expect_error(svod_plan_load_with_comm(kCollectivePlan, nullptr, nullptr, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_with_comm: comm is NULL");
  expect_error(svod_plan_load_package_with_comm(x.data(), 8, nullptr, nullptr, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_package_with_comm: comm is NULL");
  expect_error(svod_plan_load_package_file_with_comm("x.svodpkg", nullptr, nullptr, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_package_file_with_comm: comm is NULL");

  // One rank of its own: its argument errors need no peer.
  Comm alone;
  ASSERT_OK(svod_comm_create_local(1, &alone.handle));
  expect_error(svod_comm_all_reduce(alone.handle, buffer.handle, static_cast<svod_reduce_op>(4)),
               SVOD_ERROR_VALIDATION, "op 4 is not an svod_reduce_op");
  expect_error(svod_comm_broadcast(alone.handle, buffer.handle, 1), SVOD_ERROR_VALIDATION,
               "root 1 is out of range (the job has ranks 0 to 0)");
  expect_error(svod_comm_send(alone.handle, buffer.handle, 0, 0), SVOD_ERROR_VALIDATION, "peer 0 is not another rank");
  expect_error(svod_comm_abort(alone.handle, nullptr), SVOD_ERROR_VALIDATION, "reason is NULL");
  expect_error(svod_plan_load_with_comm(nullptr, nullptr, alone.handle, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_with_comm: path is NULL");
  expect_error(svod_plan_load_with_comm(kCollectivePlan, nullptr, alone.handle, nullptr), SVOD_ERROR_VALIDATION,
               "out is NULL");
  expect_error(svod_plan_load_package_with_comm(nullptr, 8, nullptr, alone.handle, &plan), SVOD_ERROR_VALIDATION,
               "data is NULL");
  expect_error(svod_plan_load_package_file_with_comm(nullptr, nullptr, alone.handle, &plan), SVOD_ERROR_VALIDATION,
               "path is NULL");
  EXPECT_EQ(plan, nullptr);
  ASSERT_OK(svod_comm_barrier(alone.handle));  // a failed load on one rank of one leaves it usable
}

TEST(CApiComm, DoubleReleaseIsDetected) {
  svod_comm* group[2] = {};
  ASSERT_OK(svod_comm_create_local(2, group));
  ASSERT_NE(group[0], group[1]);
  EXPECT_EQ(svod_comm_rank(group[0]), 0);
  EXPECT_EQ(svod_comm_rank(group[1]), 1);
  EXPECT_OK(svod_comm_release(group[0]));
  expect_error(svod_comm_release(group[0]), SVOD_ERROR_VALIDATION, "not a live handle");
  expect_error(svod_buffer_release(reinterpret_cast<svod_buffer*>(group[1])), SVOD_ERROR_VALIDATION,
               "not a live handle");
  EXPECT_OK(svod_comm_release(group[1]));
  svod_comm* world = nullptr;
  ASSERT_OK(svod_comm_world("local", &world));
  EXPECT_OK(svod_comm_release(world));
  expect_error(svod_comm_release(world), SVOD_ERROR_VALIDATION, "not a live handle");
}

}  // namespace
