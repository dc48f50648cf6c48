// ExecutionPlan's constructors and read-only queries; building, running and
// rebinding are in plan_build.cpp, plan_run.cpp and plan_rebind.cpp.
#include "svod/plan/execution_plan.h"

#include "svod/base/error.h"
#include "svod/plan/plan_state.h"

namespace svod {

ExecutionPlan::ExecutionPlan(std::shared_ptr<detail::PlanState> state) : state_(std::move(state)) {}
ExecutionPlan::ExecutionPlan(ExecutionPlan&&) noexcept = default;
ExecutionPlan& ExecutionPlan::operator=(ExecutionPlan&&) noexcept = default;
ExecutionPlan::~ExecutionPlan() = default;

const Buffer& ExecutionPlan::buffer(size_t index) const {
  if (index >= state_->buffers.size())
    throw make_error(ErrorKind::Validation, "buffer {} is out of range ({} buffers)", index, state_->buffers.size());
  return state_->buffers[index];
}

size_t ExecutionPlan::buffer_count() const { return state_->buffers.size(); }

const std::string& ExecutionPlan::buffer_name(size_t index) const {
  buffer(index);  // checks the index
  return state_->buffer_names[index];
}

std::optional<PlanView> ExecutionPlan::view(size_t index) const {
  buffer(index);  // checks the index
  return state_->views[index];
}

std::optional<size_t> ExecutionPlan::find_buffer(std::string_view name) const {
  const auto& names = state_->buffer_names;
  for (size_t i = 0; i < names.size(); ++i)
    if (!names[i].empty() && names[i] == name) return i;
  return std::nullopt;
}

const std::vector<size_t>& ExecutionPlan::outputs() const { return state_->outputs; }
size_t ExecutionPlan::op_count() const { return state_->ops.size(); }

const PlanOp& ExecutionPlan::op(size_t index) const {
  if (index >= state_->ops.size())
    throw make_error(ErrorKind::Validation, "op {} is out of range ({} ops)", index, state_->ops.size());
  return state_->ops[index];
}

const std::string& ExecutionPlan::op_id(size_t index) const {
  op(index);
  return state_->options[index].id;
}

const OpOptions& ExecutionPlan::op_options(size_t index) const {
  op(index);
  return state_->options[index];
}

std::string ExecutionPlan::op_title(size_t index) const {
  op(index);  // checks the index
  return state_->op_title(index);
}

Device* ExecutionPlan::op_device(size_t index) const {
  op(index);
  return state_->devices[index];
}

std::span<const std::pair<size_t, Access>> ExecutionPlan::op_accesses(size_t index) const {
  op(index);
  return state_->access[index];
}

std::optional<int64_t> ExecutionPlan::variable(std::string_view name) const {
  std::lock_guard lock(state_->mutex);
  return state_->variables().find(name);
}

std::vector<PlanVariable> ExecutionPlan::variables() const {
  std::lock_guard lock(state_->mutex);
  std::vector<PlanVariable> out;
  for (size_t i = 0; i < state_->var_names.size(); ++i) out.push_back({state_->var_defs[i], state_->var_values[i]});
  return out;
}

std::vector<size_t> ExecutionPlan::topological_order() const { return state_->runner.dag().order(); }

const std::vector<std::vector<size_t>>& ExecutionPlan::predecessors() const {
  return state_->runner.dag().predecessors();
}

bool ExecutionPlan::poisoned() const { return state_->poisoned.load(); }

bool ExecutionPlan::uses_devices() const {
  for (size_t b = 0; b < buffer_count(); ++b)
    if (buffer(b).valid() && !buffer(b).device().queue().runs_inline()) return true;
  for (size_t i = 0; i < op_count(); ++i)
    if (const auto* k = std::get_if<KernelOp>(&op(i)); k && !k->program->device().queue().runs_inline())
      return true;
  return false;
}

const std::shared_ptr<Communicator>& ExecutionPlan::communicator() const { return state_->comm; }

}  // namespace svod
