// The CUDA driver (libcuda.so.1) and NVRTC (libnvrtc.so), opened with dlopen
// on first use.
//
// svod links no CUDA library and includes no CUDA header, so it builds and
// loads on machines without a toolkit or a GPU. The handful of types, enum
// values and signatures the CUDA device uses are declared here by hand, after
// the CUDA 12 driver API (cuda.h) and NVRTC (nvrtc.h); they live in
// svod::cu so they never clash with the real headers in a program that also
// includes them.
//
// Driver entry points are resolved through cuGetProcAddress (the CUDA 12
// form, cuGetProcAddress_v2) asking for the CUDA 12.0 ABI, so every pointer
// has the signature declared below whatever the driver's own version; only
// cuGetProcAddress itself is looked up with dlsym.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "svod/base/error.h"

namespace svod::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CtxHandle*;
using CUmodule = struct ModuleHandle*;
using CUfunction = struct FunctionHandle*;
using CUkernel = struct KernelHandle*;
using CUstream = struct StreamHandle*;
using CUevent = struct EventHandle*;
using CUgraph = struct GraphHandle*;
using CUgraphNode = struct GraphNodeHandle*;
using CUgraphExec = struct GraphExecHandle*;

// CUresult values svod tests for.
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_INSUFFICIENT_DRIVER = 35;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;

// Device attributes (CUdevice_attribute).
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;
inline constexpr uint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;

// CUDA_KERNEL_NODE_PARAMS as of CUDA 12 (the _v2 layout, which the CUDA 12.0
// ABI of cuGraphAddKernelNode and cuGraphExecKernelNodeSetParams takes).
struct KernelNodeParams {
  CUfunction func = nullptr;
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned sharedMemBytes = 0;
  void** kernelParams = nullptr;
  void** extra = nullptr;
  CUkernel kern = nullptr;  // used only when func is null
  CUcontext ctx = nullptr;  // ignored when func is set
};

using nvrtcResult = int;
using nvrtcProgram = struct NvrtcProgramHandle*;
inline constexpr nvrtcResult NVRTC_SUCCESS = 0;

}  // namespace svod::cu

namespace svod::detail {

// The driver entry points the CUDA device calls, each declared once here as
// X(name, (parameters)), all returning CUresult: the table's members and the
// lookups in cuda_api.cpp are both generated from these lists. The first list
// is looked up before the others, so that errors can be named early.
#define SVOD_CUDA_DRIVER_FIRST(X) \
  X(cuGetErrorName, (R error, const char** name)) \
  X(cuGetErrorString, (R error, const char** text)) \
  X(cuInit, (unsigned flags))
#define SVOD_CUDA_DRIVER_REST(X) \
  X(cuDriverGetVersion, (int* version)) \
  X(cuDeviceGetCount, (int* count)) \
  X(cuDeviceGet, (cu::CUdevice* device, int ordinal)) \
  X(cuDeviceGetName, (char* name, int length, cu::CUdevice device)) \
  X(cuDeviceGetAttribute, (int* value, int attribute, cu::CUdevice device)) \
  X(cuDeviceTotalMem, (size_t* bytes, cu::CUdevice device)) \
  X(cuDevicePrimaryCtxRetain, (cu::CUcontext* context, cu::CUdevice device)) \
  X(cuDevicePrimaryCtxRelease, (cu::CUdevice device)) \
  X(cuCtxSetCurrent, (cu::CUcontext context)) \
  X(cuCtxSynchronize, ()) \
  X(cuMemAlloc, (cu::CUdeviceptr* pointer, size_t bytes)) \
  X(cuMemFree, (cu::CUdeviceptr pointer)) \
  X(cuMemHostAlloc, (void** pointer, size_t bytes, unsigned flags)) \
  X(cuMemFreeHost, (void* pointer)) \
  X(cuMemsetD8Async, (cu::CUdeviceptr pointer, unsigned char value, size_t count, cu::CUstream stream)) \
  X(cuMemcpyHtoDAsync, (cu::CUdeviceptr dst, const void* src, size_t bytes, cu::CUstream stream)) \
  X(cuMemcpyDtoHAsync, (void* dst, cu::CUdeviceptr src, size_t bytes, cu::CUstream stream)) \
  X(cuMemcpyDtoDAsync, (cu::CUdeviceptr dst, cu::CUdeviceptr src, size_t bytes, cu::CUstream stream)) \
  X(cuModuleLoadData, (cu::CUmodule* module, const void* image)) \
  X(cuModuleUnload, (cu::CUmodule module)) \
  X(cuModuleGetFunction, (cu::CUfunction* function, cu::CUmodule module, const char* name)) \
  X(cuLaunchKernel, (cu::CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes, cu::CUstream stream, void** params, void** extra)) \
  X(cuStreamCreate, (cu::CUstream* stream, unsigned flags)) \
  X(cuStreamDestroy, (cu::CUstream stream)) \
  X(cuStreamSynchronize, (cu::CUstream stream)) \
  X(cuEventCreate, (cu::CUevent* event, unsigned flags)) \
  X(cuEventDestroy, (cu::CUevent event)) \
  X(cuEventRecord, (cu::CUevent event, cu::CUstream stream)) \
  X(cuEventSynchronize, (cu::CUevent event)) \
  X(cuEventElapsedTime, (float* milliseconds, cu::CUevent start, cu::CUevent end)) \
  X(cuStreamWaitEvent, (cu::CUstream stream, cu::CUevent event, unsigned flags)) \
  X(cuEventQuery, (cu::CUevent event)) \
  X(cuGraphCreate, (cu::CUgraph* graph, unsigned flags)) \
  X(cuGraphDestroy, (cu::CUgraph graph)) \
  X(cuGraphAddKernelNode, (cu::CUgraphNode* node, cu::CUgraph graph, const cu::CUgraphNode* dependencies, size_t count, const cu::KernelNodeParams* params)) \
  X(cuGraphInstantiateWithFlags, (cu::CUgraphExec* exec, cu::CUgraph graph, unsigned long long flags)) \
  X(cuGraphExecKernelNodeSetParams, (cu::CUgraphExec exec, cu::CUgraphNode node, const cu::KernelNodeParams* params)) \
  X(cuGraphLaunch, (cu::CUgraphExec exec, cu::CUstream stream)) \
  X(cuGraphExecDestroy, (cu::CUgraphExec exec))

struct CudaDriverApi {
  using R = cu::CUresult;
#define SVOD_CUDA_MEMBER(name, params) R(*name) params = nullptr;
  SVOD_CUDA_DRIVER_FIRST(SVOD_CUDA_MEMBER)
  SVOD_CUDA_DRIVER_REST(SVOD_CUDA_MEMBER)
#undef SVOD_CUDA_MEMBER

  std::string path;        // the library opened
  int driver_version = 0;  // 1000 * major + 10 * minor
};

// The driver at SVOD_CUDA_DRIVER (default libcuda.so.1), loaded and
// initialised (cuInit) once per path. Error(DeviceUnavailable) saying which
// case holds: no driver library, a library without cuGetProcAddress (too
// old), the toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), a driver older
// than CUDA 12.0, or cuInit failing (no device, driver/kernel mismatch).
const CudaDriverApi& cuda_driver();

// "CUDA_ERROR_INVALID_VALUE (1): invalid argument" for a driver status.
std::string cu_status_text(cu::CUresult status);

// Throws Error(kind) "<what>: <status text>" when status is not CUDA_SUCCESS.
void check_cu(cu::CUresult status, std::string_view what, ErrorKind kind = ErrorKind::Execution);

struct NvrtcApi {
  using R = cu::nvrtcResult;
  R (*nvrtcVersion)(int* major, int* minor) = nullptr;
  const char* (*nvrtcGetErrorString)(R result) = nullptr;
  R (*nvrtcCreateProgram)(cu::nvrtcProgram* program, const char* source, const char* name, int header_count,
                          const char* const* headers, const char* const* include_names) = nullptr;
  R (*nvrtcDestroyProgram)(cu::nvrtcProgram* program) = nullptr;
  R (*nvrtcCompileProgram)(cu::nvrtcProgram program, int option_count, const char* const* options) = nullptr;
  R (*nvrtcGetProgramLogSize)(cu::nvrtcProgram program, size_t* size) = nullptr;
  R (*nvrtcGetProgramLog)(cu::nvrtcProgram program, char* log) = nullptr;
  R (*nvrtcGetPTXSize)(cu::nvrtcProgram program, size_t* size) = nullptr;
  R (*nvrtcGetPTX)(cu::nvrtcProgram program, char* ptx) = nullptr;
  R (*nvrtcGetCUBINSize)(cu::nvrtcProgram program, size_t* size) = nullptr;
  R (*nvrtcGetCUBIN)(cu::nvrtcProgram program, char* cubin) = nullptr;

  std::string path;          // the library opened
  std::string include_dir;   // the toolkit's include folder beside it, when present
  int major = 0, minor = 0;  // nvrtcVersion
};

// NVRTC, found as libnvrtc.so under $SVOD_CUDA_PATH/lib64 or /lib when
// SVOD_CUDA_PATH is set, else under /usr/local/cuda/lib64 and /lib, else by
// its soname; loaded once per SVOD_CUDA_PATH value. Error(DeviceUnavailable)
// when it is absent or incomplete.
const NvrtcApi& nvrtc_api();

}  // namespace svod::detail
