// How svod names the ops of a plan, in every table, trace, report and error:
// what kind of op it is (OpKind).
#pragma once

#include <cstdint>
#include <string_view>

namespace svod {

// The kinds of plan op (svod/plan/execution_plan.h's PlanOp alternatives).
enum class OpKind : uint8_t { Kernel, Copy, Custom, Collective, View };

// The kind's one spelling: "kernel", "copy", "custom", "collective", "view".
std::string_view to_string(OpKind kind) noexcept;

}  // namespace svod
