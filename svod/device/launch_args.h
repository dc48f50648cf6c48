// LaunchArgs: the arguments of one kernel launch, the one record every launch
// path takes — Program::launch and time_launch, Queue::launch, a graph's
// KernelLaunch — and KernelArgs, the same owning what it names, for launches
// kept to be made later (the executor's kernel nodes, the tuner's and the
// benchmarks' candidates).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "svod/device/buffer.h"
#include "svod/program/launch_layout.h"

namespace svod {

// `buffers` in declared order; `scalars` for every declared scalar except
// core_id, in declared order; `dims`, when set, replaces the launch sizes
// the spec gives for these scalars (plans pass sizes over their variables;
// on the CPU global[0] is the number of core_id slices).
struct LaunchArgs {
  std::span<const Buffer> buffers;
  std::span<const int64_t> scalars;
  const LaunchDims* dims = nullptr;
};

struct KernelArgs {
  std::vector<Buffer> buffers;
  std::vector<int64_t> scalars;
  std::optional<LaunchDims> dims;

  LaunchArgs view() const noexcept { return {buffers, scalars, dims ? &*dims : nullptr}; }
};

}  // namespace svod
