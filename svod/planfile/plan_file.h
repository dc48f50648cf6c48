// Plan files (docs/PLAN_FORMAT.md, version 1): buffers, programs and the
// operations over them as JSON, so kernels can be run, checked, timed and
// profiled without writing C++.
//
// Loading happens in two steps. parse_plan_file() reads the JSON into a
// PlanFile, checking every field, name, type and size, and reads program
// source files. load_plan() then does what needs a device: it allocates and
// initialises buffers, compiles the programs, reads expected results and
// builds the ExecutionPlan through ExecutionPlanBuilder — the path a C++ user
// takes. Every error is an svod::Error whose message starts with the plan
// file's name and the JSON path of the field at fault, e.g.
//   plan.json: ops[2].buffers[1]: no buffer named "c"
//
// Choices the format leaves open:
//  - "uniform" and "normal" use splitmix64 seeded with `seed`: element i of
//    "uniform" takes draw i, u = (draw >> 11) * 2^-53 in [0, 1), value
//    low + (high - low) * u; element i of "normal" takes draws 2i and 2i+1
//    and Box–Muller's cosine branch: mean + std * sqrt(-2 ln(1 - u0)) *
//    cos(2 pi u1). Values are computed in double and stored rounded to the
//    buffer's dtype, so a seed gives the same data on every machine.
//    Random inits need a float buffer.
//  - fill/arange into integer or bool buffers must be integers the dtype
//    holds; npy init must match the buffer's dtype and element count, except
//    that a bf16 buffer takes "<u2" files (bit patterns) or "<f4" (rounded).
//  - `init` may also be the string "zeros"; `global_size`/`local_size` may
//    list 1 to 3 sizes (missing ones are 1); program buffers may give a
//    `dtype` (checked against the buffers an op passes) and scalars `min`/
//    `max` (checked at run time); the plan may carry a `description`.
//  - Outputs written as .npy keep the buffer's dtype, except bf16, written as
//    f32 (exactly, since every bf16 value is a float).
//  - A view's base must be a base buffer (not another view).
//  - Expected values are compared as doubles like numpy.isclose:
//    |got - expected| <= atol + rtol * |expected|, NaN equal to NaN; integer
//    and bool buffers default to exact comparison.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "svod/base/hash.h"
#include "svod/custom/custom_function.h"
#include "svod/device/device.h"
#include "svod/plan/execution_plan.h"
#include "svod/planfile/buffer_roles.h"
#include "svod/program/program_spec.h"

namespace svod {

// The format version this code reads.
inline constexpr int kPlanFileVersion = 1;

struct PlanFileVariable {
  Variable variable;  // name and inclusive bounds
  int64_t value = 0;
};

struct BufferInit {
  enum class Kind { Zeros, Fill, Arange, Uniform, Normal, Npy };
  Kind kind = Kind::Zeros;
  double a = 0;  // fill value, arange start, uniform low, normal mean
  double b = 0;  // arange step, uniform high, normal std
  uint64_t seed = 0;
  std::filesystem::path npy;  // absolute (resolved against the plan folder)
};

struct PlanFileBuffer {
  std::string name;
  DType dtype = DType::F32;
  size_t count = 0;            // the elements allocated: variable dimensions at their variable's max
  std::vector<size_t> shape;   // {count} when the file gave a count; variable dimensions at their max
  // Per dimension of `shape`, the plan variable it is ("batch") or "" for a
  // fixed one; empty when no dimension is variable.
  std::vector<std::string> dim_variables;
  std::string device;          // base buffers; empty: the plan's device
  BufferInit init;             // base buffers only
  std::optional<BufferRole> role;      // base buffers: what a saved plan and a model do with it
  std::optional<std::string> view_of;  // set for views: the base buffer's name
  size_t byte_offset = 0;      // views: where in the base they start

  size_t bytes() const noexcept { return count * size_of(dtype); }
};

struct PlanFileProgram {
  std::string name;
  std::string device;  // empty: the plan's device
  ProgramSpec spec;  // validated; spec.name is the program's name
};

// One element of an op's `after`: an op id or an op index.
using OpRef = std::variant<std::string, size_t>;

// The read-only variables every plan has: this process's rank and the number
// of ranks (0 and 1 when no communicator is given to load_plan).
inline constexpr std::string_view kRankVariable = "rank";
inline constexpr std::string_view kWorldSizeVariable = "world_size";

struct PlanFileOp {
  enum class Kind { Run, Copy, Custom, Collective };
  Kind kind = Kind::Run;
  std::string target;                // run: the program; custom: the function; collective: the kind's name
  std::vector<std::string> buffers;  // run/custom/all_reduce/broadcast: buffer names; copy: {dst, src};
                                     // all_gather/reduce_scatter: {src, dst}
  CollectiveKind collective = CollectiveKind::AllReduce;
  ReduceOp reduce = ReduceOp::Sum;  // all_reduce, reduce_scatter
  int root = 0;                     // broadcast
  std::vector<Expr> scalars;         // run: the program's scalars except core_id, in order
  // run: launch sizes of this op in place of the program's (plan variables
  // and the program's scalars), as KernelOp::global and local.
  std::optional<std::array<Expr, 3>> global_size;
  std::optional<std::array<Expr, 3>> local_size;
  Attrs attrs;                       // custom
  std::string id;
  std::vector<OpRef> after;
};

struct PlanFileExpect {
  std::optional<std::filesystem::path> npy;  // absolute
  std::vector<double> values;                // when no npy
  bool prefix = false;
  std::optional<double> rtol;
  std::optional<double> atol;
};

struct PlanFileOutput {
  std::string buffer;
  std::optional<std::filesystem::path> npy;  // as written in the file, relative to the plan folder or --out
  std::optional<PlanFileExpect> expect;
};

struct PlanFile {
  std::string source_name;       // the file name used in error messages
  std::filesystem::path folder;  // where relative file names start
  std::string device = "CPU";
  std::vector<PlanFileVariable> variables;
  std::vector<PlanFileBuffer> buffers;
  std::vector<PlanFileProgram> programs;
  std::vector<PlanFileOp> ops;
  std::vector<PlanFileOutput> outputs;

  const PlanFileBuffer* find_buffer(std::string_view name) const;
  const PlanFileProgram* find_program(std::string_view name) const;
};

// Reads and checks a plan file. Errors: Io when the file or a source_file
// cannot be read, Validation for everything else.
PlanFile parse_plan_file(const std::filesystem::path& path);
// The same from text; `folder` resolves relative names, `source_name` is what
// error messages call the file.
PlanFile parse_plan_text(std::string_view json_text, const std::filesystem::path& folder,
                         std::string_view source_name);

// The plan file's JSON text for `file`, which parse_plan_text reads back into
// an equal PlanFile given the same folder: every field as docs/PLAN_FORMAT.md
// describes it, programs inline ("source"), files (npy inits and
// expectations) relative to file.folder where they lie inside it, else
// absolute. The inverse of parse_plan_text, for plans made in code
// (save_plan).
std::string write_plan_text(const PlanFile& file);

// One program object as written under "programs" in a plan file, parsed on
// its own (for APIs that take a single kernel, such as the C API): the same
// fields and checks, except that sizes may name only the program's scalars.
// The program has no name (its spec goes by its entry); relative source_file
// names start at `folder`. Errors as parse_plan_text, e.g.
//   program spec: buffers[1].access: unknown access "rw"
PlanFileProgram parse_program_text(std::string_view json_text, const std::filesystem::path& folder,
                                   std::string_view source_name);

struct LoadOptions {
  // Overrides of variable values (svod run --var); each must name a plan
  // variable and lie within its bounds. rank and world_size cannot be set.
  std::map<std::string, int64_t> vars;

  // The ranks this plan runs on, this process being communicator->rank():
  // it sets rank and world_size, runs the collectives and picks the devices
  // named "KIND:local" (by its local_rank()). Null: one rank.
  // With a communicator, load_plan first checks with the other ranks that
  // they all load the same plan with the same variable values (see
  // plan_digest) and fails with Error(Validation) on every rank naming the
  // ranks that differ.
  std::shared_ptr<Communicator> communicator = {};

  // The compiler of the plan's CPU devices, one of the CPU kind's compilers
  // ("llvm", "clang" or "dlopen", any letter case; svod run --cpu-compiler);
  // empty: the process's default (SVOD_CPU_COMPILER, else the llvm plugin when
  // it is there, else clang). Each choice is a CPU device of its own, shared
  // by every plan that makes it (DeviceRegistry::open). Another name is an
  // Error(Validation) that names the compilers.
  std::string cpu_compiler;

  // When stderr is a terminal and the programs are still compiling this long
  // after compiling began, a progress line shows there (programs done of
  // the total, seconds, the programs compiling now), replaced by a summary
  // when the compiles end. Nothing is written when stderr is not a terminal.
  std::chrono::milliseconds progress_after = std::chrono::seconds(1);

  // Base buffers whose first values come from these .npy files instead of
  // their init (svod run --input NAME=@FILE.npy): by buffer name, each file
  // checked as an npy init is (dtype, element count). A buffer whose shape
  // has variable dimensions takes a file of that shape, each variable
  // dimension setting its variable (a value given in `vars` must agree) and
  // the data filling its first elements. Errors name "inputs.NAME": an
  // unknown buffer (with the plan's), a view, a bad file or shape.
  std::map<std::string, std::filesystem::path> inputs;

  // Hooks for packages (svod/package), which carry a plan's data and compiled
  // programs in place of .npy files and source to compile. Each one unset
  // leaves load_plan to do its own work. build_program runs on several
  // threads at once.
  //   npy_buffer: creates base buffer `desc` (an npy init) on `device`, filled.
  //   npy_expected: the expected values of `output` (an npy expect).
  //   build_program: `program` ready on `device`, instead of device.compile().
  std::function<Buffer(const PlanFileBuffer& desc, Device& device)> npy_buffer = {};
  std::function<std::vector<double>(const PlanFileOutput& output)> npy_expected = {};
  std::function<std::shared_ptr<const Program>(const PlanFileProgram& program, Device& device)> build_program = {};
};

struct LoadedOutput {
  std::string name;
  size_t slot = 0;                    // the plan's buffer index
  std::vector<size_t> shape;         // variable dimensions at the loaded values
  std::optional<PlanFileExpect> expect;
  std::vector<double> expected;       // the expected values (from the file or npy), when expect is set
};

struct LoadedPlan {
  ExecutionPlan plan;
  std::vector<LoadedOutput> outputs;   // in file order
  bool uses_devices = false;           // some buffer or program is on a device other than the CPU

  // Runs the plan once: plan.execute(options), which submits each op to its
  // device's queue; a failure poisons the plan on every device.
  void execute(const ExecuteOptions& options = {});
};

// Creates the buffers, compiles the programs and builds the plan. Devices are
// opened through the device registry ("CPU", "CL:0", ...); "CUDA:local" and
// "CL:local" are this rank's device of its machine, index
// communicator->local_rank() % the number of such devices (index 0 without a
// communicator; resolve_device_name). An unknown or absent device is an
// error naming the device and the field. Buffers on other
// devices are initialised through host memory; outputs must be CPU buffers.
// Compile errors keep their kind and name the program.
LoadedPlan load_plan(const PlanFile& file, const LoadOptions& options = {});

// What the ranks compare before they run a plan: everything parse_plan_file
// read (device, variables, buffers with their inits, programs with their
// source, ops, outputs and expectations) and the variable values `vars`
// (the file's, overridden), but neither the file's own name and folder nor
// the contents of .npy files, nor rank (which differs by design).
Hash128 plan_digest(const PlanFile& file, const std::map<std::string, int64_t>& vars);

struct Mismatch {
  size_t index = 0;
  double got = 0;
  double expected = 0;
};

struct OutputCheck {
  std::string name;
  size_t compared = 0;
  size_t mismatches = 0;
  std::vector<Mismatch> first;  // the first few mismatches, in index order
  double max_abs_error = 0;
  bool passed() const noexcept { return mismatches == 0; }
};

inline constexpr size_t kReportedMismatches = 5;

// Compares `data` (the output's bytes, e.g. a snapshot taken after a run)
// with the output's expectation.
OutputCheck check_output(const LoadedOutput& output, DType dtype, std::span<const std::byte> data);

// Writes `data` as .npy to `path` in the output's shape (bf16 widened to f32).
void write_output_npy(const std::filesystem::path& path, const LoadedOutput& output, DType dtype,
                      std::span<const std::byte> data);

}  // namespace svod
