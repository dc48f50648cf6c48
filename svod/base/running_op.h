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

// Thread-locals read on every launch: `__thread` (no initialisation guard)
// in the initial-exec model, one %fs-relative access where the general model
// calls __tls_get_addr (about 14 ns a launch, measured).
#define SVOD_HOT_THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))

extern SVOD_HOT_THREAD_LOCAL const RunningOp* running_op;

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
