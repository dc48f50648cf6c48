// Dependency graphs of operations and the runner that executes them.
//
// A Dag is nodes 0..n-1 with predecessor lists, checked for cycles once and
// given one deterministic topological order (Kahn's algorithm, smallest ready
// index first). DagRunner executes a node function over it either on the
// calling thread in that order, or on svod's thread pool, starting each node
// the moment its last predecessor finishes (atomic countdowns, no levels), so
// a long branch never waits for an unrelated one. Plans and the executor both
// run their graphs through this one implementation.
//
// Deferred nodes (set_deferred) are for work that waits on other processes or
// threads, such as collectives: their node function only starts the work
// somewhere off the pool, and the node finishes when complete() is called.
// Nothing on the pool ever blocks for them: when the pool runs out of ready
// nodes the calling thread leaves it and waits there for completions, then
// runs the nodes they made ready. So runners that share the pool (ranks in
// one process) cannot starve each other by holding its threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace svod::detail {

class Dag {
 public:
  Dag() = default;
  // preds[i] lists the nodes that must finish before node i (any order,
  // repeats allowed). Throws Error(Validation) for an index out of range, a
  // node that depends on itself, or a cycle, naming the nodes with `name`.
  Dag(std::vector<std::vector<size_t>> preds, const std::function<std::string(size_t)>& name);

  size_t size() const noexcept { return preds_.size(); }
  const std::vector<std::vector<size_t>>& predecessors() const noexcept { return preds_; }
  const std::vector<std::vector<size_t>>& successors() const noexcept { return succs_; }
  const std::vector<size_t>& order() const noexcept { return order_; }
  const std::vector<size_t>& roots() const noexcept { return roots_; }

 private:
  std::vector<std::vector<size_t>> preds_;  // sorted, unique
  std::vector<std::vector<size_t>> succs_;  // sorted
  std::vector<size_t> order_;
  std::vector<size_t> roots_;
};

// Deterministic topological order of `preds` (which must hold valid,
// self-free indices); nullopt when there is a cycle.
std::optional<std::vector<size_t>> topological_order(const std::vector<std::vector<size_t>>& preds);

// The first node that failed and what it threw.
struct DagFailure {
  size_t node;
  std::exception_ptr error;
};

class DagRunner {
 public:
  using NodeFn = void (*)(void* context, size_t node);

  DagRunner() = default;
  explicit DagRunner(Dag dag);

  const Dag& dag() const noexcept { return dag_; }

  // Runs fn(context, node) for every node after its predecessors. After the
  // first exception no further node starts; nodes already running finish, and
  // the failure is returned. One run at a time per runner (the caller
  // serializes); the steady state allocates nothing of its own.
  std::optional<DagFailure> run_parallel(NodeFn fn, void* context);
  std::optional<DagFailure> run_sequential(NodeFn fn, void* context) const;

  // Marks the nodes whose completion run_parallel waits for through
  // complete() (run_sequential ignores the marks: there the node function
  // finishes its work before returning).
  void set_deferred(std::vector<bool> deferred);
  // Finishes deferred node `node` of the run in progress, with `error` (null
  // when it succeeded). Called once per started deferred node, from any
  // thread; the run does not return before every started one completed.
  void complete(size_t node, std::exception_ptr error);

  template <typename Fn>
  std::optional<DagFailure> run(bool sequential, Fn& fn) {
    NodeFn thunk = [](void* c, size_t node) { (*static_cast<Fn*>(c))(node); };
    return sequential ? run_sequential(thunk, &fn) : run_parallel(thunk, &fn);
  }

 private:
  struct Run;
  struct ChainTask;
  void run_chain(Run& run, size_t node);
  void spawn(Run& run, size_t node);
  // Runs `start` and every node they make ready on the pool, except what
  // waits for a deferred node still running.
  void run_on_pool(Run& run, const std::vector<size_t>& start);

  Dag dag_;
  std::unique_ptr<std::atomic<uint32_t>[]> pending_;
  std::vector<bool> deferred_;  // empty when no node is deferred
  Run* active_ = nullptr;       // the run in progress, for complete()
};

}  // namespace svod::detail
