// A root of the sandbox helper's own (namespaces.h).
#include "tools/sandbox_helper/namespaces.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace svod::sandbox {
namespace {

// What failed, with errno's reason.
std::string failed(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string write_text(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return failed(std::string("opening ") + path);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const std::string why = written ? std::string() : failed(std::string("writing ") + path);
  ::close(fd);
  return why;
}

std::string make_folders(const std::filesystem::path& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  return error ? "making " + folder.string() + ": " + error.message() : std::string();
}

// The flags a read-only remount of the bind at `path` must keep: those of the
// mount it came from, which a user namespace may not drop; none when statvfs
// fails (errno says why).
std::optional<unsigned long> locked_flags(const char* path) {
  struct statvfs s {};
  if (::statvfs(path, &s) != 0) return std::nullopt;
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
// one (under /new). The source is named without links, which would otherwise
// be read in the scratch root; the path's folders are plain folders of the
// new root.
std::string bind_read_only(const std::string& source, const std::string& path) {
  const std::filesystem::path inside = std::filesystem::path(path).lexically_normal();
  if (!inside.is_absolute() || !std::filesystem::path(source).is_absolute())
    return "a path to bind is not absolute: " + source + " at " + path;
  const std::string from = "/old" + source;
  const std::string to = "/new" + inside.string();
  struct stat s {};
  if (::lstat(from.c_str(), &s) != 0) return {};
  if (S_ISLNK(s.st_mode)) return "a source to bind is a symbolic link: " + source;
  if (S_ISDIR(s.st_mode)) {
    if (std::string why = make_folders(to); !why.empty()) return why;
  } else {
    if (std::string why = make_folders(std::filesystem::path(to).parent_path()); !why.empty()) return why;
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0) return failed("making the mount point " + to);
    ::close(fd);
  }
  if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) return failed("binding " + source);
  const std::optional<unsigned long> flags = locked_flags(to.c_str());
  if (!flags) return failed("statvfs of " + to);
  if (::mount(nullptr, to.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | *flags, nullptr) != 0)
    return failed("making " + path + " read-only");
  return {};
}

}  // namespace

std::string map_ids(uid_t uid, gid_t gid) {
  std::string why = write_text("/proc/self/setgroups", "deny");
  if (why.empty()) why = write_text("/proc/self/uid_map", std::to_string(kInsideId) + " " + std::to_string(uid) + " 1");
  if (why.empty()) why = write_text("/proc/self/gid_map", std::to_string(kInsideId) + " " + std::to_string(gid) + " 1");
  return why;
}

std::string build_root(const std::vector<std::pair<std::string, std::string>>& binds) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return failed("making mounts private");
  // A scratch tmpfs over /tmp holds the new root and the old one while the
  // binds are made; the pivot leaves the old /tmp visible under /old.
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700") != 0)
    return failed("mounting a tmpfs (mount namespace)");
  if (::chdir("/tmp") != 0 || ::mkdir("new", 0755) != 0 || ::mkdir("old", 0700) != 0)
    return failed("preparing the new root");
  if (::mount("tmpfs", "new", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755") != 0)
    return failed("mounting the new root");
  if (::syscall(SYS_pivot_root, ".", "old") != 0) return failed("pivot_root");
  for (const auto& [source, path] : binds) {
    if (std::string why = bind_read_only(source, path); !why.empty()) return why;
  }
  if (::umount2("/old", MNT_DETACH) != 0) return failed("detaching the old root");
  // Into the new root; the scratch tmpfs is stacked under it and detached.
  if (::chdir("/new") != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    return failed("entering the new root");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return failed("making the new root read-only");
  return {};
}

}  // namespace svod::sandbox
