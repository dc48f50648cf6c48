#include "svod/executor/executor.h"

#include <algorithm>

#include "svod/base/error.h"
#include "svod/custom/custom_function.h"

namespace svod {

// ---- ExecutionGraph --------------------------------------------------------

struct ExecutionGraph::State {
  std::vector<ExecutionNode> nodes;
  std::optional<ExecutionPlan> plan;  // reset when a node is added
  std::vector<Device*> devices;       // the distinct devices of the nodes, with the plan
  std::mutex mutex;                   // guards building the plan

  size_t add(ExecutionNode node, NodeOptions options) {
    const size_t id = nodes.size();
    for (size_t p : options.after)
      if (p >= id)
        throw make_error(ErrorKind::Validation, "node {}: `after` names node {}, which is not an earlier node", id, p);
    for (const auto& a : node.accesses)
      if (!a.buffer.valid()) throw make_error(ErrorKind::Validation, "node {}: an access names an empty buffer", id);
    node.id = id;
    node.label = std::move(options.label);
    node.after = std::move(options.after);
    node.global = options.global;
    node.local = options.local;
    nodes.push_back(std::move(node));
    plan.reset();
    return id;
  }

  // Node i becomes op i; every buffer a node names gets its own slot (the
  // plan finds hazards by storage and byte range, not by slot).
  ExecutionPlan build() const {
    ExecutionPlanBuilder builder;
    auto constants = [](const std::array<int64_t, 3>& v) {
      return std::array<Expr, 3>{Expr::constant(v[0]), Expr::constant(v[1]), Expr::constant(v[2])};
    };
    for (const ExecutionNode& node : nodes) {
      OpOptions options;
      options.after = node.after;
      options.label = node.label;
      switch (node.kind) {
        case ExecutionNode::Kind::Kernel: {
          PreparedKernel k;
          k.program = node.program;
          for (const Buffer& b : node.buffers) k.buffers.push_back(builder.add_buffer(b));
          for (int64_t v : node.scalars) k.scalars.push_back(Expr::constant(v));
          if (node.global) k.global = constants(*node.global);
          if (node.local) k.local = constants(*node.local);
          builder.add_op(std::move(k), std::move(options));
          break;
        }
        case ExecutionNode::Kind::Copy: {
          const size_t dst = builder.add_buffer(node.accesses[0].buffer);
          const size_t src = builder.add_buffer(node.accesses[1].buffer);
          builder.add_op(PreparedCopy{dst, src}, std::move(options));
          break;
        }
        case ExecutionNode::Kind::Host: {
          PreparedCustomFunction f;
          f.name = "host function";
          std::vector<Access> access;
          for (const auto& a : node.accesses) {
            f.buffers.push_back(builder.add_buffer(a.buffer));
            access.push_back(a.access);
          }
          f.def = std::make_shared<const CustomFunctionDef>(CustomFunctionDef{
              [function = node.function](std::span<const Buffer>, const Attrs&, const VariableValues&) { function(); },
              [access](std::span<const Buffer>, const Attrs&) { return access; }});
          builder.add_op(std::move(f), std::move(options));
          break;
        }
      }
    }
    return builder.build();
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
  // The plan makes the same choice when it picks the copy's queue.
  if (dst.device().direct_copy(dst, src)) node.device = &dst.device();
  else if (src.device().direct_copy(dst, src)) node.device = &src.device();
  node.accesses = {{dst, Access::Write}, {src, Access::Read}};
  if (options.label.empty()) options.label = fmt::format("copy {} -> {}", src.device().name(), dst.device().name());
  return state_->add(std::move(node), std::move(options));
}

size_t ExecutionGraph::add_host(std::function<void()> function, std::vector<KernelBufferAccess> accesses,
                                NodeOptions options) {
  if (!function) throw make_error(ErrorKind::Validation, "node {}: no host function", size());
  ExecutionNode node;
  node.kind = ExecutionNode::Kind::Host;
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

ExecutionPlan& ExecutionGraph::plan() {
  std::lock_guard lock(state_->mutex);
  if (!state_->plan) {
    state_->plan.emplace(state_->build());
    state_->devices.clear();
    for (const ExecutionNode& n : state_->nodes)
      if (n.device && std::find(state_->devices.begin(), state_->devices.end(), n.device) == state_->devices.end())
        state_->devices.push_back(n.device);
  }
  return *state_->plan;
}

const std::vector<std::vector<size_t>>& ExecutionGraph::predecessors() { return plan().predecessors(); }

std::vector<size_t> ExecutionGraph::order() { return plan().topological_order(); }

std::vector<std::vector<size_t>> ExecutionGraph::parallel_groups() {
  const auto& preds = predecessors();
  std::vector<size_t> depth(preds.size(), 0);
  std::vector<std::vector<size_t>> groups;
  for (size_t n : order()) {
    for (size_t p : preds[n]) depth[n] = std::max(depth[n], depth[p] + 1);
    if (groups.size() <= depth[n]) groups.resize(depth[n] + 1);
    groups[depth[n]].push_back(n);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

// ---- UnifiedExecutor ---------------------------------------------------------

UnifiedExecutor::UnifiedExecutor() = default;
UnifiedExecutor::~UnifiedExecutor() = default;

void UnifiedExecutor::execute(ExecutionGraph& graph, const GraphRunOptions& options) {
  ExecutionPlan& plan = graph.plan();
  {
    std::lock_guard lock(mutex_);
    devices_.insert(graph.state_->devices.begin(), graph.state_->devices.end());
  }
  plan.execute(ExecuteOptions{.sequential = options.sequential, .observer = options.observer, .strategy = options.strategy});
}

void UnifiedExecutor::synchronize_all() {
  std::vector<Device*> devices;
  {
    std::lock_guard lock(mutex_);
    devices.assign(devices_.begin(), devices_.end());
  }
  for (Device* d : devices) d->synchronize();
}

UnifiedExecutor& global_executor() {
  static UnifiedExecutor executor;
  return executor;
}

}  // namespace svod
