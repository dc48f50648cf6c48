// The C API's plans (svod.h, "Plans" to "Running a plan by name"): plan files
// and packages loaded into handles, a plan's variables and buffers, its
// executions in this process or in its sandbox, and its inputs and outputs.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "svod/base/json_depth.h"
#include "svod/capi/capi_internal.h"
#include "svod/package/package.h"
#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_file.h"
#include "svod/sandbox/confined_compile.h"

namespace svod::capi {
namespace {

size_t plan_slot(const svod_plan& plan, const char* name) {
  require(name, "name");
  auto slot = const_cast<svod_plan&>(plan).model.plan().find_buffer(name);
  if (!slot) throw make_error(ErrorKind::Validation, "the plan has no buffer named \"{}\"", name);
  return *slot;
}

std::map<std::string, int64_t> parse_vars(const char* vars_json) {
  std::map<std::string, int64_t> vars;
  if (vars_json == nullptr) return vars;
  check_json_depth(vars_json, ErrorKind::Validation, "vars_json");  // deeper values overflow the stack
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(vars_json);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e999
    throw make_error(ErrorKind::Validation, "vars_json is not valid JSON: {}", json_error_words(e.what()));
  }
  if (!json.is_object()) {
    throw make_error(ErrorKind::Validation, "vars_json: expected an object of integers, got {}",
                     detail::json_type_name(json));
  }
  for (const auto& [name, value] : json.items()) {
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) {
      throw make_error(ErrorKind::Validation, "vars_json.{}: expected a 64-bit integer, got {}", name, value.dump());
    }
    vars.emplace(name, value.get<int64_t>());
  }
  return vars;
}

// svod_plan_sandbox's options_json: {"wall_limit_s": seconds, "memory_limit": bytes}.
SandboxOptions parse_sandbox_options(const char* options_json) {
  SandboxOptions options;
  if (options_json == nullptr) return options;
  check_json_depth(options_json, ErrorKind::Validation, "options_json");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(options_json);
  } catch (const nlohmann::json::exception& e) {
    throw make_error(ErrorKind::Validation, "options_json is not valid JSON: {}", json_error_words(e.what()));
  }
  if (!json.is_object())
    throw make_error(ErrorKind::Validation, "options_json: expected an object, got {}", detail::json_type_name(json));
  for (const auto& [name, value] : json.items()) {
    if (name == "wall_limit_s") {
      // Whole milliseconds, at least one, and at most a day: a larger limit
      // is no limit a caller means.
      if (!value.is_number() || !(value.get<double>() >= 0.001 && value.get<double>() <= 86400.0))
        throw make_error(ErrorKind::Validation,
                         "options_json.wall_limit_s: expected seconds from 0.001 to 86400, got {}", value.dump());
      options.wall_limit = std::chrono::milliseconds(static_cast<int64_t>(value.get<double>() * 1000.0));
    } else if (name == "memory_limit") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() == 0)
        throw make_error(ErrorKind::Validation,
                         "options_json.memory_limit: expected a positive number of bytes, got {}", value.dump());
      options.memory_limit = value.get<uint64_t>();
    } else {
      throw make_error(ErrorKind::Validation,
                       "options_json: unknown option \"{}\" (the options are wall_limit_s and memory_limit)", name);
    }
  }
  return options;
}

void check_flags(uint32_t flags, uint32_t known, std::string_view loading) {
  if ((flags & ~known) != 0)
    throw make_error(ErrorKind::Validation, "flags: 0x{:x} holds bits {} does not take (0x{:x})", flags, loading,
                     flags & ~known);
}

// Sandboxed: a program compiled from its source is compiled confined, never in this process.
std::shared_ptr<const Program> compile_confined_on(Device& device, const ProgramSpec& spec) {
  return load_confined(device, spec);
}

// The handle of a loaded model, sandboxed when `flags` say so.
std::unique_ptr<svod_plan> plan_handle(Model model, uint32_t flags) {
  auto plan = std::make_unique<svod_plan>(std::move(model));
  if ((flags & SVOD_PACKAGE_SANDBOX) != 0) plan->sandbox = std::make_unique<SandboxedPlan>(plan->model.plan());
  return plan;
}

// `source`: the package's bytes or its path, as load_package takes them.
template <typename Source>
std::unique_ptr<svod_plan> load_package_handle(const Source& source, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags) {
  check_flags(flags, SVOD_PACKAGE_REFUSE_CPU_MISMATCH | SVOD_PACKAGE_SANDBOX, "a package load");
  PackageLoadOptions options;
  options.vars = parse_vars(vars_json);
  options.communicator = std::move(comm);
  if ((flags & SVOD_PACKAGE_REFUSE_CPU_MISMATCH) != 0) options.on_cpu_mismatch = CpuMismatch::Refuse;
  if ((flags & SVOD_PACKAGE_SANDBOX) != 0) options.compile_source = compile_confined_on;
  return plan_handle(Model(load_package(source, options)), flags);
}

}  // namespace

std::unique_ptr<svod_plan> plan_from_file(const char* path, const char* vars_json, std::shared_ptr<Communicator> comm,
                                          uint32_t flags) {
  check_flags(flags, SVOD_PACKAGE_SANDBOX, "a plan file's load");
  LoadOptions options;
  options.vars = parse_vars(vars_json);
  options.communicator = std::move(comm);
  if ((flags & SVOD_PACKAGE_SANDBOX) != 0)
    options.build_program = [](const PlanFileProgram& program, Device& device) {
      return compile_confined_on(device, program.spec);
    };
  PlanFile file = parse_plan_file(path);
  LoadedPlan loaded = load_plan(file, options);
  return plan_handle(Model(std::move(file), std::move(loaded)), flags);
}

std::unique_ptr<svod_plan> plan_from_package(std::span<const std::byte> bytes, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags) {
  return load_package_handle(bytes, vars_json, std::move(comm), flags);
}

std::unique_ptr<svod_plan> plan_from_package(const std::filesystem::path& path, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags) {
  return load_package_handle(path, vars_json, std::move(comm), flags);
}

}  // namespace svod::capi

using svod::capi::guarded;
using svod::capi::require;

extern "C" {

// ---- Plans ------------------------------------------------------------------

svod_status* svod_plan_load(const char* path, const char* vars_json, svod_plan** out) {
  return guarded(__func__, [&] {
    require(path, "path");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_file(path, vars_json, nullptr), out);
  });
}

svod_status* svod_plan_load_with_flags(const char* path, const char* vars_json, uint32_t flags, svod_plan** out) {
  return guarded(__func__, [&] {
    require(path, "path");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_file(path, vars_json, nullptr, flags), out);
  });
}

svod_status* svod_plan_load_package(const void* data, size_t size, const char* vars_json, svod_plan** out) {
  return guarded(__func__, [&] {
    require(data, "data");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_package(std::span(static_cast<const std::byte*>(data), size), vars_json, nullptr),
                   out);
  });
}

svod_status* svod_plan_load_package_file(const char* path, const char* vars_json, svod_plan** out) {
  return guarded(__func__, [&] {
    require(path, "path");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_package(std::filesystem::path(path), vars_json, nullptr), out);
  });
}

svod_status* svod_plan_load_package_with_flags(const void* data, size_t size, const char* vars_json, uint32_t flags,
                                               svod_plan** out) {
  return guarded(__func__, [&] {
    require(data, "data");
    require(out, "out");
    svod::capi::hand_out(
        svod::capi::plan_from_package(std::span(static_cast<const std::byte*>(data), size), vars_json, nullptr, flags),
        out);
  });
}

svod_status* svod_plan_load_package_file_with_flags(const char* path, const char* vars_json, uint32_t flags,
                                                    svod_plan** out) {
  return guarded(__func__, [&] {
    require(path, "path");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_package(std::filesystem::path(path), vars_json, nullptr, flags), out);
  });
}

svod_status* svod_plan_set_var(svod_plan* plan, const char* name, int64_t value) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    require(name, "name");
    std::lock_guard lock(plan->mutex);
    plan->model.set_variable(name, value);
  });
}

svod_status* svod_plan_buffer(svod_plan* plan, const char* name, svod_buffer** out) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    require(out, "out");
    std::lock_guard lock(plan->mutex);
    const size_t slot = svod::capi::plan_slot(*plan, name);
    svod::capi::hand_out(svod::capi::buffer_handle(plan->model.plan().buffer(slot)), out);
  });
}

svod_status* svod_plan_bind(svod_plan* plan, const char* name, svod_buffer* buffer) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    require(buffer, "buffer");
    std::lock_guard lock(plan->mutex);
    const size_t slot = svod::capi::plan_slot(*plan, name);
    if (plan->sandbox)
      throw svod::make_error(svod::ErrorKind::Unsupported,
                             "buffer \"{}\": a sandboxed plan's buffers stay in the memory it shares with its helper "
                             "(copy data in with svod_plan_set_input or through svod_plan_buffer)",
                             name);
    // An input bound here is bound at the shape its variables have now.
    for (const svod::ModelPort& input : plan->model.inputs()) {
      if (input.slot != slot) continue;
      plan->model.bind_input(name, buffer->buffer, input.shape);
      return;
    }
    plan->model.plan().rebind(slot, buffer->buffer);
  });
}

svod_status* svod_plan_execute(svod_plan* plan) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    std::lock_guard lock(plan->mutex);
    plan->model.run(plan->sandbox.get());
  });
}

svod_status* svod_plan_sandbox(svod_plan* plan, const char* options_json) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    const svod::SandboxOptions options = svod::capi::parse_sandbox_options(options_json);
    std::lock_guard lock(plan->mutex);
    if (plan->sandbox)
      throw svod::make_error(svod::ErrorKind::Validation,
                             "the plan is sandboxed already (its limits stay as they were set)");
    plan->sandbox = std::make_unique<svod::SandboxedPlan>(plan->model.plan(), options);
  });
}

namespace {

// Input or output `index` of `plan`, as svod_plan_*_info and _dim give it.
svod::ModelPort port_at(svod_plan* plan, size_t index, bool input) {
  require(plan, "plan");
  const auto ports = input ? plan->model.inputs() : plan->model.outputs();
  if (index >= ports.size())
    throw svod::make_error(svod::ErrorKind::Validation, "{} {} is out of range (the plan has {})",
                           input ? "input" : "output", index, ports.size());
  return ports[index];
}

// A name of the plan's file, which lives as long as the plan.
const char* file_string(const svod_plan* plan, const std::string& name) {
  for (const auto& b : plan->model.file().buffers) {
    if (b.name == name) return b.name.c_str();
    for (const auto& v : b.dim_variables)
      if (v == name) return v.c_str();
  }
  throw svod::make_error(svod::ErrorKind::Internal, "\"{}\" is not a name of the plan's file", name);
}

svod_status* port_info(const char* function, svod_plan* plan, size_t index, bool input, const char** name,
                       const char** dtype, size_t* rank) {
  return guarded(function, [&] {
    require(name, "name");
    require(dtype, "dtype");
    require(rank, "rank");
    require(plan, "plan");
    std::lock_guard lock(plan->mutex);
    const svod::ModelPort port = port_at(plan, index, input);
    *name = file_string(plan, port.name);
    *dtype = svod::to_string(port.dtype).data();
    *rank = port.shape.size();
  });
}

svod_status* port_dim(const char* function, svod_plan* plan, size_t index, bool input, size_t dim, int64_t* size,
                      const char** variable) {
  return guarded(function, [&] {
    require(size, "size");
    require(variable, "variable");
    require(plan, "plan");
    std::lock_guard lock(plan->mutex);
    const svod::ModelPort port = port_at(plan, index, input);
    if (dim >= port.shape.size())
      throw svod::make_error(svod::ErrorKind::Validation, "{} \"{}\" has {} dimensions, not {}",
                             input ? "input" : "output", port.name, port.shape.size(), dim + 1);
    *size = static_cast<int64_t>(port.shape[dim]);
    const bool fixed = port.dim_variables.empty() || port.dim_variables[dim].empty();
    *variable = fixed ? nullptr : file_string(plan, port.dim_variables[dim]);
  });
}

}  // namespace

size_t svod_plan_input_count(svod_plan* plan) {
  if (plan == nullptr) return 0;
  std::lock_guard lock(plan->mutex);
  return plan->model.inputs().size();
}

size_t svod_plan_output_count(svod_plan* plan) {
  if (plan == nullptr) return 0;
  std::lock_guard lock(plan->mutex);
  return plan->model.outputs().size();
}

svod_status* svod_plan_input_info(svod_plan* plan, size_t index, const char** name, const char** dtype,
                                  size_t* rank) {
  return port_info(__func__, plan, index, true, name, dtype, rank);
}

svod_status* svod_plan_output_info(svod_plan* plan, size_t index, const char** name, const char** dtype,
                                   size_t* rank) {
  return port_info(__func__, plan, index, false, name, dtype, rank);
}

svod_status* svod_plan_input_dim(svod_plan* plan, size_t index, size_t dim, int64_t* size, const char** variable) {
  return port_dim(__func__, plan, index, true, dim, size, variable);
}

svod_status* svod_plan_output_dim(svod_plan* plan, size_t index, size_t dim, int64_t* size, const char** variable) {
  return port_dim(__func__, plan, index, false, dim, size, variable);
}

svod_status* svod_plan_set_input(svod_plan* plan, const char* name, const void* data, size_t bytes,
                                 const char* dtype, const int64_t* shape, size_t rank) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    require(name, "name");
    require(dtype, "dtype");
    if (bytes > 0) require(data, "data");
    if (rank > 0) require(shape, "shape");
    std::vector<size_t> dims;
    for (size_t d = 0; d < rank; ++d) {
      if (shape[d] < 0)
        throw svod::make_error(svod::ErrorKind::Validation, "input \"{}\": shape[{}] is {}, below 0", name, d,
                               shape[d]);
      dims.push_back(static_cast<size_t>(shape[d]));
    }
    const svod::DType type = svod::parse_dtype(dtype);
    std::lock_guard lock(plan->mutex);
    plan->model.set_input(name, type, dims, std::span(static_cast<const std::byte*>(data), bytes));
  });
}

svod_status* svod_plan_get_output(svod_plan* plan, const char* name, void* data, size_t bytes) {
  return guarded(__func__, [&] {
    require(plan, "plan");
    require(name, "name");
    if (bytes > 0) require(data, "data");
    std::lock_guard lock(plan->mutex);
    plan->model.read_output(name, std::span(static_cast<std::byte*>(data), bytes));
  });
}

svod_status* svod_plan_release(svod_plan* plan) { return svod::capi::release(__func__, plan, "plan"); }

}  // extern "C"
