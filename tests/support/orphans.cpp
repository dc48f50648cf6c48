#include "tests/support/orphans.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace svod::test {

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: the command may hold spaces and parentheses.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    pid_t ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
      out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

OrphanCatcher::OrphanCatcher() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

OrphanCatcher::~OrphanCatcher() {
  for (pid_t pid : children_of(::getpid())) ::kill(pid, SIGKILL);
  wait_for_none(std::chrono::seconds(10));
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

std::vector<pid_t> OrphanCatcher::wait_for_none(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::vector<pid_t> left = children_of(::getpid());
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace svod::test
