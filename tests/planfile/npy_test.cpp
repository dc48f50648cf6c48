#include "svod/base/npy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "svod/base/error.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::TempDir;

std::vector<std::byte> as_bytes(std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

// A file as numpy 1.24 writes it: np.save(f, np.array([[1.5, -2], [3, 4]], dtype='<f4')).
std::string numpy_written_f32() {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  header.append(117 - header.size(), ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header;
  const float values[] = {1.5f, -2.0f, 3.0f, 4.0f};
  file.append(reinterpret_cast<const char*>(values), sizeof(values));
  return file;
}

// A file of any version with the given header dict and data bytes.
std::string npy_file(int major, std::string dict, std::string_view data) {
  std::string file = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  dict += '\n';
  const size_t len = dict.size();
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) file += static_cast<char>((len >> (8 * i)) & 0xff);
  return file + dict + std::string(data);
}

template <typename Fn>
void expect_error(ErrorKind kind, std::string_view needle, Fn&& fn) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  auto array = parse_npy(as_bytes(numpy_written_f32()), "numpy.npy");
  EXPECT_EQ(array.dtype, DType::F32);
  EXPECT_EQ(array.shape, (std::vector<size_t>{2, 2}));
  ASSERT_EQ(array.data.size(), 16u);
  float values[4];
  std::memcpy(values, array.data.data(), 16);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
  EXPECT_EQ(values[3], 4.0f);
}

TEST(Npy, WritesWhatNumpyWrites) {
  TempDir dir;
  const float values[] = {1.5f, -2.0f, 3.0f, 4.0f};
  const size_t shape[] = {2, 2};
  write_npy(dir / "x.npy", DType::F32, shape, std::as_bytes(std::span(values)));
  std::ifstream in(dir / "x.npy", std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(written, numpy_written_f32());
}

TEST(Npy, RoundTripsEveryNumpyDType) {
  TempDir dir;
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::BF16) continue;
    SCOPED_TRACE(std::string(to_string(dtype)));
    const size_t shape[] = {3, 5};
    std::vector<std::byte> data(15 * size_of(dtype));
    for (size_t i = 0; i < 15; ++i) store_from_double(dtype, data.data() + i * size_of(dtype), double(i % 2));
    const auto path = dir / (std::string(to_string(dtype)) + ".npy");
    write_npy(path, dtype, shape, data);
    auto back = read_npy(path);
    EXPECT_EQ(back.dtype, dtype);
    EXPECT_EQ(back.shape, (std::vector<size_t>{3, 5}));
    EXPECT_EQ(back.data, data);
  }
}

TEST(Npy, RoundTripsZeroDimensionalEmptyAndOneDimensionalShapes) {
  TempDir dir;
  const int64_t one = 42;
  write_npy(dir / "scalar.npy", DType::I64, {}, std::as_bytes(std::span(&one, 1)));
  auto scalar = read_npy(dir / "scalar.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.count(), 1u);

  const size_t empty_shape[] = {0, 4};
  write_npy(dir / "empty.npy", DType::F64, empty_shape, {});
  EXPECT_EQ(read_npy(dir / "empty.npy").count(), 0u);

  const uint8_t bytes[] = {1, 2, 3};
  const size_t flat[] = {3};
  write_npy(dir / "flat.npy", DType::U8, flat, std::as_bytes(std::span(bytes)));
  EXPECT_EQ(read_npy(dir / "flat.npy").shape, (std::vector<size_t>{3}));
}

TEST(Npy, WritesVersion2WhenTheHeaderIsLong) {
  TempDir dir;
  std::vector<size_t> shape(25000, 1);  // a header longer than 65535 bytes
  const float value = 3.0f;
  write_npy(dir / "long.npy", DType::F32, shape, std::as_bytes(std::span(&value, 1)));
  std::ifstream in(dir / "long.npy", std::ios::binary);
  std::string head(8, '\0');
  in.read(head.data(), 8);
  EXPECT_EQ(head[6], 2);
  auto back = read_npy(dir / "long.npy");
  EXPECT_EQ(back.shape.size(), 25000u);
  EXPECT_EQ(back.count(), 1u);
}

TEST(Npy, ReadsVersions2And3) {
  const std::string data("\x01\x00\x02\x00", 4);
  for (int major : {2, 3}) {
    auto array = parse_npy(as_bytes(npy_file(major, "{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2,)}", data)), "v.npy");
    EXPECT_EQ(array.dtype, DType::I16);
    EXPECT_EQ(array.count(), 2u);
  }
}

TEST(Npy, RefusesBf16WithAClearError) {
  TempDir dir;
  const uint16_t bits = 0x3f80;
  const size_t shape[] = {1};
  expect_error(ErrorKind::Unsupported, "bfloat16",
               [&] { write_npy(dir / "b.npy", DType::BF16, shape, std::as_bytes(std::span(&bits, 1))); });
  EXPECT_FALSE(std::filesystem::exists(dir / "b.npy"));
}

TEST(Npy, WriteChecksTheSizeAndLeavesNoFileBehind) {
  TempDir dir;
  const float values[3] = {};
  const size_t shape[] = {4};
  expect_error(ErrorKind::Validation, "does not match",
               [&] { write_npy(dir / "x.npy", DType::F32, shape, std::as_bytes(std::span(values))); });
  const size_t empty[] = {0};
  expect_error(ErrorKind::Io, "cannot write",
               [&] { write_npy(dir / "missing_folder" / "x.npy", DType::F32, empty, {}); });
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Npy, ReplacesAnExistingFileWhole) {
  TempDir dir;
  const size_t shape[] = {1};
  const double a = 1.0, b = 2.0;
  write_npy(dir / "x.npy", DType::F64, shape, std::as_bytes(std::span(&a, 1)));
  write_npy(dir / "x.npy", DType::F64, shape, std::as_bytes(std::span(&b, 1)));
  double got;
  std::memcpy(&got, read_npy(dir / "x.npy").data.data(), 8);
  EXPECT_EQ(got, 2.0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(Npy, AFifoOrAFolderIsRefusedWithoutWaiting) {
  TempDir dir;
  test::Watchdog watchdog("refusing a FIFO .npy file", std::chrono::seconds(20));
  ASSERT_EQ(::mkfifo((dir / "fifo.npy").c_str(), 0644), 0);
  expect_error(ErrorKind::Io, (dir / "fifo.npy").string() + ": the .npy file is a FIFO, not a regular file",
               [&] { read_npy(dir / "fifo.npy"); });
  std::filesystem::create_directory(dir / "folder.npy");
  expect_error(ErrorKind::Io, "folder.npy: the .npy file is a directory, not a regular file",
               [&] { read_npy(dir / "folder.npy"); });
}

TEST(Npy, ErrorsNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string good = numpy_written_f32();
  auto check = [&](std::string_view content, ErrorKind kind, std::string_view needle) {
    SCOPED_TRACE(std::string(needle));
    const auto path = dir.write("bad.npy", content);
    expect_error(kind, path.string(), [&] { read_npy(path); });
    expect_error(kind, needle, [&] { read_npy(path); });
  };
  expect_error(ErrorKind::Io, "cannot open", [&] { read_npy(dir / "absent.npy"); });
  check("", ErrorKind::Validation, "magic");
  check("PK\x03\x04 not numpy at all", ErrorKind::Validation, "magic");
  check(std::string("\x93NUMPY\x04\x00", 8), ErrorKind::Validation, "version 4.0");
  check(std::string("\x93NUMPY\x01\x00\x76", 9), ErrorKind::Io, "truncated");
  check(good.substr(0, 50), ErrorKind::Io, "truncated");
  check(good.substr(0, good.size() - 1), ErrorKind::Io, "truncated");
  check(good + "xx", ErrorKind::Validation, "trailing data");
  check(npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"), ErrorKind::Validation,
        "big-endian");
  check(npy_file(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "abcdabcd"), ErrorKind::Validation,
        "unsupported element type");
  check(npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"),
        ErrorKind::Validation, "structured");
  check(npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"), ErrorKind::Validation,
        "Fortran");
  check(npy_file(1, "{'descr': '<f4', 'shape': (1,), }", "abcd"), ErrorKind::Validation, "bad .npy header");
  check(npy_file(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "abcd"), ErrorKind::Validation,
        "True or False");
  check(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "abcd"), ErrorKind::Validation,
        "dimension");
  check(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "abcd"),
        ErrorKind::Validation, "unexpected header key");
  check(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }", ""),
        ErrorKind::Validation, "too large");
}

}  // namespace
}  // namespace svod
