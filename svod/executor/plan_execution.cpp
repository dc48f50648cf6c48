#include "svod/executor/plan_execution.h"

#include <algorithm>

#include "svod/base/error.h"

namespace svod {

namespace {

// Values of the names an op's expressions use: the op's fixed values first,
// then the plan's variables.
int64_t lookup(const ExecutionPlan& plan, const PreparedKernel& k, const std::string& name, size_t op,
               const std::string& text) {
  if (auto it = k.fixed_vars.find(name); it != k.fixed_vars.end()) return it->second;
  if (auto v = plan.variable(name)) return *v;
  throw make_error(ErrorKind::Validation, "op {}: expression \"{}\" uses \"{}\", which the plan does not define", op,
                   text, name);
}

std::vector<int64_t> values_for(const ExecutionPlan& plan, const PreparedKernel& k, const Expr& e, size_t op,
                                const std::vector<std::pair<std::string, int64_t>>& scalars) {
  std::vector<int64_t> values;
  for (const auto& name : e.variables()) {
    auto it = std::find_if(scalars.begin(), scalars.end(), [&](const auto& s) { return s.first == name; });
    values.push_back(it != scalars.end() ? it->second : lookup(plan, k, name, op, e.text()));
  }
  return values;
}

}  // namespace

bool plan_uses_devices(const ExecutionPlan& plan) {
  for (size_t b = 0; b < plan.buffer_count(); ++b)
    if (plan.buffer(b).valid() && !plan.buffer(b).is_host()) return true;
  for (size_t i = 0; i < plan.op_count(); ++i)
    if (const auto* k = std::get_if<PreparedKernel>(&plan.op(i)); k && k->program->device().name() != "CPU") return true;
  return false;
}

ExecutionGraph graph_from_plan(const ExecutionPlan& plan) {
  ExecutionGraph graph;
  const auto& preds = plan.predecessors();
  for (size_t i = 0; i < plan.op_count(); ++i) {
    NodeOptions options;
    options.label = plan.op_id(i);
    options.after = preds[i];
    const PreparedOp& op = plan.op(i);
    if (const auto* k = std::get_if<PreparedKernel>(&op)) {
      const ProgramSpec& spec = k->program->spec();
      std::vector<int64_t> scalars;
      std::vector<std::pair<std::string, int64_t>> named;  // scalar parameter values by name
      size_t caller = 0;
      for (const auto& param : spec.scalars) {
        if (param.name == kCoreIdName) continue;
        const Expr& e = k->scalars.at(caller++);
        const int64_t value = e.evaluate(values_for(plan, *k, e, i, {}));
        scalars.push_back(value);
        named.emplace_back(param.name, value);
      }
      std::array<int64_t, 3> global{}, local{};
      for (size_t d = 0; d < 3; ++d) {
        global[d] = spec.global_size[d].evaluate(values_for(plan, *k, spec.global_size[d], i, named));
        local[d] = spec.local_size[d].evaluate(values_for(plan, *k, spec.local_size[d], i, named));
      }
      options.global = global;
      options.local = local;
      std::vector<Buffer> buffers;
      for (size_t slot : k->buffers) buffers.push_back(plan.buffer(slot));
      graph.add_kernel(k->program, std::move(buffers), std::move(scalars), std::move(options));
    } else if (const auto* c = std::get_if<PreparedCopy>(&op)) {
      graph.add_copy(plan.buffer(c->dst), plan.buffer(c->src), std::move(options));
    } else if (const auto* f = std::get_if<PreparedCustomFunction>(&op)) {
      auto def = find_custom_function(f->name);
      std::vector<Buffer> buffers;
      for (size_t slot : f->buffers) buffers.push_back(plan.buffer(slot));
      const std::vector<Access> access = def->validate(buffers, f->attrs);
      std::vector<KernelBufferAccess> accesses;
      for (size_t p = 0; p < buffers.size(); ++p) accesses.push_back({buffers[p], access.at(p)});
      if (options.label.empty()) options.label = f->name;
      graph.add_host([def, buffers, attrs = f->attrs] { def->run(buffers, attrs, VariableValues{}); },
                     std::move(accesses), std::move(options));
    } else {
      graph.add_host([] {}, {}, std::move(options));
    }
  }
  return graph;
}

void execute_plan_on(UnifiedExecutor& executor, const ExecutionPlan& plan, const ExecuteOptions& options,
                     SyncStrategy strategy) {
  ExecutionGraph graph = graph_from_plan(plan);
  executor.execute(graph, GraphRunOptions{strategy, options.sequential, options.observer});
}

}  // namespace svod
