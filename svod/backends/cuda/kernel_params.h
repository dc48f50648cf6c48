// Packing a CUDA launch's kernelParams array from svod's argument model.
//
// cuLaunchKernel and graph kernel nodes take `void** kernelParams`: one
// pointer per kernel parameter, each pointing at the parameter's bytes, which
// the driver copies at launch (or when a graph node's parameters are set). A
// kernel's parameters follow the CPU ABI: every buffer parameter in declared
// order (a CUdeviceptr, 8 bytes), then every scalar as int32_t (i32) or
// int64_t (i64). Each value sits in its own 8-byte slot, so the block has no
// pointers into anything but itself.
//
// This is a pure function of its inputs so that it can be tested without a
// GPU.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "svod/program/program_spec.h"

namespace svod {

class CudaKernelParams {
 public:
  // More than any CUDA kernel svod builds takes; launches with more are refused.
  static constexpr size_t kMaxParams = 128;

  CudaKernelParams() = default;
  // Copies re-point the pointer array at their own slots.
  CudaKernelParams(const CudaKernelParams& other) { *this = other; }
  CudaKernelParams& operator=(const CudaKernelParams& other) {
    count_ = other.count_;
    std::memcpy(slots_.data(), other.slots_.data(), count_ * sizeof(uint64_t));
    for (size_t i = 0; i < count_; ++i) pointers_[i] = &slots_[i];
    return *this;
  }

  size_t size() const noexcept { return count_; }
  // The kernelParams array for cuLaunchKernel / KernelNodeParams.
  void** pointers() noexcept { return pointers_.data(); }
  // The bytes of parameter i (8, of which an i32 uses the first 4).
  const void* slot(size_t i) const noexcept { return &slots_[i]; }
  // Equal when every parameter has the same bytes.
  bool same_values(const CudaKernelParams& other) const noexcept {
    return count_ == other.count_ && std::memcmp(slots_.data(), other.slots_.data(), count_ * sizeof(uint64_t)) == 0;
  }

  // Fills the block: `device_pointers` for the buffer parameters, then
  // `abi_scalars` (every declared scalar, in order) converted to the type
  // `scalars` declares for it. The values must already be in range (the
  // launch layout checks them). Error(Validation) when the counts disagree
  // or exceed kMaxParams.
  void pack(std::span<const uint64_t> device_pointers, std::span<const ScalarParam> scalars,
            std::span<const int64_t> abi_scalars);

 private:
  size_t count_ = 0;
  std::array<uint64_t, kMaxParams> slots_{};
  std::array<void*, kMaxParams> pointers_{};
};

}  // namespace svod
