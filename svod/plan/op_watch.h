// OpWatch: which ops of a plan's executions are running, for the report of
// a run that runs out of time, is stuck on another rank or dies (svod run's
// --timeout, --ranks and --isolate). A PlanObserver that passes every op on
// to another observer (a profiler) and, in an isolated run's child
// (svod/guard/isolation.h), records them where the waiting process reads
// them however the child ends.
#pragma once

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "svod/plan/execution_plan.h"
#include "svod/plan/op_description.h"

namespace svod {

class OpWatch final : public PlanObserver {
 public:
  // Watches the ops `ops` describes (describe_ops), passing them to `inner`.
  OpWatch(PlanObserver& inner, std::span<const OpDescription> ops);
  // Passes the ops on to `inner` from the next execution on.
  void pass_to(PlanObserver& inner) noexcept { inner_ = &inner; }
  void op_started(size_t op) noexcept override;
  void op_finished(size_t op) noexcept override;
  // The running ops' titles ("op 2 (layer3) kernel layer3, ..."), or empty.
  std::string running() const;

 private:
  PlanObserver* inner_;
  std::vector<std::string> titles_;
  std::vector<std::atomic<bool>> running_;
};

}  // namespace svod
