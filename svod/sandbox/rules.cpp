#include "svod/sandbox/rules.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace svod::sandbox {

std::string rule_of(std::string_view name, const uint64_t* args, uint64_t memory_limit) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (any({"mmap", "mprotect", "pkey_mprotect"})) {
    if ((args[2] & PROT_EXEC) != 0) return "no executable memory after loading";
    return fmt::format("no mapping larger than the memory limit ({} bytes)", memory_limit);
  }
  if (any({"open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "stat", "lstat",
           "newfstatat", "statx", "access", "faccessat", "faccessat2", "unlink", "unlinkat", "rename", "renameat",
           "renameat2", "mkdir", "mkdirat", "rmdir", "readlink", "readlinkat", "chmod", "fchmodat", "chown",
           "truncate", "link", "symlink", "read", "write", "pread64", "pwrite64", "readv", "writev", "memfd_create"}))
    return "no files";
  if (any({"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom",
           "sendmsg", "recvmsg", "sendmmsg", "recvmmsg"}))
    return "no network";
  if (any({"fork", "vfork", "clone"})) return "no new processes";
  if (any({"execve", "execveat"})) return "no programs";
  if (any({"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd"}))
    return "no access to other processes";
  if (any({"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal"}))
    return "no signals to other processes";
  return "only the allow-list's system calls";
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

}  // namespace svod::sandbox
