#include "svod/plan/op_description.h"

#include <fmt/format.h>

#include "svod/base/error.h"
#include "svod/base/visit.h"
#include "svod/plan/plan_state.h"

namespace svod {
namespace {

std::optional<double> evaluate_cost(const ExecutionPlan& plan, const KernelOp& kernel,
                                    const std::optional<Expr>& cost) {
  if (!cost) return std::nullopt;
  const ProgramSpec& spec = kernel.program->spec();
  auto value_of = [&](const std::string& name) -> std::optional<int64_t> {
    size_t caller = 0;
    for (const auto& s : spec.scalars) {
      if (s.name == kCoreIdName) continue;
      if (s.name == name) {
        const Expr& e = kernel.scalars[caller];
        std::vector<int64_t> values;
        for (const auto& v : e.variables()) {
          auto fixed = kernel.fixed_vars.find(v);
          auto value = fixed != kernel.fixed_vars.end() ? std::optional<int64_t>(fixed->second) : plan.variable(v);
          if (!value) return std::nullopt;
          values.push_back(*value);
        }
        return e.evaluate(values);
      }
      ++caller;
    }
    if (auto fixed = kernel.fixed_vars.find(name); fixed != kernel.fixed_vars.end()) return fixed->second;
    return plan.variable(name);
  };
  try {
    std::vector<int64_t> values;
    for (const auto& v : cost->variables()) {
      auto value = value_of(v);
      if (!value) return std::nullopt;
      values.push_back(*value);
    }
    return static_cast<double>(cost->evaluate(values));
  } catch (const Error&) {
    return std::nullopt;  // an expression that overflows gives no rate rather than a wrong one
  }
}

}  // namespace

OpWords op_words(const PlanOp& op) {
  return visit_exhaustively(
      op,
      [](const KernelOp& k) -> OpWords {
        return {OpKind::Kernel, k.program ? k.program->spec().display_name() : std::string()};
      },
      [](const CopyOp&) -> OpWords { return {OpKind::Copy, "copy"}; },
      [](const CustomOp& f) -> OpWords { return {OpKind::Custom, f.name}; },
      [](const CollectiveOp& c) -> OpWords { return {OpKind::Collective, std::string(to_string(c.kind))}; },
      [](const ViewOp&) -> OpWords { return {OpKind::View, "view"}; });
}

namespace detail {

std::string PlanState::op_title(size_t i) const {
  // A copy by its buffers' names (or indices; the slots may not be checked
  // yet), a view by its kind alone.
  const auto buffer_text = [&](size_t slot) {
    const bool named = slot < buffer_names.size() && !buffer_names[slot].empty();
    return named ? buffer_names[slot] : fmt::format("buffer {}", slot);
  };
  const OpWords words = op_words(ops[i]);
  std::string what = words.name;
  if (const auto* c = std::get_if<CopyOp>(&ops[i])) what = buffer_text(c->dst) + " <- " + buffer_text(c->src);
  if (words.kind == OpKind::View) what.clear();
  return svod::op_title(op_name(i), words.kind, what);
}

}  // namespace detail

OpDescription describe_op(const ExecutionPlan& plan, size_t index) {
  const PlanOp& op = plan.op(index);
  OpWords words = op_words(op);
  OpDescription d;
  d.name = std::move(words.name);
  d.title = plan.op_title(index);
  d.id = plan.op_id(index);
  d.kind = words.kind;
  d.device = "host";
  visit_exhaustively(
      op,
      [&](const KernelOp& k) {
        d.device = k.program->device().name();
        d.buffers = k.buffers;
        d.flops = evaluate_cost(plan, k, k.program->spec().flops);
        d.bytes = evaluate_cost(plan, k, k.program->spec().bytes);
      },
      [&](const CopyOp& c) {
        if (plan.buffer(c.dst).valid()) d.device = plan.buffer(c.dst).device().name();
        d.buffers = {c.dst, c.src};
        d.bytes = static_cast<double>(2 * plan.buffer(c.src).bytes());
      },
      [&](const CustomOp& f) { d.buffers = f.buffers; },
      [&](const CollectiveOp& c) { d.buffers = c.buffers.empty() ? std::vector<size_t>{c.src, c.dst} : c.buffers; },
      [&](const ViewOp& v) { d.buffers = {v.view, v.base}; });
  return d;
}

OpDescription describe_call(const Program& program) {
  OpDescription d;
  d.name = program.spec().display_name();
  d.title = op_title({}, OpKind::Kernel, d.name);
  d.kind = OpKind::Kernel;
  d.device = program.device().name();
  return d;
}

std::vector<OpDescription> describe_ops(const ExecutionPlan& plan) {
  std::vector<OpDescription> ops;
  ops.reserve(plan.op_count());
  for (size_t i = 0; i < plan.op_count(); ++i) ops.push_back(describe_op(plan, i));
  return ops;
}

}  // namespace svod
