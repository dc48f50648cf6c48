#include "svod/executor/plan_execution.h"

namespace svod {

bool plan_uses_devices(const ExecutionPlan& plan) {
  for (size_t b = 0; b < plan.buffer_count(); ++b)
    if (plan.buffer(b).valid() && !plan.buffer(b).device().queue().runs_inline()) return true;
  for (size_t i = 0; i < plan.op_count(); ++i)
    if (const auto* k = std::get_if<PreparedKernel>(&plan.op(i)); k && !k->program->device().queue().runs_inline())
      return true;
  return false;
}

}  // namespace svod
