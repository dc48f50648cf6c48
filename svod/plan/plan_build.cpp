// ExecutionPlanBuilder and build time: the definition checked, views and
// variables resolved, each op resolved (slots checked, accesses, launch
// layout), the hazard DAG, queues and bound addresses. finalize() ends by
// evaluating every kernel once through prepare() (plan_run.cpp), so bad
// initial values fail the build.
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "svod/base/error.h"
#include "svod/base/visit.h"
#include "svod/guard/op_deadline.h"
#include "svod/plan/hazards.h"
#include "svod/plan/plan_state.h"

namespace svod {
namespace detail {

void PlanState::finalize() {
  op_timeout = op_timeout_seconds();
  const bool collectives = std::any_of(ops.begin(), ops.end(), [](const PlanOp& op) {
    return std::holds_alternative<CollectiveOp>(op);
  });
  if (!collectives) {
    comm = nullptr;
  } else {
    if (!comm) comm = std::move(create_local_communicators(1).front());
    if (!comm_thread) comm_thread = std::make_unique<WorkerThread>();
  }
  check_buffers();
  derive_views();
  check_variables();
  resolve_dependencies();
  resolve_ops();
  check_writes();
  schedule();
  bind_addresses();
  staged_values = var_values;
  // Evaluating every kernel now reports bad initial values at build time.
  prepare(var_values);
  dirty = false;
}

void PlanState::check_buffers() {
  const size_t n = given_buffers.size();
  std::unordered_map<std::string_view, size_t> named;  // linear in the buffers: plans may have tens of thousands
  named.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (buffer_names[i].empty()) continue;
    if (const auto [at, fresh] = named.emplace(buffer_names[i], i); !fresh)
      throw make_error(ErrorKind::Validation, "buffers {} and {} are both named \"{}\"", at->second, i,
                       buffer_names[i]);
  }
  std::vector<bool> output(n, false);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k] >= n)
      throw make_error(ErrorKind::Validation, "output {} is buffer {}, but the plan has {} buffers", k, outputs[k], n);
    if (output[outputs[k]])
      throw make_error(ErrorKind::Validation, "{} is declared as an output twice", slot_name(outputs[k]));
    output[outputs[k]] = true;
  }
}

void PlanState::derive_views() {
  const size_t n = given_buffers.size();
  views = given_views;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto* v = std::get_if<ViewOp>(&ops[i]);
    if (!v) continue;
    if (v->view >= n || v->base >= n)
      throw make_error(ErrorKind::Validation, "{}: buffer index {} is out of range ({} buffers)", op_title(i),
                       std::max(v->view, v->base), n);
    if (views[v->view] || given_buffers[v->view].valid())
      throw make_error(ErrorKind::Validation, "{}: {} must be an empty slot that no other view defines",
                       op_title(i), slot_name(v->view));
    views[v->view] = PlanView{v->base, v->byte_offset, v->bytes, v->dtype};
  }
  buffers = given_buffers;
  derive_order.clear();
  // Depth-first over base links so a view of a view is derived after its base.
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 in progress, 2 done
  auto visit = [&](auto& self, size_t slot) -> void {
    if (state[slot] == 2) return;
    if (state[slot] == 1)
      throw make_error(ErrorKind::Validation, "{} is a view of itself through a chain of views", slot_name(slot));
    state[slot] = 1;
    if (const auto& rule = views[slot]) {
      if (rule->base >= n)
        throw make_error(ErrorKind::Validation, "{}: base buffer {} is out of range ({} buffers)", slot_name(slot),
                         rule->base, n);
      self(self, rule->base);
      try {
        buffers[slot] = buffers[rule->base].view_bytes(rule->byte_offset, rule->bytes, rule->dtype);
      } catch (...) {
        rethrow_with(fmt::format("{} as a view of {}", slot_name(slot), slot_name(rule->base)));
      }
      derive_order.push_back(slot);
    } else if (!buffers[slot].valid()) {
      throw make_error(ErrorKind::Validation, "{} is empty and no view defines it", slot_name(slot));
    }
    state[slot] = 2;
  };
  for (size_t i = 0; i < n; ++i) visit(visit, i);
}

void PlanState::check_variables() {
  std::vector<size_t> order(given_variables.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return given_variables[a].first.name < given_variables[b].first.name; });
  var_names.clear();
  var_defs.clear();
  var_values.clear();
  for (size_t i : order) {
    const auto& [var, value] = given_variables[i];
    if (var.name.empty()) throw make_error(ErrorKind::Validation, "a plan variable needs a name");
    if (!var_names.empty() && var_names.back() == var.name)
      throw make_error(ErrorKind::Validation, "plan variable \"{}\" is declared twice", var.name);
    if (var.min > var.max)
      throw make_error(ErrorKind::Validation, "plan variable \"{}\" has empty bounds [{}, {}]", var.name, var.min,
                       var.max);
    var.check(value);
    var_names.push_back(var.name);
    var_defs.push_back(var);
    var_values.push_back(value);
  }
}

void PlanState::resolve_dependencies() {
  const size_t n = ops.size();
  // Looked up by hash: a plan of 160,000 ops with ids took 13 s to build when
  // each id was compared with every other.
  std::unordered_map<std::string_view, size_t> by_id;
  by_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (options[i].id.empty()) continue;
    if (const auto [at, fresh] = by_id.emplace(options[i].id, i); !fresh)
      throw make_error(ErrorKind::Validation, "ops {} and {} both have the id \"{}\"", at->second, i, options[i].id);
  }
  declared.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    for (size_t d : options[i].after) {
      if (d >= n)
        throw make_error(ErrorKind::Validation, "{} depends on op index {}, but there are only {} ops", op_name(i), d, n);
      if (d == i) throw make_error(ErrorKind::Validation, "{} depends on itself", op_name(i));
      declared[i].push_back(d);
    }
    for (const std::string& id : options[i].after_ids) {
      const auto it = by_id.find(id);
      if (id.empty() || it == by_id.end())
        throw make_error(ErrorKind::Validation, "{} depends on unknown op id \"{}\"", op_name(i), id);
      const size_t d = it->second;
      if (d == i) throw make_error(ErrorKind::Validation, "{} depends on itself", op_name(i));
      declared[i].push_back(d);
    }
  }
  // Every rank must issue its collectives in one order: each waits for the
  // previous one.
  std::optional<size_t> previous;
  for (size_t i = 0; i < n; ++i) {
    if (!std::holds_alternative<CollectiveOp>(ops[i])) continue;
    if (previous) declared[i].push_back(*previous);
    previous = i;
  }
  // Hazards are found in this order, so declared edges decide which of two
  // conflicting ops goes first and the combined graph stays acyclic.
  declared_order = Dag(declared, [&](size_t i) { return op_name(i); }).order();
}

void PlanState::resolve_ops() {
  const size_t nbuf = buffers.size();
  resolved.clear();
  access.assign(ops.size(), {});
  auto check_slot = [&](size_t i, std::string_view what, size_t slot) {
    if (slot >= nbuf)
      throw make_error(ErrorKind::Validation, "{}: {} is buffer {}, but the plan has {} buffers", op_title(i), what,
                       slot, nbuf);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    visit_exhaustively(
        ops[i],
        [&](const KernelOp& k) {
          for (size_t p = 0; p < k.buffers.size(); ++p) check_slot(i, fmt::format("argument {}", p), k.buffers[p]);
          resolve_kernel(i, k);
        },
        [&](const CopyOp& c) {
          check_slot(i, "the destination", c.dst);
          check_slot(i, "the source", c.src);
          if (buffers[c.dst].bytes() != buffers[c.src].bytes())
            throw make_error(ErrorKind::Validation, "{}: {} holds {} bytes but {} holds {}; sizes must be equal",
                             op_title(i), slot_name(c.dst), buffers[c.dst].bytes(), slot_name(c.src),
                             buffers[c.src].bytes());
          access[i] = {{c.src, Access::Read}, {c.dst, Access::Write}};
          resolved.emplace_back(ResolvedCopy{c.dst, c.src});
        },
        [&](const CustomOp& f) {
          for (size_t p = 0; p < f.buffers.size(); ++p) check_slot(i, fmt::format("argument {}", p), f.buffers[p]);
          resolve_custom(i, f);
        },
        [&](const CollectiveOp& c) { resolve_collective(i, c); },
        [&](const ViewOp&) { resolved.emplace_back(ResolvedView{}); });
  }
}

void PlanState::resolve_kernel(size_t i, const KernelOp& k) {
  const std::string where = op_title(i);
  if (!k.program) throw make_error(ErrorKind::Validation, "{}: no program", where);
  const ProgramSpec& spec = k.program->spec();
  ResolvedKernel out;
  out.program = k.program;
  out.bound = k.program->binds_host_arguments() && k.program->device().queue().runs_inline();
  try {
    out.layout = std::make_shared<const LaunchLayout>(spec);
  } catch (...) {
    rethrow_with(where);
  }
  const LaunchLayout& layout = *out.layout;
  if (k.buffers.size() != layout.buffer_count())
    throw make_error(ErrorKind::Validation, "{}: the program takes {} buffers, the op passes {}", where,
                     layout.buffer_count(), k.buffers.size());
  if (k.scalars.size() != layout.caller_scalar_count())
    throw make_error(ErrorKind::Validation, "{}: the program takes {} scalars{}, the op passes {}", where,
                     layout.caller_scalar_count(), layout.core_id() ? " (core_id is set by the runtime)" : "",
                     k.scalars.size());
  for (size_t p = 0; p < k.buffers.size(); ++p) {
    const Buffer& b = buffers[k.buffers[p]];
    const BufferParam& param = spec.buffers[p];
    if (param.dtype && !dtype_accepts(*param.dtype, b.dtype(), b.first_byte()))
      throw make_error(ErrorKind::Validation, "{}: parameter \"{}\" is {} but {} is {}{}", where, param.name,
                       to_string(*param.dtype), slot_name(k.buffers[p]), to_string(b.dtype()),
                       b.dtype() == DType::U8 ? fmt::format(" at offset {:#x}, not aligned to its elements",
                                                            b.first_byte())
                                              : "");
    if (out.bound && !b.is_host())
      throw make_error(ErrorKind::Validation, "{}: parameter \"{}\" gets {}, which is not in host memory", where,
                       param.name, slot_name(k.buffers[p]));
    access[i].emplace_back(k.buffers[p], param.access);
  }
  out.slots = k.buffers;

  // Names the expressions use, each resolved to a fixed value or a variable.
  std::vector<std::string> abi_names;
  for (const auto& s : spec.scalars) abi_names.push_back(s.name);
  std::vector<std::string> names;
  auto need = [&](const std::string& name, const std::string& text) {
    if (std::find(names.begin(), names.end(), name) != names.end()) return;
    if (auto it = k.fixed_vars.find(name); it != k.fixed_vars.end()) {
      out.sources.push_back({true, it->second});
    } else if (auto v = std::lower_bound(var_names.begin(), var_names.end(), name);
               v != var_names.end() && *v == name) {
      out.sources.push_back({false, v - var_names.begin()});
    } else {
      throw make_error(ErrorKind::Validation,
                       "{}: expression \"{}\" uses \"{}\", which is neither a plan variable nor a fixed variable", where,
                       text, name);
    }
    names.push_back(name);
  };
  for (const Expr& e : k.scalars)
    for (const auto& v : e.variables()) need(v, e.text());
  const std::array<Expr, 3>& global = k.global ? *k.global : spec.global_size;
  const std::array<Expr, 3>& local = k.local ? *k.local : spec.local_size;
  for (const auto* sizes : {&global, &local})
    for (const Expr& e : *sizes)
      for (const auto& v : e.variables())
        if (std::find(abi_names.begin(), abi_names.end(), v) == abi_names.end()) need(v, e.text());
  try {
    for (const Expr& e : k.scalars) out.scalars.push_back(e.bind_to(names));
    std::vector<std::string> launch_names = abi_names;
    launch_names.insert(launch_names.end(), names.begin(), names.end());
    for (size_t d = 0; d < 3; ++d) {
      out.global[d] = global[d].bind_to(launch_names);
      out.local[d] = local[d].bind_to(launch_names);
    }
  } catch (...) {
    rethrow_with(where);
  }
  out.abi_scalars = abi_names.size();
  out.values.assign(out.abi_scalars + out.sources.size() + k.scalars.size(), 0);
  if (out.bound)
    out.args.assign(layout.buffer_count() + layout.scalar_count(), 0);
  else
    out.launch_buffers.resize(layout.buffer_count());
  resolved.emplace_back(std::move(out));
}

void PlanState::resolve_collective(size_t i, const CollectiveOp& c) {
  const std::string where = op_title(i);
  if (c.kind == CollectiveKind::Barrier || c.kind == CollectiveKind::Send)
    throw make_error(ErrorKind::Validation,
                     "{}: a plan's collectives are all_reduce, broadcast, all_gather and reduce_scatter", where);
  const size_t nbuf = buffers.size();
  const size_t ranks = static_cast<size_t>(comm->size());
  ResolvedCollective out{c.kind, {}, c.op, c.root};
  if (c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::Broadcast) {
    if (c.buffers.empty()) throw make_error(ErrorKind::Validation, "{}: no buffers", where);
    for (size_t p = 0; p < c.buffers.size(); ++p) {
      if (c.buffers[p] >= nbuf)
        throw make_error(ErrorKind::Validation, "{}: buffer {} is buffer {}, but the plan has {} buffers", where, p,
                         c.buffers[p], nbuf);
      access[i].emplace_back(c.buffers[p], Access::ReadWrite);
    }
    if (c.kind == CollectiveKind::Broadcast && (c.root < 0 || static_cast<size_t>(c.root) >= ranks))
      throw make_error(ErrorKind::Validation, "{}: root {} is out of range (the communicator has ranks 0 to {})", where,
                       c.root, ranks - 1);
    out.slots = c.buffers;
  } else {
    for (auto [what, slot] : {std::pair{"the source", c.src}, std::pair{"the destination", c.dst}})
      if (slot >= nbuf)
        throw make_error(ErrorKind::Validation, "{}: {} is buffer {}, but the plan has {} buffers", where, what, slot,
                         nbuf);
    const Buffer& src = buffers[c.src];
    const Buffer& dst = buffers[c.dst];
    if (src.dtype() != dst.dtype())
      throw make_error(ErrorKind::Validation, "{}: {} is {} but {} is {}; the dtypes must match", where,
                       slot_name(c.src), to_string(src.dtype()), slot_name(c.dst), to_string(dst.dtype()));
    const bool gather = c.kind == CollectiveKind::AllGather;
    const Buffer& part = gather ? src : dst;
    const Buffer& whole = gather ? dst : src;
    const size_t part_slot = gather ? c.src : c.dst;
    const size_t whole_slot = gather ? c.dst : c.src;
    if (whole.count() != part.count() * ranks)
      throw make_error(ErrorKind::Validation,
                       "{}: {} holds {} elements but must hold {} ranks x {} ({} elements of {}) = {}", where,
                       slot_name(whole_slot), whole.count(), ranks, part.count(), part.count(), slot_name(part_slot),
                       part.count() * ranks);
    if (src.overlaps(dst))
      throw make_error(ErrorKind::Validation, "{}: {} and {} overlap", where, slot_name(c.src), slot_name(c.dst));
    access[i] = {{c.src, Access::Read}, {c.dst, Access::Write}};
    out.slots = {c.src, c.dst};
  }
  resolved.emplace_back(std::move(out));
}

void PlanState::resolve_custom(size_t i, const CustomOp& c) {
  const std::string where = op_title(i);
  ResolvedCustom out;
  out.attrs = &c.attrs;
  out.slots = c.buffers;
  for (size_t slot : c.buffers) out.buffers.push_back(buffers[slot]);
  std::vector<Access> acc;
  if (custom_defs.size() != ops.size()) custom_defs.assign(ops.size(), nullptr);
  try {
    if (!custom_defs[i]) custom_defs[i] = c.def ? c.def : find_custom_function(c.name);
    out.def = custom_defs[i];
    acc = out.def->validate(out.buffers, c.attrs);
  } catch (...) {
    rethrow_with(where);
  }
  if (acc.size() != c.buffers.size())
    throw make_error(ErrorKind::Validation, "{}: the validator declared {} accesses for {} buffers", where, acc.size(),
                     c.buffers.size());
  for (size_t p = 0; p < acc.size(); ++p) access[i].emplace_back(c.buffers[p], acc[p]);
  resolved.emplace_back(std::move(out));
}

void PlanState::check_writes() const {
  for (size_t i = 0; i < ops.size(); ++i)
    for (const auto& [slot, acc] : access[i])
      if (writes(acc))
        check_writable(buffers[slot], fmt::format("{} writes {}", op_title(i), slot_name(slot)));
}

void PlanState::schedule() {
  std::vector<std::vector<MemoryAccess>> ranges(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto& [slot, acc] : access[i]) {
      const Buffer& b = buffers[slot];
      ranges[i].push_back(MemoryAccess{range_of(b), reads(acc), writes(acc)});
    }
  }
  auto preds = hazard_predecessors(declared_order, ranges);
  for (size_t i = 0; i < ops.size(); ++i) preds[i].insert(preds[i].end(), declared[i].begin(), declared[i].end());
  runner = DagRunner(Dag(std::move(preds), [&](size_t i) { return op_name(i); }));
  std::vector<bool> deferred(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) deferred[i] = std::holds_alternative<ResolvedCollective>(resolved[i]);
  runner.set_deferred(std::move(deferred));
  assign_queues();
}

void PlanState::assign_queues() {
  const size_t n = ops.size();
  queues.assign(n, nullptr);
  devices.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    Queue* queue = nullptr;
    if (const auto* k = std::get_if<ResolvedKernel>(&resolved[i])) {
      queue = &k->program->device().queue();
    } else if (const auto* c = std::get_if<ResolvedCopy>(&resolved[i])) {
      // The device that moves the bytes in one command; else the host
      // stages the copy.
      if (Device* device = direct_copy_device(buffers[c->dst], buffers[c->src])) queue = &device->queue();
    }
    if (queue) devices[i] = &queue->device();
    if (queue && !queue->runs_inline()) queues[i] = queue;
  }
  const auto& preds = runner.dag().predecessors();
  cross_waits.assign(n, {});
  uses_queues = false;
  for (size_t i = 0; i < n; ++i) {
    if (queues[i]) uses_queues = true;
    for (size_t p : preds[i])
      if (queues[p] && queues[p] != queues[i])
        cross_waits[i].emplace_back(p, queues[i] && queues[i]->can_wait_on(*queues[p]));
  }
  events.assign(n, nullptr);
  graph_device = nullptr;
  for (size_t i = 0; i < n; ++i) {
    Device* device = queues[i] && std::holds_alternative<ResolvedKernel>(resolved[i]) ? &queues[i]->device() : nullptr;
    if (!device || (i > 0 && device != graph_device)) {
      graph_device = nullptr;
      break;
    }
    graph_device = device;
  }
}

void PlanState::bind_addresses() {
  for (auto& r : resolved) {
    if (auto* k = std::get_if<ResolvedKernel>(&r)) {
      for (size_t p = 0; p < k->slots.size(); ++p) {
        const Buffer& b = buffers[k->slots[p]];
        if (k->bound)
          k->args[p] = reinterpret_cast<uint64_t>(static_cast<std::byte*>(b.storage().host_data()) + b.byte_offset());
        else
          k->launch_buffers[p] = b;
      }
    } else if (auto* c = std::get_if<ResolvedCustom>(&r)) {
      for (size_t p = 0; p < c->slots.size(); ++p) c->buffers[p] = buffers[c->slots[p]];
    }
  }
}

}  // namespace detail

// ---- ExecutionPlanBuilder --------------------------------------------------

ExecutionPlanBuilder::ExecutionPlanBuilder() : state_(std::make_unique<detail::PlanState>()) {}
ExecutionPlanBuilder::~ExecutionPlanBuilder() = default;
ExecutionPlanBuilder::ExecutionPlanBuilder(ExecutionPlanBuilder&&) noexcept = default;
ExecutionPlanBuilder& ExecutionPlanBuilder::operator=(ExecutionPlanBuilder&&) noexcept = default;

size_t ExecutionPlanBuilder::add_buffer(Buffer buffer, std::string name) {
  state_->given_buffers.push_back(std::move(buffer));
  state_->buffer_names.push_back(std::move(name));
  state_->given_views.emplace_back();
  return state_->given_buffers.size() - 1;
}

size_t ExecutionPlanBuilder::add_view(size_t base, size_t byte_offset, size_t bytes, DType dtype, std::string name) {
  const size_t slot = add_buffer(Buffer{}, std::move(name));
  state_->given_views[slot] = PlanView{base, byte_offset, bytes, dtype};
  return slot;
}

void ExecutionPlanBuilder::add_variable(Variable variable, int64_t value) {
  state_->given_variables.emplace_back(std::move(variable), value);
}

size_t ExecutionPlanBuilder::add_op(PlanOp op, OpOptions options) {
  state_->ops.push_back(std::move(op));
  state_->options.push_back(std::move(options));
  return state_->ops.size() - 1;
}

void ExecutionPlanBuilder::add_output(size_t buffer) { state_->outputs.push_back(buffer); }

void ExecutionPlanBuilder::set_communicator(std::shared_ptr<Communicator> communicator) {
  state_->comm = std::move(communicator);
}

ExecutionPlan ExecutionPlanBuilder::build() {
  std::shared_ptr<detail::PlanState> state = std::move(state_);
  state_ = std::make_unique<detail::PlanState>();
  state->finalize();
  return ExecutionPlan(std::move(state));
}

}  // namespace svod
