// WorkerThread: an in-order command list run by one thread of its own, with
// timeline values. Plans run on it asynchronously (ExecutionPlan::
// execute_async) and hand it their collectives, which block until the
// other ranks arrive and so must not hold a pool thread.
//
// Commands run one after the other on the worker, so the submitting thread
// can run ahead and prepare more work. Each submission returns its timeline
// value (1, 2, 3, ...); wait(v) blocks until command v and everything before
// it completed. A command that throws does not stop the worker: its error is
// kept and thrown by the first wait/synchronize that covers its value, and
// the commands submitted after it are skipped until then, since they usually
// consume its results. Submitting from several threads at once is safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace svod {

class WorkerThread {
 public:
  WorkerThread();
  // Finishes every submitted command, then stops the worker. Errors that
  // were never waited for are dropped.
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Queues `work` and returns its timeline value; Error(Validation) when it
  // is empty.
  uint64_t submit(std::function<void()> work);

  // Blocks until command `value` completed (0 returns at once). Throws the
  // error of a failed command with a value <= `value`, once; a value never
  // submitted is Error(Validation), since waiting for it would never end.
  void wait(uint64_t value);
  // wait(last_submitted()).
  void synchronize();

  uint64_t last_submitted() const;
  uint64_t last_completed() const;

 private:
  struct Command {
    uint64_t value;
    std::function<void()> work;
  };
  struct Failure {
    uint64_t value;
    std::exception_ptr error;
    size_t skipped = 0;
  };

  void worker_loop();

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<Command> pending_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  std::optional<Failure> failure_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace svod
