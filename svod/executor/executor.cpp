#include "svod/executor/executor.h"

#include <algorithm>

#include "svod/base/error.h"
#include "svod/custom/custom_function.h"

namespace svod {

struct ExecutionGraph::State {
  // What an ExecutionPlanBuilder takes, kept so that the plan can be built
  // again after more nodes were added: every buffer a node names gets its own
  // slot (the plan finds hazards by storage and byte range, not by slot).
  std::vector<Buffer> buffers;
  std::vector<PlanOp> ops;
  std::vector<OpOptions> options;
  std::optional<ExecutionPlan> plan;  // reset when a node is added
  std::vector<Device*> devices;       // the distinct devices of the ops, with the plan
  std::mutex mutex;                   // guards building the plan

  // A slot for each of `named` (all checked first, so a refused node adds
  // nothing).
  std::vector<size_t> slots(std::vector<Buffer> named) {
    for (const Buffer& b : named)
      if (!b.valid()) throw make_error(ErrorKind::Validation, "node {}: an access names an empty buffer", ops.size());
    std::vector<size_t> out;
    for (Buffer& b : named) {
      out.push_back(buffers.size());
      buffers.push_back(std::move(b));
    }
    return out;
  }

  // Checks what the next node's options name (before anything is added).
  void check_after(const NodeOptions& node) const {
    for (size_t p : node.after)
      if (p >= ops.size())
        throw make_error(ErrorKind::Validation, "node {}: `after` names node {}, which is not an earlier node",
                         ops.size(), p);
  }

  size_t add(PlanOp op, NodeOptions node) {
    const size_t id = ops.size();
    OpOptions opts;
    opts.after = std::move(node.after);
    opts.label = std::move(node.label);
    ops.push_back(std::move(op));
    options.push_back(std::move(opts));
    plan.reset();
    return id;
  }

  ExecutionPlan build() const {
    ExecutionPlanBuilder builder;
    for (const Buffer& b : buffers) builder.add_buffer(b);
    for (size_t i = 0; i < ops.size(); ++i) builder.add_op(ops[i], options[i]);
    return builder.build();
  }
};

ExecutionGraph::ExecutionGraph() : state_(std::make_unique<State>()) {}
ExecutionGraph::~ExecutionGraph() = default;
ExecutionGraph::ExecutionGraph(ExecutionGraph&&) noexcept = default;
ExecutionGraph& ExecutionGraph::operator=(ExecutionGraph&&) noexcept = default;

size_t ExecutionGraph::add_kernel(std::shared_ptr<const Program> program, KernelArgs args, NodeOptions options) {
  auto& [buffers, scalars, dims] = args;
  if (!program) throw make_error(ErrorKind::Validation, "node {}: no program", size());
  state_->check_after(options);
  const ProgramSpec& spec = program->spec();
  if (buffers.size() != spec.buffers.size())
    throw make_error(ErrorKind::Validation, "node {}: program \"{}\" takes {} buffers, got {}", size(),
                     spec.display_name(), spec.buffers.size(), buffers.size());
  const size_t caller_scalars = spec.scalars.size() - (spec.core_id_index() ? 1 : 0);
  if (scalars.size() != caller_scalars)
    throw make_error(ErrorKind::Validation, "node {}: program \"{}\" takes {} scalars, got {}", size(),
                     spec.display_name(), caller_scalars, scalars.size());
  auto constants = [](const std::array<int64_t, 3>& v) {
    return std::array<Expr, 3>{Expr::constant(v[0]), Expr::constant(v[1]), Expr::constant(v[2])};
  };
  KernelOp k;
  k.buffers = state_->slots(std::move(buffers));
  for (int64_t v : scalars) k.scalars.push_back(Expr::constant(v));
  if (dims) {
    k.global = constants(dims->global);
    k.local = constants(dims->local);
  }
  if (options.label.empty()) options.label = spec.display_name();
  k.program = std::move(program);
  return state_->add(std::move(k), std::move(options));
}

size_t ExecutionGraph::add_copy(Buffer dst, Buffer src, NodeOptions options) {
  if (!dst.valid() || !src.valid()) throw make_error(ErrorKind::Validation, "node {}: copy of an empty buffer", size());
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "node {}: copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     size(), src.bytes(), dst.bytes());
  state_->check_after(options);
  if (options.label.empty()) options.label = fmt::format("copy {} -> {}", src.device().name(), dst.device().name());
  const auto slots = state_->slots({std::move(dst), std::move(src)});
  return state_->add(CopyOp{slots[0], slots[1]}, std::move(options));
}

size_t ExecutionGraph::add_host(std::function<void()> function, std::vector<BufferAccess> accesses,
                                NodeOptions options) {
  if (!function) throw make_error(ErrorKind::Validation, "node {}: no host function", size());
  state_->check_after(options);
  CustomOp f;
  f.name = "host function";
  std::vector<Buffer> buffers;
  std::vector<Access> access;
  for (auto& a : accesses) {
    buffers.push_back(std::move(a.buffer));
    access.push_back(a.access);
  }
  f.buffers = state_->slots(std::move(buffers));
  f.def = std::make_shared<const CustomFunctionDef>(CustomFunctionDef{
      [function = std::move(function)](std::span<const Buffer>, const Attrs&, const VariableValues&) { function(); },
      [access](std::span<const Buffer>, const Attrs&) { return access; }});
  return state_->add(std::move(f), std::move(options));
}

size_t ExecutionGraph::size() const noexcept { return state_->ops.size(); }

ExecutionPlan& ExecutionGraph::plan() {
  std::lock_guard lock(state_->mutex);
  if (!state_->plan) {
    ExecutionPlan& plan = state_->plan.emplace(state_->build());
    state_->devices.clear();
    for (size_t i = 0; i < plan.op_count(); ++i)
      if (Device* d = plan.op_device(i);
          d && std::find(state_->devices.begin(), state_->devices.end(), d) == state_->devices.end())
        state_->devices.push_back(d);
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
