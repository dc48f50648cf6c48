// What the files of the C API share (svod.cpp: statuses, devices, buffers and
// programs; plan.cpp: plans; comm.cpp: communicators): the structs behind
// svod.h's opaque handles, guarded(), which turns whatever the runtime throws
// into an svod_status, and the registry of live handles that releases check.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "svod/base/error.h"
#include "svod/capi/svod.h"
#include "svod/comm/communicator.h"
#include "svod/device/device.h"
#include "svod/package/model.h"
#include "svod/planfile/plan_file.h"
#include "svod/sandbox/sandbox.h"

struct svod_status {
  svod_error_kind kind;
  std::string message;
};

struct svod_device {
  std::shared_ptr<svod::Device> device;
  std::string name;
};

struct svod_buffer {
  svod::Buffer buffer;
  std::string dtype;  // for svod_buffer_dtype
};

struct svod_program {
  std::shared_ptr<const svod::Program> program;
};

struct svod_comm {
  std::shared_ptr<svod::Communicator> comm;  // borrowed for the world communicator
  std::string transport;                    // for svod_comm_transport
};

struct svod_plan {
  explicit svod_plan(svod::Model m) : model(std::move(m)) {}

  std::mutex mutex;  // serializes every call on the plan
  svod::Model model;  // its variables set since the last execution, its inputs bound
  // Set by svod_plan_sandbox: the plan's runs go through it. Declared after
  // the model, so that it ends (and kills its helper) before the plan does.
  std::unique_ptr<svod::SandboxedPlan> sandbox;
};

namespace svod::capi {

// The status for the exception in flight; called only from a catch block.
svod_status* current_exception_status(const char* function) noexcept;

// Runs `body` and reports what it throws as a status (NULL when it returns).
template <typename Body>
svod_status* guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (...) {
    return current_exception_status(function);
  }
}

// Error(Validation) "<what> is NULL".
[[noreturn]] void null_argument(const char* what);

inline void require(const void* pointer, const char* what) {
  if (pointer == nullptr) [[unlikely]]
    null_argument(what);
}

// The addresses of the live handles of each type, so a release can tell a
// live handle from a released one without reading the memory behind it.
enum class HandleType { Device, Buffer, Program, Plan, Comm };

class LiveHandles {
 public:
  void add(const void* handle, HandleType type) {
    std::lock_guard lock(mutex_);
    handles_.emplace(handle, type);
  }
  bool remove(const void* handle, HandleType type) {
    std::lock_guard lock(mutex_);
    auto it = handles_.find(handle);
    if (it == handles_.end() || it->second != type) return false;
    handles_.erase(it);
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, HandleType> handles_;
};

LiveHandles& live_handles();

template <typename Handle>
constexpr HandleType handle_type() {
  if constexpr (std::is_same_v<Handle, svod_device>) return HandleType::Device;
  else if constexpr (std::is_same_v<Handle, svod_buffer>) return HandleType::Buffer;
  else if constexpr (std::is_same_v<Handle, svod_program>) return HandleType::Program;
  else if constexpr (std::is_same_v<Handle, svod_plan>) return HandleType::Plan;
  else return HandleType::Comm;
}

// Registers a new handle and gives it to the caller.
template <typename Handle>
void hand_out(std::unique_ptr<Handle> handle, Handle** out) {
  live_handles().add(handle.get(), handle_type<Handle>());
  *out = handle.release();
}

// Registers new handles and gives them to the caller in out[0..], all or none.
template <typename Handle>
void hand_out(std::vector<std::unique_ptr<Handle>> handles, Handle** out) {
  size_t added = 0;
  try {
    for (; added < handles.size(); ++added) live_handles().add(handles[added].get(), handle_type<Handle>());
  } catch (...) {
    while (added > 0) live_handles().remove(handles[--added].get(), handle_type<Handle>());
    throw;
  }
  for (size_t i = 0; i < handles.size(); ++i) out[i] = handles[i].release();
}

template <typename Handle>
svod_status* release(const char* function, Handle* handle, const char* what) noexcept {
  return guarded(function, [&] {
    require(handle, what);
    if (!live_handles().remove(handle, handle_type<Handle>())) {
      throw make_error(ErrorKind::Validation, "{} {} is not a live handle (released already?)", what,
                       static_cast<const void*>(handle));
    }
    delete handle;
  });
}

// A handle over `buffer` (svod.cpp), its dtype's name kept for svod_buffer_dtype.
std::unique_ptr<svod_buffer> buffer_handle(Buffer buffer);

// A plan file, or a package's bytes or file, loaded as a handle, with
// vars_json as svod_plan_load takes it; on `comm`'s rank when it is not null;
// either with `flags` (svod_package_flag values; a plan file takes only
// SVOD_PACKAGE_SANDBOX).
std::unique_ptr<svod_plan> plan_from_file(const char* path, const char* vars_json, std::shared_ptr<Communicator> comm,
                                          uint32_t flags = 0);
std::unique_ptr<svod_plan> plan_from_package(std::span<const std::byte> bytes, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags = 0);
std::unique_ptr<svod_plan> plan_from_package(const std::filesystem::path& path, const char* vars_json,
                                             std::shared_ptr<Communicator> comm, uint32_t flags = 0);

}  // namespace svod::capi
