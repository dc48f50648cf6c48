#include "svod/base/npy.h"

#include <fmt/ranges.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/file_write.h"

namespace svod {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy pads the preamble plus header to a multiple of 64 so the data is aligned.
constexpr size_t kHeaderAlignment = 64;

[[noreturn]] void fail(ErrorKind kind, std::string_view name, std::string_view problem) {
  throw make_error(kind, "{}: {}", name, problem);
}

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// This parser accepts exactly the literals numpy writes there: quoted strings,
// True/False and tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<size_t>> shape;
  };

  Fields parse() {
    Fields fields;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') bad("structured (record) arrays are not supported, only plain numeric arrays");
        fields.descr = string_literal();
      } else if (key == "fortran_order") {
        fields.fortran_order = boolean();
      } else if (key == "shape") {
        fields.shape = tuple();
      } else {
        bad(fmt::format("unexpected header key '{}'", key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        bad(fmt::format("expected ',' or '}}' at header offset {}", pos_));
      }
    }
    skip_space();
    if (pos_ != text_.size()) bad(fmt::format("unexpected text after the header dict at offset {}", pos_));
    if (!fields.descr || !fields.fortran_order || !fields.shape) {
      bad("the header must have 'descr', 'fortran_order' and 'shape'");
    }
    return fields;
  }

 private:
  [[noreturn]] void bad(std::string_view what) const {
    fail(ErrorKind::Validation, name_, fmt::format("bad .npy header: {}", what));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(fmt::format("expected '{}' at header offset {}", c, pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad(fmt::format("expected a quoted string at header offset {}", pos_));
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad(fmt::format("expected True or False at header offset {}", pos_));
  }
  std::vector<size_t> tuple() {
    expect('(');
    std::vector<size_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return dims;
      }
      if (peek() < '0' || peek() > '9') bad(fmt::format("expected a dimension at header offset {}", pos_));
      size_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        const size_t digit = static_cast<size_t>(peek() - '0');
        if (value > (SIZE_MAX - digit) / 10) bad("a dimension is too large");
        value = value * 10 + digit;
        ++pos_;
      }
      // numpy writes a trailing 'L' for Python 2 longs in old files.
      if (peek() == 'L') ++pos_;
      dims.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        bad(fmt::format("expected ',' or ')' in the shape at header offset {}", pos_));
      }
    }
  }

  std::string_view text_;
  std::string_view name_;
  size_t pos_ = 0;
};

// Python's tuple spelling: "()", "(3,)", "(3, 4)".
std::string shape_text(std::span<const size_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::string make_header(DType dtype, std::span<const size_t> shape, int& major) {
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", numpy_descr(dtype), shape_text(shape));
  // Version 1.0 stores the header length in 16 bits; 2.0 in 32 bits.
  auto padded_total = [&](size_t preamble) {
    return (preamble + dict.size() + 1 + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
  };
  major = padded_total(kMagicSize + 4) - (kMagicSize + 4) <= 65535 ? 1 : 2;
  const size_t preamble = kMagicSize + 2 + (major == 1 ? 2 : 4);
  const size_t total = padded_total(preamble);
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  return dict;
}

}  // namespace

size_t NpyArray::count() const noexcept { return element_count(shape).value_or(0); }

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicSize + 2 || std::memcmp(raw, kMagic, kMagicSize) != 0) {
    fail(ErrorKind::Validation, name, "not a .npy file (the \\x93NUMPY magic is missing)");
  }
  const int major = raw[kMagicSize];
  const int minor = raw[kMagicSize + 1];
  if (major < 1 || major > 3 || minor != 0) {
    fail(ErrorKind::Validation, name,
         fmt::format(".npy format version {}.{} is not supported (1.0, 2.0 and 3.0 are)", major, minor));
  }
  const size_t len_size = major == 1 ? 2 : 4;
  const size_t preamble = kMagicSize + 2 + len_size;
  if (bytes.size() < preamble) fail(ErrorKind::Io, name, "truncated .npy file: it ends inside the preamble");
  size_t header_len = 0;
  for (size_t i = 0; i < len_size; ++i) header_len |= size_t{raw[kMagicSize + 2 + i]} << (8 * i);
  if (bytes.size() - preamble < header_len) {
    fail(ErrorKind::Io, name,
         fmt::format("truncated .npy file: the header needs {} bytes, {} remain", header_len, bytes.size() - preamble));
  }
  const std::string_view header(reinterpret_cast<const char*>(raw + preamble), header_len);
  const auto fields = HeaderParser(header, name).parse();

  NpyArray array;
  try {
    array.dtype = parse_numpy_descr(*fields.descr);
  } catch (const Error& e) {
    fail(ErrorKind::Validation, name, fmt::format("unsupported element type: {}", e.what()));
  }
  if (*fields.fortran_order) {
    fail(ErrorKind::Validation, name,
         "Fortran-order arrays are not supported: save a C-order copy (numpy.ascontiguousarray)");
  }
  array.shape = *fields.shape;
  const auto count = element_count(array.shape);
  const auto total = count ? byte_size(array.dtype, *count) : std::nullopt;
  if (!total) fail(ErrorKind::Validation, name, fmt::format("shape {} is too large", shape_text(array.shape)));
  const size_t data_bytes = *total;
  const size_t have = bytes.size() - preamble - header_len;
  if (have < data_bytes) {
    fail(ErrorKind::Io, name,
         fmt::format("truncated .npy file: shape {} of {} needs {} data bytes, the file has {}",
                     shape_text(array.shape), *fields.descr, data_bytes, have));
  }
  if (have > data_bytes) {
    fail(ErrorKind::Validation, name,
         fmt::format("size mismatch: shape {} of {} needs {} data bytes, the file has {} (trailing data)",
                     shape_text(array.shape), *fields.descr, data_bytes, have));
  }
  const auto* data = bytes.data() + preamble + header_len;
  array.data.assign(data, data + data_bytes);
  return array;
}

NpyArray read_npy(const std::filesystem::path& path) {
  const std::string bytes = read_regular_file(path, ".npy file");
  return parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), path.string());
}

void write_npy(const std::filesystem::path& path, DType dtype, std::span<const size_t> shape,
               std::span<const std::byte> data) {
  const std::string name = path.string();
  if (dtype == DType::BF16) {
    fail(ErrorKind::Unsupported, name,
         "numpy has no bfloat16 type: write the bit patterns as u16 or widen the values to f32");
  }
  const auto count = element_count(shape);
  const auto total = count ? byte_size(dtype, *count) : std::nullopt;
  if (!total || *total != data.size()) {
    fail(ErrorKind::Validation, name,
         fmt::format("shape {} of {} does not match the {} bytes given", shape_text(shape), to_string(dtype),
                     data.size()));
  }
  int major = 1;
  const std::string header = make_header(dtype, shape, major);
  std::string preamble(kMagic, kMagicSize);
  preamble += static_cast<char>(major);
  preamble += '\0';
  const size_t len_size = major == 1 ? 2 : 4;
  for (size_t i = 0; i < len_size; ++i) preamble += static_cast<char>((header.size() >> (8 * i)) & 0xff);

  write_file_atomically(path, {std::as_bytes(std::span(preamble.data(), preamble.size())),
                               std::as_bytes(std::span(header.data(), header.size())), data});
}

}  // namespace svod
