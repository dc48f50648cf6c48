// OpenClCompiler: OpenCL C to a device binary (CL_PROGRAM_BINARIES) for one
// OpenCL device, so that OpenCL programs go through the same Compiler ->
// Artifact -> object cache path as CPU objects and CUDA cubins: a warm disk
// cache loads binaries (clCreateProgramWithBinary) and builds no program from
// source.
//
// The identity holds the platform, the device, its OpenCL and driver
// versions, so a driver update or another device never gets a stale binary.
// Defines become -DNAME=VALUE build options.
#pragma once

#include <string>

#include "svod/compile/compiler.h"

struct _cl_context;
struct _cl_device_id;

namespace svod {

// The OpenCL device's language and what its compiler makes of it.
inline constexpr Language kOpenClLanguage{"opencl"};           // OpenCL C
inline constexpr ArtifactKind kOpenClBinary{"opencl_binary"};  // CL_PROGRAM_BINARIES of one device

class OpenClCompiler final : public Compiler {
 public:
  // Compiles for `device` in `context`; `device_name` names it in errors
  // ("CL:0"). Both handles must outlive the compiler.
  OpenClCompiler(_cl_context* context, _cl_device_id* device, std::string device_name);

  const CompilerIdentity& identity() const override { return identity_; }
  // Error(Unsupported) for a language other than OpenCL C or a platform that
  // gives no binaries, Error(Validation) for defines that cannot be build
  // options or a core_id scalar, Error(Compile) with the build log,
  // Error(UndefinedSymbol) when no __kernel is named spec.entry.
  Artifact compile(const ProgramSpec& spec) const override;

 private:
  _cl_context* context_;
  _cl_device_id* device_;
  std::string device_name_;
  CompilerIdentity identity_;
};

// The build options for `spec` ("-DNAME=VALUE ..."); Error(Validation) when
// a value holds spaces or quotes.
std::string opencl_build_options(const ProgramSpec& spec);

}  // namespace svod
