#include "svod/plan/plan_writes.h"

namespace svod {

std::set<uint64_t> written_storages(const ExecutionPlan& plan) {
  std::set<uint64_t> ids;
  for (size_t i = 0; i < plan.op_count(); ++i)
    for (const auto& [slot, access] : plan.op_accesses(i))
      if (writes(access)) ids.insert(plan.buffer(slot).storage_id());
  return ids;
}

}  // namespace svod
