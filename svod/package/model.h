// A loaded plan run by name (docs/PACKAGE_FORMAT.md, "Running a model by
// name"): its inputs (base buffers of role "input") and outputs (the plan's
// outputs), each with a dtype and a shape whose dimensions may be plan
// variables; the caller binds inputs by name, sets variables, runs, and reads
// outputs by name. The C API's svod_plan_input_* functions and `svod run
// --input/--output` are this class.
//
// Binding an input checks its dtype and shape before anything changes: a
// fixed dimension must match, a variable dimension sets its variable (within
// its bounds) for the next run. A run checks that every input was bound and
// that inputs sharing a variable agree on it; then it runs with the variables
// set since the last run (ExecutionPlan::execute_with_vars). Every error is
// an svod::Error naming the input, output or variable at fault, and nothing
// runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/package/package.h"

namespace svod {

class SandboxedPlan;  // svod/sandbox/sandbox.h

// An input or output of a model as its caller sees it.
struct ModelPort {
  std::string name;
  DType dtype = DType::F32;
  // The shape, a variable dimension at its variable's current value.
  std::vector<size_t> shape;
  // Per dimension, the variable it is ("" for a fixed one); empty when none is.
  std::vector<std::string> dim_variables;
  size_t slot = 0;  // the plan's buffer

  size_t count() const noexcept;  // elements in `shape`
  size_t bytes() const noexcept { return count() * size_of(dtype); }
};

struct ModelLoadOptions {
  // As PackageLoadOptions (and LoadOptions for a plan file).
  std::map<std::string, int64_t> vars;
  std::string cpu_compiler;
  CpuMismatch on_cpu_mismatch = CpuMismatch::Recompile;  // a package's (PackageLoadOptions)
};

class Model {
 public:
  // A plan file, a folder save_plan wrote (its plan.json) or a package.
  // Errors as load_plan and load_package.
  static Model load(const std::filesystem::path& path, const ModelLoadOptions& options = {});
  // Over a plan loaded already: `file` says its inputs, outputs and shapes.
  Model(PlanFile file, LoadedPlan loaded);
  explicit Model(LoadedPackage package);

  // Inputs in plan order, outputs in the order the plan lists them; shapes
  // at the variables' values for the next run.
  std::vector<ModelPort> inputs() const;
  std::vector<ModelPort> outputs() const;
  // Error(Validation) naming the unknown input or output and the known ones.
  ModelPort input(std::string_view name) const;
  ModelPort output(std::string_view name) const;

  // Copies `data` (`shape`, `dtype`, row-major) into input `name`: its
  // first bytes, the rest of the buffer kept. Error(Validation) for a dtype
  // other than the input's, a rank or fixed dimension that differs, a
  // variable dimension outside its variable's bounds, or data of another
  // size than the shape's.
  void set_input(std::string_view name, DType dtype, std::span<const size_t> shape, std::span<const std::byte> data);
  // Makes `buffer` input `name` (no copy; ExecutionPlan::rebind): it must
  // have the input's dtype, the device and byte size of the plan's buffer
  // (the variables' max), and `shape` checks and sets variables as
  // set_input does.
  void bind_input(std::string_view name, Buffer buffer, std::span<const size_t> shape);
  // Makes `buffer` output `name`: the plan's kernels write into it.
  // Error(Validation) as bind_input; Error(Unsupported) for an output that is
  // part of a buffer (a view), which cannot be rebound.
  void bind_output(std::string_view name, Buffer buffer);
  // Sets a plan variable for the next run. Error(Validation) for an unknown
  // or read-only variable or a value outside its bounds.
  void set_variable(std::string_view name, int64_t value);
  // The variables' values for the next run.
  std::map<std::string, int64_t> variables() const;

  // Runs the plan once: in `sandbox`, a SandboxedPlan over this model's
  // plan, when one is given (its helper runs the ops with the variables set
  // here), else in this process. Error(Validation) naming an input never
  // bound, or two inputs that set one variable to different values; nothing
  // runs then. Run errors as ExecutionPlan::execute and SandboxedPlan::execute.
  void run(SandboxedPlan* sandbox = nullptr);
  // Output `name`'s current shape's bytes (the first bytes of its buffer),
  // copied into `into`, which must hold exactly that many
  // (Error(Validation) otherwise).
  void read_output(std::string_view name, std::span<std::byte> into) const;
  std::vector<std::byte> read_output(std::string_view name) const;

  ExecutionPlan& plan() noexcept { return loaded_.plan; }
  const PlanFile& file() const noexcept { return file_; }
  // The package's manifest when the model came from one.
  const std::optional<PackageManifest>& manifest() const noexcept { return manifest_; }

 private:
  struct Port {
    std::string name;
    size_t buffer = 0;  // in file_.buffers
    size_t slot = 0;
  };
  ModelPort describe(const Port& port) const;
  const Port& find(const std::vector<Port>& ports, std::string_view name, std::string_view what) const;
  // The variables `shape` sets for `port` (checked), before anything changes.
  std::map<std::string, int64_t> shape_variables(const Port& port, DType dtype, std::span<const size_t> shape) const;
  const PlanFileVariable* find_variable(std::string_view name) const;

  PlanFile file_;
  LoadedPlan loaded_;
  std::optional<PackageManifest> manifest_;
  std::vector<Port> inputs_, outputs_;
  std::map<std::string, int64_t> pending_;  // variables set for the next run
  // Per input (by index), the variables its last binding set; nullopt when
  // never bound.
  std::vector<std::optional<std::map<std::string, int64_t>>> bound_;
};

}  // namespace svod
