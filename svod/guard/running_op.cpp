#include "svod/guard/running_op.h"

namespace svod {

SVOD_HOT_THREAD_LOCAL const RunningOp* running_op = nullptr;

std::string op_name(const RunningOp& op) { return op_name(op.index, op.id_or_label(op.plan, op.index)); }

}  // namespace svod
