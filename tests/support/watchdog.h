// Ends the test program when a step that must finish promptly does not: a
// test of a read that could block (a FIFO where a file belongs) then fails
// loudly, naming the step, instead of hanging the test run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace svod::test {

class Watchdog {
 public:
  // Aborts the process unless the object is destroyed within `limit`.
  Watchdog(std::string what, std::chrono::milliseconds limit)
      : thread_([this, what = std::move(what), limit] {
          std::unique_lock lock(mutex_);
          if (!done_changed_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld ms; aborting\n", what.c_str(),
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace svod::test
