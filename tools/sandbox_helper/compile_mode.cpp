// The sandbox helper's compile mode: clang compiling a source nobody vouches
// for, in a process that can read nothing but the toolchain
// (svod/sandbox/confined_compile.h starts it; compile_protocol.h is the
// command line).
//
// A source can #include any file clang can open and get its text back in the
// diagnostics, or in the object as data that a kernel then copies into an
// output. So clang runs where the files it may open are exactly the ones the
// parent names (its binary, its libraries, its resource folder and the C
// header folders), each bound read-only at its own path into an otherwise
// empty root:
//   - new user, mount, network, IPC and PID namespaces: the mounts are this
//     process's alone, there is no network interface, and no other process
//     can be named (clang is process 1 of its own PID namespace);
//   - a tmpfs root made read-only, holding only the bound paths, with the
//     old root detached: nothing else of the machine's files is reachable;
//   - clang runs as an unprivileged user of the namespace (exec drops the
//     namespace's capabilities), with no_new_privs, an empty environment,
//     only its standard streams, and limits on CPU time, address space, file
//     size, files and processes.
// The parent enforces the wall-clock limit (killing this process kills clang:
// it dies with its parent).
#include "tools/sandbox_helper/compile_mode.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "svod/sandbox/compile_protocol.h"
#include "tools/sandbox_helper/namespaces.h"

namespace svod::sandbox {
namespace {

[[noreturn]] void setup_failed(const std::string& why) {
  const std::string line = std::string(kSetupPrefix) + why + "\n";
  (void)!::write(2, line.data(), line.size());
  _exit(kExitCompileSetupFailed);
}

[[noreturn]] void setup_failed_errno(const std::string& what) { setup_failed(what + ": " + std::strerror(errno)); }

struct Request {
  unsigned long cpu_seconds = 0;
  unsigned long long memory = 0;
  std::string library_path;
  std::vector<std::pair<std::string, std::string>> binds;  // source, path
  std::vector<char*> clang;  // argv, null-terminated
};

bool parse(int argc, char** argv, Request& request) {
  int i = 2;  // argv[1] is kCompileMode
  for (; i < argc && argv[i] != kEndOfOptions; ++i) {
    const std::string_view option = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (option == kCpuSecondsOption) {
      request.cpu_seconds = std::strtoul(value, nullptr, 10);
    } else if (option == kMemoryOption) {
      request.memory = std::strtoull(value, nullptr, 10);
    } else if (option == kLibraryPathOption) {
      request.library_path = value;
    } else if (option == kBindOption && i + 1 < argc) {
      request.binds.emplace_back(value, argv[++i]);
    } else {
      return false;
    }
  }
  if (i + 1 >= argc || request.cpu_seconds == 0 || request.memory == 0) return false;
  for (++i; i < argc; ++i) request.clang.push_back(argv[i]);
  request.clang.push_back(nullptr);
  return true;
}

void limit(int resource, rlim_t soft, rlim_t hard, const char* name) {
  const rlimit r{soft, hard};
  if (::setrlimit(resource, &r) != 0) setup_failed_errno(std::string("setting ") + name);
}

// Process 1 of the new PID namespace: clang, confined. `alive` is the read end
// of a pipe whose write end only the helper holds: it hangs up when the
// helper has ended.
[[noreturn]] void run_clang(const Request& request, int alive) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pollfd p{alive, POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) _exit(kExitCompileSetupFailed);  // the helper is gone already
  ::close(alive);
  limit(RLIMIT_CPU, request.cpu_seconds, request.cpu_seconds + 1, "RLIMIT_CPU");
  limit(RLIMIT_AS, request.memory, request.memory, "RLIMIT_AS");
  limit(RLIMIT_FSIZE, 0, 0, "RLIMIT_FSIZE");
  limit(RLIMIT_NPROC, 0, 0, "RLIMIT_NPROC");
  limit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE");
  limit(RLIMIT_NOFILE, 256, 256, "RLIMIT_NOFILE");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) setup_failed_errno("no_new_privs");
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) setup_failed_errno("close_range");
  // Nothing of the parent's environment; only where clang's libraries are.
  std::string library_path = "LD_LIBRARY_PATH=" + request.library_path;
  char* environment[] = {request.library_path.empty() ? nullptr : library_path.data(), nullptr};
  ::execve(request.clang[0], request.clang.data(), environment);
  setup_failed_errno(std::string("starting ") + request.clang[0]);
}

}  // namespace

int compile_mode(int argc, char** argv) {
  Request request;
  if (!parse(argc, argv, request)) {
    std::fprintf(stderr, "%smalformed command line\n", std::string(kSetupPrefix).c_str());
    return kExitCompileSetupFailed;
  }
  limit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE");  // the helper re-raises the signal that ended clang
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID) != 0)
    setup_failed_errno("new user, mount, network, IPC and PID namespaces are refused here (unshare)");
  if (std::string why = map_ids(uid, gid); !why.empty()) setup_failed(why);
  if (std::string why = build_root(request.binds); !why.empty()) setup_failed(why);

  int alive[2];
  if (::pipe2(alive, O_CLOEXEC) != 0) setup_failed_errno("pipe");
  const pid_t child = ::fork();
  if (child < 0) setup_failed_errno("fork");
  if (child == 0) {
    ::close(alive[1]);
    run_clang(request, alive[0]);
  }
  ::close(alive[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) setup_failed_errno("waitpid");
  }
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  // Ended by a signal: so is the helper, so that the parent sees how clang ended.
  const int signal = WTERMSIG(status);
  ::signal(signal, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::kill(::getpid(), signal);
  _exit(128 + signal);
}

}  // namespace svod::sandbox
