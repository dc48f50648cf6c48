#include "svod/guard/isolation.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "svod/base/error.h"
#include "svod/guard/op_name.h"

namespace svod {
namespace {

// What the child tells the waiting process, in memory they share.
struct IsolationRecord {
  static constexpr size_t kOps = 16384;
  static constexpr size_t kTitleBytes = 256 * 1024;
  std::atomic<bool> finished{false};
  std::atomic<bool> titled{false};
  std::atomic<uint32_t> ops{0};
  std::atomic<bool> running[kOps];
  char titles[kTitleBytes];  // NUL-terminated, one per op, in order

  std::string running_ops() const {
    std::vector<std::string> names;
    const char* title = titles;
    const char* end = titles + kTitleBytes;
    for (size_t op = 0; op < std::min<size_t>(ops.load(), kOps); ++op) {
      const bool has_title = titled.load() && title < end;
      if (running[op].load()) names.push_back(has_title && *title ? std::string(title) : op_name(op, {}));
      if (has_title) title += std::strlen(title) + 1;
    }
    return fmt::format("{}", fmt::join(names, ", "));
  }
};

IsolationRecord* record = nullptr;  // set in the child

}  // namespace

bool isolated() noexcept { return record != nullptr; }

void isolation_title_ops(std::span<const std::string> titles) {
  if (record == nullptr || record->titled.load()) return;
  size_t used = 0;
  for (const auto& title : titles) {
    if (used + 1 >= IsolationRecord::kTitleBytes) break;  // the rest are named by index
    const size_t n = std::min(title.size(), IsolationRecord::kTitleBytes - used - 1);
    std::memcpy(record->titles + used, title.data(), n);
    record->titles[used + n] = '\0';
    used += n + 1;
  }
  record->ops.store(static_cast<uint32_t>(std::min(titles.size(), IsolationRecord::kOps)));
  record->titled.store(true);
}

void isolation_op_started(size_t op) noexcept {
  if (record != nullptr && op < IsolationRecord::kOps) record->running[op].store(true);
}

void isolation_op_finished(size_t op) noexcept {
  if (record != nullptr && op < IsolationRecord::kOps) record->running[op].store(false);
}

IsolatedEnd run_isolated(const std::function<int()>& job) {
  void* shared = ::mmap(nullptr, sizeof(IsolationRecord), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED)
    throw make_error(ErrorKind::Execution, "cannot map memory to share with the isolated process: {}",
                     std::strerror(errno));
  auto* shared_record = new (shared) IsolationRecord();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::munmap(shared, sizeof(IsolationRecord));
    throw make_error(ErrorKind::Execution, "cannot start the isolated process: {}", std::strerror(error));
  }
  if (child == 0) {
    // The job dies with the waiting process, however that ends.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) std::_Exit(1);
    record = shared_record;
    int status = 1;
    try {
      status = job();
    } catch (const std::exception& e) {
      fmt::print(stderr, "svod: {}\n", e.what());
    }
    std::fflush(nullptr);
    record->finished.store(true);
    std::exit(status);
  }
  int raw = 0;
  while (::waitpid(child, &raw, 0) < 0 && errno == EINTR) {
  }
  IsolatedEnd end;
  end.running = shared_record->running_ops();
  end.finished = shared_record->finished.load();
  end.exited = WIFEXITED(raw);
  end.status = end.exited ? WEXITSTATUS(raw) : 0;
  end.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
  ::munmap(shared, sizeof(IsolationRecord));
  return end;
}

}  // namespace svod
