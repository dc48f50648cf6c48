#include "svod/backends/opencl/opencl_api.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <optional>

#include "svod/base/error.h"
#include "svod/base/plugin.h"
#include "svod/backends/opencl/cl_handle.h"

namespace svod::detail {

namespace {

struct Loaded {
  OpenClApi api;
  std::optional<Error> failure;  // why the loader is unusable, reported on every use
};

Loaded load() {
  Loaded out;
  // libOpenCL.so.1 is the ICD loader's SONAME; the unversioned name only
  // exists where development files are installed.
  void* handle = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) handle = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable,
                                   "no OpenCL ICD loader (libOpenCL.so.1): {}; install ocl-icd-libopencl1 and a "
                                   "platform such as pocl-opencl-icd",
                                   why ? why : "not found"));
    return out;
  }
  OpenClApi& api = out.api;
  detail::SymbolBinder bind(handle);
#define SVOD_CL_BIND(name) bind(api.name, #name);
  SVOD_OPENCL_FUNCTIONS(SVOD_CL_BIND)
#undef SVOD_CL_BIND
  if (bind.missing()) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable,
                                   "the OpenCL ICD loader has no {} (it predates OpenCL 1.2)", bind.missing()));
  }
  // The handle stays open for the process: devices and their objects live
  // until exit.
  return out;
}

}  // namespace

const OpenClApi& opencl_api() {
  static const Loaded loaded = load();
  if (loaded.failure) throw *loaded.failure;
  return loaded.api;
}

std::string cl_status_text(cl_int status) {
  const char* name = nullptr;
  switch (status) {
#define SVOD_CL_CASE(code) \
  case code: name = #code; break;
    SVOD_CL_CASE(CL_SUCCESS)
    SVOD_CL_CASE(CL_DEVICE_NOT_FOUND)
    SVOD_CL_CASE(CL_DEVICE_NOT_AVAILABLE)
    SVOD_CL_CASE(CL_COMPILER_NOT_AVAILABLE)
    SVOD_CL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    SVOD_CL_CASE(CL_OUT_OF_RESOURCES)
    SVOD_CL_CASE(CL_OUT_OF_HOST_MEMORY)
    SVOD_CL_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
    SVOD_CL_CASE(CL_MEM_COPY_OVERLAP)
    SVOD_CL_CASE(CL_BUILD_PROGRAM_FAILURE)
    SVOD_CL_CASE(CL_LINK_PROGRAM_FAILURE)
    SVOD_CL_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    SVOD_CL_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    SVOD_CL_CASE(CL_INVALID_VALUE)
    SVOD_CL_CASE(CL_INVALID_DEVICE)
    SVOD_CL_CASE(CL_INVALID_CONTEXT)
    SVOD_CL_CASE(CL_INVALID_COMMAND_QUEUE)
    SVOD_CL_CASE(CL_INVALID_MEM_OBJECT)
    SVOD_CL_CASE(CL_INVALID_BUILD_OPTIONS)
    SVOD_CL_CASE(CL_INVALID_BINARY)
    SVOD_CL_CASE(CL_INVALID_PROGRAM)
    SVOD_CL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
    SVOD_CL_CASE(CL_INVALID_KERNEL_NAME)
    SVOD_CL_CASE(CL_INVALID_KERNEL)
    SVOD_CL_CASE(CL_INVALID_ARG_INDEX)
    SVOD_CL_CASE(CL_INVALID_ARG_VALUE)
    SVOD_CL_CASE(CL_INVALID_ARG_SIZE)
    SVOD_CL_CASE(CL_INVALID_KERNEL_ARGS)
    SVOD_CL_CASE(CL_INVALID_WORK_DIMENSION)
    SVOD_CL_CASE(CL_INVALID_WORK_GROUP_SIZE)
    SVOD_CL_CASE(CL_INVALID_WORK_ITEM_SIZE)
    SVOD_CL_CASE(CL_INVALID_GLOBAL_OFFSET)
    SVOD_CL_CASE(CL_INVALID_EVENT_WAIT_LIST)
    SVOD_CL_CASE(CL_INVALID_EVENT)
    SVOD_CL_CASE(CL_INVALID_BUFFER_SIZE)
    SVOD_CL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
#undef SVOD_CL_CASE
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR"; break;  // cl_ext.h: the loader found no platform
    default: break;
  }
  return name ? fmt::format("{} ({})", name, status) : fmt::format("OpenCL status {}", status);
}

namespace {

// A string property through clGetDeviceInfo or clGetPlatformInfo: the size
// first, then the text (trimmed at its terminating NUL).
template <typename Query, typename Handle, typename Info>
std::string info_string(Query query, Handle handle, Info what) {
  size_t size = 0;
  if (query(handle, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  query(handle, what, size, out.data(), nullptr);
  out.resize(std::strlen(out.c_str()));
  return out;
}

}  // namespace

std::string cl_device_string(cl_device_id device, cl_device_info what) {
  return info_string(opencl_api().clGetDeviceInfo, device, what);
}

std::string cl_platform_string(cl_platform_id platform, cl_platform_info what) {
  return info_string(opencl_api().clGetPlatformInfo, platform, what);
}

void cl_release(cl_program handle) noexcept { opencl_api().clReleaseProgram(handle); }
void cl_release(cl_kernel handle) noexcept { opencl_api().clReleaseKernel(handle); }
void cl_release(cl_mem handle) noexcept { opencl_api().clReleaseMemObject(handle); }
void cl_release(cl_command_queue handle) noexcept { opencl_api().clReleaseCommandQueue(handle); }

void check_cl(cl_int status, std::string_view what, ErrorKind kind) {
  if (status != CL_SUCCESS) throw make_error(kind, "{}: {}", what, cl_status_text(status));
}

}  // namespace svod::detail
