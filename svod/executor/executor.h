// UnifiedExecutor: runs graphs of kernels, copies and host functions that
// span several devices, each node on its own device's queue, in dependency
// order, with independent work on different devices overlapping.
//
// An ExecutionGraph is a front end of ExecutionPlanBuilder for callers that
// hold buffers rather than plan slots: each node added in program order
// becomes the plan op of the same index (a KernelOp, CopyOp or CustomOp)
// over slots of the buffers it names. Each node states the byte ranges it
// reads and writes (kernels by their parameters' access, host functions by
// BufferAccess); the dependencies are the
// read/write hazards between those ranges (RAW, WAR, WAW) plus explicit
// `after` edges.
//
// The first execute() after nodes were added builds the plan (hazards,
// queues and waits worked out once), and every run goes through the plan's
// runner, so graphs and plans share one runner and one set of semantics on
// every device: kernels of devices with
// queues are submitted to them (queue.h) and wait for other queues on the
// device where the queues allow it (SyncStrategy::DeviceEvents), host work
// waits on the host; a graph made only of kernels of one device may go to
// the device as one submission (CUDA graphs); a failure poisons the graph
// (later runs throw ErrorKind::PlanPoisoned until a node is added).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "svod/device/buffer.h"
#include "svod/device/device.h"
#include "svod/device/queue.h"
#include "svod/plan/execution_plan.h"
#include "svod/program/program_spec.h"

namespace svod {

// One buffer a node touches and how.
struct BufferAccess {
  Buffer buffer;
  Access access = Access::Read;
};

struct NodeOptions {
  std::string label;          // for errors and traces; "op N" when empty
  std::vector<size_t> after;  // nodes (added earlier) that must finish first
};

class UnifiedExecutor;

class ExecutionGraph {
 public:
  ExecutionGraph();
  ~ExecutionGraph();
  ExecutionGraph(ExecutionGraph&&) noexcept;
  ExecutionGraph& operator=(ExecutionGraph&&) noexcept;

  // A kernel on its program's device, launched on `args` (args.dims, when
  // set, replace the spec's launch sizes); its accesses are its buffers with
  // the access each parameter declares. Counts are checked now (Validation).
  size_t add_kernel(std::shared_ptr<const Program> program, KernelArgs args, NodeOptions options = {});
  // dst <- src (equal byte sizes), on whichever device can do it directly,
  // else staged through host memory.
  size_t add_copy(Buffer dst, Buffer src, NodeOptions options = {});
  // A host function run on the thread pool, touching `accesses`.
  size_t add_host(std::function<void()> function, std::vector<BufferAccess> accesses, NodeOptions options = {});

  size_t size() const noexcept;
  // The graph's plan, built on first use after nodes were added; building
  // checks every node as plans do (Error(Validation) naming the op). Node i
  // is its op i (ExecutionPlan::op, op_device).
  ExecutionPlan& plan();
  // Predecessors of each node (hazards and `after`, sorted, unique).
  const std::vector<std::vector<size_t>>& predecessors();
  // Deterministic topological order (smallest ready id first).
  std::vector<size_t> order();
  // Nodes grouped by dependency depth: group k holds the nodes whose longest
  // path from a root has k edges, ids ascending.
  std::vector<std::vector<size_t>> parallel_groups();

 private:
  friend class UnifiedExecutor;
  struct State;
  std::unique_ptr<State> state_;
};

struct GraphRunOptions {
  SyncStrategy strategy = SyncStrategy::DeviceEvents;
  // Run the nodes one at a time in order() on the calling thread, each to
  // completion (for debugging).
  bool sequential = false;
  // Told when each node starts and finishes (ExecuteOptions::observer).
  PlanObserver* observer = nullptr;
};

class UnifiedExecutor {
 public:
  UnifiedExecutor();
  ~UnifiedExecutor();
  UnifiedExecutor(const UnifiedExecutor&) = delete;
  UnifiedExecutor& operator=(const UnifiedExecutor&) = delete;

  // Runs every node once and returns when all finished. The first failure is
  // rethrown with its kind, its message naming the node; after a failure no
  // further node starts, the work already submitted finishes, and the graph
  // is poisoned. Thread-safe across graphs; runs of one graph are serialized.
  void execute(ExecutionGraph& graph, const GraphRunOptions& options = {});

  // Waits for all work submitted to every device this executor has run on.
  void synchronize_all();

 private:
  std::mutex mutex_;
  std::set<Device*> devices_;
};

// The process's executor.
UnifiedExecutor& global_executor();

}  // namespace svod
