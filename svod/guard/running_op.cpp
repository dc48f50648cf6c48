#include "svod/guard/running_op.h"

namespace svod {

SVOD_HOT_THREAD_LOCAL const RunningOp* running_op = nullptr;

}  // namespace svod
