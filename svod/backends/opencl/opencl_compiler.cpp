#include "svod/backends/opencl/opencl_compiler.h"

#include <cstring>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/opencl/cl_handle.h"
#include "svod/backends/opencl/opencl_api.h"

namespace svod {

using detail::check_cl;
using detail::cl_device_string;
using detail::cl_platform_string;
using detail::ClHandle;
using detail::cl_status_text;
using detail::opencl_api;

namespace {

std::string platform_name(cl_device_id device) {
  cl_platform_id platform = nullptr;
  opencl_api().clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(platform), &platform, nullptr);
  return platform ? cl_platform_string(platform, CL_PLATFORM_NAME) : std::string();
}

}  // namespace

std::string opencl_build_options(const ProgramSpec& spec) {
  std::string options;
  for (const auto& [define, value] : spec.defines) {
    if (value.find_first_of(" \t\n\"'\\") != std::string::npos)
      throw make_error(ErrorKind::Validation,
                       "program \"{}\": define {}=\"{}\": OpenCL build options cannot carry spaces or quotes",
                       spec.display_name(), define, value);
    options += fmt::format("-D{}={} ", define, value);
  }
  return options;
}

OpenClCompiler::OpenClCompiler(_cl_context* context, _cl_device_id* device, std::string device_name)
    : context_(context), device_(device), device_name_(std::move(device_name)) {
  identity_.name = "opencl";
  identity_.path = platform_name(device);
  identity_.version = fmt::format("{}; driver {}", cl_device_string(device, CL_DEVICE_VERSION),
                                  cl_device_string(device, CL_DRIVER_VERSION));
  identity_.target_cpu = cl_device_string(device, CL_DEVICE_NAME);
}

Artifact OpenClCompiler::compile(const ProgramSpec& spec) const {
  if (spec.language != kOpenClLanguage)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": {} runs OpenCL C programs, not {}", spec.display_name(),
                     device_name_, to_string(spec.language));
  spec.validate();
  if (spec.core_id_index())
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": core_id is the CPU's slice index; OpenCL kernels use get_group_id() and "
                     "get_local_id() instead",
                     spec.display_name());
  const std::string options = opencl_build_options(spec);
  const auto& cl = opencl_api();
  const char* text = spec.source.c_str();
  const size_t length = spec.source.size();
  cl_int status = CL_SUCCESS;
  ClHandle<cl_program> program(cl.clCreateProgramWithSource(context_, 1, &text, &length, &status));
  check_cl(status, fmt::format("program \"{}\": clCreateProgramWithSource", spec.display_name()));
  status = cl.clBuildProgram(program.get(), 1, &device_, options.c_str(), nullptr, nullptr);
  // The build log: the errors of a failed build, the warnings of one that built.
  size_t log_size = 0;
  cl.clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
  std::string log(log_size, '\0');
  if (log_size) cl.clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, log_size, log.data(), nullptr);
  log.resize(std::strlen(log.c_str()));
  if (status != CL_SUCCESS)
    throw make_error(ErrorKind::Compile, "program \"{}\" does not build for {} ({}): {}\n{}", spec.display_name(),
                     device_name_, identity_.target_cpu, cl_status_text(status), log);
  // A missing entry is a compile-time error, before anything is cached.
  ClHandle<cl_kernel> kernel(cl.clCreateKernel(program.get(), spec.entry.c_str(), &status));
  if (status == CL_INVALID_KERNEL_NAME)
    throw make_error(ErrorKind::UndefinedSymbol, "program \"{}\" has no __kernel named \"{}\"", spec.display_name(),
                     spec.entry);
  check_cl(status, fmt::format("program \"{}\": clCreateKernel", spec.display_name()));
  size_t size = 0;
  check_cl(cl.clGetProgramInfo(program.get(), CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr),
           fmt::format("program \"{}\": reading the binary size", spec.display_name()), ErrorKind::Unsupported);
  if (size == 0)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the OpenCL platform of {} gives no program binaries",
                     spec.display_name(), device_name_);
  Artifact artifact;
  artifact.kind = kOpenClBinary;
  artifact.diagnostics = std::move(log);
  artifact.bytes.resize(size);
  unsigned char* out = reinterpret_cast<unsigned char*>(artifact.bytes.data());
  check_cl(cl.clGetProgramInfo(program.get(), CL_PROGRAM_BINARIES, sizeof(out), &out, nullptr),
           fmt::format("program \"{}\": reading the binary", spec.display_name()), ErrorKind::Unsupported);
  if (debug_level() >= 1)
    log_debug("built OpenCL program {} for {} from source ({} byte binary)", spec.display_name(), device_name_,
                   size);
  return artifact;
}

}  // namespace svod
