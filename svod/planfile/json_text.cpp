#include "svod/planfile/json_text.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <vector>

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

nlohmann::ordered_json parse_json_checking_keys(
    std::string_view text, const std::function<void(const std::string& path, std::string_view problem)>& fail) {
  using Json = nlohmann::ordered_json;
  using Event = Json::parse_event_t;
  // The containers being read, outermost first: an object's keys so far and
  // the one whose value is being read, an array's index.
  struct Open {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Open> open;
  auto path_to = [&](const std::string& key) {
    std::string path;
    for (size_t i = 0; i + 1 < open.size(); ++i) {
      if (open[i].array) {
        path += '[' + std::to_string(open[i].index) + ']';
      } else {
        if (!path.empty()) path += '.';
        path += open[i].key;
      }
    }
    if (!path.empty()) path += '.';
    return path + key;
  };
  auto finished_value = [&] {
    if (!open.empty() && open.back().array) ++open.back().index;
  };
  Json::parser_callback_t check = [&](int, Event event, Json& parsed) {
    switch (event) {
      case Event::object_start: open.push_back({}); break;
      case Event::array_start: open.push_back({.array = true, .index = 0, .key = {}, .keys = {}}); break;
      case Event::object_end:
      case Event::array_end:
        open.pop_back();
        finished_value();
        break;
      case Event::key: {
        std::string key = parsed.get<std::string>();
        if (key.find('\0') != std::string::npos)
          fail(path_to(Json(key).dump()), "a key may not contain a NUL byte (\\u0000)");
        Open& object = open.back();
        if (!object.keys.insert(key).second)
          fail(path_to(key), "the key appears twice in one object (each may be given once)");
        object.key = std::move(key);
        break;
      }
      case Event::value: finished_value(); break;
    }
    return true;
  };
  return Json::parse(text.begin(), text.end(), check);
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
