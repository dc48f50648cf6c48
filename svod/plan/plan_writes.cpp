#include "svod/plan/plan_writes.h"

#include <variant>

namespace svod {

std::set<uint64_t> written_storages(const ExecutionPlan& plan) {
  std::set<uint64_t> ids;
  for (size_t i = 0; i < plan.op_count(); ++i) {
    const PreparedOp& op = plan.op(i);
    if (const auto* k = std::get_if<PreparedKernel>(&op)) {
      const auto& params = k->program->spec().buffers;
      for (size_t b = 0; b < k->buffers.size(); ++b) {
        if (writes(params[b].access)) ids.insert(plan.buffer(k->buffers[b]).storage_id());
      }
    } else if (const auto* c = std::get_if<PreparedCopy>(&op)) {
      ids.insert(plan.buffer(c->dst).storage_id());
    } else if (const auto* f = std::get_if<PreparedCustomFunction>(&op)) {
      for (size_t b : f->buffers) ids.insert(plan.buffer(b).storage_id());
    } else if (const auto* c = std::get_if<PreparedCollective>(&op)) {
      for (size_t b : c->buffers) ids.insert(plan.buffer(b).storage_id());
      if (c->buffers.empty()) ids.insert(plan.buffer(c->dst).storage_id());
    }
  }
  return ids;
}

}  // namespace svod
