#include "svod/base/file_write.h"

#include <gtest/gtest.h>
#include <sys/stat.h>


#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::TempDir;

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> names_in(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FileWrite, WritesThePartsInOrderAndReplacesTheOldFileWhole) {
  TempDir dir;
  const std::string a = "header;", b = "payload";
  write_file_atomically(dir / "f", {std::as_bytes(std::span(a)), std::as_bytes(std::span(b))});
  EXPECT_EQ(read(dir / "f"), "header;payload");
  write_file_atomically(dir / "f", "short");
  EXPECT_EQ(read(dir / "f"), "short");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"f"});
}

TEST(FileWrite, FailuresNameThePathAndLeaveNothingBehind) {
  TempDir dir;
  std::string message;
  EXPECT_EQ(test::kind_of([&] { write_file_atomically(dir / "missing" / "f", "x"); }, &message), ErrorKind::Io);
  EXPECT_NE(message.find((dir / "missing" / "f").string()), std::string::npos) << message;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

bool is_character_device(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

TEST(FileWrite, DevicesAndPipesAreWrittenThroughNeverReplaced) {
  // As root a rename over /dev/null would replace the system's /dev/null.
  ASSERT_TRUE(is_character_device("/dev/null"));
  write_file_atomically("/dev/null", "profile");
  EXPECT_TRUE(is_character_device("/dev/null"));

  TempDir dir;
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read(fifo); });
  write_file_atomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"fifo"});
}

// A FIFO that no process reads: a blocking open() would wait for a reader
// for ever. The writer waits kFifoReaderWait for one and then fails, naming
// the FIFO, which stays.
TEST(FileWrite, AFifoWithNoReaderFailsWithinTheWaitInsteadOfHanging) {
  TempDir dir;
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const test::Watchdog watchdog("a write into a FIFO with no reader", std::chrono::seconds(60));
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(test::kind_of([&] { write_file_atomically(fifo, "nobody reads this"); }, &message), ErrorKind::Io);
  EXPECT_GE(std::chrono::steady_clock::now() - start, kFifoReaderWait);
  EXPECT_EQ(message, "cannot write " + fifo.string() + ": the FIFO has no reader (none opened it within 2 s)");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"fifo"});

  // A reader that comes within the wait gets everything.
  std::string received;
  std::thread reader([&] {
    std::this_thread::sleep_for(kFifoReaderWait / 4);
    received = read(fifo);
  });
  write_file_atomically(fifo, "a late reader");
  reader.join();
  EXPECT_EQ(received, "a late reader");
}

// The object cache's writer: whatever has the name is replaced, never opened
// (a FIFO) or followed (a link, whose target stays).
TEST(FileWrite, ReplaceNeverOpensOrFollowsWhatHasTheName) {
  TempDir dir;
  const test::Watchdog watchdog("replacing a FIFO", std::chrono::seconds(60));
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  replace_file_atomically(dir / "fifo", "a file now");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "fifo")));
  EXPECT_EQ(read(dir / "fifo"), "a file now");

  write_file_atomically(dir / "target", "kept");
  std::filesystem::create_symlink(dir / "target", dir / "link");
  replace_file_atomically(dir / "link", "replaced");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "link")));
  EXPECT_EQ(read(dir / "link"), "replaced");
  EXPECT_EQ(read(dir / "target"), "kept");

  std::filesystem::create_directory(dir / "folder");
  EXPECT_EQ(test::kind_of([&] { replace_file_atomically(dir / "folder", "x"); }), ErrorKind::Io);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"fifo", "folder", "link", "target"}));
}

TEST(FileWrite, ALinkKeepsNamingTheFileThatReplacesItsTarget) {
  TempDir dir;
  write_file_atomically(dir / "real", "old");
  std::filesystem::create_symlink(dir / "real", dir / "link");
  write_file_atomically(dir / "link", "new");
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link"));
  EXPECT_EQ(read(dir / "real"), "new");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"link", "real"}));
}

TEST(FileWrite, OtherKindsOfFileAreRefusedByName) {
  TempDir dir;
  std::filesystem::create_directories(dir / "folder" / "inner");
  std::string message;
  EXPECT_EQ(test::kind_of([&] { write_file_atomically(dir / "folder", "x"); }, &message), ErrorKind::Io);
  EXPECT_NE(message.find("it is a directory"), std::string::npos) << message;
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"folder"});
  EXPECT_TRUE(std::filesystem::is_directory(dir / "folder" / "inner"));
}

// check_writable refuses before any work what the writer would refuse after
// it, in the writer's words, and writes nothing.
TEST(FileWrite, CheckWritableRefusesWhatTheWriterWouldBeforeWriting) {
  TempDir dir;
  std::filesystem::create_directories(dir / "folder");
  std::string message;
  EXPECT_EQ(test::kind_of([&] { check_writable(dir / "missing" / "f"); }, &message), ErrorKind::Io);
  EXPECT_NE(message.find("cannot write " + (dir / "missing" / "f").string() + ": the folder " +
                         (dir / "missing").string() + ": No such file or directory"),
            std::string::npos)
      << message;
  EXPECT_EQ(test::kind_of([&] { check_writable(dir / "folder"); }, &message), ErrorKind::Io);
  EXPECT_NE(message.find("it is a directory"), std::string::npos) << message;
  write_file_atomically(dir / "taken", "a file");
  EXPECT_EQ(test::kind_of([&] { check_writable(dir / "taken" / "f"); }, &message), ErrorKind::Io);
  EXPECT_NE(message.find((dir / "taken").string() + " is a regular file, not a folder"), std::string::npos) << message;
  // What the writer accepts: a new file, an old one, a relative name, a device.
  check_writable(dir / "new");
  check_writable(dir / "taken");
  check_writable("relative-name");
  check_writable("/dev/null");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"folder", "taken"}));
  EXPECT_EQ(read(dir / "taken"), "a file");
}

TEST(FileWrite, ConcurrentWritersOfOnePathLeaveOneWholeFile) {
  TempDir dir;
  std::vector<std::thread> writers;
  for (char c : std::string("abcd")) {
    writers.emplace_back([&, c] {
      for (int i = 0; i < 50; ++i) write_file_atomically(dir / "f", std::string(4096, c));
    });
  }
  for (auto& w : writers) w.join();
  const std::string text = read(dir / "f");
  ASSERT_EQ(text.size(), 4096u);
  EXPECT_EQ(text, std::string(4096, text[0]));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"f"});
}

}  // namespace
}  // namespace svod
