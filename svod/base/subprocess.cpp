#include "svod/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
                          const std::function<void(std::string_view)>& on_stdout) {
  if (argv.empty()) throw make_error(ErrorKind::Validation, "run_process: empty argv");
  Pipe in(/*socket=*/true), out, err;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], STDERR_FILENO);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw make_error(ErrorKind::Io, "cannot start '{}': {}", argv[0], std::strerror(rc));

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
