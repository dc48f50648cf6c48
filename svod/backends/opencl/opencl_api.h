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

// Every entry point the OpenCL device uses, declared once: the table's
// members and their lookups in opencl_api.cpp are generated from this list.
#define SVOD_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs) \
  X(clGetPlatformInfo) \
  X(clGetDeviceIDs) \
  X(clGetDeviceInfo) \
  X(clCreateContext) \
  X(clReleaseContext) \
  X(clCreateCommandQueue) \
  X(clReleaseCommandQueue) \
  X(clCreateBuffer) \
  X(clCreateSubBuffer) \
  X(clReleaseMemObject) \
  X(clEnqueueFillBuffer) \
  X(clEnqueueReadBuffer) \
  X(clEnqueueWriteBuffer) \
  X(clEnqueueCopyBuffer) \
  X(clCreateProgramWithSource) \
  X(clBuildProgram) \
  X(clGetProgramBuildInfo) \
  X(clReleaseProgram) \
  X(clCreateKernel) \
  X(clReleaseKernel) \
  X(clGetKernelInfo) \
  X(clSetKernelArg) \
  X(clEnqueueNDRangeKernel) \
  X(clWaitForEvents) \
  X(clGetEventInfo) \
  X(clGetEventProfilingInfo) \
  X(clSetEventCallback) \
  X(clRetainEvent) \
  X(clReleaseEvent) \
  X(clFlush) \
  X(clFinish) \
  X(clEnqueueMarkerWithWaitList) \
  X(clGetProgramInfo) \
  X(clCreateProgramWithBinary)

struct OpenClApi {
#define SVOD_CL_MEMBER(name) decltype(&::name) name = nullptr;
  SVOD_OPENCL_FUNCTIONS(SVOD_CL_MEMBER)
#undef SVOD_CL_MEMBER
};

// The loaded table; Error(DeviceUnavailable) saying why when the loader
// cannot be opened or lacks an entry point. Loaded once per process.
const OpenClApi& opencl_api();

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL status code.
std::string cl_status_text(cl_int status);

// Throws Error(kind) "<what>: <status text>" when status is not CL_SUCCESS.
void check_cl(cl_int status, std::string_view what, ErrorKind kind = ErrorKind::Execution);

// A string property of a device or platform (its name, version...); empty
// when the query fails: these only describe, so they never throw.
std::string cl_device_string(cl_device_id device, cl_device_info what);
std::string cl_platform_string(cl_platform_id platform, cl_platform_info what);

}  // namespace svod::detail
