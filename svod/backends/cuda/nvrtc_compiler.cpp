#include "svod/backends/cuda/nvrtc_compiler.h"

#include <cstring>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/cuda/cuda_api.h"

namespace svod {

namespace {

bool valid_target(const std::string& target, bool& cubin) {
  std::string digits;
  if (target.starts_with("sm_")) {
    cubin = true;
    digits = target.substr(3);
  } else if (target.starts_with("compute_")) {
    cubin = false;
    digits = target.substr(8);
  } else {
    return false;
  }
  // "90", "90a", "100f": two or three digits and an optional feature suffix.
  size_t n = 0;
  while (n < digits.size() && digits[n] >= '0' && digits[n] <= '9') ++n;
  return n >= 2 && n <= 3 && digits.size() - n <= 1;
}

// True when the PTX declares a kernel named `entry` (".entry name(").
bool ptx_has_entry(std::string_view ptx, const std::string& entry) {
  const std::string needle = ".entry " + entry;
  for (size_t at = ptx.find(needle); at != std::string_view::npos; at = ptx.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end < ptx.size() && (ptx[end] == '(' || ptx[end] == ' ' || ptx[end] == '\n' || ptx[end] == '\t')) return true;
  }
  return false;
}

// Destroys the NVRTC program on every path out of compile().
struct ProgramGuard {
  const detail::NvrtcApi& api;
  cu::nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) api.nvrtcDestroyProgram(&program);
  }
};

}  // namespace

std::string cuda_sm_target(int major, int minor) { return fmt::format("sm_{}{}", major, minor); }

NvrtcCompiler::NvrtcCompiler(std::string target) : target_(std::move(target)) {
  if (!valid_target(target_, cubin_))
    throw make_error(ErrorKind::Validation, "NVRTC target \"{}\": expected sm_XY (cubin) or compute_XY (PTX)", target_);
  const auto& api = detail::nvrtc_api();
  identity_.name = "nvrtc";
  identity_.path = api.path;
  identity_.version = fmt::format("{}.{}", api.major, api.minor);
  identity_.target_triple = "nvptx64-nvidia-cuda";
  identity_.target_cpu = target_;
  identity_.flags.push_back("--gpu-architecture=" + target_);
  if (!api.include_dir.empty()) identity_.flags.push_back("--include-path=" + api.include_dir);
}

Artifact NvrtcCompiler::compile(const ProgramSpec& spec) const {
  const std::string& program = spec.display_name();
  if (spec.language != kCudaLanguage)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": NVRTC compiles CUDA C, not {}", program,
                     to_string(spec.language));
  const auto& api = detail::nvrtc_api();
  std::vector<std::string> options = identity_.flags;
  for (const auto& [name, value] : spec.defines) options.push_back(fmt::format("-D{}={}", name, value));
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());

  ProgramGuard guard{api};
  const std::string file = program + ".cu";
  cu::nvrtcResult status = api.nvrtcCreateProgram(&guard.program, spec.source.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (status != cu::NVRTC_SUCCESS)
    throw make_error(ErrorKind::Compile, "program \"{}\": nvrtcCreateProgram: {}", program,
                     api.nvrtcGetErrorString(status));
  status = api.nvrtcCompileProgram(guard.program, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  std::string log;
  if (api.nvrtcGetProgramLogSize(guard.program, &log_size) == cu::NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    api.nvrtcGetProgramLog(guard.program, log.data());
    log.resize(std::strlen(log.c_str()));
  }
  if (status != cu::NVRTC_SUCCESS)
    throw make_error(ErrorKind::Compile, "program \"{}\" does not compile with NVRTC {} for {}: {}\n{}", program,
                     identity_.version, target_, api.nvrtcGetErrorString(status), log);
  if (debug_level() >= 1 && !log.empty()) log_debug("NVRTC log for {}:\n{}", program, log);

  Artifact artifact;
  artifact.diagnostics = std::move(log);
  size_t size = 0;
  if (cubin_) {
    artifact.kind = kCubin;
    if (api.nvrtcGetCUBINSize(guard.program, &size) != cu::NVRTC_SUCCESS || size == 0)
      throw make_error(ErrorKind::Compile, "program \"{}\": NVRTC produced no cubin for {}", program, target_);
    artifact.bytes.resize(size);
    api.nvrtcGetCUBIN(guard.program, reinterpret_cast<char*>(artifact.bytes.data()));
    return artifact;
  }
  artifact.kind = kPtx;
  if (api.nvrtcGetPTXSize(guard.program, &size) != cu::NVRTC_SUCCESS || size == 0)
    throw make_error(ErrorKind::Compile, "program \"{}\": NVRTC produced no PTX for {}", program, target_);
  // The size counts the terminating NUL, which cuModuleLoadData needs.
  artifact.bytes.resize(size);
  api.nvrtcGetPTX(guard.program, reinterpret_cast<char*>(artifact.bytes.data()));
  const std::string_view ptx(reinterpret_cast<const char*>(artifact.bytes.data()), size);
  if (!ptx_has_entry(ptx, spec.entry))
    throw make_error(ErrorKind::UndefinedSymbol,
                     "program \"{}\" has no kernel named \"{}\" (declare it extern \"C\" __global__ so its name is not "
                     "mangled)",
                     program, spec.entry);
  return artifact;
}

}  // namespace svod
