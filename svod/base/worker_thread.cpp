#include "svod/base/worker_thread.h"

#include "svod/base/error.h"
#include "svod/base/rethrow.h"

namespace svod {

WorkerThread::WorkerThread() : worker_([this] { worker_loop(); }) {}

WorkerThread::~WorkerThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  worker_.join();
}

uint64_t WorkerThread::submit(std::function<void()> work) {
  if (!work) throw make_error(ErrorKind::Validation, "WorkerThread::submit: empty command");
  uint64_t value;
  {
    std::lock_guard lock(mutex_);
    value = ++submitted_;
    pending_.push_back(Command{value, std::move(work)});
  }
  work_ready_.notify_one();
  return value;
}

void WorkerThread::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and everything ran
    Command command = std::move(pending_.front());
    pending_.pop_front();
    if (failure_) {
      ++failure_->skipped;
    } else {
      lock.unlock();
      std::exception_ptr error;
      try {
        command.work();
      } catch (...) {
        error = std::current_exception();
      }
      // The command's captures (buffers, plans) are released before it
      // counts as complete, so a waiter sees them gone.
      command.work = nullptr;
      lock.lock();
      if (error) failure_ = Failure{command.value, error};
    }
    completed_ = command.value;
    work_done_.notify_all();
  }
}

void WorkerThread::wait(uint64_t value) {
  std::unique_lock lock(mutex_);
  if (value > submitted_)
    throw make_error(ErrorKind::Validation, "WorkerThread::wait({}): only {} commands were submitted", value,
                     submitted_);
  work_done_.wait(lock, [&] { return completed_ >= value; });
  if (!failure_ || failure_->value > value) return;
  Failure failure = std::move(*failure_);
  failure_.reset();
  lock.unlock();
  const std::string where =
      failure.skipped == 0
          ? fmt::format("worker command {} failed", failure.value)
          : fmt::format("worker command {} failed and the {} command{} after it {} skipped", failure.value,
                        failure.skipped, failure.skipped == 1 ? "" : "s", failure.skipped == 1 ? "was" : "were");
  rethrow_with_context(failure.error, where);
}

void WorkerThread::synchronize() {
  uint64_t last;
  {
    std::lock_guard lock(mutex_);
    last = submitted_;
  }
  wait(last);
}

uint64_t WorkerThread::last_submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

uint64_t WorkerThread::last_completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

}  // namespace svod
