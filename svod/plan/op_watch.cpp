#include "svod/plan/op_watch.h"

#include "svod/guard/isolation.h"

namespace svod {

OpWatch::OpWatch(PlanObserver& inner, std::span<const OpDescription> ops) : inner_(&inner), running_(ops.size()) {
  for (const OpDescription& op : ops) titles_.push_back(op.title);
  isolation_title_ops(titles_);
}

void OpWatch::op_started(size_t op) noexcept {
  running_[op].store(true, std::memory_order_relaxed);
  isolation_op_started(op);
  inner_->op_started(op);
}

void OpWatch::op_finished(size_t op) noexcept {
  inner_->op_finished(op);
  isolation_op_finished(op);
  running_[op].store(false, std::memory_order_relaxed);
}

std::string OpWatch::running() const {
  std::string text;
  for (size_t op = 0; op < running_.size(); ++op) {
    if (!running_[op].load(std::memory_order_relaxed)) continue;
    if (!text.empty()) text += ", ";
    text += titles_[op];
  }
  return text;
}

}  // namespace svod
