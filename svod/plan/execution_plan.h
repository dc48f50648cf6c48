// Execution plans: many kernels, copies and custom functions over a table of
// buffers, validated and ordered once, then executed many times.
//
// ExecutionPlanBuilder collects buffers, variables and operations (PlanOp) and
// build() checks everything (indices, counts, sizes, attributes, dependencies)
// before a plan exists. Operations are ordered by their declared dependencies
// plus the read/write hazards (RAW, WAR, WAW) between the byte ranges they
// touch in each storage, so overlapping views of one arena are ordered and
// disjoint ones are not. execute() runs independent operations concurrently on
// the thread pool, each as soon as its predecessors finished; a sequential mode
// runs the same order on the calling thread. Ops of devices with their own
// queue (OpenCL, CUDA) are submitted to it (queue.h) and the runner only
// waits where it must: a queue waits on another's events on the device where
// the two allow it, the host waits for device work only before host work that
// depends on it, and for everything at the end of the run. Variables are bound by name and
// checked for every operation before anything runs. A run that fails poisons
// the plan: later runs refuse with ErrorKind::PlanPoisoned until it is rebuilt
// or a buffer is rebound (rebind), instead of computing on half-written state.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "svod/comm/communicator.h"
#include "svod/custom/custom_function.h"
#include "svod/device/buffer.h"
#include "svod/device/device.h"
#include "svod/device/queue.h"
#include "svod/program/expr.h"
#include "svod/program/program_spec.h"

namespace svod {

class WorkerThread;

// Identity and explicit ordering of an operation. `id` names the operation in
// errors and lets others depend on it (ids are unique when given); `after_ids`
// and `after` (op indices) must finish before this one starts.
struct OpOptions {
  std::string id;
  std::vector<std::string> after_ids;
  std::vector<size_t> after;
  // The caller's name for an op without an id, need not be unique: errors,
  // tables and reports name the op by its id, else by this ("op 3 (label)").
  std::string label;
};

// A loaded program with its buffer slots in ABI order and its caller scalars
// (every declared scalar except core_id, in order) as expressions over the plan
// variables. `fixed_vars` are values bound when the op was made that a
// runtime binding of the same name does not override for this op. The launch
// size is evaluated over the op's scalars by parameter name, then fixed_vars,
// then the plan variables. `global` and `local`, when given, replace the
// spec's launch sizes (expressions over the same names).
struct KernelOp {
  std::shared_ptr<const Program> program;
  std::vector<size_t> buffers;
  std::vector<Expr> scalars;
  std::map<std::string, int64_t> fixed_vars;
  std::optional<std::array<Expr, 3>> global;
  std::optional<std::array<Expr, 3>> local;
};

// dst <- src; both slots hold the same number of bytes.
struct CopyOp {
  size_t dst = 0;
  size_t src = 0;
};

// A registered custom function called with these buffer slots and attributes.
// `def`, when set, is used instead of looking `name` up in the registry (for
// host functions that are not registered, such as executor graph nodes).
struct CustomOp {
  std::string name;
  std::vector<size_t> buffers;
  Attrs attrs;
  std::shared_ptr<const CustomFunctionDef> def;
};

// Makes slot `view` a zero-copy view of slot `base`: `bytes` bytes at
// `byte_offset` into it, typed `dtype`. The slot must have been added empty
// (add_buffer(Buffer{})). Nothing runs at execute time; the op exists so plan
// formats that express views as operations can order other ops after it.
struct ViewOp {
  size_t view = 0;
  size_t base = 0;
  size_t byte_offset = 0;
  size_t bytes = 0;
  DType dtype = DType::U8;
};

// A collective operation among the ranks of the plan's communicator
// (svod/comm/communicator.h): `kind` is all_reduce, broadcast, all_gather or
// reduce_scatter (build() refuses a barrier or a send/recv). all_reduce and
// broadcast work in place on each slot of `buffers`, one call per slot in
// order; all_gather and reduce_scatter read `src` and write `dst`
// (all_gather: dst holds size() x src elements; reduce_scatter: src holds
// size() x dst; same dtype). `op` is the reduction of all_reduce and
// reduce_scatter, `root` the source rank of broadcast. Every rank's plan must
// issue the same collectives in the same order; build() chains each
// collective after the previous one so that the order is the plan's op order
// on every rank.
struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::vector<size_t> buffers;  // all_reduce, broadcast
  size_t src = 0;               // all_gather, reduce_scatter
  size_t dst = 0;               // all_gather, reduce_scatter
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
};

using PlanOp =
    std::variant<KernelOp, CopyOp, CustomOp, ViewOp, CollectiveOp>;

// A slot that is part of another (add_view, or a ViewOp): `bytes` bytes of
// slot `base` at `byte_offset`, typed `dtype`. The base may itself be a view.
struct PlanView {
  size_t base = 0;
  size_t byte_offset = 0;
  size_t bytes = 0;
  DType dtype = DType::U8;
};

// A plan variable: its name and bounds, and the value it has now.
struct PlanVariable {
  Variable variable;
  int64_t value = 0;
};

// Receives op start/end notifications from execute(); called on the thread
// that runs the op, so implementations must be thread-safe and cheap. Null
// (the default) costs one branch per op.
class PlanObserver {
 public:
  virtual ~PlanObserver() = default;
  virtual void op_started(size_t op) noexcept = 0;
  virtual void op_finished(size_t op) noexcept = 0;
};

struct ExecuteOptions {
  // Run on the calling thread in topological_order(), each op to completion.
  bool sequential = false;
  // Told when each op starts and finishes; with an observer, device ops are
  // waited for as they are submitted, so that their ends are observed.
  PlanObserver* observer = nullptr;
  // How ops on different queues wait for each other.
  SyncStrategy strategy = SyncStrategy::DeviceEvents;
};

class ExecutionPlan;

namespace detail {
struct PlanState;
}  // namespace detail

class ExecutionPlanBuilder {
 public:
  ExecutionPlanBuilder();
  ~ExecutionPlanBuilder();
  ExecutionPlanBuilder(ExecutionPlanBuilder&&) noexcept;
  ExecutionPlanBuilder& operator=(ExecutionPlanBuilder&&) noexcept;

  // Adds a buffer slot and returns its index. Names, when given, are unique.
  size_t add_buffer(Buffer buffer, std::string name = {});
  // Adds a slot that is `bytes` bytes of slot `base` at `byte_offset`, typed
  // `dtype`; it follows its base when the base is rebound.
  size_t add_view(size_t base, size_t byte_offset, size_t bytes, DType dtype, std::string name = {});
  // Declares a plan variable with its bounds and initial value.
  void add_variable(Variable variable, int64_t value);
  // Adds an operation and returns its index (0, 1, 2, ... in call order).
  size_t add_op(PlanOp op, OpOptions options = {});
  // Marks a slot as a result of the plan (order is kept).
  void add_output(size_t buffer);
  // The communicator collective ops run on; this plan is its rank. A plan
  // with collectives and no communicator gets a one-rank "local" one, so it
  // runs alone (all_reduce and broadcast leave the buffers as they are).
  void set_communicator(std::shared_ptr<Communicator> communicator);

  // Validates everything and builds the plan; throws Error(Validation) naming
  // the op (index and id) or buffer at fault (collectives: slots, dtypes,
  // sizes against the communicator's size, root in [0, size)). The builder
  // is left empty either way.
  ExecutionPlan build();

 private:
  std::unique_ptr<detail::PlanState> state_;
};

class ExecutionPlan {
 public:
  ExecutionPlan(ExecutionPlan&&) noexcept;
  ExecutionPlan& operator=(ExecutionPlan&&) noexcept;
  ~ExecutionPlan();

  // Runs every op once with the current variable values. Thread-safe: runs of
  // one plan are serialized (use replicate() for concurrent runs). The first
  // failing op's error is rethrown with its kind, its message naming the op;
  // the plan is then poisoned. A plan with collectives first aborts its
  // communicator, so that the other ranks fail at once naming this one.
  //
  // Collectives block until every rank arrives, and local ranks (threads of
  // one process) share the thread pool, so a collective never waits on a
  // pool thread: it runs on the plan's communication thread, and the ops
  // after it start when it has finished. Ops independent of it run
  // meanwhile. Sequential runs call collectives on the calling thread.
  void execute(const ExecuteOptions& options = {});
  void execute_sequential();
  // Runs op `index` alone with the current variables and buffers and returns
  // how long it took: a kernel on a device with events by them
  // (Program::time_launch), anything else by the host clock. For benchmarks
  // (svod bench): the op is not ordered against others, so run the plan
  // first when it needs their results. A failure poisons the plan like a
  // failed execute(). Thread-safe like execute().
  std::chrono::nanoseconds time_op(size_t index);
  // Op `index`, a CPU kernel, as the CPU ABI calls it with the current
  // variables: its argument words (each buffer parameter's host address, then
  // the ABI scalars, core_id as 0) and its slice count (core_id's values are
  // 0 .. slices-1). For running the plan's kernels in another process
  // (svod/sandbox); the words live until the plan's next change or run.
  // Error(Unsupported) for another op; Error(Validation) naming the op when
  // the variables do not suit it, as execute() would.
  struct HostLaunch {
    std::span<const uint64_t> words;
    int64_t slices = 1;
  };
  HostLaunch host_launch(size_t index);
  // Kernel op `index`'s launch as it would run now: its buffers, its caller
  // scalars and launch sizes evaluated with the current variables, for
  // launching its program (or another) alone, as variants are timed
  // (svod/tune/variants.h). Error(Validation) for an op that is no kernel.
  KernelArgs kernel_args(size_t index) const;
  // Runs kernel op `index` with `program` from now on: a variant of its
  // program, the same spec but for its recipe (ProgramSpec::recipe), on the
  // same device. The op's buffers, scalars and order stay as they were.
  // Error(Validation) for an op that is no kernel or a program that differs
  // in more than its recipe; waits for a running execute.
  void replace_program(size_t index, std::shared_ptr<const Program> program);
  // Sets the named variables (others keep their values), checks them and every
  // op's scalars and launch sizes, then runs. Nothing changes and nothing runs
  // when a check fails (Error(Validation)).
  void execute_with_vars(const std::map<std::string, int64_t>& vars, const ExecuteOptions& options = {});
  // Sets and checks the named variables as execute_with_vars does, without
  // running: for a plan whose ops run elsewhere (svod/sandbox) with the
  // current values.
  void set_variables(const std::map<std::string, int64_t>& vars);
  // Runs the plan on `worker`, after the commands submitted to it before;
  // returns the timeline value to wait for. Variable names and bounds are
  // checked now (Error(Validation), nothing queued); the values are applied
  // when the command runs, and run errors surface at the worker's
  // wait/synchronize. The plan's state stays alive until the command is done.
  uint64_t execute_async(WorkerThread& worker, const std::map<std::string, int64_t>& vars = {});

  // Replaces slot `buffer` with a buffer of the same byte size, dtype and device.
  // Views of it follow; hazards are recomputed if aliasing changed. View slots
  // cannot be rebound themselves (rebind their base). A poisoned plan without
  // peers may run again after a rebind: the ops write their outputs anew, and
  // the caller answers for buffers it reads as an earlier run left them.
  void rebind(size_t buffer, Buffer replacement);

  // An independent plan sharing the compiled programs and every storage no op
  // writes; storages that ops write are copied into fresh allocations (views
  // into them keep their offsets), so replicas run concurrently without
  // touching each other's results. Custom functions stay the ones resolved
  // when this plan was built. Variables keep their current values. A plan
  // with collectives cannot be replicated (Error(Unsupported)): the replica
  // would be a second caller on the same rank of the communicator, whose
  // calls would interleave with the original's in no fixed order.
  ExecutionPlan replicate() const;

  const Buffer& buffer(size_t index) const;
  size_t buffer_count() const;
  std::optional<size_t> find_buffer(std::string_view name) const;
  const std::string& buffer_name(size_t index) const;  // empty for a slot added without a name
  // How slot `index` is part of another when add_view or a ViewOp made it so;
  // nullopt for a slot that holds a buffer of its own.
  std::optional<PlanView> view(size_t index) const;
  const std::vector<size_t>& outputs() const;
  size_t op_count() const;
  const PlanOp& op(size_t index) const;
  const std::string& op_id(size_t index) const;
  // The id, label and declared order (after, after_ids) op `index` was added with.
  const OpOptions& op_options(size_t index) const;
  // How errors, tables, traces and reports name op `index` with what it is
  // (op_title, svod/guard/op_name.h): "op 3 (mm) kernel mm", a copy by its
  // buffers "op 4 copy out <- d_out", a view "op 5 view".
  std::string op_title(size_t index) const;
  // The device that runs op `index`: a kernel's device, the device whose
  // queue moves a copy in one command; null for work on the host (host
  // functions, collectives, copies staged through host memory).
  Device* op_device(size_t index) const;
  // The buffers op `index` reads and writes as the plan resolved them, by
  // slot: a kernel's parameters, a copy's source and destination, a
  // collective's buffers, a custom function's as its validator declared them
  // (views and other ops without buffers: none).
  std::span<const std::pair<size_t, Access>> op_accesses(size_t index) const;
  // The current value of a plan variable (waits for a running execute; do
  // not call it from inside an op of this plan).
  std::optional<int64_t> variable(std::string_view name) const;
  // Every plan variable with its bounds and current value, by name (rank and
  // world_size, which plan files add, are read_only); waits like variable().
  std::vector<PlanVariable> variables() const;

  // Deterministic: Kahn's algorithm taking the smallest ready op index first.
  std::vector<size_t> topological_order() const;
  // For each op, the ops it waits for (declared and hazard edges, sorted).
  const std::vector<std::vector<size_t>>& predecessors() const;

  bool poisoned() const;
  // True when some buffer or kernel of the plan is on a device whose queue
  // does not run on the host (OpenCL, CUDA).
  bool uses_devices() const;
  // The communicator the plan's collectives run on; null for a plan without
  // collectives.
  const std::shared_ptr<Communicator>& communicator() const;

 private:
  friend class ExecutionPlanBuilder;
  explicit ExecutionPlan(std::shared_ptr<detail::PlanState> state);

  std::shared_ptr<detail::PlanState> state_;
};

}  // namespace svod
