// The C API of svod.h over the C++ runtime: statuses, devices, buffers,
// programs and the log callback (plans: plan.cpp; communicators: comm.cpp).
// Handles hold shared runtime objects; every entry point runs its body inside
// guarded(), which turns whatever the runtime throws into an svod_status, so
// no exception crosses into C.
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "svod/base/log_sink.h"
#include "svod/capi/capi_internal.h"
#include "svod/device/host_device.h"
#include "svod/registry/registry.h"
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

std::unique_ptr<svod_buffer> buffer_handle(Buffer buffer) {
  auto handle = std::make_unique<svod_buffer>();
  handle->dtype = to_string(buffer.dtype());
  handle->buffer = std::move(buffer);
  return handle;
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
