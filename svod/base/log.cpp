#include "svod/base/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace svod {

namespace {
std::atomic<size_t> warnings{0};
}  // namespace

int debug_level() noexcept {
  static const int level = [] {
    const char* value = std::getenv("SVOD_DEBUG");
    return value ? std::atoi(value) : 0;
  }();
  return level;
}

void log_line(std::string_view message) {
  std::string line;
  line.reserve(message.size() + 7);
  line.append("svod: ").append(message).push_back('\n');
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report that stderr is gone
    done += static_cast<size_t>(n);
  }
}

void log_warning(std::string_view message) {
  warnings.fetch_add(1, std::memory_order_relaxed);
  log_line(message);
}

size_t warnings_logged() noexcept { return warnings.load(std::memory_order_relaxed); }

}  // namespace svod
