// What svod.Plan's files (plan.cpp, plan_sandbox.cpp, plan_builder.cpp) and
// capture.cpp share: svod.Plan's object and its sandbox, the builder behind
// svod.PlanBuilder and dev.capture(), and the conversion of Python scalars and
// launch sizes to expressions.
#pragma once

#include <array>
#include <mutex>

#include "bindings.h"
#include "svod/planfile/plan_file.h"
#include "svod/sandbox/sandbox.h"

namespace svod::python {

// The sandbox of a svod.Plan (Plan.sandbox(), load_plan/load_package with
// sandbox=True): the plan's runs go through its helper from then on.
struct PySandbox {
  PySandbox(std::shared_ptr<LoadedPlan> plan, const SandboxOptions& options)
      : loaded(std::move(plan)), sandboxed(loaded->plan, options) {}
  // Sets `vars`, then runs the plan in the helper; one run at a time.
  void execute(const std::map<std::string, int64_t>& vars);
  // Copies `from` into the plan's buffer `to` (in the shared memory), counted.
  void copy_in(const Buffer& to, const Buffer& from);

  std::shared_ptr<LoadedPlan> loaded;  // first: the sandbox points into it, and ends before it
  SandboxedPlan sandboxed;
  std::mutex mutex;  // held by a run and by a copy in, so that neither sees the other half done
  // Arrays copied into the shared memory since the plan was sandboxed: a
  // plan's buffers stay there, so run() and bind() copy rather than rebind.
  uint64_t copied_bytes = 0;
  uint64_t copies = 0;
};

// svod.Plan: a loaded plan plus the names and shapes Python shows.
struct PyPlan {
  std::shared_ptr<LoadedPlan> loaded;  // shared: an open profile keeps the plans it saw
  std::string source;                  // the plan file, or "PlanBuilder", for messages
  std::vector<std::string> names;      // per slot; empty when unnamed
  std::vector<std::vector<size_t>> shapes;
  std::vector<std::string> variables;
  // What every copy of this object shares (a capture's g.plan is a new
  // object each time it is read).
  struct Shared {
    // Held by run() from binding to copying the outputs, so that runs from
    // several threads never see each other's inputs.
    std::mutex run_lock;
    // Set once the plan is sandboxed: every copy's runs go through it from
    // then on, so that none runs the plan's kernels in this process. Read and
    // set with the GIL held.
    std::shared_ptr<PySandbox> sandbox;
  };
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();

  ExecutionPlan& plan() const { return loaded->plan; }
  // The slot named `name`; Validation listing the names otherwise.
  size_t slot(const std::string& name) const;
  PyBuffer buffer(size_t slot) const { return PyBuffer{plan().buffer(slot), shapes[slot]}; }
};

// Sandboxed plans (plan_sandbox.cpp). load_plan's and load_package's
// sandbox=, sandbox_wall_limit= and sandbox_memory_limit=: the options of the
// plan's sandbox, or nullopt without one. The limits are refused without
// sandbox=True, where they would limit nothing.
std::optional<SandboxOptions> sandbox_options(py::handle sandbox, py::handle wall_limit, py::handle memory_limit,
                                              std::string_view function);
// Sandboxes `p` (Plan.sandbox, and the loaders' sandbox=True): its buffers
// move into memory shared with a new helper, which runs its ops from now on.
void sandbox_plan(PyPlan& p, const SandboxOptions& options);
// Plan.sandbox() and Plan.sandbox_info, bound on svod.Plan's class.
void bind_plan_sandbox(py::class_<PyPlan>& cls);

// ExecutionPlanBuilder plus the names and shapes Python shows.
struct PyPlanBuilder {
  ExecutionPlanBuilder builder;
  std::vector<std::string> names;
  std::vector<std::vector<size_t>> shapes;
  std::vector<std::string> variables;
  std::vector<size_t> outputs;
  size_t ops = 0;

  size_t add(const Buffer& buffer, std::vector<size_t> shape, const std::string& name);
  size_t add_op(PlanOp op, OpOptions options);
  size_t add_view(size_t base, size_t byte_offset, size_t bytes, DType dtype, const std::string& name);
  void add_variable(const std::string& name, int64_t value, int64_t min, int64_t max);
  // The plan (`source` names it in messages); the builder is empty afterwards.
  PyPlan build(const std::string& source);
};

// A scalar of a plan op: an integer, or an expression string over plan
// variables ("n * 2"). `what` names it in errors.
Expr expr_of(py::handle v, const std::string& what);
// A launch size of a plan op: one such value or a sequence of one to three
// (the dimensions left out are 1).
std::array<Expr, 3> size_exprs(py::handle v, const std::string& what);
// svod.PlanBuilder (plan_builder.cpp), bound after svod.Plan.
void bind_plan_builder(py::module_& m);

}  // namespace svod::python
