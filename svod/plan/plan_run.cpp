// Run time: kernels evaluated for the variables, ops run on the host, submitted
// to their queues, handed to the communication thread or sent as one graph;
// failures poison the plan. Also the ExecutionPlan methods that run it
// (execute*, time_op).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "svod/base/error.h"
#include "svod/base/visit.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/guarded_memory.h"
#include "svod/guard/op_deadline.h"
#include "svod/guard/running_op.h"
#include "svod/plan/plan_state.h"

namespace svod {
namespace detail {

void PlanState::prepare(const std::vector<int64_t>& values) {
  for (size_t i = 0; i < resolved.size(); ++i)
    if (auto* k = std::get_if<ResolvedKernel>(&resolved[i])) prepare_kernel(i, *k, values);
}

void PlanState::prepare_kernel(size_t i, ResolvedKernel& k, const std::vector<int64_t>& values) {
  try {
    int64_t* named = k.values.data() + k.abi_scalars;
    for (size_t s = 0; s < k.sources.size(); ++s)
      named[s] = k.sources[s].fixed ? k.sources[s].value : values[static_cast<size_t>(k.sources[s].value)];
    int64_t* caller = k.caller();
    for (size_t s = 0; s < k.scalars.size(); ++s) caller[s] = k.scalars[s].evaluate({named, k.sources.size()});
    k.layout->fill_scalars({caller, k.scalars.size()}, k.values.data());
    const std::span<const int64_t> launch_values(k.values.data(), k.abi_scalars + k.sources.size());
    LaunchDims dims;
    for (size_t d = 0; d < 3; ++d) {
      dims.global[d] = k.global[d].evaluate(launch_values);
      dims.local[d] = k.local[d].evaluate(launch_values);
      if (dims.global[d] < 1)
        throw make_error(ErrorKind::Validation, "global_size[{}] \"{}\" = {} is below 1", d, k.global[d].text(),
                         dims.global[d]);
      if (dims.local[d] < 1)
        throw make_error(ErrorKind::Validation, "local_size[{}] \"{}\" = {} is below 1", d, k.local[d].text(),
                         dims.local[d]);
    }
    // Bound kernels run their slices through run_bound, unchecked; the others
    // are checked by their launch().
    if (k.bound) k.layout->check_slices(dims.global[0]);
    for (size_t p = 0; p < k.slots.size(); ++p) {
      const auto need = k.layout->min_bytes(p, k.values.data());
      if (need && buffers[k.slots[p]].bytes() < *need)
        throw make_error(ErrorKind::Validation, "parameter \"{}\" gets {} of {} bytes but the launch needs {}",
                         k.program->spec().buffers[p].name, slot_name(k.slots[p]), buffers[k.slots[p]].bytes(),
                         *need);
    }
    k.dims = dims;
    if (k.bound) std::copy_n(k.values.data(), k.abi_scalars, k.args.begin() + static_cast<std::ptrdiff_t>(k.slots.size()));
  } catch (...) {
    rethrow_with(op_title(i));
  }
}

void PlanState::wait_for_op(size_t p) {
  try {
    events[p]->wait();
  } catch (...) {
    // The failure is the device command's, found by the op waiting for it.
    rethrow_with("waiting for " + op_title(p));
  }
}

void PlanState::run_inline(size_t i) {
  // Host work waits for the device work it depends on.
  for (const auto& [p, on_device] : cross_waits[i])
    if (events[p]) wait_for_op(p);
  run_host_work(i);
}

namespace {

// RunningOp::id_or_label: how a fault report names the op.
const std::string& id_or_label_of(const void* state, size_t i) {
  return static_cast<const PlanState*>(state)->id_or_label(i);
}

}  // namespace

void PlanState::run_host_work(size_t i) {
  if (op_timeout > 0) [[unlikely]] {
    run_host_work_watched(i);
    return;
  }
  const RunningOp running{i, this, id_or_label_of, caller_stop};  // for the fault report of a kernel that crashes
  const RunningOpScope scope(running);
  do_host_work(i);
}

// Out of the op loop's way: the same under SVOD_OP_TIMEOUT's deadline.
[[gnu::noinline, gnu::cold]] void PlanState::run_host_work_watched(size_t i) {
  RunningOp running{i, this, id_or_label_of, caller_stop};
  const RunningOpScope scope(running);
  const OpDeadline deadline(op_title(i));  // its report names the op
  if (const StopScope* s = deadline.scope()) running.stop = s;  // the op's kernels run in it
  do_host_work(i);
}

void PlanState::do_host_work(size_t i) {
  visit_exhaustively(
      resolved[i],
      [&](ResolvedKernel& k) {
        if (k.bound && !launch_checked) {
          k.program->run_bound(k.args.data(), k.dims.global[0]);
        } else if (k.bound) {
          // Checked mode (memory): through launch(), which stages every
          // argument that has no guard pages of its own.
          std::vector<Buffer> arguments;
          arguments.reserve(k.slots.size());
          for (size_t slot : k.slots) arguments.push_back(buffers[slot]);
          k.program->launch(arguments, k.caller_scalars(), &k.dims);
        } else {
          k.program->launch(k.launch_args());
        }
      },
      [&](ResolvedCopy& c) { copy_buffer(buffers[c.dst], buffers[c.src]); },
      [&](ResolvedCustom& f) { f.def->run(f.buffers, *f.attrs, variables()); },
      [&](ResolvedCollective& c) { run_collective(c); },
      [&](ResolvedView&) {});  // a view is made at build time: nothing runs
}

void PlanState::run_collective(const ResolvedCollective& c) {
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      for (size_t slot : c.slots) comm->all_reduce(buffers[slot], c.op);
      return;
    case CollectiveKind::Broadcast:
      for (size_t slot : c.slots) comm->broadcast(buffers[slot], c.root);
      return;
    case CollectiveKind::AllGather:
      comm->all_gather(buffers[c.slots[0]], buffers[c.slots[1]]);
      return;
    case CollectiveKind::ReduceScatter:
      comm->reduce_scatter(buffers[c.slots[0]], buffers[c.slots[1]], c.op);
      return;
    case CollectiveKind::Barrier:
    case CollectiveKind::Send:
      return;  // refused by build()
  }
}

// Hands collective i to the communication thread, which waits there for its
// device predecessors and its peers and then completes the node; the pool
// thread returns at once.
void PlanState::start_collective(size_t i, const ExecuteOptions& options) {
  PlanObserver* observer = options.observer;
  if (observer) observer->op_started(i);
  comm_thread->submit([this, i, observer] {
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
  if (auto* k = std::get_if<ResolvedKernel>(&resolved[i])) {
    const RunningOp running{i, this, id_or_label_of, caller_stop};  // names the op while a device runs it (PoCL's threads)
    const RunningOpScope scope(running);
    events[i] = queue.launch(*k->program, k->launch_args(), list);
  } else {
    const auto& c = std::get<ResolvedCopy>(resolved[i]);
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
  std::vector<KernelLaunch> kernels;
  kernels.reserve(resolved.size());
  const auto& preds = runner.dag().predecessors();
  for (size_t i = 0; i < resolved.size(); ++i) {
    auto& k = std::get<ResolvedKernel>(resolved[i]);
    kernels.push_back({k.program, k.launch_args(), preds[i]});
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
                     "or rebind a buffer (the failure: {})",
                     poison_reason);
}

// Rethrows the exception in flight with op i named, and poisons the plan.
void PlanState::poison_with(size_t i, std::string_view what) {
  const bool peers = comm && comm->size() > 1;
  auto poison = [&](const Error& e) {
    // The other ranks would wait for this one in their next collective. A
    // one-rank communicator has no one waiting and stays usable (the world
    // communicator outside a launcher lives as long as the process).
    if (peers) comm->abort(e.what());
    poison_reason = e.what();
    poisoned.store(true);
  };
  try {
    rethrow_with(fmt::format("{} {}", op_title(i), what));
  } catch (const KernelFault& e) {
    if (!peers) {
      poison(e);
      throw;
    }
    // A fault names the rank it happened on.
    KernelFaultInfo info = e.info();
    info.rank = comm->rank();
    KernelFault ranked(std::move(info), fmt::format("rank {}: {}", comm->rank(), e.what()));
    poison(ranked);
    throw ranked;
  } catch (const Error& e) {
    poison(e);
    throw;
  }
}

void PlanState::check_outputs(size_t i, bool scan_nan) const {
  for (const auto& [slot, a] : access[i]) {
    if (!writes(a)) continue;
    const Buffer& b = buffers[slot];
    if (b.is_host() && b.storage().guarded() && !gaps_intact(b.storage().host_data(), b.storage().bytes(), Guards::Around))
      throw make_error(ErrorKind::Execution,
                       "wrote just outside {} ({}[{}]): the canary in the bytes around it changed (checked mode)",
                       slot_name(slot), to_string(b.dtype()), b.count());
    if (!scan_nan || !is_float(b.dtype())) continue;
    Buffer host = b;
    if (!b.is_host()) {  // device memory: checked in a host copy
      host = b.device().allocate_host(b.dtype(), b.count());
      b.device().copy(host, b);
    }
    const auto at = first_non_finite(host.data(), host.count(), host.dtype());
    if (!at) continue;
    const double v = load_as_double(b.dtype(), static_cast<const std::byte*>(host.data()) + *at * size_of(b.dtype()));
    throw make_error(ErrorKind::Execution,
                     "{} ({}[{}]) holds {} at element {}: the first non-finite value (checked mode: nan)",
                     slot_name(slot), to_string(b.dtype()), b.count(), std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                     *at);
  }
}

// Checked mode runs the ops one at a time in dependency order, so the first
// op to fail a check is the one named: with memory, CPU kernels go through
// launch() (every argument guarded, the canaries checked after each); with
// nan, each op's float outputs are scanned. Then the plan is poisoned like
// after any failed op (the ops after it did not run).
void PlanState::run_checked(const ExecuteOptions& options, CheckMode mode) {
  ExecuteOptions one_at_a_time = options;
  one_at_a_time.sequential = true;
  launch_checked = mode.memory;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{launch_checked};
  for (size_t i : runner.dag().order()) {
    try {
      run_op(i, one_at_a_time);
      if (events[i]) events[i]->wait();
      events[i] = nullptr;
      check_outputs(i, mode.nan);
    } catch (...) {
      events[i] = nullptr;
      poison_with(i, "failed");
    }
  }
}

void PlanState::run(const ExecuteOptions& options) {
  check_not_poisoned();
  caller_stop = launch_stop_scope();
  if (dirty) {
    prepare(var_values);
    dirty = false;
  }
  if (const CheckMode mode = check_mode(); mode.any()) [[unlikely]] {
    run_checked(options, mode);
    return;
  }
  if (graph_device && !options.sequential && !options.observer && run_as_graph()) return;
  std::optional<DagFailure> failure;
  if (comm && !options.sequential) {
    auto node = [this, &options](size_t i) {
      if (std::holds_alternative<ResolvedCollective>(resolved[i]))
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
  caller_stop = launch_stop_scope();
  if (dirty) {
    prepare(var_values);
    dirty = false;
  }
  try {
    auto* k = std::get_if<ResolvedKernel>(&resolved[i]);
    if (k && !k->bound) return k->program->time_launch(k->launch_args());
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

// ---- ExecutionPlan: running ------------------------------------------------

void ExecutionPlan::execute(const ExecuteOptions& options) {
  std::lock_guard lock(state_->mutex);
  state_->run(options);
}

ExecutionPlan::HostLaunch ExecutionPlan::host_launch(size_t index) {
  if (index >= state_->ops.size())
    throw make_error(ErrorKind::Validation, "op {} is out of range: the plan has {} ops", index, state_->ops.size());
  std::lock_guard lock(state_->mutex);
  detail::PlanState& s = *state_;
  if (s.dirty) {
    s.prepare(s.var_values);
    s.dirty = false;
  }
  const auto* k = std::get_if<detail::ResolvedKernel>(&s.resolved[index]);
  if (k == nullptr || !k->bound)
    throw make_error(ErrorKind::Unsupported, "{}: not a kernel whose arguments are host addresses", s.op_title(index));
  return {k->args, k->dims.global[0]};
}

std::chrono::nanoseconds ExecutionPlan::time_op(size_t index) {
  if (index >= state_->ops.size())
    throw make_error(ErrorKind::Validation, "op {} is out of range: the plan has {} ops", index, state_->ops.size());
  std::lock_guard lock(state_->mutex);
  return state_->time_op(index);
}

void ExecutionPlan::execute_sequential() { execute(ExecuteOptions{.sequential = true}); }

namespace {

// Sets `vars` (others keep their values) once every op's scalars and launch
// sizes accept them; nothing changes when one does not. Under s.mutex.
void set_vars(detail::PlanState& s, const std::map<std::string, int64_t>& vars) {
  if (vars.empty()) return;
  std::copy(s.var_values.begin(), s.var_values.end(), s.staged_values.begin());
  s.apply_vars(vars, s.staged_values);
  if (s.staged_values == s.var_values) return;
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

}  // namespace

void ExecutionPlan::execute_with_vars(const std::map<std::string, int64_t>& vars, const ExecuteOptions& options) {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  set_vars(s, vars);
  s.run(options);
}

void ExecutionPlan::set_variables(const std::map<std::string, int64_t>& vars) {
  std::lock_guard lock(state_->mutex);
  set_vars(*state_, vars);
}

uint64_t ExecutionPlan::execute_async(WorkerThread& worker, const std::map<std::string, int64_t>& vars) {
  // Variable names and bounds are fixed at build time, so they can be checked
  // here without the run lock; the values are applied when the command runs,
  // after any earlier queued run of this plan.
  std::vector<int64_t> scratch(state_->var_defs.size());
  state_->apply_vars(vars, scratch);
  return worker.submit([state = state_, vars] {
    ExecutionPlan plan(state);
    plan.execute_with_vars(vars);
  });
}

}  // namespace svod
