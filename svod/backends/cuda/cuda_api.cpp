#include "svod/backends/cuda/cuda_api.h"

#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/plugin.h"
#include "svod/base/error.h"

namespace svod::detail {

namespace {

// The CUDA version whose ABI every entry point is requested at: the _v2
// forms of the memory and graph calls, as declared in cuda_api.h.
constexpr int kDriverAbiVersion = 12000;

using GetProcAddress = cu::CUresult (*)(const char* symbol, void** function, int cuda_version, uint64_t flags,
                                        int* symbol_status);

// A driver whose cuGetErrorName resolved: cu_status_text asks it for names.
std::atomic<const CudaDriverApi*> g_named_driver{nullptr};

struct LoadedDriver {
  CudaDriverApi api;
  std::optional<Error> failure;  // why the driver is unusable, reported on every use
};

std::string stub_message(const std::string& path) {
  return fmt::format(
      "{} is the CUDA toolkit's stub library (cuInit: CUDA_ERROR_STUB_LIBRARY, 34), not a driver: this machine has "
      "no NVIDIA driver installed",
      path);
}

// Loads into `out`, which stays where it is for the process (a map node), so
// cu_status_text may point at its table.
void load_driver(const std::string& path, LoadedDriver& out) {
  out.api.path = path;
  auto fail = [&](std::string message) { out.failure.emplace(ErrorKind::DeviceUnavailable, std::move(message)); };
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return fail(fmt::format("no CUDA driver: cannot open {} ({}); install the NVIDIA driver or point "
                            "SVOD_CUDA_DRIVER at libcuda.so.1",
                            path, why ? why : "not found"));
  }
  // The handle stays open for the process: devices and modules live until exit.
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!get_proc)
    return fail(fmt::format("the CUDA driver {} has no cuGetProcAddress_v2: it predates CUDA 12, and svod needs a "
                            "CUDA 12 or newer driver",
                            path));
  const char* missing = nullptr;
  cu::CUresult lookup_status = cu::CUDA_SUCCESS;
  auto bind = [&](auto& fn, const char* name) {
    void* address = nullptr;
    int found = -1;
    const cu::CUresult status = get_proc(name, &address, kDriverAbiVersion, cu::CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (status != cu::CUDA_SUCCESS && lookup_status == cu::CUDA_SUCCESS) lookup_status = status;
    if (status == cu::CUDA_SUCCESS && found == cu::CU_GET_PROC_ADDRESS_SUCCESS && address)
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
    else if (!missing)
      missing = name;
  };
  CudaDriverApi& api = out.api;
#define SVOD_CUDA_BIND(name, params) bind(api.name, #name);
  SVOD_CUDA_DRIVER_FIRST(SVOD_CUDA_BIND)
  if (lookup_status == cu::CUDA_ERROR_STUB_LIBRARY) return fail(stub_message(path));
  if (lookup_status == cu::CUDA_ERROR_INVALID_VALUE)
    return fail(fmt::format("the CUDA driver {} is older than CUDA 12.0, which svod needs", path));
  if (lookup_status != cu::CUDA_SUCCESS)
    return fail(fmt::format("the CUDA driver {} refuses cuGetProcAddress: status {}", path, lookup_status));
  if (missing) return fail(fmt::format("the CUDA driver {} has no {}", path, missing));
  if (api.cuGetErrorName) g_named_driver.store(&api);

  SVOD_CUDA_DRIVER_REST(SVOD_CUDA_BIND)
#undef SVOD_CUDA_BIND
  if (missing) return fail(fmt::format("the CUDA driver {} has no {} at the CUDA 12.0 ABI", path, missing));

  const cu::CUresult init = api.cuInit(0);
  if (init == cu::CUDA_ERROR_STUB_LIBRARY) return fail(stub_message(path));
  if (init == cu::CUDA_ERROR_NO_DEVICE)
    return fail(fmt::format("the CUDA driver ({}) finds no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)", path));
  if (init != cu::CUDA_SUCCESS)
    return fail(fmt::format("the CUDA driver ({}) does not initialise: cuInit: {}", path, cu_status_text(init)));
  api.cuDriverGetVersion(&api.driver_version);
}

// Fallback names for statuses seen before (or without) a driver that can
// name them.
const char* known_status_name(cu::CUresult status) {
  switch (status) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return nullptr;
  }
}

struct LoadedNvrtc {
  NvrtcApi api;
  std::optional<Error> failure;
};

LoadedNvrtc load_nvrtc(const std::optional<std::string>& cuda_path) {
  namespace fs = std::filesystem;
  LoadedNvrtc out;
  std::vector<std::string> candidates;
  if (cuda_path) {
    candidates = {*cuda_path + "/lib64/libnvrtc.so", *cuda_path + "/lib/libnvrtc.so"};
  } else {
    candidates = {"/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib/libnvrtc.so", "libnvrtc.so",
                  "libnvrtc.so.13", "libnvrtc.so.12"};
  }
  std::string tried;
  void* handle = detail::open_first_library(candidates, out.api.path, tried);
  if (!handle) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable,
                                   "no NVRTC (tried {}); install the CUDA toolkit or set SVOD_CUDA_PATH to it", tried));
    return out;
  }
  NvrtcApi& api = out.api;
  detail::SymbolBinder bind(handle);
  bind(api.nvrtcVersion, "nvrtcVersion");
  bind(api.nvrtcGetErrorString, "nvrtcGetErrorString");
  bind(api.nvrtcCreateProgram, "nvrtcCreateProgram");
  bind(api.nvrtcDestroyProgram, "nvrtcDestroyProgram");
  bind(api.nvrtcCompileProgram, "nvrtcCompileProgram");
  bind(api.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  bind(api.nvrtcGetProgramLog, "nvrtcGetProgramLog");
  bind(api.nvrtcGetPTXSize, "nvrtcGetPTXSize");
  bind(api.nvrtcGetPTX, "nvrtcGetPTX");
  bind(api.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  bind(api.nvrtcGetCUBIN, "nvrtcGetCUBIN");
  if (bind.missing()) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable, "NVRTC at {} has no {} (svod needs CUDA 11.2 or newer)",
                                   api.path, bind.missing()));
    return out;
  }
  api.nvrtcVersion(&api.major, &api.minor);
  // The toolkit's headers (cuda_fp16.h and friends) sit in include/ beside
  // lib/ or lib64/; kernels may include them.
  std::error_code ec;
  const fs::path include = fs::weakly_canonical(fs::path(api.path)).parent_path().parent_path() / "include";
  if (fs::exists(include / "cuda_fp16.h", ec)) api.include_dir = include.string();
  return out;
}

}  // namespace

const CudaDriverApi& cuda_driver() {
  static std::mutex mutex;
  static std::map<std::string, LoadedDriver>* loaded = new std::map<std::string, LoadedDriver>;  // never freed: devices outlive statics
  const std::string path = env_string(EnvVar::CudaDriver).value_or("libcuda.so.1");
  std::lock_guard lock(mutex);
  auto it = loaded->find(path);
  if (it == loaded->end()) {
    it = loaded->emplace(path, LoadedDriver{}).first;
    load_driver(path, it->second);
  }
  if (it->second.failure) throw *it->second.failure;
  return it->second.api;
}

std::string cu_status_text(cu::CUresult status) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const CudaDriverApi* api = g_named_driver.load()) {
    if (api->cuGetErrorName(status, &name) != cu::CUDA_SUCCESS) name = nullptr;
    if (api->cuGetErrorString && api->cuGetErrorString(status, &text) != cu::CUDA_SUCCESS) text = nullptr;
  }
  if (!name) name = known_status_name(status);
  if (!name) return fmt::format("CUDA status {}", status);
  if (!text) return fmt::format("{} ({})", name, status);
  return fmt::format("{} ({}): {}", name, status, text);
}

void check_cu(cu::CUresult status, std::string_view what, ErrorKind kind) {
  if (status != cu::CUDA_SUCCESS) throw make_error(kind, "{}: {}", what, cu_status_text(status));
}

const NvrtcApi& nvrtc_api() {
  static std::mutex mutex;
  static std::map<std::string, LoadedNvrtc>* loaded = new std::map<std::string, LoadedNvrtc>;
  const std::optional<std::string> cuda_path = env_string(EnvVar::CudaPath);
  std::lock_guard lock(mutex);
  auto it = loaded->find(cuda_path.value_or(""));
  if (it == loaded->end()) it = loaded->emplace(cuda_path.value_or(""), load_nvrtc(cuda_path)).first;
  if (it->second.failure) throw *it->second.failure;
  return it->second.api;
}

}  // namespace svod::detail
