// Buffer roles: what a saved plan does with each of its base buffers
// (docs/PLAN_FORMAT.md, "Roles"). An input is bound by the caller, an output
// is read (or bound) by the caller, a constant and state keep their contents
// in the saved plan (state is changed by runs and kept between them), and
// scratch is allocated zeroed when the plan loads, with nothing stored.
//
// derive_buffer_roles() decides them from what the plan's ops do, byte by
// byte, in the plan's topological order (ExecutionPlan::op_accesses): a base
// buffer no op writes is a constant; one that some op writes and of which
// some byte is read before any op wrote that byte is state; one whose every
// read byte was written first is scratch, or an output when the caller reads
// it. Bytes are tracked in the memory the buffers are, so that several views
// of one arena are judged together: a tinygrad arena whose first op writes
// it is scratch, an accumulator that an op reads and writes is state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "svod/plan/execution_plan.h"

namespace svod {

enum class BufferRole { Input, Output, Constant, State, Scratch };

std::string_view to_string(BufferRole role) noexcept;
// "input", "output", "constant", "state" or "scratch"; Error(Validation)
// naming them for anything else.
BufferRole parse_buffer_role(std::string_view text);

// What the caller says about a plan's buffers, by slot.
struct RoleRequest {
  // Base slots the caller binds: their role is input.
  std::vector<size_t> inputs;
  // Slots (bases or views) the caller reads after a run: their base is an
  // output where the ops alone would make it scratch (state and constants
  // keep their role: their contents must be kept).
  std::vector<size_t> outputs;
  // Base slots whose role the caller chooses, over everything else.
  std::map<size_t, BufferRole> overrides;
};

// The role of every base slot of `plan` (nullopt for views: slots with
// ExecutionPlan::view). Error(Validation) naming the slot for an input or an
// override on a view, or a slot out of range.
std::vector<std::optional<BufferRole>> derive_buffer_roles(const ExecutionPlan& plan, const RoleRequest& request);

// The base slot `slot` is part of (itself when it is no view).
size_t base_slot(const ExecutionPlan& plan, size_t slot);

// Where a buffer's bytes are, [begin, end) in `space`: host memory by
// address (space UINT64_MAX, as for hazards: two storages over the same host memory are the same
// bytes), device memory by its storage's id and offset.
struct BufferPlace {
  uint64_t space = UINT64_MAX;
  uint64_t begin = 0;
  uint64_t end = 0;
};
BufferPlace place_of(const Buffer& buffer);

}  // namespace svod
