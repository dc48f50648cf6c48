// The compile progress line of load_plan() (plan_load.cpp), in a header of
// its own. Not part of the public API (plan_file.h is).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace svod::detail {

// The progress line of a long compile on a terminal (LoadOptions::progress_after):
//   compiling programs: 3/11 done, 4 s: layer4, layer5
// A ticker thread shows it once compiling has lasted `after`, so that even one
// long compile is visibly working, and refreshes it as programs start and end
// and every quarter second; a last line with the time taken ends it (a failed
// compile counts as done: its error follows). Without a terminal there is no
// thread and nothing is written.
class CompileProgress {
 public:
  CompileProgress(size_t total, std::chrono::milliseconds after) : total_(total) {
    if (total == 0 || isatty(STDERR_FILENO) == 0) return;
    if (after <= std::chrono::milliseconds(0)) {  // from the start
      shown_ = true;
      show();
    }
    ticker_ = std::thread([this, after] { tick(after); });
  }
  ~CompileProgress() { finish(); }

  // From any thread: a program's compile began, or ended.
  void started(const std::string& name) {
    const std::lock_guard lock(mutex_);
    compiling_.push_back(name);
    if (shown_) show();
  }
  void done(const std::string& name) {
    const std::lock_guard lock(mutex_);
    ++done_;
    if (auto it = std::find(compiling_.begin(), compiling_.end(), name); it != compiling_.end()) compiling_.erase(it);
    if (shown_) show();
  }

  // Stops the ticker and, if the line was shown, writes the summary.
  void finish() {
    {
      const std::lock_guard lock(mutex_);
      finished_ = true;
    }
    wake_.notify_all();
    if (!ticker_.joinable()) return;
    ticker_.join();
    if (shown_) std::fprintf(stderr, "\rcompiling programs: %zu/%zu done in %.1f s\x1b[K\n", done_, total_, seconds());
  }

 private:
  void tick(std::chrono::milliseconds after) {
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, after, [this] { return finished_; })) return;
    shown_ = true;
    do show();
    while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return finished_; }));
  }

  // Under mutex_.
  void show() {
    std::string now;
    for (const std::string& name : compiling_) now += (now.empty() ? ": " : ", ") + name;
    std::fprintf(stderr, "\rcompiling programs: %zu/%zu done, %.0f s%s\x1b[K", done_, total_, seconds(), now.c_str());
    std::fflush(stderr);
  }

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  const size_t total_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  size_t done_ = 0;
  std::vector<std::string> compiling_;
  bool shown_ = false;
  bool finished_ = false;
  std::thread ticker_;  // last: it starts once every other member is ready
};

}  // namespace svod::detail
