#include "svod/planfile/json_text.h"

#include <sys/stat.h>

#include <algorithm>

#include "svod/base/error.h"
#include "svod/base/file_read.h"

namespace svod::detail {

std::string_view json_type_name(const nlohmann::ordered_json& j) {
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::object: return "an object";
    case Type::array: return "an array";
    case Type::string: return "a string";
    case Type::boolean: return "true/false";
    case Type::number_integer:
    case Type::number_unsigned: return "an integer";
    case Type::number_float: return "a number";
    case Type::null: return "null";
    default: return "something else";
  }
}

bool is_variable_name(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !alpha(s[0]) || s == "min" || s == "max") return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

std::string read_format_file(const std::filesystem::path& path, std::string_view what, uintmax_t max_bytes) {
  struct stat status {};
  const FileDescriptor fd = open_regular_file(path, what, &status);
  if (static_cast<uintmax_t>(status.st_size) > max_bytes) {
    throw make_error(ErrorKind::Validation, "{}: the {} has {} bytes, more than the {} MiB a {} may have",
                     path.string(), what, status.st_size, max_bytes >> 20, what);
  }
  return read_to_end(fd, path, what);
}

}  // namespace svod::detail
