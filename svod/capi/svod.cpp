// The C API of svod.h over the C++ runtime: statuses, devices, buffers,
// programs, plans and the log callback (communicators: comm.cpp). Handles
// hold shared runtime objects; every entry point runs its body inside
// guarded(), which turns whatever the runtime throws into an svod_status, so
// no exception crosses into C.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "svod/base/json_depth.h"
#include "svod/base/log_sink.h"
#include "svod/capi/capi_internal.h"
#include "svod/device/host_device.h"
#include "svod/registry/registry.h"
#include "svod/package/package.h"
#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_file.h"

namespace svod::capi {
namespace {

// Handed out when a status cannot be allocated; svod_status_free leaves it alone.
svod_status out_of_memory{SVOD_ERROR_INTERNAL, "out of memory"};

svod_error_kind to_c(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Validation: return SVOD_ERROR_VALIDATION;
    case ErrorKind::Compile: return SVOD_ERROR_COMPILE;
    case ErrorKind::Load: return SVOD_ERROR_LOAD;
    case ErrorKind::UndefinedSymbol: return SVOD_ERROR_UNDEFINED_SYMBOL;
    case ErrorKind::Unsupported: return SVOD_ERROR_UNSUPPORTED;
    case ErrorKind::DeviceUnavailable: return SVOD_ERROR_DEVICE_UNAVAILABLE;
    case ErrorKind::Execution: return SVOD_ERROR_EXECUTION;
    case ErrorKind::PlanPoisoned: return SVOD_ERROR_PLAN_POISONED;
    case ErrorKind::Timeout: return SVOD_ERROR_TIMEOUT;
    case ErrorKind::Io: return SVOD_ERROR_IO;
    case ErrorKind::Internal: return SVOD_ERROR_INTERNAL;
    case ErrorKind::KernelFault: return SVOD_ERROR_KERNEL_FAULT;
    case ErrorKind::SandboxViolation: return SVOD_ERROR_SANDBOX_VIOLATION;
  }
  return SVOD_ERROR_INTERNAL;
}

svod_status* make_status(svod_error_kind kind, std::string_view function, std::string_view message) noexcept {
  try {
    return new svod_status{kind, fmt::format("{}: {}", function, message)};
  } catch (...) {
    return &out_of_memory;
  }
}

// Copies of the caller's buffers side by side, as Program::launch takes them:
// up to kOnStack of them in place, more on the heap. Only the buffers given
// are constructed (zeroing a whole default-constructed array cost a launch
// more than the copies do).
class LaunchBuffers {
 public:
  LaunchBuffers(svod_buffer* const* handles, size_t count) : count_(count) {
    for (size_t i = 0; i < count; ++i) {
      if (handles[i] == nullptr) [[unlikely]]
        throw make_error(ErrorKind::Validation, "buffers[{}] is NULL", i);
    }
    buffers_ = count <= kOnStack ? reinterpret_cast<Buffer*>(stack_)
                                 : static_cast<Buffer*>(::operator new(count * sizeof(Buffer)));
    for (size_t i = 0; i < count; ++i) new (buffers_ + i) Buffer(handles[i]->buffer);
  }
  ~LaunchBuffers() {
    for (size_t i = 0; i < count_; ++i) buffers_[i].~Buffer();
    if (count_ > kOnStack) ::operator delete(buffers_);
  }
  LaunchBuffers(const LaunchBuffers&) = delete;
  LaunchBuffers& operator=(const LaunchBuffers&) = delete;

  std::span<const Buffer> span() const noexcept { return {buffers_, count_}; }

 private:
  static constexpr size_t kOnStack = 8;
  alignas(Buffer) std::byte stack_[kOnStack * sizeof(Buffer)];
  Buffer* buffers_;
  size_t count_;
};

std::unique_ptr<svod_buffer> buffer_handle(Buffer buffer) {
  auto handle = std::make_unique<svod_buffer>();
  handle->dtype = to_string(buffer.dtype());
  handle->buffer = std::move(buffer);
  return handle;
}

DType checked_dtype(const char* dtype, size_t count) {
  require(dtype, "dtype");
  const DType type = parse_dtype(dtype);
  if (count == 0) throw make_error(ErrorKind::Validation, "a buffer needs at least one element");
  return type;
}

// Host memory the caller owns, as a buffer of the host device.
Buffer host_buffer(void* data, DType dtype, size_t count) {
  return Buffer(std::make_shared<Storage>(host_device(), checked_byte_size(dtype, count), data), dtype);
}

// Copies between a buffer and caller memory of exactly the buffer's size.
void copy_with_host(const char* what, const svod_buffer* buffer, const void* host, size_t bytes, bool to_host) {
  require(buffer, "buffer");
  require(host, what);
  const Buffer& b = buffer->buffer;
  if (bytes != b.bytes()) {
    throw make_error(ErrorKind::Validation, "{} bytes given, the buffer holds {} ({} {} elements)", bytes, b.bytes(),
                     b.count(), to_string(b.dtype()));
  }
  const Buffer host_side = host_buffer(const_cast<void*>(host), DType::U8, bytes);
  if (to_host) b.device().copy(host_side, b);
  else b.device().copy(b, host_side);
}

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

}  // namespace

// The status for the exception in flight; called only from a catch block.
svod_status* current_exception_status(const char* function) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return make_status(to_c(e.kind()), function, e.what());
  } catch (const std::bad_alloc&) {
    return make_status(SVOD_ERROR_INTERNAL, function, "out of memory");
  } catch (const std::exception& e) {
    return make_status(SVOD_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return make_status(SVOD_ERROR_INTERNAL, function, "unknown exception");
  }
}

void null_argument(const char* what) { throw make_error(ErrorKind::Validation, "{} is NULL", what); }

// Never destroyed: handles may be released from static destructors.
LiveHandles& live_handles() {
  static auto* handles = new LiveHandles;
  return *handles;
}

std::unique_ptr<svod_plan> plan_from_file(const char* path, const char* vars_json,
                                          std::shared_ptr<Communicator> comm) {
  LoadOptions options;
  options.vars = parse_vars(vars_json);
  options.communicator = std::move(comm);
  PlanFile file = parse_plan_file(path);
  LoadedPlan loaded = load_plan(file, options);
  return std::make_unique<svod_plan>(Model(std::move(file), std::move(loaded)));
}

namespace {

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

// `source`: the package's bytes or its path, as load_package takes them.
template <typename Source>
std::unique_ptr<svod_plan> load_package_handle(const Source& source, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags) {
  constexpr uint32_t kKnownFlags = SVOD_PACKAGE_REFUSE_CPU_MISMATCH | SVOD_PACKAGE_SANDBOX;
  if ((flags & ~kKnownFlags) != 0)
    throw make_error(ErrorKind::Validation, "flags: 0x{:x} holds bits this svod does not know (0x{:x})", flags,
                     flags & ~kKnownFlags);
  PackageLoadOptions options;
  options.vars = parse_vars(vars_json);
  options.communicator = std::move(comm);
  if ((flags & SVOD_PACKAGE_REFUSE_CPU_MISMATCH) != 0) options.on_cpu_mismatch = CpuMismatch::Refuse;
  auto plan = std::make_unique<svod_plan>(Model(load_package(source, options)));
  if ((flags & SVOD_PACKAGE_SANDBOX) != 0) plan->sandbox = std::make_unique<SandboxedPlan>(plan->model.plan());
  return plan;
}

}  // namespace

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

int svod_api_version(void) { return SVOD_API_VERSION; }

// ---- Statuses ---------------------------------------------------------------

svod_error_kind svod_status_kind(const svod_status* status) { return status ? status->kind : SVOD_OK; }

const char* svod_status_message(const svod_status* status) { return status ? status->message.c_str() : ""; }

const char* svod_error_kind_name(svod_error_kind kind) {
  switch (kind) {
    case SVOD_OK: return "ok";
    case SVOD_ERROR_VALIDATION: return "validation";
    case SVOD_ERROR_COMPILE: return "compile";
    case SVOD_ERROR_LOAD: return "load";
    case SVOD_ERROR_UNDEFINED_SYMBOL: return "undefined symbol";
    case SVOD_ERROR_UNSUPPORTED: return "unsupported";
    case SVOD_ERROR_DEVICE_UNAVAILABLE: return "device unavailable";
    case SVOD_ERROR_EXECUTION: return "execution";
    case SVOD_ERROR_PLAN_POISONED: return "plan poisoned";
    case SVOD_ERROR_TIMEOUT: return "timeout";
    case SVOD_ERROR_IO: return "io";
    case SVOD_ERROR_INTERNAL: return "internal";
    case SVOD_ERROR_KERNEL_FAULT: return "kernel fault";
    case SVOD_ERROR_SANDBOX_VIOLATION: return "sandbox violation";
  }
  return "unknown";
}

void svod_status_free(svod_status* status) {
  if (status != &svod::capi::out_of_memory) delete status;
}

// ---- Devices ----------------------------------------------------------------

svod_status* svod_device_get(const char* name, svod_device** out) {
  return guarded(__func__, [&] {
    require(name, "name");
    require(out, "out");
    auto handle = std::make_unique<svod_device>();
    handle->device = svod::open_device(name);
    handle->name = handle->device->name();
    svod::capi::hand_out(std::move(handle), out);
  });
}

const char* svod_device_name(const svod_device* device) { return device ? device->name.c_str() : nullptr; }

svod_status* svod_device_release(svod_device* device) { return svod::capi::release(__func__, device, "device"); }

// ---- Buffers ----------------------------------------------------------------

svod_status* svod_buffer_allocate(svod_device* device, const char* dtype, size_t count, svod_buffer** out) {
  return guarded(__func__, [&] {
    require(device, "device");
    require(out, "out");
    const svod::DType type = svod::capi::checked_dtype(dtype, count);
    svod::capi::hand_out(svod::capi::buffer_handle(device->device->allocate(type, count)), out);
  });
}

svod_status* svod_buffer_wrap_host(void* data, const char* dtype, size_t count, svod_buffer** out) {
  return guarded(__func__, [&] {
    require(data, "data");
    require(out, "out");
    const svod::DType type = svod::capi::checked_dtype(dtype, count);
    if (reinterpret_cast<uintptr_t>(data) % svod::size_of(type) != 0) {
      throw svod::make_error(svod::ErrorKind::Validation, "data {} is not aligned to the {} bytes of a {} element",
                             data, svod::size_of(type), svod::to_string(type));
    }
    svod::capi::hand_out(svod::capi::buffer_handle(svod::capi::host_buffer(data, type, count)), out);
  });
}

svod_status* svod_buffer_copy_from_host(svod_buffer* buffer, const void* src, size_t bytes) {
  return guarded(__func__, [&] { svod::capi::copy_with_host("src", buffer, src, bytes, false); });
}

svod_status* svod_buffer_copy_to_host(const svod_buffer* buffer, void* dst, size_t bytes) {
  return guarded(__func__, [&] { svod::capi::copy_with_host("dst", buffer, dst, bytes, true); });
}

svod_status* svod_buffer_data(const svod_buffer* buffer, void** out) {
  return guarded(__func__, [&] {
    require(buffer, "buffer");
    require(out, "out");
    *out = buffer->buffer.data();
  });
}

svod_status* svod_buffer_view(const svod_buffer* base, size_t byte_offset, const char* dtype, size_t count,
                              svod_buffer** out) {
  return guarded(__func__, [&] {
    require(base, "base");
    require(out, "out");
    const svod::DType type = svod::capi::checked_dtype(dtype, count);
    const size_t bytes = svod::checked_byte_size(type, count);
    const svod::Buffer& b = base->buffer;
    if (byte_offset > b.bytes() || bytes > b.bytes() - byte_offset)
      throw svod::make_error(svod::ErrorKind::Validation,
                             "a view of {} {} elements ({} bytes) at byte offset {} leaves the buffer of {} bytes",
                             count, svod::to_string(type), bytes, byte_offset, b.bytes());
    svod::capi::hand_out(svod::capi::buffer_handle(b.view_bytes(byte_offset, bytes, type)), out);
  });
}

size_t svod_buffer_count(const svod_buffer* buffer) { return buffer ? buffer->buffer.count() : 0; }

size_t svod_buffer_bytes(const svod_buffer* buffer) { return buffer ? buffer->buffer.bytes() : 0; }

const char* svod_buffer_dtype(const svod_buffer* buffer) { return buffer ? buffer->dtype.c_str() : nullptr; }

svod_status* svod_buffer_release(svod_buffer* buffer) { return svod::capi::release(__func__, buffer, "buffer"); }

// ---- Programs ---------------------------------------------------------------

svod_status* svod_program_compile(svod_device* device, const char* spec_json, svod_program** out) {
  return guarded(__func__, [&] {
    require(device, "device");
    require(spec_json, "spec_json");
    require(out, "out");
    svod::PlanFileProgram parsed =
        svod::parse_program_text(spec_json, std::filesystem::current_path(), "program spec");
    if (!parsed.device.empty() && svod::device_registry().canonical_name(parsed.device) != device->name) {
      throw svod::make_error(svod::ErrorKind::Validation, "the spec's device is \"{}\", compiling for {}",
                             parsed.device, device->name);
    }
    auto handle = std::make_unique<svod_program>();
    handle->program = device->device->compile(parsed.spec);
    svod::capi::hand_out(std::move(handle), out);
  });
}

svod_status* svod_program_launch(svod_program* program, svod_buffer* const* buffers, size_t n_buffers,
                                 const int64_t* scalars, size_t n_scalars) {
  return guarded(__func__, [&] {
    require(program, "program");
    if (n_buffers != 0) require(buffers, "buffers");
    if (n_scalars != 0) require(scalars, "scalars");
    const svod::capi::LaunchBuffers list(buffers, n_buffers);
    program->program->launch(list.span(), {scalars, n_scalars});
  });
}

svod_status* svod_program_launch_sized(svod_program* program, svod_buffer* const* buffers, size_t n_buffers,
                                       const int64_t* scalars, size_t n_scalars, const int64_t* global_size,
                                       const int64_t* local_size) {
  return guarded(__func__, [&] {
    require(program, "program");
    if (n_buffers != 0) require(buffers, "buffers");
    if (n_scalars != 0) require(scalars, "scalars");
    const svod::Program& p = *program->program;
    svod::LaunchDims dims = p.layout().dims({scalars, n_scalars});
    for (auto [given, into, what] : {std::tuple{global_size, &dims.global, "global_size"},
                                     std::tuple{local_size, &dims.local, "local_size"}}) {
      if (given == nullptr) continue;
      for (size_t d = 0; d < 3; ++d) {
        if (given[d] < 1)
          throw svod::make_error(svod::ErrorKind::Validation, "program \"{}\": {}[{}] is {}; launch sizes are at least 1",
                                 p.spec().display_name(), what, d, given[d]);
        (*into)[d] = given[d];
      }
    }
    const svod::capi::LaunchBuffers list(buffers, n_buffers);
    p.launch(list.span(), {scalars, n_scalars}, &dims);
  });
}

svod_status* svod_program_release(svod_program* program) { return svod::capi::release(__func__, program, "program"); }

// ---- Plans ------------------------------------------------------------------

svod_status* svod_plan_load(const char* path, const char* vars_json, svod_plan** out) {
  return guarded(__func__, [&] {
    require(path, "path");
    require(out, "out");
    svod::capi::hand_out(svod::capi::plan_from_file(path, vars_json, nullptr), out);
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

// ---- Log lines --------------------------------------------------------------

svod_status* svod_set_log_callback(svod_log_callback callback, void* user) {
  return guarded(__func__, [&] {
    if (callback == nullptr) return svod::set_log_sink(nullptr);
    svod::set_log_sink([callback, user](svod::LogLevel level, std::string_view line) {
      callback(user, static_cast<int>(level), line.data());  // NUL-terminated (log_sink.h)
    });
  });
}

}  // extern "C"
