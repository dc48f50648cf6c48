// UnifiedExecutor: runs graphs of kernels, copies and host functions that
// span several devices, each node on its own device's queue, in dependency
// order, with independent work on different devices overlapping.
//
// An ExecutionGraph is built by adding nodes in program order. Each node
// states the byte ranges it reads and writes (KernelBufferAccess); the
// dependencies are the read/write hazards between those ranges (RAW, WAR,
// WAW, from the same analysis plans use) plus explicit `after` edges. Every
// device taking part gets a DeviceContext saying how work reaches it: the CPU
// runs nodes on the thread pool; an OpenCL device enqueues them on its
// in-order queue. A node starts once its predecessors allow it:
//  - on the same in-order queue, as soon as they are enqueued (the queue
//    keeps the order);
//  - on another queue of the same OpenCL context, with SyncStrategy::
//    DeviceEvents, as soon as they are enqueued, passing their events in the
//    wait list, so the host never blocks;
//  - otherwise (host work, other contexts, or SyncStrategy::BlockingHostWait),
//    once they have finished, which the host observes.
// Copies between devices that have no direct path are staged through host
// memory on the thread pool. CUDA kernels and copies run as host work (each
// launch waits for its stream), except that a graph made only of kernels of
// one CUDA device, run without an observer, is submitted as one CUDA graph
// (see CudaDevice::run_graph). Graphs are reusable: execute() may run one graph
// many times (one run at a time per graph).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "svod/device/buffer.h"
#include "svod/device/device.h"
#include "svod/plan/execution_plan.h"
#include "svod/program/program_spec.h"

namespace svod {

enum class SyncStrategy {
  BlockingHostWait,  // the host waits for a predecessor on another queue before submitting
  DeviceEvents,      // queues wait on each other's events where the devices share a context
};
std::string_view to_string(SyncStrategy strategy) noexcept;

// How a node waits for one predecessor, given both devices and the strategy.
enum class WaitKind {
  InOrder,      // same in-order queue: submission order suffices
  DeviceEvent,  // the device waits on the predecessor's event
  HostWait,     // the host waits for the predecessor to finish, then submits
};
std::string_view to_string(WaitKind kind) noexcept;

// One buffer a node touches and how.
struct KernelBufferAccess {
  Buffer buffer;
  Access access = Access::Read;
};

// How work reaches one device. Contexts are created by the executor, one per
// device, and live as long as it does.
class DeviceContext {
 public:
  enum class Lane {
    HostPool,     // run on svod's thread pool (CPU device, host functions, staged copies)
    OpenClQueue,  // enqueued on the device's in-order OpenCL queue
  };

  DeviceContext(Device& device, Lane lane) : device_(&device), lane_(lane) {}
  Device& device() const noexcept { return *device_; }
  Lane lane() const noexcept { return lane_; }
  bool has_events() const noexcept { return lane_ == Lane::OpenClQueue; }

 private:
  Device* device_;
  Lane lane_;
};

struct NodeOptions {
  std::string label;          // for errors and traces; "node N" when empty
  std::vector<size_t> after;  // nodes (added earlier) that must finish first
  // Kernel nodes: launch sizes to use instead of the spec's (work-groups and
  // work-items per group; for CPU programs global[0] is the core_id slice
  // count). For sizes that name variables the kernel does not take.
  std::optional<std::array<int64_t, 3>> global;
  std::optional<std::array<int64_t, 3>> local;
};

struct ExecutionNode {
  enum class Kind { Kernel, Copy, Host };
  size_t id = 0;
  Kind kind = Kind::Kernel;
  std::string label;
  Device* device = nullptr;  // where it runs (kernels: the program's device)
  std::vector<KernelBufferAccess> accesses;  // Copy: {dst (write), src (read)}
  std::vector<size_t> after;
  // Kernel
  std::shared_ptr<const Program> program;
  std::vector<Buffer> buffers;   // in declared order
  std::vector<int64_t> scalars;  // caller scalars (all but core_id)
  std::optional<std::array<int64_t, 3>> global;
  std::optional<std::array<int64_t, 3>> local;
  // Host
  std::function<void()> function;
};

class UnifiedExecutor;

class ExecutionGraph {
 public:
  ExecutionGraph();
  ~ExecutionGraph();
  ExecutionGraph(ExecutionGraph&&) noexcept;
  ExecutionGraph& operator=(ExecutionGraph&&) noexcept;

  // A kernel on its program's device; its accesses are its buffers with the
  // access each parameter declares. Counts are checked now (Validation).
  size_t add_kernel(std::shared_ptr<const Program> program, std::vector<Buffer> buffers,
                    std::vector<int64_t> scalars, NodeOptions options = {});
  // dst <- src (equal byte sizes), on whichever device can do it directly,
  // else staged through host memory.
  size_t add_copy(Buffer dst, Buffer src, NodeOptions options = {});
  // A host function run on the thread pool, touching `accesses`.
  size_t add_host(std::function<void()> function, std::vector<KernelBufferAccess> accesses, NodeOptions options = {});

  size_t size() const noexcept;
  const ExecutionNode& node(size_t id) const;
  // Predecessors of each node (hazards and `after`, sorted, unique).
  const std::vector<std::vector<size_t>>& predecessors() const;
  // Deterministic topological order (smallest ready id first).
  const std::vector<size_t>& order() const;
  // Nodes grouped by dependency depth: group k holds the nodes whose longest
  // path from a root has k edges, ids ascending.
  std::vector<std::vector<size_t>> parallel_groups() const;

  struct State;  // opaque; defined in executor.cpp

 private:
  friend class UnifiedExecutor;
  std::unique_ptr<State> state_;
};

struct GraphRunOptions {
  SyncStrategy strategy = SyncStrategy::DeviceEvents;
  // Run the nodes one at a time in order() on the calling thread, each to
  // completion (for debugging).
  bool sequential = false;
  // Told when each node starts (submitted to its queue, or started on the
  // pool) and finishes (observed complete); calls may come from pool threads
  // and OpenCL callback hand-offs.
  PlanObserver* observer = nullptr;
};

class UnifiedExecutor {
 public:
  UnifiedExecutor();
  ~UnifiedExecutor();
  UnifiedExecutor(const UnifiedExecutor&) = delete;
  UnifiedExecutor& operator=(const UnifiedExecutor&) = delete;

  // The context of `device`, created on first use. Devices must outlive the
  // executor's use of them (registry devices live for the process).
  const DeviceContext& context(Device& device);
  // How `to` waits for a predecessor `from` under `strategy`.
  WaitKind wait_kind(Device& from, Device& to, SyncStrategy strategy);

  // Runs every node once and returns when all finished. The first failure is
  // rethrown with its kind, its message naming the node; after a failure no
  // further node starts (commands already queued finish). Thread-safe across
  // graphs; one run at a time per graph.
  void execute(ExecutionGraph& graph, const GraphRunOptions& options = {});

  // Waits for all work submitted to every device this executor has seen.
  void synchronize_all();

 private:
  std::mutex mutex_;
  std::map<Device*, std::unique_ptr<DeviceContext>> contexts_;
};

// The process's executor.
UnifiedExecutor& global_executor();

}  // namespace svod
