// The hazard tracker and the DAG runner on their own, without plans.
#include "svod/plan/hazards.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "svod/base/thread_pool.h"
#include "svod/plan/dag.h"
#include "tests/plan/plan_test_support.h"

namespace svod::detail {
namespace {

using Deps = std::vector<size_t>;

MemoryAccess rd(uint64_t storage, size_t begin, size_t end) { return {{storage, begin, end}, true, false}; }
MemoryAccess wr(uint64_t storage, size_t begin, size_t end) { return {{storage, begin, end}, false, true}; }
MemoryAccess rw(uint64_t storage, size_t begin, size_t end) { return {{storage, begin, end}, true, true}; }

// Deps of a second op (node 1) after a first op (node 0), both single accesses.
Deps pair_deps(MemoryAccess first, MemoryAccess second) {
  HazardTracker t;
  Deps d0, d1;
  t.add(0, std::vector{first}, d0);
  t.add(1, std::vector{second}, d1);
  EXPECT_TRUE(d0.empty());
  return d1;
}

TEST(Hazards, RangeShapesDecideConflicts) {
  const Deps ordered{0}, free{};
  // identical
  EXPECT_EQ(pair_deps(wr(1, 0, 16), rd(1, 0, 16)), ordered);
  // nested, either way round
  EXPECT_EQ(pair_deps(wr(1, 0, 64), rd(1, 16, 32)), ordered);
  EXPECT_EQ(pair_deps(wr(1, 16, 32), rd(1, 0, 64)), ordered);
  // partial overlap, from either side
  EXPECT_EQ(pair_deps(wr(1, 0, 20), rd(1, 16, 32)), ordered);
  EXPECT_EQ(pair_deps(wr(1, 16, 32), rd(1, 0, 17)), ordered);
  // disjoint and adjacent ranges share no byte
  EXPECT_EQ(pair_deps(wr(1, 0, 16), rd(1, 32, 48)), free);
  EXPECT_EQ(pair_deps(wr(1, 0, 16), rd(1, 16, 32)), free);
  EXPECT_EQ(pair_deps(wr(1, 16, 32), wr(1, 0, 16)), free);
  // the same bytes of another storage
  EXPECT_EQ(pair_deps(wr(1, 0, 16), wr(2, 0, 16)), free);
  // empty ranges never conflict
  EXPECT_EQ(pair_deps(wr(1, 8, 8), rd(1, 0, 16)), free);
  EXPECT_EQ(pair_deps(wr(1, 0, 16), rd(1, 8, 8)), free);
}

TEST(Hazards, KindsOfConflict) {
  const Deps ordered{0}, free{};
  EXPECT_EQ(pair_deps(wr(1, 0, 8), rd(1, 0, 8)), ordered);  // RAW
  EXPECT_EQ(pair_deps(rd(1, 0, 8), wr(1, 0, 8)), ordered);  // WAR
  EXPECT_EQ(pair_deps(wr(1, 0, 8), wr(1, 0, 8)), ordered);  // WAW
  EXPECT_EQ(pair_deps(rd(1, 0, 8), rd(1, 0, 8)), free);     // readers share
  EXPECT_EQ(pair_deps(rw(1, 0, 8), rd(1, 0, 8)), ordered);
  EXPECT_EQ(pair_deps(rd(1, 0, 8), rw(1, 0, 8)), ordered);
}

TEST(Hazards, ViewsOfOneArena) {
  // An arena of 64 bytes: A = [0,16), B = [16,32), C = [8,24) straddles both.
  HazardTracker t;
  Deps a, b, c, d;
  t.add(0, std::vector{wr(7, 0, 16)}, a);
  t.add(1, std::vector{wr(7, 16, 32)}, b);
  t.add(2, std::vector{rd(7, 8, 24)}, c);
  t.add(3, std::vector{wr(7, 32, 64), rd(7, 0, 4)}, d);
  EXPECT_EQ(b, Deps{});
  EXPECT_EQ(c, (Deps{0, 1}));
  EXPECT_EQ(d, Deps{0});  // reads A's bytes; its write touches nobody else
}

TEST(Hazards, ReadersAllWaitForOneWriterAndTheNextWriterForAllReaders) {
  HazardTracker t;
  Deps d[5];
  t.add(0, std::vector{wr(1, 0, 8)}, d[0]);
  t.add(1, std::vector{rd(1, 0, 8)}, d[1]);
  t.add(2, std::vector{rd(1, 4, 8)}, d[2]);
  t.add(3, std::vector{rd(1, 0, 2)}, d[3]);
  t.add(4, std::vector{wr(1, 2, 6)}, d[4]);
  EXPECT_EQ(d[1], Deps{0});
  EXPECT_EQ(d[2], Deps{0});
  EXPECT_EQ(d[3], Deps{0});
  EXPECT_EQ(d[4], (Deps{0, 1, 2}));  // reader 3 ([0,2)) does not touch [2,6)
}

TEST(Hazards, CoveredEntriesArePrunedButOrderIsKept) {
  // A chain of full writes keeps one writer entry; a later reader depends
  // only on the last writer, which transitively follows all earlier ones.
  HazardTracker t;
  std::vector<Deps> d(100);
  for (size_t i = 0; i < 99; ++i) t.add(i, std::vector{rw(1, 0, 4)}, d[i]);
  for (size_t i = 1; i < 99; ++i) EXPECT_EQ(d[i], Deps{i - 1});
  t.add(99, std::vector{rd(1, 0, 4)}, d[99]);
  EXPECT_EQ(d[99], Deps{98});

  // A partial write does not hide the writer of the bytes it leaves alone.
  HazardTracker u;
  Deps e[3];
  u.add(0, std::vector{wr(1, 0, 8)}, e[0]);
  u.add(1, std::vector{wr(1, 0, 4)}, e[1]);
  u.add(2, std::vector{rd(1, 4, 8)}, e[2]);
  EXPECT_EQ(e[1], Deps{0});
  EXPECT_EQ(e[2], Deps{0});
}

TEST(Hazards, PredecessorsFollowTheGivenOrder) {
  // Node 1 is visited first, so node 0's write waits for it (WAR), not the reverse.
  std::vector<std::vector<MemoryAccess>> acc{{wr(1, 0, 8)}, {rd(1, 0, 8)}};
  std::vector<size_t> order{1, 0};
  auto preds = hazard_predecessors(order, acc);
  EXPECT_EQ(preds[0], Deps{1});
  EXPECT_EQ(preds[1], Deps{});
}

std::string node_name(size_t i) { return "n" + std::to_string(i); }

TEST(Dag, DeterministicOrderSmallestReadyFirst) {
  // 3 -> 1, 2 -> 0: ready set starts {2, 3}.
  Dag dag({{2}, {3}, {}, {}}, node_name);
  EXPECT_EQ(dag.order(), (std::vector<size_t>{2, 0, 3, 1}));
  EXPECT_EQ(dag.roots(), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(dag.successors()[2], Deps{0});
}

TEST(Dag, CycleErrorNamesTheCycle) {
  // 0 waits for 2, 2 for 1, 1 for 0; node 3 merely sits behind the cycle.
  test::expect_error(
      ErrorKind::Validation, [] { Dag({{2}, {0}, {1}, {0}}, node_name); },
      {"cycle", "n0 → n2 → n1 → n0"});
  test::expect_error(ErrorKind::Validation, [] { Dag({{0}}, node_name); }, {"n0 depends on itself"});
  test::expect_error(ErrorKind::Validation, [] { Dag({{5}}, node_name); }, {"n0", "index 5"});
}

TEST(DagRunner, RunsEveryNodeAfterItsPredecessors) {
  // A layered graph: node i waits for i-3 and i-5 when they exist.
  const size_t n = 200;
  std::vector<std::vector<size_t>> preds(n);
  for (size_t i = 0; i < n; ++i) {
    if (i >= 3) preds[i].push_back(i - 3);
    if (i >= 5) preds[i].push_back(i - 5);
  }
  DagRunner runner(Dag(preds, node_name));
  for (bool sequential : {false, true}) {
    std::vector<std::atomic<int>> done(n);
    std::atomic<int> violations{0};
    auto fn = [&](size_t i) {
      for (size_t p : preds[i])
        if (done[p].load() != 1) ++violations;
      done[i].store(1);
    };
    for (int rep = 0; rep < 3; ++rep) {
      for (auto& d : done) d.store(0);
      EXPECT_FALSE(runner.run(sequential, fn).has_value());
      EXPECT_EQ(violations.load(), 0);
      for (auto& d : done) EXPECT_EQ(d.load(), 1);
    }
  }
}

TEST(DagRunner, FirstFailureStopsLaterNodes) {
  // 0 -> 1 -> 2 and an independent 3; node 1 throws.
  DagRunner runner(Dag({{}, {0}, {1}, {}}, node_name));
  for (bool sequential : {false, true}) {
    std::atomic<bool> ran2{false};
    auto fn = [&](size_t i) {
      if (i == 1) throw std::runtime_error("node one");
      if (i == 2) ran2 = true;
    };
    auto failure = runner.run(sequential, fn);
    ASSERT_TRUE(failure.has_value());
    EXPECT_EQ(failure->node, 1u);
    EXPECT_FALSE(ran2.load());
  }
}

TEST(DagRunner, IndependentNodesOverlap) {
  if (thread_count() < 2) GTEST_SKIP() << "needs two pool threads";
  DagRunner runner(Dag({{}, {}}, node_name));
  std::atomic<int> arrived{0};
  std::atomic<int> saw_other{0};
  auto fn = [&](size_t) {
    ++arrived;
    // Bounded: a runner that ran the nodes one after the other fails here
    // after the deadline instead of hanging.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (arrived.load() == 2) ++saw_other;
  };
  EXPECT_FALSE(runner.run(false, fn).has_value());
  EXPECT_EQ(saw_other.load(), 2);
}


// Node 0 is deferred: its work runs on another thread and completes the
// node only after the independent node 2 ran, so the run shows that the pool
// kept working meanwhile, that node 1 waited for the completion, and that
// a failed completion stops node 1.
TEST(DagRunner, DeferredNodesFinishWhenCompleted) {
  DagRunner runner(Dag({{}, {0}, {}, {1, 2}}, node_name));
  runner.set_deferred({true, false, false, false});
  for (bool fail : {false, true, false}) {
    std::atomic<bool> completed{false};
    std::atomic<bool> ran2{false};
    std::atomic<int> order_violations{0};
    std::atomic<int> ran{0};
    std::mutex mutex;  // the worker is started on a pool thread and joined here
    std::thread worker;
    auto fn = [&](size_t i) {
      ++ran;
      if (i == 0) {
        std::lock_guard lock(mutex);
        worker = std::thread([&] {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (!ran2.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
          completed = true;
          runner.complete(0, fail ? std::make_exception_ptr(std::runtime_error("deferred")) : nullptr);
        });
        return;
      }
      if (i == 1 && !completed.load()) ++order_violations;
      if (i == 2) ran2 = true;
    };
    auto failure = runner.run(false, fn);
    {
      std::lock_guard lock(mutex);
      worker.join();
    }
    EXPECT_TRUE(ran2.load());
    EXPECT_EQ(order_violations.load(), 0);
    if (fail) {
      ASSERT_TRUE(failure.has_value());
      EXPECT_EQ(failure->node, 0u);
      EXPECT_EQ(ran.load(), 2);  // nodes 0 and 2
    } else {
      EXPECT_FALSE(failure.has_value());
      EXPECT_EQ(ran.load(), 4);
    }
  }
}

}  // namespace
}  // namespace svod::detail
