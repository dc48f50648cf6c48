// How svod names the ops of a plan, in every table, trace, report and error:
// what kind of op it is (OpKind), its name ("op 3 (mm)", written by one
// async-signal-safe writer) and its title, the name with what the op is
// ("op 3 (mm) kernel mm"). Everything that names an op composes from these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace svod {

// The kinds of plan op (svod/plan/execution_plan.h's PlanOp alternatives).
enum class OpKind : uint8_t { Kernel, Copy, Custom, Collective, View };

// The kind's one spelling: "kernel", "copy", "custom", "collective", "view".
std::string_view to_string(OpKind kind) noexcept;

// Writes the name of op `index` of a plan into `out`: "op 3", or "op 3 (mm)"
// for an op with an id or a label (`id_or_label`: its id when it has one,
// else its label). The one writer of an op's name. Async-signal-safe: it
// allocates nothing, takes no lock and stops at out's end, so the fault
// handler names an op as errors do. Returns the length of the whole name,
// more than out.size() when it was cut.
size_t write_op_name(std::span<char> out, size_t index, std::string_view id_or_label) noexcept;

// write_op_name's name, whole, as a string.
std::string op_name(size_t index, std::string_view id_or_label);

// "op 3 (mm) kernel mm": an op's name (op_name; may be empty for work that
// is no plan op, "kernel mm"), its kind and what it runs (`what`: a kernel's
// program, a custom function, a collective's kind, a copy's "dst <- src";
// may be empty).
std::string op_title(std::string_view name, OpKind kind, std::string_view what);

}  // namespace svod
