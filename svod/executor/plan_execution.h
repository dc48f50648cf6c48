// Running an ExecutionPlan through the UnifiedExecutor.
//
// ExecutionPlan::execute() runs every op on the host thread pool and waits
// for device work op by op. A plan whose ops live on several devices (CPU and
// CL:0) runs better as an executor graph: each op on its own device's queue,
// device-to-device dependencies as events, host waits only where needed. The
// graph is built from the plan's ops, current buffers and variable values on
// every call, so rebinding and new variable values take effect.
#pragma once

#include "svod/executor/executor.h"
#include "svod/plan/execution_plan.h"

namespace svod {

// True when some buffer or kernel of the plan is on a device other than the CPU.
bool plan_uses_devices(const ExecutionPlan& plan);

// The plan's ops as graph nodes (node i is op i, labelled with its id): kernels
// with their scalars and launch sizes evaluated from the plan's variables and
// fixed values, copies, custom functions as host nodes (which see no plan
// variables), view ops as empty host nodes. Edges are the plan's
// predecessors, which the graph's own hazard analysis reproduces.
ExecutionGraph graph_from_plan(const ExecutionPlan& plan);

// graph_from_plan(plan) run by `executor`. ExecuteOptions::sequential and
// ::observer carry over. Unlike ExecutionPlan::execute, a failure does not
// poison the plan.
void execute_plan_on(UnifiedExecutor& executor, const ExecutionPlan& plan, const ExecuteOptions& options = {},
                     SyncStrategy strategy = SyncStrategy::DeviceEvents);

}  // namespace svod
