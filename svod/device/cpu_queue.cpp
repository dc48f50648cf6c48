#include "svod/device/cpu_queue.h"

#include "svod/base/error.h"
#include "svod/base/rethrow.h"

namespace svod {

CpuQueue::CpuQueue() : worker_([this] { worker_loop(); }) {}

CpuQueue::~CpuQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  worker_.join();
}

uint64_t CpuQueue::submit(const char* kind, std::function<void()> work) {
  uint64_t value;
  {
    std::lock_guard lock(mutex_);
    value = ++submitted_;
    pending_.push_back(Command{value, kind, std::move(work)});
  }
  work_ready_.notify_one();
  return value;
}

uint64_t CpuQueue::submit_launch(std::shared_ptr<const Program> program, std::vector<Buffer> buffers,
                                 std::vector<int64_t> scalars) {
  if (!program) throw make_error(ErrorKind::Validation, "CpuQueue::submit_launch: no program");
  const ProgramSpec& spec = program->spec();
  const size_t scalar_count = spec.scalars.size() - (spec.core_id_index() ? 1 : 0);
  if (buffers.size() != spec.buffers.size() || scalars.size() != scalar_count)
    throw make_error(ErrorKind::Validation,
                     "CpuQueue::submit_launch: program \"{}\" takes {} buffers and {} scalars, got {} and {}",
                     spec.display_name(), spec.buffers.size(), scalar_count, buffers.size(), scalars.size());
  return submit("launch", [program = std::move(program), buffers = std::move(buffers),
                           scalars = std::move(scalars)] { program->launch(buffers, scalars); });
}

uint64_t CpuQueue::submit_copy(Buffer dst, Buffer src) {
  if (!dst.valid() || !src.valid() || dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "CpuQueue::submit_copy: copy of {} bytes into {} bytes; sizes must be equal",
                     src.valid() ? src.bytes() : 0, dst.valid() ? dst.bytes() : 0);
  return submit("copy", [dst = std::move(dst), src = std::move(src)] {
    (dst.is_host() ? src : dst).device().copy(dst, src);
  });
}

uint64_t CpuQueue::submit_callback(std::function<void()> callback) {
  if (!callback) throw make_error(ErrorKind::Validation, "CpuQueue::submit_callback: empty callback");
  return submit("callback", std::move(callback));
}

void CpuQueue::worker_loop() {
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
      if (error) failure_ = Failure{command.value, command.kind, error};
    }
    completed_ = command.value;
    work_done_.notify_all();
  }
}

void CpuQueue::wait(uint64_t value) {
  std::unique_lock lock(mutex_);
  if (value > submitted_)
    throw make_error(ErrorKind::Validation, "CpuQueue::wait({}): only {} commands were submitted", value, submitted_);
  work_done_.wait(lock, [&] { return completed_ >= value; });
  if (!failure_ || failure_->value > value) return;
  Failure failure = std::move(*failure_);
  failure_.reset();
  lock.unlock();
  const std::string where =
      failure.skipped == 0
          ? fmt::format("queue command {} ({}) failed", failure.value, failure.kind)
          : fmt::format("queue command {} ({}) failed and the {} command{} after it {} skipped", failure.value,
                        failure.kind, failure.skipped, failure.skipped == 1 ? "" : "s",
                        failure.skipped == 1 ? "was" : "were");
  rethrow_with_context(failure.error, where);
}

void CpuQueue::synchronize() {
  uint64_t last;
  {
    std::lock_guard lock(mutex_);
    last = submitted_;
  }
  wait(last);
}

uint64_t CpuQueue::last_submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

uint64_t CpuQueue::last_completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

}  // namespace svod
