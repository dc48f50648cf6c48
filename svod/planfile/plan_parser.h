// The plan-file parser, shared by its own files: plan_parse.cpp reads a
// plan as a whole (variables, buffers, outputs) and holds the entry points,
// plan_parse_program.cpp reads program objects and plan_parse_ops.cpp ops.
// The typed access to JSON fields, which every section uses, is here. Not
// part of the public API (plan_file.h is).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_file.h"

namespace svod::detail::plan_parse {

namespace fs = std::filesystem;
// Ordered, so outputs and error messages follow the file's order.
using Json = nlohmann::ordered_json;

// Buffers larger than this are surely a typo; it also keeps count * size far from overflow.
inline constexpr size_t kMaxBufferBytes = size_t{1} << 40;

// Paths are made for every field read, error or not: concatenated rather
// than formatted (a program from Python is parsed on every compile()).
inline std::string child(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string out;
  out.reserve(path.size() + 1 + key.size());
  out.append(path).append(1, '.').append(key);
  return out;
}
inline std::string item(const std::string& path, size_t index) {
  std::string out = path;
  out.append(1, '[').append(std::to_string(index)).append(1, ']');
  return out;
}

inline std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

class Parser {
 public:
  Parser(fs::path folder, std::string source) : folder_(std::move(folder)) { file_.source_name = std::move(source); }

  PlanFile parse(std::string_view text);

  // A program object on its own (parse_program_text).
  PlanFileProgram parse_program(std::string_view text);
  // A program object already in memory, read as a plan's "programs" entry
  // `key` (parse_program_value).
  PlanFileProgram parse_program(const Json& value, const std::string& key) const {
    return program(value, key, child("programs", key));
  }

 private:
  Json parse_json(std::string_view text) const {
    check_json_depth(text, ErrorKind::Validation, file_.source_name);  // deeper values overflow the stack
    try {
      return parse_json_checking_keys(text, [this](const std::string& path, std::string_view problem) { fail(path, problem); });
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      throw make_error(ErrorKind::Validation, "{}: not valid JSON: {}", file_.source_name, json_error_words(e.what()));
    }
  }

  [[noreturn]] void fail(const std::string& path, std::string_view problem) const {
    throw make_error(ErrorKind::Validation, "{}: {}: {}", file_.source_name, path.empty() ? root_name_ : path,
                     problem);
  }

  // --- typed access -------------------------------------------------------

  void object(const Json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, got {}", json_type_name(j)));
  }
  void array(const Json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, fmt::format("expected an array, got {}", json_type_name(j)));
  }
  void allow(const Json& j, const std::string& path, std::initializer_list<std::string_view> keys) const {
    for (const auto& [key, value] : j.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string expected;
        for (auto k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
        fail(child(path, key), fmt::format("unknown field (expected one of: {})", expected));
      }
    }
  }
  static const Json* find(const Json& j, std::string_view key) {
    auto it = j.find(std::string(key));
    return it == j.end() ? nullptr : &*it;
  }
  const Json& need(const Json& j, const std::string& path, std::string_view key) const {
    const Json* v = find(j, key);
    if (!v) fail(path, fmt::format("missing field \"{}\"", key));
    return *v;
  }
  std::string str(const Json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, fmt::format("expected a string, got {}", json_type_name(j)));
    return j.get<std::string>();
  }
  std::string name(const Json& j, const std::string& path) const {
    std::string s = str(j, path);
    if (s.empty()) fail(path, "expected a name, got an empty string");
    no_nul(s, path);
    return s;
  }
  // Names are C text wherever they go (reports, the C API, kernels' entry
  // symbols): a NUL byte would cut one short. A plan file's keys are checked
  // as it is parsed (parse_json_checking_keys); this checks names given as
  // values, and keys that arrive without a parse (Python's compile()).
  void no_nul(const std::string& s, const std::string& path) const {
    if (s.find('\0') != std::string::npos) fail(path, "a name may not contain a NUL byte (\\u0000)");
  }
  int64_t integer(const Json& j, const std::string& path) const {
    if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)) fail(path, "integer too large");
    if (!j.is_number_integer()) fail(path, fmt::format("expected an integer, got {}", describe(j)));
    return j.get<int64_t>();
  }
  uint64_t unsigned_integer(const Json& j, const std::string& path) const {
    if (!j.is_number_unsigned()) {
      fail(path, fmt::format("expected a non-negative integer, got {}", describe(j)));
    }
    return j.get<uint64_t>();
  }
  size_t count(const Json& j, const std::string& path) const {
    const uint64_t v = unsigned_integer(j, path);
    if (v > kMaxBufferBytes) fail(path, fmt::format("{} is too large", v));
    return static_cast<size_t>(v);
  }
  double number(const Json& j, const std::string& path) const {
    if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
    if (!j.is_number()) fail(path, fmt::format("expected a number, got {}", json_type_name(j)));
    return j.get<double>();
  }
  // Runs a parse_* function of the program/dtype headers on `text`, moving its
  // error under `path`.
  template <typename Fn>
  auto parsed(const std::string& path, const std::string& text, Fn&& fn) const {
    try {
      return fn(text);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }
  static std::string describe(const Json& j) {
    if (j.is_number() || j.is_boolean()) return j.dump();
    return std::string(json_type_name(j));
  }
  // An integer literal or an expression over `allowed` names.
  Expr expr(const Json& j, const std::string& path, const std::set<std::string>& allowed,
            std::string_view allowed_what) const {
    if (j.is_number_integer()) return Expr::constant(integer(j, path));
    if (!j.is_string()) fail(path, fmt::format("expected an integer or an expression string, got {}", describe(j)));
    Expr e;
    try {
      e = Expr::parse(j.get<std::string>());
    } catch (const Error& err) {
      fail(path, err.what());
    }
    for (const auto& v : e.variables()) {
      if (!allowed.contains(v)) {
        fail(path, fmt::format("unknown variable \"{}\" in \"{}\" ({}: {})", v, e.text(), allowed_what,
                               join({allowed.begin(), allowed.end()})));
      }
    }
    return e;
  }
  fs::path file_path(const Json& j, const std::string& path) const {
    fs::path p = name(j, path);
    return p.is_absolute() ? p : folder_ / p;
  }

  // --- sections (plan_parse.cpp) ------------------------------------------

  void variables(const Json& j);
  void buffers(const Json& j);
  PlanFileBuffer base_buffer(const Json& b, const std::string& key, const std::string& path) const;
  void count_or_shape(const Json& b, const std::string& path, PlanFileBuffer& buf) const;
  void representable(DType dtype, double value, const std::string& path) const;
  BufferInit buffer_init(const Json& j, const PlanFileBuffer& buf, const std::string& path) const;
  PlanFileBuffer view_buffer(const Json& b, const std::string& key, const std::string& path,
                             const std::map<std::string, PlanFileBuffer>& bases, const Json& all) const;
  void outputs(const Json& j);
  PlanFileExpect expect(const Json& j, const std::string& path, const PlanFileBuffer& buf) const;

  // --- programs (plan_parse_program.cpp) -----------------------------------

  void programs(const Json& j);
  PlanFileProgram program(const Json& p, const std::string& key, const std::string& path) const;
  Expr cost_expr(const Json& j, const std::string& path, const std::set<std::string>& names) const;

  // --- ops (plan_parse_ops.cpp) ---------------------------------------------

  std::string buffer_ref(const Json& j, const std::string& path) const;
  std::vector<std::string> buffer_list(const Json& j, const std::string& path) const;
  void ops(const Json& j);
  PlanFileOp op(const Json& j, const std::string& path, size_t index, size_t op_count,
                const std::map<std::string, size_t>& ids) const;
  void collective_op(const Json& j, const std::string& path, PlanFileOp& op) const;

  fs::path folder_;
  PlanFile file_;
  std::string root_name_ = "(the plan)";  // what errors call the top-level value
  // Every plan has rank and world_size.
  std::set<std::string> variable_names_{std::string(kRankVariable), std::string(kWorldSizeVariable)};
};

// The spec builder of Python's Device.compile (and of anything else that has
// a program's fields as values rather than text): `program` read exactly as
// the entry `key` of a plan's "programs" (same checks, same messages, paths
// "programs.KEY.…" prefixed by `source_name`), relative source_file paths
// under `folder`. No JSON text is made or parsed.
PlanFileProgram parse_program_value(const Json& program, const std::string& key, const fs::path& folder,
                                    std::string_view source_name);

}  // namespace svod::detail::plan_parse
