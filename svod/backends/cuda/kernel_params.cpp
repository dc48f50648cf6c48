#include "svod/backends/cuda/kernel_params.h"

#include "svod/base/error.h"

namespace svod {

void CudaKernelParams::pack(std::span<const uint64_t> device_pointers, std::span<const ScalarParam> scalars,
                            std::span<const int64_t> abi_scalars) {
  if (scalars.size() != abi_scalars.size())
    throw make_error(ErrorKind::Validation, "kernel parameters: {} scalars declared, {} values given", scalars.size(),
                     abi_scalars.size());
  const size_t count = device_pointers.size() + scalars.size();
  if (count > kMaxParams)
    throw make_error(ErrorKind::Validation, "kernel parameters: {} parameters; svod passes at most {} to a CUDA kernel",
                     count, kMaxParams);
  count_ = count;
  size_t at = 0;
  for (uint64_t pointer : device_pointers) slots_[at++] = pointer;
  for (size_t s = 0; s < scalars.size(); ++s, ++at) {
    slots_[at] = 0;  // unused high bytes stay zero, so same_values compares only what the kernel reads
    if (scalars[s].type == ScalarType::I32) {
      const auto value = static_cast<int32_t>(abi_scalars[s]);
      std::memcpy(&slots_[at], &value, sizeof(value));
    } else {
      const int64_t value = abi_scalars[s];
      std::memcpy(&slots_[at], &value, sizeof(value));
    }
  }
  for (size_t i = 0; i < count_; ++i) pointers_[i] = &slots_[i];
}

}  // namespace svod
