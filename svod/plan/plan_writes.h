// What a plan's ops write, read from the ops themselves: the storages a
// caller's arrays must be writable to be bound at, and the buffers a failed
// run may have left half-written.
#pragma once

#include <cstdint>
#include <set>

#include "svod/plan/execution_plan.h"

namespace svod {

// The storage ids (Buffer::storage_id) that some op of `plan` writes, by the
// ops' resolved accesses (ExecutionPlan::op_accesses): kernels' written
// parameters, copies' destinations, collectives' written buffers, the
// buffers a custom function's validator declared written.
std::set<uint64_t> written_storages(const ExecutionPlan& plan);

}  // namespace svod
