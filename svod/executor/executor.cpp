#include "svod/executor/executor.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/device/cpu/cpu_device.h"
#include "svod/device/cuda/cuda_device.h"
#include "svod/plan/dag.h"
#include "svod/plan/hazards.h"
#include "svod/program/cpu_abi.h"
#if SVOD_HAVE_OPENCL
#include "svod/device/opencl/opencl_device.h"
#endif

namespace svod {

std::string_view to_string(SyncStrategy strategy) noexcept {
  switch (strategy) {
    case SyncStrategy::BlockingHostWait: return "blocking host wait";
    case SyncStrategy::DeviceEvents: return "device events";
  }
  return "?";
}

std::string_view to_string(WaitKind kind) noexcept {
  switch (kind) {
    case WaitKind::InOrder: return "in order";
    case WaitKind::DeviceEvent: return "device event";
    case WaitKind::HostWait: return "host wait";
  }
  return "?";
}

namespace {

#if SVOD_HAVE_OPENCL
OpenClDevice* opencl(Device* device) { return dynamic_cast<OpenClDevice*>(device); }
#endif

// Rethrows the current exception as an svod::Error of the same kind whose
// message starts with `where`.
[[noreturn]] void rethrow_at(const std::string& where) {
  try {
    throw;
  } catch (const Error& e) {
    throw make_error(e.kind(), "{}: {}", where, e.what());
  } catch (const std::exception& e) {
    throw make_error(ErrorKind::Execution, "{}: {}", where, e.what());
  } catch (...) {
    throw make_error(ErrorKind::Execution, "{}: unknown exception", where);
  }
}

}  // namespace

// ---- ExecutionGraph --------------------------------------------------------

struct ExecutionGraph::State {
  std::vector<ExecutionNode> nodes;
  bool dirty = true;
  detail::Dag dag;
  std::mutex run_mutex;  // one execute() at a time

  std::string name(size_t i) const {
    return nodes[i].label.empty() ? fmt::format("node {}", i) : fmt::format("node {} ({})", i, nodes[i].label);
  }

  size_t add(ExecutionNode node, NodeOptions options) {
    const size_t id = nodes.size();
    for (size_t p : options.after)
      if (p >= id)
        throw make_error(ErrorKind::Validation, "node {}: `after` names node {}, which is not an earlier node", id, p);
    node.id = id;
    node.label = std::move(options.label);
    node.after = std::move(options.after);
    node.global = options.global;
    node.local = options.local;
    for (const auto& a : node.accesses)
      if (!a.buffer.valid()) throw make_error(ErrorKind::Validation, "{}: an access names an empty buffer", name(id));
    nodes.push_back(std::move(node));
    dirty = true;
    return id;
  }

  void finalize() {
    if (!dirty) return;
    std::vector<std::vector<detail::MemoryAccess>> ranges(nodes.size());
    std::vector<size_t> order(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      order[i] = i;
      for (const auto& a : nodes[i].accesses) {
        const Buffer& b = a.buffer;
        ranges[i].push_back({{b.storage_id(), b.byte_offset(), b.byte_offset() + b.bytes()}, reads(a.access),
                             writes(a.access)});
      }
    }
    auto preds = detail::hazard_predecessors(order, ranges);
    for (size_t i = 0; i < nodes.size(); ++i) preds[i].insert(preds[i].end(), nodes[i].after.begin(), nodes[i].after.end());
    dag = detail::Dag(std::move(preds), [this](size_t i) { return name(i); });
    dirty = false;
  }
};

ExecutionGraph::ExecutionGraph() : state_(std::make_unique<State>()) {}
ExecutionGraph::~ExecutionGraph() = default;
ExecutionGraph::ExecutionGraph(ExecutionGraph&&) noexcept = default;
ExecutionGraph& ExecutionGraph::operator=(ExecutionGraph&&) noexcept = default;

size_t ExecutionGraph::add_kernel(std::shared_ptr<const Program> program, std::vector<Buffer> buffers,
                                  std::vector<int64_t> scalars, NodeOptions options) {
  if (!program) throw make_error(ErrorKind::Validation, "node {}: no program", size());
  const ProgramSpec& spec = program->spec();
  if (buffers.size() != spec.buffers.size())
    throw make_error(ErrorKind::Validation, "node {}: program \"{}\" takes {} buffers, got {}", size(),
                     spec.display_name(), spec.buffers.size(), buffers.size());
  const size_t caller_scalars = spec.scalars.size() - (spec.core_id_index() ? 1 : 0);
  if (scalars.size() != caller_scalars)
    throw make_error(ErrorKind::Validation, "node {}: program \"{}\" takes {} scalars, got {}", size(),
                     spec.display_name(), caller_scalars, scalars.size());
  ExecutionNode node;
  node.kind = ExecutionNode::Kind::Kernel;
  node.device = &program->device();
  for (size_t i = 0; i < buffers.size(); ++i) node.accesses.push_back({buffers[i], spec.buffers[i].access});
  node.program = std::move(program);
  node.buffers = std::move(buffers);
  node.scalars = std::move(scalars);
  if (options.label.empty()) options.label = spec.display_name();
  return state_->add(std::move(node), std::move(options));
}

size_t ExecutionGraph::add_copy(Buffer dst, Buffer src, NodeOptions options) {
  if (!dst.valid() || !src.valid()) throw make_error(ErrorKind::Validation, "node {}: copy of an empty buffer", size());
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "node {}: copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     size(), src.bytes(), dst.bytes());
  ExecutionNode node;
  node.kind = ExecutionNode::Kind::Copy;
  // The device that can do it in one command; otherwise the host stages it.
  node.device = create_cpu_device().get();
#if SVOD_HAVE_OPENCL
  if (OpenClDevice* d = opencl(&dst.device()); d && d->direct_copy(dst, src)) node.device = d;
  else if (OpenClDevice* s = opencl(&src.device()); s && s->direct_copy(dst, src)) node.device = s;
#endif
  node.accesses = {{dst, Access::Write}, {src, Access::Read}};
  if (options.label.empty()) options.label = fmt::format("copy {} -> {}", src.device().name(), dst.device().name());
  return state_->add(std::move(node), std::move(options));
}

size_t ExecutionGraph::add_host(std::function<void()> function, std::vector<KernelBufferAccess> accesses,
                                NodeOptions options) {
  if (!function) throw make_error(ErrorKind::Validation, "node {}: no host function", size());
  ExecutionNode node;
  node.kind = ExecutionNode::Kind::Host;
  node.device = create_cpu_device().get();
  node.accesses = std::move(accesses);
  node.function = std::move(function);
  return state_->add(std::move(node), std::move(options));
}

size_t ExecutionGraph::size() const noexcept { return state_->nodes.size(); }

const ExecutionNode& ExecutionGraph::node(size_t id) const {
  if (id >= state_->nodes.size())
    throw make_error(ErrorKind::Validation, "node {} does not exist (the graph has {})", id, state_->nodes.size());
  return state_->nodes[id];
}

const std::vector<std::vector<size_t>>& ExecutionGraph::predecessors() const {
  state_->finalize();
  return state_->dag.predecessors();
}

const std::vector<size_t>& ExecutionGraph::order() const {
  state_->finalize();
  return state_->dag.order();
}

std::vector<std::vector<size_t>> ExecutionGraph::parallel_groups() const {
  state_->finalize();
  const auto& preds = state_->dag.predecessors();
  std::vector<size_t> depth(preds.size(), 0);
  std::vector<std::vector<size_t>> groups;
  for (size_t n : state_->dag.order()) {
    for (size_t p : preds[n]) depth[n] = std::max(depth[n], depth[p] + 1);
    if (groups.size() <= depth[n]) groups.resize(depth[n] + 1);
    groups[depth[n]].push_back(n);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

// ---- running one graph -----------------------------------------------------

namespace {

// A device kernel node's launch sizes: the node's where it gives them, else
// the program's own for the node's scalars.
LaunchDims node_dims(const ExecutionNode& node, const LaunchLayout& layout) {
  LaunchDims dims;
  if (!node.global || !node.local) dims = layout.dims(node.scalars);
  if (node.global) dims.global = *node.global;
  if (node.local) dims.local = *node.local;
  return dims;
}

// Work that runs on the host: CPU kernels, other devices' synchronous
// launches, staged or host copies, host functions.
void run_on_host(const ExecutionNode& node) {
  switch (node.kind) {
    case ExecutionNode::Kind::Kernel: {
      if (const auto* cuda = dynamic_cast<const CudaProgram*>(node.program.get())) {
        const LaunchDims dims = node_dims(node, cuda->layout());
        cuda->launch_with(node.buffers, node.scalars, &dims);
        return;
      }
      const auto* cpu = dynamic_cast<const CpuProgram*>(node.program.get());
      if (!cpu || !node.global) {
        node.program->launch(node.buffers, node.scalars);
        return;
      }
      // The caller gave the slice count: build the ABI arguments here, as
      // CpuProgram::launch would, and run that many slices.
      const LaunchLayout& layout = cpu->layout();
      uint64_t args[kMaxKernelArgs];
      int64_t* abi = reinterpret_cast<int64_t*>(args + layout.buffer_count());
      layout.fill_scalars(node.scalars, abi);
      for (size_t i = 0; i < node.buffers.size(); ++i) {
        const Buffer& b = node.buffers[i];
        if (!b.is_host())
          throw make_error(ErrorKind::Validation, "buffer {} (\"{}\") is on {}, not in host memory", i,
                           node.program->spec().buffers[i].name, b.device().name());
        if (auto need = layout.min_bytes(i, abi); need && b.bytes() < *need)
          throw make_error(ErrorKind::Validation, "buffer {} (\"{}\") holds {} bytes but the launch needs {}", i,
                           node.program->spec().buffers[i].name, b.bytes(), *need);
        args[i] = reinterpret_cast<uint64_t>(b.data());
      }
      cpu->run(args, (*node.global)[0]);
      return;
    }
    case ExecutionNode::Kind::Copy: {
      const Buffer& dst = node.accesses[0].buffer;
      const Buffer& src = node.accesses[1].buffer;
      if (dst.is_host() && src.is_host()) std::memmove(dst.data(), src.data(), src.bytes());
      else (dst.is_host() ? src : dst).device().copy(dst, src);
      return;
    }
    case ExecutionNode::Kind::Host: node.function(); return;
  }
}

#if SVOD_HAVE_OPENCL
OpenClEvent enqueue_on_queue(const ExecutionNode& node, std::span<const OpenClEvent> waits) {
  if (node.kind == ExecutionNode::Kind::Copy)
    return static_cast<OpenClDevice*>(node.device)->enqueue_copy(node.accesses[0].buffer, node.accesses[1].buffer, waits);
  const auto& program = static_cast<const OpenClProgram&>(*node.program);
  if (!node.global && !node.local) return program.enqueue(node.buffers, node.scalars, waits);
  const LaunchDims dims = node_dims(node, program.layout());
  return program.enqueue(node.buffers, node.scalars, waits, &dims);
}
#endif

// A graph made only of kernels of one CUDA device runs as one CUDA graph:
// the device keeps the instantiated graph per shape (programs and edges) and
// on later runs only updates the parameters and sizes that changed, so a plan
// re-run with rebound buffers or new variable values replays it. Returns
// false, running nothing, for any other graph.
bool run_as_cuda_graph(const ExecutionGraph::State& state) {
  CudaDevice* device = nullptr;
  for (const auto& node : state.nodes) {
    auto* cuda = dynamic_cast<CudaDevice*>(node.device);
    if (node.kind != ExecutionNode::Kind::Kernel || !cuda || (device && cuda != device)) return false;
    device = cuda;
  }
  const auto& preds = state.dag.predecessors();
  std::vector<CudaGraphKernel> kernels;
  kernels.reserve(state.nodes.size());
  for (size_t i = 0; i < state.nodes.size(); ++i) {
    const ExecutionNode& node = state.nodes[i];
    const auto& program = static_cast<const CudaProgram&>(*node.program);
    kernels.push_back({node.program, node.buffers, node.scalars, node_dims(node, program.layout()), preds[i]});
  }
  device->run_graph(kernels);
  return true;
}

// Host work of one run: items posted here are run by whichever thread gets
// to them first — a pool worker (each post enqueues one pool task) or the
// thread that called execute(), which drains the queue while it waits, so it
// adds to the pool instead of idling.
//
// A pool task may start long after the run it was enqueued for has ended (the
// caller drained the queue itself), or never, if the process exits first, so
// it must not own or point at the run's queue. Pool tasks capture nothing:
// they take an item from any queue in the registry of live runs. A queue is
// in the registry for exactly its lifetime, and a run ends only when all its
// items have run, so a task either finds an item of a live run or nothing.
// (An earlier version let each task hold its queue by shared_ptr; tasks still
// pending when the process exited then leaked every run's queue.)
struct WorkQueue;

struct WorkRegistry {
  std::mutex mutex;  // taken before any WorkQueue::mutex, never after
  std::vector<WorkQueue*> live;
};

// Never destroyed: pool tasks may still run during or after static
// destruction.
WorkRegistry& work_registry() {
  static WorkRegistry* registry = new WorkRegistry;
  return *registry;
}

struct WorkQueue {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> items;

  WorkQueue() {
    WorkRegistry& r = work_registry();
    std::lock_guard lock(r.mutex);
    r.live.push_back(this);
  }
  ~WorkQueue() {
    WorkRegistry& r = work_registry();
    std::lock_guard lock(r.mutex);
    std::erase(r.live, this);
  }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void post(std::function<void()> item) {
    {
      // Notified under the lock: once it drops, the waiter may run the item,
      // end the run and destroy this queue.
      std::lock_guard lock(mutex);
      items.push_back(std::move(item));
      wake.notify_one();
    }
    thread_pool().enqueue(run_one);
  }

  // One pool task: runs one item of some live run, if any is left.
  static void run_one() {
    std::function<void()> next;
    {
      WorkRegistry& r = work_registry();
      std::lock_guard registry_lock(r.mutex);
      for (WorkQueue* queue : r.live) {
        std::lock_guard lock(queue->mutex);
        if (queue->items.empty()) continue;
        next = std::move(queue->items.front());
        queue->items.pop_front();
        break;
      }
    }
    // The item's run cannot end before the item finishes its node.
    if (next) next();
  }
};

struct GraphRun {
  const std::vector<ExecutionNode>& nodes;
  const ExecutionGraph::State& graph;
  PlanObserver* observer;
  std::vector<const DeviceContext*> contexts;
  std::vector<std::vector<std::pair<size_t, WaitKind>>> waits_for;  // per node: predecessor, how
  std::vector<std::vector<size_t>> released_on_submit;               // per node: successors
  std::vector<std::vector<size_t>> released_on_finish;
  std::unique_ptr<std::atomic<uint32_t>[]> blockers;
#if SVOD_HAVE_OPENCL
  std::vector<OpenClEvent> events;
#endif
  std::atomic<bool> failed{false};
  std::unique_ptr<WorkQueue> work = std::make_unique<WorkQueue>();
  size_t remaining = 0;  // guarded by work->mutex
  std::exception_ptr error;

  GraphRun(const ExecutionGraph::State& g, PlanObserver* obs) : nodes(g.nodes), graph(g), observer(obs) {}

  void fail(size_t node) {
    std::exception_ptr wrapped;
    try {
      rethrow_at(graph.name(node) + " failed");
    } catch (...) {
      wrapped = std::current_exception();
    }
    std::lock_guard lock(work->mutex);
    if (!error) error = wrapped;
    failed.store(true);
  }

  void release(const std::vector<size_t>& successors) {
    for (size_t s : successors)
      if (blockers[s].fetch_sub(1, std::memory_order_acq_rel) == 1) dispatch(s);
  }

  // The last thing a node does; the run may end as soon as the lock drops.
  void finished(size_t node, bool ran) {
    if (ran && observer) observer->op_finished(node);
    release(released_on_finish[node]);
    std::lock_guard lock(work->mutex);
    if (--remaining == 0) work->wake.notify_all();
  }

  void run_host_node(size_t node) {
    bool ran = false;
    try {
      if (!failed.load(std::memory_order_acquire)) {
        if (observer) observer->op_started(node);
        ran = true;
        run_on_host(nodes[node]);
      }
    } catch (...) {
      fail(node);
    }
    release(released_on_submit[node]);
    finished(node, ran);
  }

  void dispatch(size_t node) {
    if (failed.load(std::memory_order_acquire)) {
      // Skipped: successors are released (and skipped in turn) so the run
      // still accounts for every node.
      release(released_on_submit[node]);
      finished(node, false);
      return;
    }
    if (contexts[node]->lane() == DeviceContext::Lane::HostPool) {
      work->post([this, node] { run_host_node(node); });
      return;
    }
#if SVOD_HAVE_OPENCL
    std::vector<OpenClEvent> waits;
    for (const auto& [p, kind] : waits_for[node])
      if (kind == WaitKind::DeviceEvent) waits.push_back(events[p]);
    try {
      if (observer) observer->op_started(node);
      events[node] = enqueue_on_queue(nodes[node], waits);
    } catch (...) {
      fail(node);
      release(released_on_submit[node]);
      finished(node, true);
      return;
    }
    release(released_on_submit[node]);
    // The callback comes on an OpenCL runtime thread, which must not block or
    // enqueue; the rest happens as host work.
    try {
      events[node].on_complete([this, node](bool ok) {
        work->post([this, node, ok] {
          if (!ok) {
            try {
              throw make_error(ErrorKind::Execution, "the OpenCL command failed on {}", nodes[node].device->name());
            } catch (...) {
              fail(node);
            }
          }
          finished(node, true);
        });
      });
    } catch (const Error&) {
      // No callback: a host thread waits for the command instead.
      work->post([this, node] {
        try {
          events[node].wait();
        } catch (...) {
          fail(node);
        }
        finished(node, true);
      });
    }
#endif
  }

  // Runs posted host work on the calling thread until every node finished.
  void wait() {
    std::unique_lock lock(work->mutex);
    while (remaining > 0) {
      if (work->items.empty()) {
        work->wake.wait(lock);
        continue;
      }
      std::function<void()> next = std::move(work->items.front());
      work->items.pop_front();
      lock.unlock();
      next();
      lock.lock();
    }
  }
};

}  // namespace

// ---- UnifiedExecutor ---------------------------------------------------------

UnifiedExecutor::UnifiedExecutor() = default;
UnifiedExecutor::~UnifiedExecutor() = default;

const DeviceContext& UnifiedExecutor::context(Device& device) {
  DeviceContext::Lane lane = DeviceContext::Lane::HostPool;
#if SVOD_HAVE_OPENCL
  if (opencl(&device)) lane = DeviceContext::Lane::OpenClQueue;
#endif
  std::lock_guard lock(mutex_);
  auto& slot = contexts_[&device];
  // A device freed and another made at its address gets a fresh context.
  if (!slot || slot->lane() != lane) slot = std::make_unique<DeviceContext>(device, lane);
  return *slot;
}

WaitKind UnifiedExecutor::wait_kind(Device& from, Device& to, SyncStrategy strategy) {
  const DeviceContext& a = context(from);
  const DeviceContext& b = context(to);
  if (a.lane() != DeviceContext::Lane::OpenClQueue || b.lane() != DeviceContext::Lane::OpenClQueue)
    return WaitKind::HostWait;
  if (&from == &to) return WaitKind::InOrder;
#if SVOD_HAVE_OPENCL
  if (strategy == SyncStrategy::DeviceEvents && opencl(&from)->shares_context(*opencl(&to))) return WaitKind::DeviceEvent;
#endif
  return WaitKind::HostWait;
}

void UnifiedExecutor::execute(ExecutionGraph& graph, const GraphRunOptions& options) {
  auto& state = *graph.state_;
  std::lock_guard run_lock(state.run_mutex);
  state.finalize();
  const size_t n = state.nodes.size();
  if (n == 0) return;
  const auto& preds = state.dag.predecessors();

  // Per-node observation and sequential debugging need per-node launches.
  if (!options.sequential && !options.observer && run_as_cuda_graph(state)) return;

  if (options.sequential) {
    for (size_t node : state.dag.order()) {
      const ExecutionNode& x = state.nodes[node];
      if (options.observer) options.observer->op_started(node);
      try {
#if SVOD_HAVE_OPENCL
        if (context(*x.device).lane() == DeviceContext::Lane::OpenClQueue) enqueue_on_queue(x, {}).wait();
        else run_on_host(x);
#else
        run_on_host(x);
#endif
      } catch (...) {
        if (options.observer) options.observer->op_finished(node);
        rethrow_at(state.name(node) + " failed");
      }
      if (options.observer) options.observer->op_finished(node);
    }
    return;
  }

  GraphRun run(state, options.observer);
  run.contexts.resize(n);
  for (size_t i = 0; i < n; ++i) run.contexts[i] = &context(*state.nodes[i].device);
  run.waits_for.resize(n);
  run.released_on_submit.resize(n);
  run.released_on_finish.resize(n);
  run.blockers = std::make_unique<std::atomic<uint32_t>[]>(n);
#if SVOD_HAVE_OPENCL
  run.events.resize(n);
#endif
  for (size_t s = 0; s < n; ++s) {
    for (size_t p : preds[s]) {
      const WaitKind kind = wait_kind(*state.nodes[p].device, *state.nodes[s].device, options.strategy);
      run.waits_for[s].emplace_back(p, kind);
      (kind == WaitKind::HostWait ? run.released_on_finish : run.released_on_submit)[p].push_back(s);
    }
    run.blockers[s].store(static_cast<uint32_t>(preds[s].size()), std::memory_order_relaxed);
  }
  run.remaining = n;
  for (size_t root : state.dag.roots()) run.dispatch(root);
  run.wait();
  if (run.error) std::rethrow_exception(run.error);
}

void UnifiedExecutor::synchronize_all() {
  std::vector<Device*> devices;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [device, context] : contexts_) devices.push_back(device);
  }
  for (Device* d : devices) d->synchronize();
}

UnifiedExecutor& global_executor() {
  static UnifiedExecutor executor;
  return executor;
}

}  // namespace svod
