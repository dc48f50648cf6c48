#include "svod/plan/dag.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <queue>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/base/tsan.h"

namespace svod::detail {
namespace {

// One cycle among the nodes Kahn's algorithm could not order, as "a → b → …
// → a" where each node waits for the next. Every such node has a predecessor
// that is also unordered, so following the smallest one must revisit a node.
std::string describe_cycle(const std::vector<std::vector<size_t>>& preds, const std::vector<bool>& ordered,
                           const std::function<std::string(size_t)>& name) {
  size_t start = 0;
  while (ordered[start]) ++start;
  std::vector<size_t> path;
  std::vector<size_t> seen_at(preds.size(), SIZE_MAX);
  size_t node = start;
  while (seen_at[node] == SIZE_MAX) {
    seen_at[node] = path.size();
    path.push_back(node);
    for (size_t p : preds[node]) {
      if (!ordered[p]) {
        node = p;
        break;
      }
    }
  }
  std::string text;
  for (size_t i = seen_at[node]; i < path.size(); ++i) text += name(path[i]) + " → ";
  return text + name(node);
}

// Kahn's algorithm, smallest ready index first; shorter than preds when
// some nodes sit on or behind a cycle.
std::vector<size_t> kahn_order(const std::vector<std::vector<size_t>>& preds) {
  const size_t n = preds.size();
  std::vector<size_t> pending(n);
  std::vector<std::vector<size_t>> succs(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = preds[i].size();
    for (size_t p : preds[i]) succs[p].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t node = ready.top();
    ready.pop();
    order.push_back(node);
    for (size_t s : succs[node])
      if (--pending[s] == 0) ready.push(s);
  }
  return order;
}

}  // namespace

std::optional<std::vector<size_t>> topological_order(const std::vector<std::vector<size_t>>& preds) {
  auto order = kahn_order(preds);
  if (order.size() != preds.size()) return std::nullopt;
  return order;
}

Dag::Dag(std::vector<std::vector<size_t>> preds, const std::function<std::string(size_t)>& name)
    : preds_(std::move(preds)), succs_(preds_.size()) {
  const size_t n = preds_.size();
  for (size_t i = 0; i < n; ++i) {
    auto& p = preds_[i];
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    for (size_t d : p) {
      if (d >= n)
        throw make_error(ErrorKind::Validation, "{} depends on op index {}, but there are only {} ops", name(i), d, n);
      if (d == i) throw make_error(ErrorKind::Validation, "{} depends on itself", name(i));
      succs_[d].push_back(i);
    }
    if (p.empty()) roots_.push_back(i);
  }
  order_ = kahn_order(preds_);
  if (order_.size() != n) {
    std::vector<bool> ordered(n, false);
    for (size_t node : order_) ordered[node] = true;
    throw make_error(ErrorKind::Validation, "dependency cycle (each waits for the next): {}",
                     describe_cycle(preds_, ordered, name));
  }
}

struct DagRunner::Run {
  NodeFn fn = nullptr;
  void* context = nullptr;
  tbb::task_group* group = nullptr;
  std::atomic<bool> stop{false};
  std::mutex failure_mutex;
  std::optional<DagFailure> failure;

  // Deferred nodes: how many are running, and the nodes their completions
  // made ready, for the calling thread to run next.
  std::mutex deferred_mutex;
  std::condition_variable deferred_done;
  size_t in_flight = 0;
  std::vector<size_t> ready;

  void fail(size_t node) { fail_with(node, std::current_exception()); }
  void fail_with(size_t node, std::exception_ptr error) {
    std::lock_guard lock(failure_mutex);
    if (!failure) failure = DagFailure{node, std::move(error)};
    stop.store(true, std::memory_order_relaxed);
  }
};

DagRunner::DagRunner(Dag dag) : dag_(std::move(dag)), pending_(new std::atomic<uint32_t>[dag_.size()]) {}

// A spawned chain. A named type (not a lambda) so a TSan suppression can name
// the one frame that reads the task object TBB built (tests/tsan.supp).
struct DagRunner::ChainTask {
  DagRunner* runner;
  Run* run;
  size_t node;
  void operator()() const {
    handoff_acquire(run);
    runner->run_chain(*run, node);
    handoff_release(run);
  }
};

// Runs `node`, then keeps going on this thread with one successor it made
// ready and hands the others to the pool: a chain costs no task spawns.
void DagRunner::run_chain(Run& run, size_t node) {
  const auto& succs = dag_.successors();
  for (;;) {
    if (run.stop.load(std::memory_order_relaxed)) return;
    if (!deferred_.empty() && deferred_[node]) {
      // Its successors are released by complete(), not here.
      {
        std::lock_guard lock(run.deferred_mutex);
        ++run.in_flight;
      }
      try {
        run.fn(run.context, node);
      } catch (...) {
        complete(node, std::current_exception());
      }
      return;
    }
    try {
      run.fn(run.context, node);
    } catch (...) {
      run.fail(node);
      return;
    }
    size_t next = SIZE_MAX;
    for (size_t s : succs[node]) {
      if (pending_[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      if (next == SIZE_MAX)
        next = s;
      else
        spawn(run, s);
    }
    if (next == SIZE_MAX) return;
    node = next;
  }
}

void DagRunner::spawn(Run& run, size_t node) {
  handoff_release(&run);
  run.group->run(ChainTask{this, &run, node});
}

void DagRunner::run_on_pool(Run& run, const std::vector<size_t>& start) {
  run_in_pool([&] {
    tbb::task_group group;
    run.group = &group;
    if (start.size() == 1) {
      run_chain(run, start.front());
    } else {
      // Many roots are split into ranges the pool steals, not one task each:
      // independent small ops then cost a loop iteration, not a spawn. The
      // chains they start spawn into the group as usual.
      tbb::parallel_for(tbb::blocked_range<size_t>(0, start.size()), [&](const tbb::blocked_range<size_t>& range) {
        handoff_acquire(&run);
        for (size_t i = range.begin(); i != range.end(); ++i) run_chain(run, start[i]);
        handoff_release(&run);
      });
      handoff_acquire(&run);
    }
    group.wait();
    handoff_acquire(&run);  // after every task, which released it
  });
}

std::optional<DagFailure> DagRunner::run_parallel(NodeFn fn, void* context) {
  const size_t n = dag_.size();
  if (n == 0) return std::nullopt;
  const auto& preds = dag_.predecessors();
  for (size_t i = 0; i < n; ++i) pending_[i].store(static_cast<uint32_t>(preds[i].size()), std::memory_order_relaxed);
  Run run;
  run.fn = fn;
  run.context = context;
  if (deferred_.empty()) {
    run_on_pool(run, dag_.roots());
    return std::move(run.failure);
  }
  active_ = &run;
  std::vector<size_t> start = dag_.roots();
  for (;;) {
    // Deferred nodes only hand their work over, so they start first: an op
    // that blocks (on another rank, on a host function's own wait) must not
    // hold back, on a thread the pool has no twin for, a collective that
    // another rank is waiting on.
    std::stable_partition(start.begin(), start.end(), [&](size_t node) { return deferred_[node]; });
    if (!start.empty()) run_on_pool(run, start);
    start.clear();
    // The pool has nothing left to run: wait off it for a deferred node.
    std::unique_lock lock(run.deferred_mutex);
    run.deferred_done.wait(lock, [&] { return !run.ready.empty() || run.in_flight == 0; });
    if (run.ready.empty()) break;
    start.swap(run.ready);
  }
  active_ = nullptr;
  return std::move(run.failure);
}

void DagRunner::set_deferred(std::vector<bool> deferred) {
  if (std::find(deferred.begin(), deferred.end(), true) == deferred.end()) deferred.clear();
  deferred_ = std::move(deferred);
}

void DagRunner::complete(size_t node, std::exception_ptr error) {
  Run& run = *active_;
  // Notified under the lock: once in_flight reaches 0 the waiting run may
  // return and destroy `run`.
  std::lock_guard lock(run.deferred_mutex);
  if (error) {
    run.fail_with(node, std::move(error));
  } else {
    for (size_t s : dag_.successors()[node])
      if (pending_[s].fetch_sub(1, std::memory_order_acq_rel) == 1) run.ready.push_back(s);
  }
  --run.in_flight;
  run.deferred_done.notify_all();
}

std::optional<DagFailure> DagRunner::run_sequential(NodeFn fn, void* context) const {
  for (size_t node : dag_.order()) {
    try {
      fn(context, node);
    } catch (...) {
      return DagFailure{node, std::current_exception()};
    }
  }
  return std::nullopt;
}

}  // namespace svod::detail
