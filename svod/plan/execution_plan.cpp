#include "svod/plan/execution_plan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#include "svod/base/error.h"
#include "svod/base/rethrow.h"
#include "svod/device/cpu_queue.h"
#include "svod/plan/dag.h"
#include "svod/plan/hazards.h"
#include "svod/program/launch_layout.h"

namespace svod {
namespace detail {

struct ViewRule {
  size_t base;
  size_t byte_offset;
  size_t bytes;
  DType dtype;
};

// Where a name in a kernel's expressions gets its value: a fixed value of
// the op, or a plan variable.
struct EnvSource {
  bool fixed;
  int64_t value;  // the fixed value, or the plan variable's slot
};

// A kernel with everything resolved at build time. `env` holds, in order:
// the ABI scalars, the values of the names its expressions use (`sources`),
// and its caller scalars; the launch-size expressions are bound to the first
// two parts (scalar parameters take precedence by name), the scalar
// expressions to the second. Evaluating therefore needs no lookups.
struct KernelRun {
  std::shared_ptr<const Program> program;
  // Programs with the pre-bound host path (the CPU) keep their argument
  // words in `args` and run through run_bound(); others get `launch_buffers`,
  // the caller scalars and `dims`.
  bool bound = false;
  // On the heap so that it stays put when runs move (KernelRuns live in a
  // growing vector).
  std::shared_ptr<const LaunchLayout> layout;
  std::vector<size_t> slots;
  std::vector<Expr> scalars;
  std::array<Expr, 3> global;
  std::array<Expr, 3> local;
  std::vector<EnvSource> sources;
  std::vector<int64_t> env;
  size_t abi_scalars = 0;
  std::vector<uint64_t> args;          // bound: buffer addresses, then ABI scalars
  std::vector<Buffer> launch_buffers;  // not bound
  LaunchDims dims;                     // global[0] is the slice count when bound

  int64_t* caller() { return env.data() + abi_scalars + sources.size(); }
  std::span<const int64_t> caller_scalars() { return {caller(), scalars.size()}; }
};

struct CopyRun {
  size_t dst;
  size_t src;
};

struct CustomRun {
  std::shared_ptr<const CustomFunctionDef> def;
  const Attrs* attrs;
  std::vector<size_t> slots;
  std::vector<Buffer> buffers;
};

struct ViewOpRun {};

// A collective with its slots: all_reduce/broadcast: `buffers`;
// all_gather/reduce_scatter: {src, dst}.
struct CollectiveRun {
  PreparedCollective::Kind kind;
  std::vector<size_t> slots;
  ReduceOp op;
  int root;
};

using OpRun = std::variant<KernelRun, CopyRun, CustomRun, ViewOpRun, CollectiveRun>;

struct PlanState {
  // ---- definition, as given to the builder ----
  std::vector<Buffer> given_buffers;
  std::vector<std::string> buffer_names;
  std::vector<std::optional<ViewRule>> given_views;  // from add_view
  std::vector<std::pair<Variable, int64_t>> given_variables;
  std::vector<PreparedOp> ops;
  std::vector<OpOptions> options;
  std::vector<size_t> outputs;
  std::shared_ptr<Communicator> comm;  // set when the plan has collectives

  // ---- built ----
  std::vector<Buffer> buffers;                 // live, views derived
  std::vector<std::optional<ViewRule>> views;  // add_view and view ops
  std::vector<size_t> derive_order;            // view slots, bases first
  std::vector<std::string> var_names;          // sorted
  std::vector<Variable> var_defs;              // same order
  std::vector<int64_t> var_values;
  std::vector<int64_t> staged_values;  // execute_with_vars works here first
  std::vector<std::vector<size_t>> declared;
  std::vector<size_t> declared_order;
  std::vector<std::vector<std::pair<size_t, Access>>> access;  // per op: slot, access
  std::vector<OpRun> runs;
  // Resolved custom functions by op (null for other ops); a replica starts
  // with its original's, so it never picks up a later registration.
  std::vector<std::shared_ptr<const CustomFunctionDef>> custom_defs;
  DagRunner runner;
  // Where each op runs: its device's queue, or null for work on the calling
  // thread (kernels of devices whose queue runs inline, host copies, custom
  // functions).
  std::vector<Queue*> queues;
  // Per op, the predecessors on another queue whose events it must wait for,
  // and whether its own queue can wait for them on the device.
  std::vector<std::vector<std::pair<size_t, bool>>> cross_waits;
  bool uses_queues = false;
  // Set when every op is a kernel of this one device: the run may go to it
  // as one submission (Device::submit_graph).
  Device* graph_device = nullptr;
  // Where collectives wait for their peers, off the thread pool; null for a
  // plan without collectives.
  std::unique_ptr<CpuQueue> comm_thread;

  // ---- run state ----
  std::vector<EventPtr> events;  // per op, the last run's submission (null when done on the host)
  mutable std::mutex mutex;
  bool dirty = true;  // kernels must be re-evaluated before the next run
  std::atomic<bool> poisoned{false};
  std::string poison_reason;

  std::string op_name(size_t i) const {
    const std::string& id = options[i].id;
    if (!id.empty()) return fmt::format("op {} (\"{}\")", i, id);
    const std::string& label = options[i].label;
    return label.empty() ? fmt::format("op {}", i) : fmt::format("op {} ({})", i, label);
  }
  std::string slot_name(size_t i) const {
    return buffer_names[i].empty() ? fmt::format("buffer {}", i) : fmt::format("buffer {} (\"{}\")", i, buffer_names[i]);
  }
  VariableValues variables() const { return VariableValues{var_names, var_values}; }

  void finalize();
  void check_buffers();
  void derive_views();
  void check_variables();
  void resolve_dependencies();
  void compile_ops();
  void compile_kernel(size_t i, const PreparedKernel& k);
  void compile_custom(size_t i, const PreparedCustomFunction& c);
  void compile_collective(size_t i, const PreparedCollective& c);
  void schedule();
  void assign_queues();
  void bind_addresses();
  void prepare(const std::vector<int64_t>& values);
  void prepare_kernel(size_t i, KernelRun& k, const std::vector<int64_t>& values);
  void run_op(size_t i, const ExecuteOptions& options);
  void wait_for_op(size_t p);
  void run_inline(size_t i);
  void run_host_work(size_t i);
  void run_collective(const CollectiveRun& c);
  void start_collective(size_t i, const ExecuteOptions& options);
  void submit(size_t i, const ExecuteOptions& options);
  bool run_as_graph();
  void wait_for_devices(std::optional<DagFailure>& failure);
  void run(const ExecuteOptions& options);
  std::chrono::nanoseconds time_op(size_t i);
  void check_not_poisoned() const;
  [[noreturn]] void poison_with(size_t i, std::string_view what);
  void apply_vars(const std::map<std::string, int64_t>& vars, std::vector<int64_t>& values) const;
};

namespace {

// Rethrows the current exception as an Error of the same kind (Execution for
// foreign exceptions) whose message starts with `where`.
[[noreturn]] void rethrow_with(const std::string& where) {
  rethrow_with_context(std::current_exception(), where);
}

std::string op_kind(const PreparedOp& op) {
  if (auto* k = std::get_if<PreparedKernel>(&op))
    return k->program ? fmt::format("kernel \"{}\"", k->program->spec().display_name()) : "kernel";
  if (std::holds_alternative<PreparedCopy>(op)) return "copy";
  if (auto* c = std::get_if<PreparedCustomFunction>(&op)) return fmt::format("custom function \"{}\"", c->name);
  if (auto* c = std::get_if<PreparedCollective>(&op)) return fmt::format("collective {}", to_string(c->kind));
  return "view";
}

}  // namespace

void PlanState::finalize() {
  const bool collectives = std::any_of(ops.begin(), ops.end(), [](const PreparedOp& op) {
    return std::holds_alternative<PreparedCollective>(op);
  });
  if (!collectives) {
    comm = nullptr;
  } else {
    if (!comm) comm = std::move(create_local_communicators(1).front());
    if (!comm_thread) comm_thread = std::make_unique<CpuQueue>();
  }
  check_buffers();
  derive_views();
  check_variables();
  resolve_dependencies();
  compile_ops();
  schedule();
  bind_addresses();
  staged_values = var_values;
  // Evaluating every kernel now reports bad initial values at build time.
  prepare(var_values);
  dirty = false;
}

void PlanState::check_buffers() {
  const size_t n = given_buffers.size();
  for (size_t i = 0; i < n; ++i) {
    if (buffer_names[i].empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (buffer_names[j] == buffer_names[i])
        throw make_error(ErrorKind::Validation, "buffers {} and {} are both named \"{}\"", j, i, buffer_names[i]);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k] >= n)
      throw make_error(ErrorKind::Validation, "output {} is buffer {}, but the plan has {} buffers", k, outputs[k], n);
    for (size_t j = 0; j < k; ++j)
      if (outputs[j] == outputs[k])
        throw make_error(ErrorKind::Validation, "{} is declared as an output twice", slot_name(outputs[k]));
  }
}

void PlanState::derive_views() {
  const size_t n = given_buffers.size();
  views = given_views;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto* v = std::get_if<PreparedBufferView>(&ops[i]);
    if (!v) continue;
    if (v->view >= n || v->base >= n)
      throw make_error(ErrorKind::Validation, "{} (view): buffer index {} is out of range ({} buffers)", op_name(i),
                       std::max(v->view, v->base), n);
    if (views[v->view] || given_buffers[v->view].valid())
      throw make_error(ErrorKind::Validation, "{} (view): {} must be an empty slot that no other view defines",
                       op_name(i), slot_name(v->view));
    views[v->view] = ViewRule{v->base, v->byte_offset, v->bytes, v->dtype};
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
  for (size_t i = 0; i < n; ++i) {
    if (options[i].id.empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (options[j].id == options[i].id)
        throw make_error(ErrorKind::Validation, "ops {} and {} both have the id \"{}\"", j, i, options[i].id);
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
      auto it = std::find_if(options.begin(), options.end(), [&](const OpOptions& o) { return o.id == id; });
      if (id.empty() || it == options.end())
        throw make_error(ErrorKind::Validation, "{} depends on unknown op id \"{}\"", op_name(i), id);
      const size_t d = static_cast<size_t>(it - options.begin());
      if (d == i) throw make_error(ErrorKind::Validation, "{} depends on itself", op_name(i));
      declared[i].push_back(d);
    }
  }
  // Every rank must issue its collectives in one order: each waits for the
  // previous one.
  std::optional<size_t> previous;
  for (size_t i = 0; i < n; ++i) {
    if (!std::holds_alternative<PreparedCollective>(ops[i])) continue;
    if (previous) declared[i].push_back(*previous);
    previous = i;
  }
  // Hazards are found in this order, so declared edges decide which of two
  // conflicting ops goes first and the combined graph stays acyclic.
  declared_order = Dag(declared, [&](size_t i) { return op_name(i); }).order();
}

void PlanState::compile_ops() {
  const size_t nbuf = buffers.size();
  runs.clear();
  access.assign(ops.size(), {});
  auto check_slot = [&](size_t i, std::string_view what, size_t slot) {
    if (slot >= nbuf)
      throw make_error(ErrorKind::Validation, "{} ({}): {} is buffer {}, but the plan has {} buffers", op_name(i),
                       op_kind(ops[i]), what, slot, nbuf);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const PreparedOp& op = ops[i];
    if (const auto* k = std::get_if<PreparedKernel>(&op)) {
      for (size_t p = 0; p < k->buffers.size(); ++p) check_slot(i, fmt::format("argument {}", p), k->buffers[p]);
      compile_kernel(i, *k);
    } else if (const auto* c = std::get_if<PreparedCopy>(&op)) {
      check_slot(i, "the destination", c->dst);
      check_slot(i, "the source", c->src);
      if (buffers[c->dst].bytes() != buffers[c->src].bytes())
        throw make_error(ErrorKind::Validation, "{} (copy): {} holds {} bytes but {} holds {}; sizes must be equal",
                         op_name(i), slot_name(c->dst), buffers[c->dst].bytes(), slot_name(c->src),
                         buffers[c->src].bytes());
      access[i] = {{c->src, Access::Read}, {c->dst, Access::Write}};
      runs.emplace_back(CopyRun{c->dst, c->src});
    } else if (const auto* f = std::get_if<PreparedCustomFunction>(&op)) {
      for (size_t p = 0; p < f->buffers.size(); ++p) check_slot(i, fmt::format("argument {}", p), f->buffers[p]);
      compile_custom(i, *f);
    } else if (const auto* c = std::get_if<PreparedCollective>(&op)) {
      compile_collective(i, *c);
    } else {
      runs.emplace_back(ViewOpRun{});
    }
  }
}

void PlanState::compile_kernel(size_t i, const PreparedKernel& k) {
  const std::string where = fmt::format("{} ({})", op_name(i), op_kind(ops[i]));
  if (!k.program) throw make_error(ErrorKind::Validation, "{}: no program", where);
  const ProgramSpec& spec = k.program->spec();
  KernelRun run;
  run.program = k.program;
  run.bound = k.program->binds_host_arguments() && k.program->device().queue().runs_inline();
  try {
    run.layout = std::make_shared<const LaunchLayout>(spec);
  } catch (...) {
    rethrow_with(where);
  }
  const LaunchLayout& layout = *run.layout;
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
    if (param.dtype && *param.dtype != b.dtype())
      throw make_error(ErrorKind::Validation, "{}: parameter \"{}\" is {} but {} is {}", where, param.name,
                       to_string(*param.dtype), slot_name(k.buffers[p]), to_string(b.dtype()));
    if (run.bound && !b.is_host())
      throw make_error(ErrorKind::Validation, "{}: parameter \"{}\" gets {}, which is not in host memory", where,
                       param.name, slot_name(k.buffers[p]));
    access[i].emplace_back(k.buffers[p], param.access);
  }
  run.slots = k.buffers;

  // Names the expressions use, each resolved to a fixed value or a variable.
  std::vector<std::string> abi_names;
  for (const auto& s : spec.scalars) abi_names.push_back(s.name);
  std::vector<std::string> names;
  auto need = [&](const std::string& name, const std::string& text) {
    if (std::find(names.begin(), names.end(), name) != names.end()) return;
    if (auto it = k.fixed_vars.find(name); it != k.fixed_vars.end()) {
      run.sources.push_back({true, it->second});
    } else if (auto v = std::lower_bound(var_names.begin(), var_names.end(), name);
               v != var_names.end() && *v == name) {
      run.sources.push_back({false, v - var_names.begin()});
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
    for (const Expr& e : k.scalars) run.scalars.push_back(e.bind_to(names));
    std::vector<std::string> launch_names = abi_names;
    launch_names.insert(launch_names.end(), names.begin(), names.end());
    for (size_t d = 0; d < 3; ++d) {
      run.global[d] = global[d].bind_to(launch_names);
      run.local[d] = local[d].bind_to(launch_names);
    }
  } catch (...) {
    rethrow_with(where);
  }
  run.abi_scalars = abi_names.size();
  run.env.assign(run.abi_scalars + run.sources.size() + k.scalars.size(), 0);
  if (run.bound)
    run.args.assign(layout.buffer_count() + layout.scalar_count(), 0);
  else
    run.launch_buffers.resize(layout.buffer_count());
  runs.emplace_back(std::move(run));
}

void PlanState::compile_collective(size_t i, const PreparedCollective& c) {
  const std::string where = fmt::format("{} ({})", op_name(i), op_kind(ops[i]));
  const size_t nbuf = buffers.size();
  const size_t ranks = static_cast<size_t>(comm->size());
  CollectiveRun run{c.kind, {}, c.op, c.root};
  if (c.kind == PreparedCollective::Kind::AllReduce || c.kind == PreparedCollective::Kind::Broadcast) {
    if (c.buffers.empty()) throw make_error(ErrorKind::Validation, "{}: no buffers", where);
    for (size_t p = 0; p < c.buffers.size(); ++p) {
      if (c.buffers[p] >= nbuf)
        throw make_error(ErrorKind::Validation, "{}: buffer {} is buffer {}, but the plan has {} buffers", where, p,
                         c.buffers[p], nbuf);
      access[i].emplace_back(c.buffers[p], Access::ReadWrite);
    }
    if (c.kind == PreparedCollective::Kind::Broadcast && (c.root < 0 || static_cast<size_t>(c.root) >= ranks))
      throw make_error(ErrorKind::Validation, "{}: root {} is out of range (the communicator has ranks 0 to {})", where,
                       c.root, ranks - 1);
    run.slots = c.buffers;
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
    const bool gather = c.kind == PreparedCollective::Kind::AllGather;
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
    run.slots = {c.src, c.dst};
  }
  runs.emplace_back(std::move(run));
}

void PlanState::compile_custom(size_t i, const PreparedCustomFunction& c) {
  const std::string where = fmt::format("{} ({})", op_name(i), op_kind(ops[i]));
  CustomRun run;
  run.attrs = &c.attrs;
  run.slots = c.buffers;
  for (size_t slot : c.buffers) run.buffers.push_back(buffers[slot]);
  std::vector<Access> acc;
  if (custom_defs.size() != ops.size()) custom_defs.assign(ops.size(), nullptr);
  try {
    if (!custom_defs[i]) custom_defs[i] = c.def ? c.def : find_custom_function(c.name);
    run.def = custom_defs[i];
    acc = run.def->validate(run.buffers, c.attrs);
  } catch (...) {
    rethrow_with(where);
  }
  if (acc.size() != c.buffers.size())
    throw make_error(ErrorKind::Validation, "{}: the validator declared {} accesses for {} buffers", where, acc.size(),
                     c.buffers.size());
  for (size_t p = 0; p < acc.size(); ++p) access[i].emplace_back(c.buffers[p], acc[p]);
  runs.emplace_back(std::move(run));
}

void PlanState::schedule() {
  std::vector<std::vector<MemoryAccess>> ranges(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto& [slot, acc] : access[i]) {
      const Buffer& b = buffers[slot];
      ranges[i].push_back(MemoryAccess{{b.storage_id(), b.byte_offset(), b.byte_offset() + b.bytes()},
                                       reads(acc), writes(acc)});
    }
  }
  auto preds = hazard_predecessors(declared_order, ranges);
  for (size_t i = 0; i < ops.size(); ++i) preds[i].insert(preds[i].end(), declared[i].begin(), declared[i].end());
  runner = DagRunner(Dag(std::move(preds), [&](size_t i) { return op_name(i); }));
  std::vector<bool> deferred(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) deferred[i] = std::holds_alternative<CollectiveRun>(runs[i]);
  runner.set_deferred(std::move(deferred));
  assign_queues();
}

void PlanState::assign_queues() {
  const size_t n = ops.size();
  queues.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    Queue* queue = nullptr;
    if (const auto* k = std::get_if<KernelRun>(&runs[i])) {
      queue = &k->program->device().queue();
    } else if (const auto* c = std::get_if<CopyRun>(&runs[i])) {
      // The device that moves the bytes in one command; else the host
      // stages the copy.
      const Buffer& dst = buffers[c->dst];
      const Buffer& src = buffers[c->src];
      if (dst.device().direct_copy(dst, src)) queue = &dst.device().queue();
      else if (src.device().direct_copy(dst, src)) queue = &src.device().queue();
    }
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
    Device* device = queues[i] && std::holds_alternative<KernelRun>(runs[i]) ? &queues[i]->device() : nullptr;
    if (!device || (i > 0 && device != graph_device)) {
      graph_device = nullptr;
      break;
    }
    graph_device = device;
  }
}

void PlanState::bind_addresses() {
  for (auto& r : runs) {
    if (auto* k = std::get_if<KernelRun>(&r)) {
      for (size_t p = 0; p < k->slots.size(); ++p) {
        const Buffer& b = buffers[k->slots[p]];
        if (k->bound)
          k->args[p] = reinterpret_cast<uint64_t>(static_cast<std::byte*>(b.storage().host_data()) + b.byte_offset());
        else
          k->launch_buffers[p] = b;
      }
    } else if (auto* c = std::get_if<CustomRun>(&r)) {
      for (size_t p = 0; p < c->slots.size(); ++p) c->buffers[p] = buffers[c->slots[p]];
    }
  }
}

void PlanState::prepare(const std::vector<int64_t>& values) {
  for (size_t i = 0; i < runs.size(); ++i)
    if (auto* k = std::get_if<KernelRun>(&runs[i])) prepare_kernel(i, *k, values);
}

void PlanState::prepare_kernel(size_t i, KernelRun& k, const std::vector<int64_t>& values) {
  try {
    int64_t* named = k.env.data() + k.abi_scalars;
    for (size_t s = 0; s < k.sources.size(); ++s)
      named[s] = k.sources[s].fixed ? k.sources[s].value : values[static_cast<size_t>(k.sources[s].value)];
    int64_t* caller = k.caller();
    for (size_t s = 0; s < k.scalars.size(); ++s) caller[s] = k.scalars[s].evaluate({named, k.sources.size()});
    k.layout->fill_scalars({caller, k.scalars.size()}, k.env.data());
    const std::span<const int64_t> launch_env(k.env.data(), k.abi_scalars + k.sources.size());
    LaunchDims dims;
    for (size_t d = 0; d < 3; ++d) {
      dims.global[d] = k.global[d].evaluate(launch_env);
      dims.local[d] = k.local[d].evaluate(launch_env);
      if (dims.global[d] < 1)
        throw make_error(ErrorKind::Validation, "global_size[{}] \"{}\" = {} is below 1", d, k.global[d].text(),
                         dims.global[d]);
      if (dims.local[d] < 1)
        throw make_error(ErrorKind::Validation, "local_size[{}] \"{}\" = {} is below 1", d, k.local[d].text(),
                         dims.local[d]);
    }
    if (k.bound && dims.global[0] > 1 && !k.layout->core_id())
      throw make_error(ErrorKind::Validation, "global_size[0] = {} needs a core_id scalar to split the work",
                       dims.global[0]);
    for (size_t p = 0; p < k.slots.size(); ++p) {
      const auto need = k.layout->min_bytes(p, k.env.data());
      if (need && buffers[k.slots[p]].bytes() < *need)
        throw make_error(ErrorKind::Validation, "parameter \"{}\" gets {} of {} bytes but the launch needs {}",
                         k.program->spec().buffers[p].name, slot_name(k.slots[p]), buffers[k.slots[p]].bytes(),
                         *need);
    }
    k.dims = dims;
    if (k.bound) std::copy_n(k.env.data(), k.abi_scalars, k.args.begin() + static_cast<std::ptrdiff_t>(k.slots.size()));
  } catch (...) {
    rethrow_with(fmt::format("{} ({})", op_name(i), op_kind(ops[i])));
  }
}

void PlanState::wait_for_op(size_t p) {
  try {
    events[p]->wait();
  } catch (...) {
    // The failure is the device command's, found by the op waiting for it.
    rethrow_with(fmt::format("waiting for {} ({})", op_name(p), op_kind(ops[p])));
  }
}

void PlanState::run_inline(size_t i) {
  // Host work waits for the device work it depends on.
  for (const auto& [p, on_device] : cross_waits[i])
    if (events[p]) wait_for_op(p);
  run_host_work(i);
}

void PlanState::run_host_work(size_t i) {
  OpRun& r = runs[i];
  if (auto* k = std::get_if<KernelRun>(&r)) {
    if (k->bound)
      k->program->run_bound(k->args.data(), k->dims.global[0]);
    else
      k->program->launch(k->launch_buffers, k->caller_scalars(), &k->dims);
  } else if (auto* c = std::get_if<CopyRun>(&r)) {
    const Buffer& dst = buffers[c->dst];
    const Buffer& src = buffers[c->src];
    if (dst.is_host() && src.is_host())
      std::memmove(dst.data(), src.data(), src.bytes());
    else
      (dst.is_host() ? src : dst).device().copy(dst, src);
  } else if (auto* f = std::get_if<CustomRun>(&r)) {
    f->def->run(f->buffers, *f->attrs, variables());
  } else if (auto* c = std::get_if<CollectiveRun>(&r)) {
    run_collective(*c);
  }
}

void PlanState::run_collective(const CollectiveRun& c) {
  switch (c.kind) {
    case PreparedCollective::Kind::AllReduce:
      for (size_t slot : c.slots) comm->all_reduce(buffers[slot], c.op);
      return;
    case PreparedCollective::Kind::Broadcast:
      for (size_t slot : c.slots) comm->broadcast(buffers[slot], c.root);
      return;
    case PreparedCollective::Kind::AllGather:
      comm->all_gather(buffers[c.slots[0]], buffers[c.slots[1]]);
      return;
    case PreparedCollective::Kind::ReduceScatter:
      comm->reduce_scatter(buffers[c.slots[0]], buffers[c.slots[1]], c.op);
      return;
  }
}

// Hands collective i to the communication thread, which waits there for its
// device predecessors and its peers and then completes the node; the pool
// thread returns at once.
void PlanState::start_collective(size_t i, const ExecuteOptions& options) {
  PlanObserver* observer = options.observer;
  if (observer) observer->op_started(i);
  comm_thread->submit_callback([this, i, observer] {
    std::exception_ptr error;
    try {
      run_inline(i);
    } catch (...) {
      error = std::current_exception();
    }
    if (observer) observer->op_finished(i);
    runner.complete(i, std::move(error));
  });
}

void PlanState::submit(size_t i, const ExecuteOptions& options) {
  // Predecessors on this queue are ordered by it; those on queues it can
  // wait on go into the wait list; for the rest the host waits.
  EventPtr waits[8];
  std::vector<EventPtr> more;
  size_t count = 0;
  for (const auto& [p, on_device] : cross_waits[i]) {
    if (!events[p]) continue;
    if (!on_device || options.strategy == SyncStrategy::BlockingHostWait) {
      wait_for_op(p);
    } else if (count < std::size(waits)) {
      waits[count++] = events[p];
    } else {
      more.push_back(events[p]);
    }
  }
  if (!more.empty()) more.insert(more.begin(), waits, waits + count);
  const std::span<const EventPtr> list = more.empty() ? std::span<const EventPtr>(waits, count) : more;
  Queue& queue = *queues[i];
  if (auto* k = std::get_if<KernelRun>(&runs[i])) {
    events[i] = queue.launch(*k->program, k->launch_buffers, k->caller_scalars(), &k->dims, list);
  } else {
    const auto& c = std::get<CopyRun>(runs[i]);
    events[i] = queue.copy(buffers[c.dst], buffers[c.src], list);
  }
  // Sequential runs and observed runs see each op end before the next.
  if ((options.sequential || options.observer) && events[i]) events[i]->wait();
}

void PlanState::run_op(size_t i, const ExecuteOptions& options) {
  struct Notify {
    PlanObserver* observer;
    size_t op;
    ~Notify() {
      if (observer) observer->op_finished(op);
    }
  } notify{options.observer, i};
  if (options.observer) options.observer->op_started(i);
  if (queues[i])
    submit(i, options);
  else
    run_inline(i);
}

bool PlanState::run_as_graph() {
  std::vector<GraphLaunch> kernels;
  kernels.reserve(runs.size());
  const auto& preds = runner.dag().predecessors();
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& k = std::get<KernelRun>(runs[i]);
    kernels.push_back({k.program, k.launch_buffers, k.caller_scalars(), k.dims, preds[i]});
  }
  try {
    return graph_device->submit_graph(kernels);
  } catch (const Error& e) {
    poison_reason = e.what();
    poisoned.store(true);
    throw;
  }
}

// Waits for every op submitted to a queue in this run, so that no device
// work outlives it (even after a failure), and records the first failure
// among them when the run had none.
void PlanState::wait_for_devices(std::optional<DagFailure>& failure) {
  for (size_t i : runner.dag().order()) {
    if (!events[i]) continue;
    try {
      events[i]->wait();
    } catch (...) {
      if (!failure) failure = DagFailure{i, std::current_exception()};
    }
    events[i] = nullptr;
  }
}

void PlanState::check_not_poisoned() const {
  if (poisoned.load(std::memory_order_relaxed))
    throw make_error(ErrorKind::PlanPoisoned,
                     "the plan failed in an earlier run and its buffers may be half-written; build it again "
                     "(the failure: {})",
                     poison_reason);
}

// Rethrows the exception in flight with op i named, and poisons the plan.
void PlanState::poison_with(size_t i, std::string_view what) {
  try {
    rethrow_with(fmt::format("{} ({}) {}", op_name(i), op_kind(ops[i]), what));
  } catch (const Error& e) {
    // The other ranks would wait for this one in their next collective.
    if (comm) comm->abort(e.what());
    poison_reason = e.what();
    poisoned.store(true);
    throw;
  }
}

void PlanState::run(const ExecuteOptions& options) {
  check_not_poisoned();
  if (dirty) {
    prepare(var_values);
    dirty = false;
  }
  if (graph_device && !options.sequential && !options.observer && run_as_graph()) return;
  std::optional<DagFailure> failure;
  if (comm && !options.sequential) {
    auto node = [this, &options](size_t i) {
      if (std::holds_alternative<CollectiveRun>(runs[i]))
        start_collective(i, options);
      else
        run_op(i, options);
    };
    failure = runner.run(false, node);
    wait_for_devices(failure);
  } else if (!uses_queues) {
    // Everything runs on the host: no events to keep or wait for.
    PlanObserver* observer = options.observer;
    if (observer) {
      auto node = [this, &options](size_t i) { run_op(i, options); };
      failure = runner.run(options.sequential, node);
    } else {
      auto node = [this](size_t i) { run_host_work(i); };
      failure = runner.run(options.sequential, node);
    }
  } else {
    auto node = [this, &options](size_t i) { run_op(i, options); };
    failure = runner.run(options.sequential, node);
    wait_for_devices(failure);
  }
  if (!failure) return;
  try {
    std::rethrow_exception(failure->error);
  } catch (...) {
    poison_with(failure->node, "failed");
  }
}

std::chrono::nanoseconds PlanState::time_op(size_t i) {
  check_not_poisoned();
  if (dirty) {
    prepare(var_values);
    dirty = false;
  }
  try {
    auto* k = std::get_if<KernelRun>(&runs[i]);
    if (k && !k->bound) return k->program->time_launch(k->launch_buffers, k->caller_scalars(), &k->dims);
    const auto start = std::chrono::steady_clock::now();
    run_op(i, ExecuteOptions{.sequential = true});
    events[i] = nullptr;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  } catch (...) {
    events[i] = nullptr;
    poison_with(i, "failed");
  }
}

void PlanState::apply_vars(const std::map<std::string, int64_t>& vars, std::vector<int64_t>& values) const {
  // Both sides are sorted by name: one merge pass, no lookups.
  size_t slot = 0;
  for (const auto& [name, value] : vars) {
    while (slot < var_names.size() && var_names[slot] < name) ++slot;
    if (slot == var_names.size() || var_names[slot] != name) {
      std::string known;
      for (const auto& n : var_names) known += (known.empty() ? "" : ", ") + n;
      throw make_error(ErrorKind::Validation, "unknown plan variable \"{}\" (the plan has: {})", name,
                       known.empty() ? "none" : known);
    }
    if (var_defs[slot].read_only)
      throw make_error(ErrorKind::Validation, "plan variable \"{}\" is read-only: it is set by the runtime", name);
    var_defs[slot].check(value);
    values[slot] = value;
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
  state_->given_views[slot] = detail::ViewRule{base, byte_offset, bytes, dtype};
  return slot;
}

void ExecutionPlanBuilder::add_variable(Variable variable, int64_t value) {
  state_->given_variables.emplace_back(std::move(variable), value);
}

size_t ExecutionPlanBuilder::add_op(PreparedOp op, OpOptions options) {
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

// ---- ExecutionPlan ---------------------------------------------------------

ExecutionPlan::ExecutionPlan(std::shared_ptr<detail::PlanState> state) : state_(std::move(state)) {}
ExecutionPlan::ExecutionPlan(ExecutionPlan&&) noexcept = default;
ExecutionPlan& ExecutionPlan::operator=(ExecutionPlan&&) noexcept = default;
ExecutionPlan::~ExecutionPlan() = default;

void ExecutionPlan::execute(const ExecuteOptions& options) {
  std::lock_guard lock(state_->mutex);
  state_->run(options);
}

std::chrono::nanoseconds ExecutionPlan::time_op(size_t index) {
  if (index >= state_->ops.size())
    throw make_error(ErrorKind::Validation, "op {} is out of range: the plan has {} ops", index, state_->ops.size());
  std::lock_guard lock(state_->mutex);
  return state_->time_op(index);
}

void ExecutionPlan::execute_sequential() { execute(ExecuteOptions{.sequential = true}); }

void ExecutionPlan::execute_with_vars(const std::map<std::string, int64_t>& vars, const ExecuteOptions& options) {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  if (!vars.empty()) {
    std::copy(s.var_values.begin(), s.var_values.end(), s.staged_values.begin());
    s.apply_vars(vars, s.staged_values);
    if (s.staged_values != s.var_values) {
      try {
        s.prepare(s.staged_values);
      } catch (...) {
        // Some kernels hold the rejected values now; the next run re-prepares
        // them from the kept ones.
        s.dirty = true;
        throw;
      }
      s.var_values.swap(s.staged_values);
      s.dirty = false;
    }
  }
  s.run(options);
}

uint64_t ExecutionPlan::execute_async(CpuQueue& queue, const std::map<std::string, int64_t>& vars) {
  // Variable names and bounds are fixed at build time, so they can be checked
  // here without the run lock; the values are applied when the command runs,
  // after any earlier queued run of this plan.
  std::vector<int64_t> scratch(state_->var_defs.size());
  state_->apply_vars(vars, scratch);
  return queue.submit_callback([state = state_, vars] {
    ExecutionPlan plan(state);
    plan.execute_with_vars(vars);
  });
}

void ExecutionPlan::rebind(size_t index, Buffer replacement) {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  if (index >= s.buffers.size())
    throw make_error(ErrorKind::Validation, "rebind: buffer {} is out of range ({} buffers)", index, s.buffers.size());
  if (s.views[index])
    throw make_error(ErrorKind::Validation, "rebind: {} is a view of buffer {}; rebind its base instead",
                     s.slot_name(index), s.views[index]->base);
  const Buffer& old = s.buffers[index];
  if (!replacement.valid() || replacement.bytes() != old.bytes() || replacement.dtype() != old.dtype() ||
      &replacement.device() != &old.device())
    throw make_error(ErrorKind::Validation,
                     "rebind: {} holds {} bytes of {} on {}; the replacement must match (it is {})", s.slot_name(index),
                     old.bytes(), to_string(old.dtype()), old.device().name(),
                     replacement.valid() ? fmt::format("{} bytes of {} on {}", replacement.bytes(),
                                                       to_string(replacement.dtype()), replacement.device().name())
                                         : std::string("empty"));
  // The slot and the views derived from it move together; when no other slot
  // shares the old or the new storage, every overlap stays as it was and the
  // dependency graph still holds.
  std::vector<bool> family(s.buffers.size(), false);
  family[index] = true;
  for (size_t v : s.derive_order) family[v] = family[s.views[v]->base];
  const uint64_t old_id = old.storage_id();
  const uint64_t new_id = replacement.storage_id();
  bool same_aliasing = true;
  for (size_t j = 0; j < s.buffers.size(); ++j)
    if (!family[j] && (s.buffers[j].storage_id() == old_id || s.buffers[j].storage_id() == new_id))
      same_aliasing = false;

  std::vector<Buffer> previous = s.buffers;
  try {
    s.buffers[index] = std::move(replacement);
    for (size_t v : s.derive_order) {
      const auto& rule = *s.views[v];
      if (family[v]) s.buffers[v] = s.buffers[rule.base].view_bytes(rule.byte_offset, rule.bytes, rule.dtype);
    }
    if (!same_aliasing) s.schedule();
  } catch (...) {
    s.buffers = std::move(previous);
    throw;
  }
  s.bind_addresses();
  // Kernels check buffer sizes against their launch; sizes did not change, so
  // only the addresses needed updating.
}

ExecutionPlan ExecutionPlan::replicate() const {
  const detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.poisoned)
    throw make_error(ErrorKind::PlanPoisoned, "cannot replicate a plan whose last run failed: {}", s.poison_reason);
  if (s.comm)
    throw make_error(ErrorKind::Unsupported,
                     "cannot replicate a plan with collectives: the replica's calls would interleave with the "
                     "original's on the same rank");
  auto copy = std::make_shared<detail::PlanState>();
  copy->buffer_names = s.buffer_names;
  copy->given_views = s.given_views;
  copy->ops = s.ops;
  copy->options = s.options;
  copy->outputs = s.outputs;
  copy->custom_defs = s.custom_defs;
  for (size_t i = 0; i < s.var_defs.size(); ++i) copy->given_variables.emplace_back(s.var_defs[i], s.var_values[i]);

  std::vector<uint64_t> written;
  for (const auto& op_access : s.access)
    for (const auto& [slot, acc] : op_access)
      if (writes(acc)) written.push_back(s.buffers[slot].storage_id());
  std::sort(written.begin(), written.end());
  std::vector<std::pair<uint64_t, std::shared_ptr<Storage>>> forks;
  copy->given_buffers.resize(s.buffers.size());
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    // View slots are derived again from their (possibly forked) bases.
    if (s.views[i]) continue;
    const Buffer& b = s.buffers[i];
    if (!std::binary_search(written.begin(), written.end(), b.storage_id())) {
      copy->given_buffers[i] = b;
      continue;
    }
    auto it = std::find_if(forks.begin(), forks.end(), [&](const auto& f) { return f.first == b.storage_id(); });
    if (it == forks.end()) {
      Storage& old = b.storage();
      Buffer fresh = old.device().allocate(DType::U8, old.bytes());
      old.device().copy(fresh, Buffer(b.storage_ptr(), DType::U8));
      forks.emplace_back(b.storage_id(), fresh.storage_ptr());
      it = forks.end() - 1;
    }
    copy->given_buffers[i] = Buffer(it->second, b.dtype(), b.byte_offset(), b.bytes());
  }
  copy->finalize();
  return ExecutionPlan(std::move(copy));
}

const Buffer& ExecutionPlan::buffer(size_t index) const {
  if (index >= state_->buffers.size())
    throw make_error(ErrorKind::Validation, "buffer {} is out of range ({} buffers)", index, state_->buffers.size());
  return state_->buffers[index];
}

size_t ExecutionPlan::buffer_count() const { return state_->buffers.size(); }

std::optional<size_t> ExecutionPlan::find_buffer(std::string_view name) const {
  const auto& names = state_->buffer_names;
  for (size_t i = 0; i < names.size(); ++i)
    if (!names[i].empty() && names[i] == name) return i;
  return std::nullopt;
}

const std::vector<size_t>& ExecutionPlan::outputs() const { return state_->outputs; }
size_t ExecutionPlan::op_count() const { return state_->ops.size(); }

const PreparedOp& ExecutionPlan::op(size_t index) const {
  if (index >= state_->ops.size())
    throw make_error(ErrorKind::Validation, "op {} is out of range ({} ops)", index, state_->ops.size());
  return state_->ops[index];
}

const std::string& ExecutionPlan::op_id(size_t index) const {
  op(index);
  return state_->options[index].id;
}

std::optional<int64_t> ExecutionPlan::variable(std::string_view name) const {
  std::lock_guard lock(state_->mutex);
  return state_->variables().find(name);
}

std::vector<size_t> ExecutionPlan::topological_order() const { return state_->runner.dag().order(); }

const std::vector<std::vector<size_t>>& ExecutionPlan::predecessors() const {
  return state_->runner.dag().predecessors();
}

bool ExecutionPlan::poisoned() const { return state_->poisoned.load(); }

const std::shared_ptr<Communicator>& ExecutionPlan::communicator() const { return state_->comm; }

std::string_view to_string(PreparedCollective::Kind kind) noexcept {
  switch (kind) {
    case PreparedCollective::Kind::AllReduce:
      return "all_reduce";
    case PreparedCollective::Kind::Broadcast:
      return "broadcast";
    case PreparedCollective::Kind::AllGather:
      return "all_gather";
    case PreparedCollective::Kind::ReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

}  // namespace svod
