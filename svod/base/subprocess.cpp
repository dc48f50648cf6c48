#include "svod/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "svod/base/error.h"

extern char** environ;

namespace svod {
namespace {

// A pipe; the stdin channel is a socket pair instead, so that writing to a
// child that already exited fails with EPIPE (send + MSG_NOSIGNAL) rather
// than raising SIGPIPE in the host process.
struct Pipe {
  int fd[2] = {-1, -1};
  explicit Pipe(bool socket = false) {
    int rc = socket ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) : ::pipe2(fd, O_CLOEXEC);
    if (rc != 0) throw make_error(ErrorKind::Io, "cannot create a pipe: {}", std::strerror(errno));
  }
  ~Pipe() { close_all(); }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  void close_all() { close_end(0), close_end(1); }
};

// The kernel's struct sigaction (not glibc's), as rt_sigaction takes it.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};
constexpr long kKernelSigsetBytes = 8;

// What the child needs between clone() and execve(), all prepared by the
// parent.
struct SpawnRequest {
  const char* path;
  char* const* argv;
  char* const* envp;
  int fds[3];  // become the child's stdin, stdout and stderr
  pid_t parent;
  sigset_t parent_mask;
  int error = 0;  // the errno of the step that failed, when one did
};

// The child between clone() and execve(). It runs in the parent's memory
// while the parent's thread waits (CLONE_VFORK), so it makes system calls
// and nothing else: no allocation, no locks, nothing a sanitizer intercepts.
__attribute__((no_sanitize("address", "undefined", "thread"))) int spawned_child(void* arg) {
  auto* request = static_cast<SpawnRequest*>(arg);
  // The parent's signal handlers must never run here: every caught signal
  // goes back to its default before the parent's mask is restored.
  for (int sig = 1; sig <= 64; ++sig) {
    KernelSigaction old{};
    if (::syscall(SYS_rt_sigaction, sig, nullptr, &old, kKernelSigsetBytes) != 0) continue;
    if (old.handler == SIG_IGN || old.handler == SIG_DFL) continue;
    const KernelSigaction fallback{};
    ::syscall(SYS_rt_sigaction, sig, &fallback, nullptr, kKernelSigsetBytes);
  }
  for (int target = 0; target < 3; ++target) {
    const int fd = request->fds[target];
    const long rc = fd == target ? ::syscall(SYS_fcntl, fd, F_SETFD, 0) : ::syscall(SYS_dup3, fd, target, 0);
    if (rc < 0) {
      request->error = errno;
      ::syscall(SYS_exit, 127);
    }
  }
  // The child dies with svod: SIGKILL when the thread that started it ends,
  // whatever ends it (a crash, kill -9). A parent already gone is seen here.
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::syscall(SYS_getppid) != request->parent) ::syscall(SYS_exit, 127);
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &request->parent_mask, nullptr, kKernelSigsetBytes);
  ::syscall(SYS_execve, request->path, request->argv, request->envp);
  request->error = errno;
  ::syscall(SYS_exit, 127);
  return 127;
}

// Starts `path` with `argv`, the environment `envp` and the three
// descriptors as its standard streams; the child is killed when the calling
// thread ends. Error(Io) when it cannot be started.
pid_t spawn(const std::string& path, char* const* argv, char* const* envp, std::array<int, 3> fds) {
  SpawnRequest request{.path = path.c_str(),
                       .argv = argv,
                       .envp = envp,
                       .fds = {fds[0], fds[1], fds[2]},
                       .parent = ::getpid(),
                       .parent_mask = {}};
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &request.parent_mask);
  // The child's stack lies in this frame: this thread waits until the child
  // has called execve() or exited.
  alignas(64) std::byte stack[32 * 1024];
  const pid_t pid = ::clone(spawned_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &request);
  const int clone_error = errno;
  pthread_sigmask(SIG_SETMASK, &request.parent_mask, nullptr);
  if (pid < 0) throw make_error(ErrorKind::Io, "cannot start '{}': {}", path, std::strerror(clone_error));
  if (request.error != 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw make_error(ErrorKind::Io, "cannot start '{}': {}", path, std::strerror(request.error));
  }
  return pid;
}

// This process's environment with `changes` (NAME=VALUE each) in place of
// the entries of the same names.
std::vector<std::string> changed_environment(const std::vector<std::string>& changes) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view name = name_of(*entry);
    if (std::none_of(changes.begin(), changes.end(), [&](const std::string& c) { return name_of(c) == name; }))
      entries.emplace_back(*entry);
  }
  entries.insert(entries.end(), changes.begin(), changes.end());
  return entries;
}

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> find_executable(std::string_view name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string path(name);
    return is_executable(path) ? std::optional(path) : std::nullopt;
  }
  const char* env_path = std::getenv("PATH");
  std::string_view dirs = env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    auto colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + std::string(name);
    if (is_executable(candidate)) return candidate;
  }
  return std::nullopt;
}

ProcessResult run_process(const std::vector<std::string>& argv, std::string_view input,
                          std::chrono::milliseconds timeout,
                          const std::function<void(std::string_view)>& on_stdout,
                          const std::vector<std::string>& environment) {
  if (argv.empty()) throw make_error(ErrorKind::Validation, "run_process: empty argv");
  Pipe in(/*socket=*/true), out, err;

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::optional<std::string> path = find_executable(argv[0]);
  if (!path) throw make_error(ErrorKind::Io, "cannot start '{}': {}", argv[0], std::strerror(ENOENT));
  std::vector<std::string> env_entries;
  std::vector<char*> envp;
  if (!environment.empty()) {
    env_entries = changed_environment(environment);
    for (auto& e : env_entries) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  const pid_t pid = spawn(*path, args.data(), envp.empty() ? environ : envp.data(), {in.fd[0], out.fd[1], err.fd[1]});

  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  for (int fd : {in.fd[1], out.fd[0], err.fd[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (input.empty()) in.close_end(1);

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t written = 0;
  char chunk[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[3];
    int n = 0;
    if (in.fd[1] >= 0) fds[n++] = {in.fd[1], POLLOUT, 0};
    if (out.fd[0] >= 0) fds[n++] = {out.fd[0], POLLIN, 0};
    if (err.fd[0] >= 0) fds[n++] = {err.fd[0], POLLIN, 0};
    int ready = ::poll(fds, n, static_cast<int>(left.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw make_error(ErrorKind::Io, "poll on '{}' failed: {}", argv[0], std::strerror(errno));
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in.fd[1]) {
        ssize_t w = ::send(in.fd[1], input.data() + written, input.size() - written, MSG_NOSIGNAL);
        if (w > 0) written += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) in.close_end(1);
        continue;
      }
      const bool is_out = fds[i].fd == out.fd[0];
      std::string& sink = is_out ? result.out : result.err;
      ssize_t r = ::read(fds[i].fd, chunk, sizeof chunk);
      if (r > 0) {
        sink.append(chunk, static_cast<size_t>(r));
        if (is_out && on_stdout) on_stdout(std::string_view(chunk, static_cast<size_t>(r)));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        (is_out ? out : err).close_end(0);
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace svod
