// Questions about where a plan's work runs.
//
// Plans run on every device through their own runner (execution_plan.h),
// which submits each op to its device's queue; nothing here runs a plan.
#pragma once

#include "svod/plan/execution_plan.h"

namespace svod {

// True when some buffer or kernel of the plan is on a device whose queue
// does not run on the host (OpenCL, CUDA).
bool plan_uses_devices(const ExecutionPlan& plan);

}  // namespace svod
