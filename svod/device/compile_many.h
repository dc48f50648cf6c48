// compile_many: compiles a batch of kernels for one device in parallel.
//
// Each distinct spec is compiled once on the thread pool (for the CPU device
// that means several clang processes at a time), through the device's
// caches, so a batch that repeats a spec, or one already compiled, costs no
// extra compile. One failing spec does not stop the others: each position of
// the result holds the Program or the Error for the spec at that position.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "svod/base/error.h"
#include "svod/device/device.h"

namespace svod {

using CompileResult = std::variant<std::shared_ptr<const Program>, Error>;

// Called on a pool thread with a position of `specs`; calls may come
// concurrently. on_compiled: once for every position, as soon as its result
// is known. on_started: once for every distinct spec, with its first
// position, as its compile (or cache lookup) begins.
using CompileCallback = std::function<void(size_t position)>;

std::vector<CompileResult> compile_many(Device& device, std::span<const ProgramSpec> specs,
                                        const CompileCallback& on_compiled = {},
                                        const CompileCallback& on_started = {});

}  // namespace svod
