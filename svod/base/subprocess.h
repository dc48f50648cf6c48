// Child processes with in-memory stdin/stdout/stderr: the clang compiler feeds
// source on stdin and reads the object from stdout, so nothing touches disk.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace svod {

struct ProcessResult {
  int exit_code = -1;    // valid when term_signal == 0 and !timed_out
  int term_signal = 0;   // signal that ended the child, 0 if it exited
  bool timed_out = false;
  std::string out;
  std::string err;
  bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
};

// Runs argv[0] (looked up in PATH when it has no '/'), writes `input` to its
// stdin, collects stdout and stderr, and kills it with SIGKILL once `timeout`
// has passed. Throws Error(Io) when the process cannot be started. The child
// never outlives svod: it gets SIGKILL when the calling thread ends, and
// with it when the process dies in any way (a crash, kill -9).
// `on_stdout`, when set, also sees each piece of stdout as it arrives (for
// children that report progress while they run); it must not throw.
// `environment` (NAME=VALUE each) sets variables for the child alone, in
// place of this process's values of the same names.
ProcessResult run_process(const std::vector<std::string>& argv, std::string_view input,
                          std::chrono::milliseconds timeout,
                          const std::function<void(std::string_view)>& on_stdout = {},
                          const std::vector<std::string>& environment = {});

// The absolute path of an executable: `name` itself when it contains '/',
// else the first match in PATH. nullopt when there is none.
std::optional<std::string> find_executable(std::string_view name);

}  // namespace svod
