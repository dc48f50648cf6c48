#include "svod/plan/op_description.h"

#include <fmt/format.h>

#include <type_traits>

#include "svod/base/error.h"

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


std::string buffer_text(const ExecutionPlan& plan, size_t slot) {
  const std::string& name = plan.buffer_name(slot);
  return name.empty() ? fmt::format("buffer {}", slot) : name;
}

}  // namespace

OpWords op_words(const PlanOp& op) {
  return std::visit(
      [](const auto& o) -> OpWords {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, KernelOp>)
          return {"kernel", o.program ? o.program->spec().display_name() : std::string()};
        else if constexpr (std::is_same_v<T, CopyOp>)
          return {"copy", "copy"};
        else if constexpr (std::is_same_v<T, CustomOp>)
          return {"custom", o.name};
        else if constexpr (std::is_same_v<T, CollectiveOp>)
          return {"collective", std::string(to_string(o.kind))};
        else
          return {"view", "view"};
      },
      op);
}

std::string op_label(const ExecutionPlan& plan, size_t index) {
  const PlanOp& op = plan.op(index);
  const OpWords words = op_words(op);
  const std::string& id = plan.op_id(index);
  const std::string head = id.empty() ? fmt::format("op {}", index) : fmt::format("op {} ({})", index, id);
  if (const auto* c = std::get_if<CopyOp>(&op))
    return fmt::format("{} copy {} <- {}", head, buffer_text(plan, c->dst), buffer_text(plan, c->src));
  return fmt::format("{} {} {}", head, words.kind, words.name);
}

OpDescription describe_op(const ExecutionPlan& plan, size_t index) {
  const PlanOp& op = plan.op(index);
  OpWords words = op_words(op);
  OpDescription d;
  d.name = std::move(words.name);
  d.label = op_label(plan, index);
  d.id = plan.op_id(index);
  d.kind = words.kind;
  d.device = "host";
  std::visit(
      [&](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, KernelOp>) {
          d.device = o.program->device().name();
          d.buffers = o.buffers;
          d.flops = evaluate_cost(plan, o, o.program->spec().flops);
          d.bytes = evaluate_cost(plan, o, o.program->spec().bytes);
        } else if constexpr (std::is_same_v<T, CopyOp>) {
          if (plan.buffer(o.dst).valid()) d.device = plan.buffer(o.dst).device().name();
          d.buffers = {o.dst, o.src};
          d.bytes = static_cast<double>(2 * plan.buffer(o.src).bytes());
        } else if constexpr (std::is_same_v<T, CustomOp>) {
          d.buffers = o.buffers;
        } else if constexpr (std::is_same_v<T, CollectiveOp>) {
          d.buffers = o.buffers.empty() ? std::vector<size_t>{o.src, o.dst} : o.buffers;
        } else {
          d.buffers = {o.view, o.base};
        }
      },
      op);
  return d;
}

std::vector<OpDescription> describe_ops(const ExecutionPlan& plan) {
  std::vector<OpDescription> ops;
  ops.reserve(plan.op_count());
  for (size_t i = 0; i < plan.op_count(); ++i) ops.push_back(describe_op(plan, i));
  return ops;
}

}  // namespace svod
