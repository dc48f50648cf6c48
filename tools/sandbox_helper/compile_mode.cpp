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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "svod/sandbox/compile_protocol.h"

namespace svod::sandbox {
namespace {

// The namespace's user and group that clang runs as: not 0, so that exec
// leaves it no capability there.
constexpr unsigned kInsideId = 1000;

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

void write_text(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    setup_failed_errno(std::string("writing ") + path);
  ::close(fd);
}

// This process's user and group become kInsideId in its new user namespace.
void map_ids(uid_t uid, gid_t gid) {
  write_text("/proc/self/setgroups", "deny");
  write_text("/proc/self/uid_map", std::to_string(kInsideId) + " " + std::to_string(uid) + " 1");
  write_text("/proc/self/gid_map", std::to_string(kInsideId) + " " + std::to_string(gid) + " 1");
}

void make_folders(const std::filesystem::path& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) setup_failed("making " + folder.string() + ": " + error.message());
}

// The flags a read-only remount of the bind at `path` must keep: those of the
// mount it came from, which a user namespace may not drop.
unsigned long locked_flags(const char* path) {
  struct statvfs s {};
  if (::statvfs(path, &s) != 0) setup_failed_errno(std::string("statvfs of ") + path);
  unsigned long flags = 0;
  if (s.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (s.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (s.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (s.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (s.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (s.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

// Binds `source` of the old root (under /old) read-only at `path` of the new
// one (under /new). The parent named the source without links, which would
// otherwise be read in the scratch root; the path's folders are plain
// folders of the new root. A source that is not there is left out: clang
// then finds nothing there, as it would outside.
void bind_read_only(const std::string& source, const std::string& path) {
  const std::filesystem::path inside = std::filesystem::path(path).lexically_normal();
  if (!inside.is_absolute() || !std::filesystem::path(source).is_absolute())
    setup_failed("a path to bind is not absolute: " + source + " at " + path);
  const std::string from = "/old" + source;
  const std::string to = "/new" + inside.string();
  struct stat s {};
  if (::lstat(from.c_str(), &s) != 0) return;
  if (S_ISLNK(s.st_mode)) setup_failed("a source to bind is a symbolic link: " + source);
  if (S_ISDIR(s.st_mode)) {
    make_folders(to);
  } else {
    make_folders(std::filesystem::path(to).parent_path());
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0) setup_failed_errno("making the mount point " + to);
    ::close(fd);
  }
  if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) setup_failed_errno("binding " + source);
  if (::mount(nullptr, to.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(to.c_str()), nullptr) != 0)
    setup_failed_errno("making " + path + " read-only");
}

// The new root: a tmpfs holding the bound paths and nothing else, made
// read-only, with the old root detached.
void build_root(const std::vector<std::pair<std::string, std::string>>& binds) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) setup_failed_errno("making mounts private");
  // A scratch tmpfs over /tmp holds the new root and the old one while the
  // binds are made; the pivot leaves the old /tmp visible under /old.
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700") != 0)
    setup_failed_errno("mounting a tmpfs (mount namespace)");
  if (::chdir("/tmp") != 0 || ::mkdir("new", 0755) != 0 || ::mkdir("old", 0700) != 0)
    setup_failed_errno("preparing the new root");
  if (::mount("tmpfs", "new", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755") != 0)
    setup_failed_errno("mounting the new root");
  if (::syscall(SYS_pivot_root, ".", "old") != 0) setup_failed_errno("pivot_root");
  for (const auto& [source, path] : binds) bind_read_only(source, path);
  if (::umount2("/old", MNT_DETACH) != 0) setup_failed_errno("detaching the old root");
  // Into the new root; the scratch tmpfs is stacked under it and detached.
  if (::chdir("/new") != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    setup_failed_errno("entering the new root");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    setup_failed_errno("making the new root read-only");
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
  map_ids(uid, gid);
  build_root(request.binds);

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
