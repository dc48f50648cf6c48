// NvrtcCompiler: CUDA C to PTX or a cubin through NVRTC, in process.
//
// The target decides the artifact: "compute_XY" gives PTX (the driver JITs it
// for the device at load; needs no GPU to produce), "sm_XY" gives a cubin of
// that architecture (nvrtcGetCUBIN; loads without a JIT step). The identity
// holds NVRTC's version and library path, the target and every option, so the
// object cache never hands a cubin for one architecture to another.
//
// Kernels are CUDA C++ as NVRTC reads it; the entry must be declared
// `extern "C" __global__` so that its name is not mangled. Defines become
// -DNAME=VALUE options; the toolkit's include folder, when found beside
// NVRTC, is on the include path.
#pragma once

#include <string>

#include "svod/compile/compiler.h"

namespace svod {

// The CUDA device's language and what NVRTC makes of it.
inline constexpr Language kCudaLanguage{"cuda"};  // CUDA C++ as NVRTC reads it
inline constexpr ArtifactKind kPtx{"ptx"};        // PTX text, JIT-compiled by the driver at load
inline constexpr ArtifactKind kCubin{"cubin"};    // a cubin for one architecture

class NvrtcCompiler final : public Compiler {
 public:
  // `target` is "compute_XY" (PTX) or "sm_XY" (cubin), e.g. "sm_90".
  // Error(DeviceUnavailable) when NVRTC cannot be loaded; Error(Validation)
  // for a malformed target.
  explicit NvrtcCompiler(std::string target);

  const CompilerIdentity& identity() const override { return identity_; }
  // Error(Compile) carrying NVRTC's log; Error(Unsupported) for a language
  // other than CUDA; Error(UndefinedSymbol) when the PTX has no .entry
  // named spec.entry.
  Artifact compile(const ProgramSpec& spec) const override;

  const std::string& target() const noexcept { return target_; }
  bool produces_cubin() const noexcept { return cubin_; }

 private:
  std::string target_;
  bool cubin_ = false;
  CompilerIdentity identity_;
};

// "sm_90" for compute capability 9.0.
std::string cuda_sm_target(int major, int minor);

}  // namespace svod
