// The plan op a thread is running, for reports that only know the thread:
// the fault report of a kernel that crashes names the op it belongs to. A
// RunningOpScope sets it around an op's host work (a pointer store and
// restore).
#pragma once

#include <cstddef>
#include <string>

namespace svod {

struct RunningOp {
  size_t index = 0;
  const std::string* label = nullptr;  // the op's id or label; may be empty
};

inline thread_local const RunningOp* running_op = nullptr;

class RunningOpScope {
 public:
  explicit RunningOpScope(const RunningOp& op) noexcept : previous_(running_op) { running_op = &op; }
  ~RunningOpScope() { running_op = previous_; }
  RunningOpScope(const RunningOpScope&) = delete;
  RunningOpScope& operator=(const RunningOpScope&) = delete;

 private:
  const RunningOp* previous_;
};

}  // namespace svod
