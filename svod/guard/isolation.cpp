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

namespace svod {
namespace {

// What the child tells the waiting process, in memory they share.
struct IsolationRecord {
  static constexpr size_t kOps = 16384;
  static constexpr size_t kLabelBytes = 256 * 1024;
  std::atomic<bool> finished{false};
  std::atomic<bool> labelled{false};
  std::atomic<uint32_t> ops{0};
  std::atomic<bool> running[kOps];
  char labels[kLabelBytes];  // NUL-terminated, one per op, in order

  std::string running_ops() const {
    std::vector<std::string> names;
    const char* label = labels;
    const char* end = labels + kLabelBytes;
    for (size_t op = 0; op < std::min<size_t>(ops.load(), kOps); ++op) {
      const bool has_label = labelled.load() && label < end;
      if (running[op].load()) names.push_back(has_label && *label ? std::string(label) : fmt::format("op {}", op));
      if (has_label) label += std::strlen(label) + 1;
    }
    return fmt::format("{}", fmt::join(names, ", "));
  }
};

IsolationRecord* record = nullptr;  // set in the child

}  // namespace

bool isolated() noexcept { return record != nullptr; }

void isolation_label_ops(std::span<const std::string> labels) {
  if (record == nullptr || record->labelled.load()) return;
  size_t used = 0;
  for (const auto& label : labels) {
    if (used + 1 >= IsolationRecord::kLabelBytes) break;  // the rest are named by index
    const size_t n = std::min(label.size(), IsolationRecord::kLabelBytes - used - 1);
    std::memcpy(record->labels + used, label.data(), n);
    record->labels[used + n] = '\0';
    used += n + 1;
  }
  record->ops.store(static_cast<uint32_t>(std::min(labels.size(), IsolationRecord::kOps)));
  record->labelled.store(true);
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
