#include "svod/guard/running_op.h"

#include <fmt/format.h>

namespace svod {

SVOD_HOT_THREAD_LOCAL const RunningOp* running_op = nullptr;

std::string op_name(const RunningOp& op) {
  std::string name = fmt::format("plan op {}", op.index);
  if (const std::string& label = op.label(op.plan, op.index); !label.empty()) name += " (" + label + ")";
  return name;
}

}  // namespace svod
