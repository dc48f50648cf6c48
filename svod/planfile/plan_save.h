// Saving a plan: any ExecutionPlan — loaded from a plan file or a package,
// built in code, captured from Python — as a plan file with its data
// (docs/PLAN_FORMAT.md, "Saved plans"), which load_plan loads into a plan that
// computes bitwise the same.
//
// to_plan_file() turns the live plan into a PlanFile: its programs (specs,
// sources inline), its base buffers and views (views of views and base
// buffers that share memory become views of one base), its variables with
// their bounds and current values, its ops (kernels with their scalars and
// launch sizes, an op's fixed values folded in; copies; host functions by
// their registered name; collectives) with their ids and declared order, and
// its inputs and outputs by name. Each base buffer gets a role
// (buffer_roles.h): constants and state keep their contents, which save_plan
// writes as .npy files beside plan.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "svod/plan/execution_plan.h"
#include "svod/planfile/buffer_roles.h"
#include "svod/planfile/plan_file.h"

namespace svod {

// A buffer of a plan: its slot, or the name it was added with.
using BufferRef = std::variant<size_t, std::string>;

// A dimension of an input's or output's shape: a count, or the name of the
// plan variable it is (the buffer holds the variable's max).
using ShapeDim = std::variant<int64_t, std::string>;

// An input or output of a saved plan: the name it gets, the buffer it is,
// and the dtype and shape its caller sees.
struct PlanPort {
  std::string name;
  BufferRef buffer;
  std::optional<DType> dtype;   // default: the buffer's
  std::vector<ShapeDim> shape;  // default: the buffer's elements, {count}
};

struct SaveOptions {
  // Buffers the caller binds before a run. Each is a whole base buffer
  // (or a view of all of one), which the saved plan gives the input's name,
  // dtype and shape: 32 bytes of u8 storage saved as an input of f32 [2, 4]
  // become a base buffer "x" of f32 [2, 4] (the plan's other slots of it
  // views of "x"). The shape at its variables' max must fill the buffer.
  std::vector<PlanPort> inputs;
  // Buffers the caller reads after a run (bases or parts of one); nullopt:
  // the plan's outputs (ExecutionPlan::outputs), by their names.
  std::optional<std::vector<PlanPort>> outputs;
  // Roles the caller chooses for base buffers, over the derived ones.
  std::vector<std::pair<BufferRef, BufferRole>> roles;
};

// What a saved plan is made of: the plan file (npy inits naming files in
// `folder` that save_plan writes), the compiled program of each of its
// programs (for packing without compiling), and the contents of its
// constant and state buffers, by base buffer name, in the buffer's dtype
// (bf16 as its bits).
struct SavedPlan {
  PlanFile file;
  std::map<std::string, std::shared_ptr<const Program>> programs;
  std::map<std::string, std::vector<std::byte>> data;
};

// `plan` as a plan file whose data lives in `folder`. Error(Validation)
// naming what is wrong with `options` (an unknown buffer, an input that is
// part of a buffer or whose shape does not fill it, a name given twice);
// Error(Unsupported) naming the op or buffer a plan file cannot express: a
// host function that is not registered by its name (an executor's node), a
// program without source, base buffers that share part of their memory.
SavedPlan to_plan_file(const ExecutionPlan& plan, const SaveOptions& options, const std::filesystem::path& folder);

// Writes `plan` as `folder`/plan.json and an .npy file per constant and
// state buffer beside it, atomically: everything is written into a new
// folder next to `folder` and renamed into place only when complete, so an
// error (a full disk) leaves no half-written folder and an earlier save at
// `folder` as it was. A `folder` that exists is replaced only when it holds
// a saved plan (a plan.json); anything else there is refused, Error(Io).
// Errors as to_plan_file, and Error(Io) naming the file that could not be
// written and why.
void save_plan(const ExecutionPlan& plan, const std::filesystem::path& folder, const SaveOptions& options = {});

}  // namespace svod
