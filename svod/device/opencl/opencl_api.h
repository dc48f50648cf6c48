// The OpenCL ICD loader (libOpenCL.so.1), opened with dlopen on first use.
//
// svod links no OpenCL library, so it loads and runs on machines without
// one; only opening a CL device needs it. The table holds the entry points
// the OpenCL device uses, typed from the Khronos headers (OpenCL 1.2 API).
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <string>
#include <string_view>

#include "svod/base/error.h"

namespace svod::detail {

struct OpenClApi {
#define SVOD_CL_FN(name) decltype(&::name) name = nullptr;
  SVOD_CL_FN(clGetPlatformIDs)
  SVOD_CL_FN(clGetPlatformInfo)
  SVOD_CL_FN(clGetDeviceIDs)
  SVOD_CL_FN(clGetDeviceInfo)
  SVOD_CL_FN(clCreateContext)
  SVOD_CL_FN(clReleaseContext)
  SVOD_CL_FN(clCreateCommandQueue)
  SVOD_CL_FN(clReleaseCommandQueue)
  SVOD_CL_FN(clCreateBuffer)
  SVOD_CL_FN(clCreateSubBuffer)
  SVOD_CL_FN(clReleaseMemObject)
  SVOD_CL_FN(clEnqueueFillBuffer)
  SVOD_CL_FN(clEnqueueReadBuffer)
  SVOD_CL_FN(clEnqueueWriteBuffer)
  SVOD_CL_FN(clEnqueueCopyBuffer)
  SVOD_CL_FN(clCreateProgramWithSource)
  SVOD_CL_FN(clBuildProgram)
  SVOD_CL_FN(clGetProgramBuildInfo)
  SVOD_CL_FN(clReleaseProgram)
  SVOD_CL_FN(clCreateKernel)
  SVOD_CL_FN(clReleaseKernel)
  SVOD_CL_FN(clGetKernelInfo)
  SVOD_CL_FN(clSetKernelArg)
  SVOD_CL_FN(clEnqueueNDRangeKernel)
  SVOD_CL_FN(clWaitForEvents)
  SVOD_CL_FN(clGetEventInfo)
  SVOD_CL_FN(clGetEventProfilingInfo)
  SVOD_CL_FN(clSetEventCallback)
  SVOD_CL_FN(clRetainEvent)
  SVOD_CL_FN(clReleaseEvent)
  SVOD_CL_FN(clFlush)
  SVOD_CL_FN(clFinish)
  SVOD_CL_FN(clEnqueueMarkerWithWaitList)
#undef SVOD_CL_FN
};

// The loaded table; Error(DeviceUnavailable) saying why when the loader
// cannot be opened or lacks an entry point. Loaded once per process.
const OpenClApi& opencl_api();

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL status code.
std::string cl_status_text(cl_int status);

// Throws Error(kind) "<what>: <status text>" when status is not CL_SUCCESS.
void check_cl(cl_int status, std::string_view what, ErrorKind kind = ErrorKind::Execution);

}  // namespace svod::detail
