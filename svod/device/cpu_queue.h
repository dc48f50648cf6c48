// CpuQueue: an in-order command queue run by a host worker thread (the CPU
// device's asynchronous queue; any device's programs and copies may be
// submitted, since it calls Program::launch and Device::copy).
//
// Kernel launches, copies and host callbacks are queued and run one after the
// other on the queue's own worker thread, so the submitting thread can run
// ahead and prepare more work. Each submission returns its timeline value
// (1, 2, 3, ...); wait(v) blocks until command v and everything before it
// completed. A command that throws does not stop the worker: its error is kept
// and thrown by the first wait/synchronize that covers its value, and the
// commands submitted after it are skipped until then, since they usually
// consume its results. Kernels with core_id slices still fan out over the
// thread pool. Submitting from several threads at once is safe.
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
#include <vector>

#include "svod/device/device.h"

namespace svod {

class CpuQueue {
 public:
  CpuQueue();
  // Finishes every submitted command, then stops the worker. Errors that
  // were never waited for are dropped.
  ~CpuQueue();
  CpuQueue(const CpuQueue&) = delete;
  CpuQueue& operator=(const CpuQueue&) = delete;

  // Program::launch(buffers, scalars) on the worker. Buffer and scalar counts
  // are checked now (Error(Validation)); everything else when it runs.
  uint64_t submit_launch(std::shared_ptr<const Program> program, std::vector<Buffer> buffers,
                         std::vector<int64_t> scalars);
  // dst <- src (equal byte sizes, checked now).
  uint64_t submit_copy(Buffer dst, Buffer src);
  uint64_t submit_callback(std::function<void()> callback);

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
    const char* kind;
    std::function<void()> work;
  };
  struct Failure {
    uint64_t value;
    const char* kind;
    std::exception_ptr error;
    size_t skipped = 0;
  };

  uint64_t submit(const char* kind, std::function<void()> work);
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
