#include "svod/base/file_read.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <chrono>
#include <string>

#include "svod/base/error.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using namespace std::chrono_literals;
using test::TempDir;
using test::Watchdog;

// A FIFO nobody writes: opening it for reading the usual way waits forever.
std::filesystem::path make_fifo(const TempDir& dir, std::string_view name) {
  const auto path = dir / name;
  if (::mkfifo(path.c_str(), 0644) != 0) ADD_FAILURE() << "mkfifo " << path;
  return path;
}

void expect_refused(const std::filesystem::path& path, std::string_view what_it_is) {
  const Error e = test::expect_error([&] { open_regular_file(path, "plan file"); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  const std::string expected = path.string() + ": the plan file is " + std::string(what_it_is) + ", not a regular file";
  EXPECT_EQ(std::string(e.what()), expected);
  const Error again = test::expect_error([&] { read_regular_file(path, "plan file"); });
  EXPECT_EQ(again.kind(), ErrorKind::Io);
  EXPECT_EQ(std::string(again.what()), expected);
}

TEST(FileRead, ReadsARegularFileWhole) {
  TempDir dir;
  EXPECT_EQ(read_regular_file(dir.write("small", "hello"), "plan file"), "hello");
  EXPECT_EQ(read_regular_file(dir.write("empty", ""), "plan file"), "");
  // Larger than any first guess, and exactly one buffer long.
  std::string big(100'000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  EXPECT_EQ(read_regular_file(dir.write("big", big), "plan file"), big);
  EXPECT_EQ(read_regular_file(dir.write("page", std::string(4096, 'p')), "plan file"), std::string(4096, 'p'));
  // Files in /proc say they are empty; they are read to their end all the same.
  EXPECT_NE(read_regular_file("/proc/self/status", "status").find("Pid:"), std::string::npos);
}

TEST(FileRead, TheDescriptorIsBlockingAndCloseOnExec) {
  TempDir dir;
  struct stat status {};
  const FileDescriptor fd = open_regular_file(dir.write("f", "12345"), "file", &status);
  ASSERT_TRUE(fd);
  EXPECT_EQ(status.st_size, 5);
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(read_to_end(fd, dir / "f", "file"), "12345");
}

TEST(FileRead, FifoDirectoryAndDeviceAreRefusedWithoutWaiting) {
  TempDir dir;
  Watchdog watchdog("refusing a FIFO, a directory and a device", 20s);
  const auto fifo = make_fifo(dir, "pipe.json");
  expect_refused(fifo, "a FIFO");
  std::filesystem::create_directory(dir / "folder.json");
  expect_refused(dir / "folder.json", "a directory");
  expect_refused("/dev/zero", "a character device");
  // A listening socket's name (opening it would fail anyway, with ENXIO).
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string sock_path = (dir / "sock").string();
  ASSERT_LT(sock_path.size(), sizeof address.sun_path);
  std::memcpy(address.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  expect_refused(dir / "sock", "a socket");
  ::close(sock);

  const RegularFile found = try_open_regular_file(fifo);
  EXPECT_FALSE(found.fd);
  EXPECT_TRUE(found.not_regular());
  EXPECT_TRUE(S_ISFIFO(found.status.st_mode));
  // A symbolic link counts as what it names.
  std::filesystem::create_symlink(fifo, dir / "link.json");
  expect_refused(dir / "link.json", "a FIFO");
  std::filesystem::create_symlink(dir.write("real", "text"), dir / "good-link");
  EXPECT_EQ(read_regular_file(dir / "good-link", "plan file"), "text");
}

TEST(FileRead, AMissingFileIsAnIoErrorThatSaysWhy) {
  TempDir dir;
  const RegularFile found = try_open_regular_file(dir / "absent");
  EXPECT_EQ(found.error, ENOENT);
  EXPECT_FALSE(found.not_regular());
  const Error e = test::expect_error([&] { read_regular_file(dir / "absent", "tune file"); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_EQ(std::string(e.what()),
            (dir / "absent").string() + ": cannot open the tune file: No such file or directory");
}

TEST(FileRead, DescriptorsMoveAndCloseOnce) {
  TempDir dir;
  FileDescriptor a = open_regular_file(dir.write("f", "x"), "file");
  const int raw = a.get();
  FileDescriptor b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.get(), raw);
  FileDescriptor c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(c.close());
  EXPECT_FALSE(c);
  EXPECT_TRUE(c.close());  // already closed
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
}

TEST(FileRead, TypeNames) {
  EXPECT_EQ(file_type_name(S_IFIFO), "a FIFO");
  EXPECT_EQ(file_type_name(S_IFDIR | 0755), "a directory");
  EXPECT_EQ(file_type_name(S_IFBLK), "a block device");
  EXPECT_EQ(file_type_name(S_IFSOCK), "a socket");
  EXPECT_EQ(file_type_name(S_IFREG | 0644), "a regular file");
}

}  // namespace
}  // namespace svod
