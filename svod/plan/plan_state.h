// The resolved form of an execution plan: what ExecutionPlanBuilder collected
// and what build() derived from it (views, variables, each op resolved, the
// DAG, queues), plus the run state. Shared by the plan's own files: plan_build.cpp
// builds it, plan_run.cpp runs it, plan_rebind.cpp changes or copies a built
// one, execution_plan.cpp answers the public queries. Not part of the public
// API (execution_plan.h only forward-declares PlanState).
#pragma once

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "svod/base/rethrow.h"
#include "svod/base/worker_thread.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/kernel_stop.h"
#include "svod/plan/dag.h"
#include "svod/plan/hazards.h"
#include "svod/plan/execution_plan.h"
#include "svod/plan/op_description.h"
#include "svod/program/launch_layout.h"

namespace svod::detail {

// The bytes `b` covers, for hazards: host memory by address (every storage
// over it shares kHostAddressSpace), device memory by storage and offset.
inline ByteRange range_of(const Buffer& b) {
  if (b.is_host()) {
    const uint64_t at = b.first_byte();
    return {kHostAddressSpace, at, at + b.bytes()};
  }
  return {b.storage_id(), b.byte_offset(), b.byte_offset() + b.bytes()};
}

// Where a name in a kernel's expressions gets its value: a fixed value of
// the op, or a plan variable.
struct ValueSource {
  bool fixed;
  int64_t value;  // the fixed value, or the plan variable's slot
};

// A kernel with everything resolved at build time. `values` holds, in order:
// the ABI scalars, the values of the names its expressions use (`sources`),
// and its caller scalars; the launch-size expressions are bound to the first
// two parts (scalar parameters take precedence by name), the scalar
// expressions to the second. Evaluating therefore needs no lookups.
struct ResolvedKernel {
  std::shared_ptr<const Program> program;
  // Programs with the pre-bound host path (the CPU) keep their argument
  // words in `args` and run through run_bound(); others get `launch_buffers`,
  // the caller scalars and `dims`.
  bool bound = false;
  // On the heap so that it stays put when resolved ops move (they live in a
  // growing vector).
  std::shared_ptr<const LaunchLayout> layout;
  std::vector<size_t> slots;
  std::vector<Expr> scalars;
  std::array<Expr, 3> global;
  std::array<Expr, 3> local;
  std::vector<ValueSource> sources;
  std::vector<int64_t> values;
  size_t abi_scalars = 0;
  std::vector<uint64_t> args;          // bound: buffer addresses, then ABI scalars
  std::vector<Buffer> launch_buffers;  // not bound
  LaunchDims dims;                     // global[0] is the slice count when bound

  int64_t* caller() { return values.data() + abi_scalars + sources.size(); }
  std::span<const int64_t> caller_scalars() { return {caller(), scalars.size()}; }
  // The launch of a kernel that is not bound.
  LaunchArgs launch_args() { return {launch_buffers, caller_scalars(), &dims}; }
};

struct ResolvedCopy {
  size_t dst;
  size_t src;
};

struct ResolvedCustom {
  std::shared_ptr<const CustomFunctionDef> def;
  const Attrs* attrs;
  std::vector<size_t> slots;
  std::vector<Buffer> buffers;
};

struct ResolvedView {};

// A collective with its slots: all_reduce/broadcast: `buffers`;
// all_gather/reduce_scatter: {src, dst}.
struct ResolvedCollective {
  CollectiveKind kind;
  std::vector<size_t> slots;
  ReduceOp op;
  int root;
};

using ResolvedOp = std::variant<ResolvedKernel, ResolvedCopy, ResolvedCustom, ResolvedView, ResolvedCollective>;

struct PlanState {
  // ---- definition, as given to the builder ----
  std::vector<Buffer> given_buffers;
  std::vector<std::string> buffer_names;
  std::vector<std::optional<PlanView>> given_views;  // from add_view
  std::vector<std::pair<Variable, int64_t>> given_variables;
  std::vector<PlanOp> ops;
  std::vector<OpOptions> options;
  std::vector<size_t> outputs;
  std::shared_ptr<Communicator> comm;  // set when the plan has collectives

  // ---- built ----
  std::vector<Buffer> buffers;                 // live, views derived
  std::vector<std::optional<PlanView>> views;  // add_view and view ops
  std::vector<size_t> derive_order;            // view slots, bases first
  std::vector<std::string> var_names;          // sorted
  std::vector<Variable> var_defs;              // same order
  std::vector<int64_t> var_values;
  std::vector<int64_t> staged_values;  // execute_with_vars works here first
  std::vector<std::vector<size_t>> declared;
  std::vector<size_t> declared_order;
  std::vector<std::vector<std::pair<size_t, Access>>> access;  // per op: slot, access
  std::vector<ResolvedOp> resolved;
  // Resolved custom functions by op (null for other ops); a replica starts
  // with its original's, so it never picks up a later registration.
  std::vector<std::shared_ptr<const CustomFunctionDef>> custom_defs;
  DagRunner runner;
  // Where each op runs: its device's queue, or null for work on the calling
  // thread (kernels of devices whose queue runs inline, host copies, custom
  // functions).
  std::vector<Queue*> queues;
  // Per op, the device that runs it (queues[i]'s device, or the device of a
  // kernel or direct copy whose queue runs inline); null for host work.
  std::vector<Device*> devices;
  // Per op, the predecessors on another queue whose events it must wait for,
  // and whether its own queue can wait for them on the device.
  std::vector<std::vector<std::pair<size_t, bool>>> cross_waits;
  bool uses_queues = false;
  // Set when every op is a kernel of this one device: the run may go to it
  // as one submission (Device::submit_graph).
  Device* graph_device = nullptr;
  // Where collectives wait for their peers, off the thread pool; null for a
  // plan without collectives.
  std::unique_ptr<WorkerThread> comm_thread;

  // SVOD_OP_TIMEOUT (svod/guard/op_deadline.h), read at build; 0: no deadline.
  double op_timeout = 0;

  // ---- run state ----
  std::vector<EventPtr> events;  // per op, the last run's submission (null when done on the host)
  mutable std::mutex mutex;
  bool dirty = true;  // kernels must be re-evaluated before the next run
  bool launch_checked = false;  // run_checked with memory: bound kernels go through launch()
  // The stop scope of the thread running the plan (svod/guard/kernel_stop.h),
  // which every op runs in, on whichever thread.
  const StopScope* caller_stop = nullptr;
  std::atomic<bool> poisoned{false};
  std::string poison_reason;

  // Op i's id, else its label (may be empty).
  const std::string& id_or_label(size_t i) const { return options[i].id.empty() ? options[i].label : options[i].id; }
  // "op 3 (mm)" (svod/guard/op_name.h).
  std::string op_name(size_t i) const { return svod::op_name(i, id_or_label(i)); }
  // "op 3 (mm) kernel mm", "op 4 copy out <- d_out": how errors, tables and
  // reports name op i with what it is (ExecutionPlan::op_title).
  std::string op_title(size_t i) const;
  std::string slot_name(size_t i) const {
    return buffer_names[i].empty() ? fmt::format("buffer {}", i) : fmt::format("buffer {} (\"{}\")", i, buffer_names[i]);
  }
  VariableValues variables() const { return VariableValues{var_names, var_values}; }

  void finalize();
  void check_buffers();
  void derive_views();
  void check_variables();
  void resolve_dependencies();
  // Each op resolved (ResolvedOp) with its buffer accesses; nothing is
  // compiled here (programs come compiled).
  void resolve_ops();
  void resolve_kernel(size_t i, const KernelOp& k);
  void resolve_custom(size_t i, const CustomOp& c);
  void resolve_collective(size_t i, const CollectiveOp& c);
  // Error(Validation) naming the op when an op writes read-only memory.
  void check_writes() const;
  void schedule();
  void assign_queues();
  void bind_addresses();
  void prepare(const std::vector<int64_t>& values);
  void prepare_kernel(size_t i, ResolvedKernel& k, const std::vector<int64_t>& values);
  void run_op(size_t i, const ExecuteOptions& options);
  void wait_for_op(size_t p);
  void run_inline(size_t i);
  void run_host_work(size_t i);          // the op under its RunningOp (and deadline)
  void run_host_work_watched(size_t i);  // ... under SVOD_OP_TIMEOUT
  void do_host_work(size_t i);           // the op itself
  void run_collective(const ResolvedCollective& c);
  void start_collective(size_t i, const ExecuteOptions& options);
  void submit(size_t i, const ExecuteOptions& options);
  bool run_as_graph();
  void wait_for_devices(std::optional<DagFailure>& failure);
  void run(const ExecuteOptions& options);
  // Checked mode: the ops one at a time, each one's outputs checked.
  void run_checked(const ExecuteOptions& options, CheckMode mode);
  // Error(Execution) naming the gap around a guarded buffer op i wrote into,
  // or (scan_nan) the first non-finite value it wrote.
  void check_outputs(size_t i, bool scan_nan) const;
  std::chrono::nanoseconds time_op(size_t i);
  void check_not_poisoned() const;
  [[noreturn]] void poison_with(size_t i, std::string_view what);
  void apply_vars(const std::map<std::string, int64_t>& vars, std::vector<int64_t>& values) const;
};

// Rethrows the current exception as an Error of the same kind (Execution for
// foreign exceptions) whose message starts with `where`.
[[noreturn]] inline void rethrow_with(const std::string& where) {
  rethrow_with_context(std::current_exception(), where);
}

}  // namespace svod::detail
