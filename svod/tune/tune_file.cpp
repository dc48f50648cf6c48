// Tune file JSON → TuneFile, every error naming the file and the JSON path.
#include "svod/tune/tune_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/planfile/json_text.h"

namespace svod {

namespace {

namespace fs = std::filesystem;
// Ordered, so parameters keep the file's order (the start point, the table).
using Json = nlohmann::ordered_json;
using detail::json_type_name;
using detail::is_variable_name;

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
}

// Whether `name` occurs in `text` as a whole identifier.
bool mentions(std::string_view text, std::string_view name) {
  for (size_t pos = text.find(name); pos != std::string_view::npos; pos = text.find(name, pos + 1)) {
    const bool starts = pos == 0 || !ident_char(text[pos - 1]);
    const size_t end = pos + name.size();
    if (starts && (end == text.size() || !ident_char(text[end]))) return true;
  }
  return false;
}

// The expressions of a spec where tuning parameters may appear.
std::vector<const Expr*> size_exprs(const ProgramSpec& spec) {
  std::vector<const Expr*> out;
  for (const Expr& e : spec.global_size) out.push_back(&e);
  for (const Expr& e : spec.local_size) out.push_back(&e);
  if (spec.flops) out.push_back(&*spec.flops);
  if (spec.bytes) out.push_back(&*spec.bytes);
  return out;
}

class Parser {
 public:
  explicit Parser(TuneFile& file) : file_(file) {}

  void parse(std::string_view text) {
    Json root;
    check_json_depth(text, ErrorKind::Validation, file_.source_name);  // deeper values overflow the stack
    try {
      root = Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      throw make_error(ErrorKind::Validation, "{}: not valid JSON: {}", file_.source_name, json_error_words(e.what()));
    }
    if (!root.is_object()) fail("(the tune file)", fmt::format("expected an object, got {}", json_type_name(root)));
    allow(root, "", {"svod_tune", "description", "plan", "op", "parameters", "beam", "min_gain", "max_rounds", "vars",
                     "check", "timeout_ms", "benchmark"});
    const Json& version = need(root, "", "svod_tune");
    if (!version.is_number_integer() || version.get<int64_t>() != kTuneFileVersion) {
      fail("svod_tune", fmt::format("this svod reads tune file version {}, the file says {}", kTuneFileVersion,
                                    version.dump()));
    }
    if (const Json* d = find(root, "description")) str(*d, "description");
    plan(need(root, "", "plan"));
    op(need(root, "", "op"));
    if (const Json* v = find(root, "vars")) vars(*v);
    parameters(need(root, "", "parameters"));
    if (const Json* b = find(root, "beam")) file_.search.beam_width = positive(*b, "beam", 1 << 20);
    if (const Json* g = find(root, "min_gain")) {
      const double gain = number(*g, "min_gain");
      if (gain < 0 || gain >= 1) fail("min_gain", fmt::format("expected a fraction in [0, 1), got {}", gain));
      file_.search.min_gain = gain;
    }
    if (const Json* r = find(root, "max_rounds")) {
      file_.search.max_rounds = r->is_number_unsigned() && r->get<uint64_t>() == 0 ? 0 : positive(*r, "max_rounds", 1 << 20);
    }
    if (const Json* c = find(root, "check")) check(*c);
    if (const Json* t = find(root, "timeout_ms")) {
      file_.timeout = std::chrono::milliseconds(positive(*t, "timeout_ms", 24 * 3600 * 1000));
    }
    if (const Json* b = find(root, "benchmark")) benchmark(*b);
  }

 private:
  [[noreturn]] void fail(const std::string& path, std::string_view problem) const {
    throw make_error(ErrorKind::Validation, "{}: {}: {}", file_.source_name, path, problem);
  }
  void allow(const Json& j, const std::string& path, std::initializer_list<std::string_view> keys) const {
    for (const auto& [key, value] : j.items()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string expected;
      for (auto k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
      fail(path.empty() ? key : path + "." + key, fmt::format("unknown field (expected one of: {})", expected));
    }
  }
  static const Json* find(const Json& j, std::string_view key) {
    auto it = j.find(std::string(key));
    return it == j.end() ? nullptr : &*it;
  }
  const Json& need(const Json& j, const std::string& path, std::string_view key) const {
    const Json* v = find(j, key);
    if (!v) fail(path.empty() ? "(the tune file)" : path, fmt::format("missing field \"{}\"", key));
    return *v;
  }
  std::string str(const Json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, fmt::format("expected a string, got {}", json_type_name(j)));
    return j.get<std::string>();
  }
  void object(const Json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, got {}", json_type_name(j)));
  }
  int64_t integer(const Json& j, const std::string& path) const {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))) {
      fail(path, fmt::format("expected an integer, got {}", j.is_number() ? j.dump() : std::string(json_type_name(j))));
    }
    return j.get<int64_t>();
  }
  int64_t positive(const Json& j, const std::string& path, int64_t max) const {
    const int64_t v = integer(j, path);
    if (v < 1 || v > max) fail(path, fmt::format("expected an integer from 1 to {}, got {}", max, v));
    return v;
  }
  double number(const Json& j, const std::string& path) const {
    if (!j.is_number()) fail(path, fmt::format("expected a number, got {}", json_type_name(j)));
    return j.get<double>();
  }

  void plan(const Json& j) {
    const std::string name = str(j, "plan");
    if (name.empty()) fail("plan", "expected the plan file's name, got an empty string");
    fs::path path = name;
    if (path.is_relative()) path = file_.path.parent_path() / path;
    try {
      file_.plan = parse_plan_file(path);
    } catch (const Error& e) {
      throw make_error(e.kind(), "{}: plan: {}", file_.source_name, e.what());
    }
  }

  void op(const Json& j) {
    const auto& ops = file_.plan.ops;
    if (j.is_string()) {
      const std::string id = j.get<std::string>();
      auto it = std::find_if(ops.begin(), ops.end(), [&](const PlanFileOp& o) { return o.id == id; });
      if (it == ops.end()) fail("op", fmt::format("the plan has no op with id \"{}\"", id));
      file_.op = static_cast<size_t>(it - ops.begin());
    } else if (j.is_number_unsigned()) {
      const uint64_t index = j.get<uint64_t>();
      if (index >= ops.size()) fail("op", fmt::format("op index {} is out of range (the plan has {} ops)", index, ops.size()));
      file_.op = static_cast<size_t>(index);
    } else {
      fail("op", fmt::format("expected an op index or an op id, got {}", j.is_number() ? j.dump() : std::string(json_type_name(j))));
    }
    if (ops[file_.op].kind != PlanFileOp::Kind::Run) {
      fail("op", fmt::format("ops[{}] does not run a program (only run ops can be tuned)", file_.op));
    }
  }

  void vars(const Json& j) {
    object(j, "vars");
    for (const auto& [name, value] : j.items()) {
      const std::string path = "vars." + name;
      const auto& vs = file_.plan.variables;
      auto it = std::find_if(vs.begin(), vs.end(), [&](const PlanFileVariable& v) { return v.variable.name == name; });
      if (it == vs.end()) fail(path, "the plan has no variable of this name");
      const int64_t v = integer(value, path);
      try {
        it->variable.check(v);
      } catch (const Error& e) {
        fail(path, e.what());
      }
      file_.vars[name] = v;
    }
  }

  void parameters(const Json& j) {
    object(j, "parameters");
    if (j.empty()) fail("parameters", "expected at least one parameter");
    const ProgramSpec& spec = file_.program().spec;
    const std::string& program = file_.program().name;
    for (const auto& [name, values] : j.items()) {
      const std::string path = "parameters." + name;
      if (!is_variable_name(name)) {
        fail(path, "a parameter name is a letter or _ followed by letters, digits or _ (and not min or max)");
      }
      if (std::any_of(spec.scalars.begin(), spec.scalars.end(), [&](const ScalarParam& s) { return s.name == name; })) {
        fail(path, fmt::format("\"{}\" is a scalar parameter of program \"{}\"; a tuning parameter is a define", name,
                               program));
      }
      bool in_sizes = false;
      for (const Expr* e : size_exprs(spec)) {
        const auto& used = e->variables();
        in_sizes = in_sizes || std::find(used.begin(), used.end(), name) != used.end();
      }
      if (!in_sizes && !mentions(spec.source, name)) {
        fail(path, fmt::format("program \"{}\" does not use \"{}\" (not in its source nor its launch sizes)", program,
                               name));
      }
      if (!values.is_array() || values.empty()) fail(path, "expected a non-empty array of values");
      TuneParameter param{name, {}};
      std::set<std::string> seen;
      for (size_t i = 0; i < values.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", path, i);
        const Json& v = values[i];
        TuneValue value;
        if (v.is_number_integer()) {
          value.integer = integer(v, at);
          value.text = std::to_string(*value.integer);
        } else if (v.is_string() && !v.get<std::string>().empty()) {
          value.text = v.get<std::string>();
        } else {
          fail(at, fmt::format("expected an integer or a non-empty string, got {}",
                               v.is_number() ? v.dump() : std::string(json_type_name(v))));
        }
        if (!seen.insert(value.text).second) fail(at, fmt::format("{} is listed twice", value.text));
        if (in_sizes) size_value(path, at, name, value);
        param.values.push_back(std::move(value));
      }
      file_.parameters.push_back(std::move(param));
    }
  }

  // A parameter in the launch sizes is a plan variable: integer values
  // within its bounds.
  void size_value(const std::string& path, const std::string& at, const std::string& name, const TuneValue& value) const {
    const auto& vs = file_.plan.variables;
    auto it = std::find_if(vs.begin(), vs.end(), [&](const PlanFileVariable& v) { return v.variable.name == name; });
    if (it == vs.end()) fail(path, "used in launch sizes but not a plan variable");  // parse_plan_file forbids this
    if (!value.integer) fail(at, fmt::format("\"{}\" is used in launch sizes, so its values must be integers", name));
    if (file_.vars.contains(name)) fail("vars." + name, "is a tuning parameter; set its values under parameters");
    try {
      it->variable.check(*value.integer);
    } catch (const Error& e) {
      fail(at, e.what());
    }
  }

  void check(const Json& j) {
    object(j, "check");
    allow(j, "check", {"rtol", "atol"});
    auto tolerance = [&](const char* key) -> std::optional<double> {
      const Json* v = find(j, key);
      if (!v) return std::nullopt;
      const double t = number(*v, std::string("check.") + key);
      if (!(t >= 0)) fail(std::string("check.") + key, fmt::format("expected a tolerance >= 0, got {}", t));
      return t;
    };
    file_.rtol = tolerance("rtol");
    file_.atol = tolerance("atol");
  }

  void benchmark(const Json& j) {
    object(j, "benchmark");
    allow(j, "benchmark", {"warmup_runs", "min_runs", "max_runs", "min_time_ms"});
    BenchmarkConfig& b = file_.benchmark;
    if (const Json* v = find(j, "warmup_runs")) {
      const int64_t n = integer(*v, "benchmark.warmup_runs");
      if (n < 0 || n > 1000) fail("benchmark.warmup_runs", fmt::format("expected 0 to 1000, got {}", n));
      b.warmup_runs = static_cast<int>(n);
    }
    if (const Json* v = find(j, "min_runs")) b.min_runs = static_cast<int>(positive(*v, "benchmark.min_runs", 100000));
    if (const Json* v = find(j, "max_runs")) b.max_runs = static_cast<int>(positive(*v, "benchmark.max_runs", 100000));
    if (b.max_runs < b.min_runs) {
      fail("benchmark", fmt::format("max_runs ({}) is below min_runs ({})", b.max_runs, b.min_runs));
    }
    if (const Json* v = find(j, "min_time_ms")) {
      const int64_t ms = integer(*v, "benchmark.min_time_ms");
      if (ms < 0 || ms > 3600 * 1000) fail("benchmark.min_time_ms", fmt::format("expected 0 to 3600000, got {}", ms));
      b.min_total = std::chrono::milliseconds(ms);
    }
  }

  TuneFile& file_;
};

}  // namespace

const PlanFileProgram& TuneFile::program() const { return *plan.find_program(plan.ops.at(op).target); }

std::string TuneFile::describe(const TunePoint& point) const {
  std::string out;
  for (size_t i = 0; i < parameters.size(); ++i) {
    out += fmt::format("{}{}={}", i == 0 ? "" : " ", parameters[i].name, parameters[i].values.at(point.at(i)).text);
  }
  return out;
}

TuneFile parse_tune_file(const std::filesystem::path& path) {
  const std::string text = detail::read_format_file(path, "tune file");
  TuneFile file;
  file.source_name = path.string();
  file.path = fs::absolute(path);
  file.benchmark.min_total = std::chrono::milliseconds(20);
  file.benchmark.max_runs = 50;
  file.search.min_gain = 0.02;
  Parser(file).parse(text);
  return file;
}

std::map<std::string, int64_t, std::less<>> plan_variable_values(const TuneFile& file) {
  std::map<std::string, int64_t, std::less<>> values;
  for (const auto& v : file.plan.variables) values[v.variable.name] = v.value;
  for (const auto& [name, value] : file.vars) values[name] = value;
  return values;
}

ProgramSpec candidate_spec(const TuneFile& file, const TunePoint& point) {
  ProgramSpec spec = file.program().spec;
  auto values = plan_variable_values(file);
  for (size_t i = 0; i < file.parameters.size(); ++i) {
    const TuneParameter& param = file.parameters[i];
    const TuneValue& value = param.values.at(point.at(i));
    auto it = std::find_if(spec.defines.begin(), spec.defines.end(), [&](const auto& d) { return d.first == param.name; });
    if (it != spec.defines.end()) it->second = value.text;
    else spec.defines.emplace_back(param.name, value.text);
    if (value.integer) values[param.name] = *value.integer;
  }
  // A scalar of the same name wins at launch, so it stays a variable.
  for (const ScalarParam& s : spec.scalars) values.erase(s.name);
  for (Expr& e : spec.global_size) e = e.substitute(values);
  for (Expr& e : spec.local_size) e = e.substitute(values);
  if (spec.flops) spec.flops = spec.flops->substitute(values);
  if (spec.bytes) spec.bytes = spec.bytes->substitute(values);
  return spec;
}

}  // namespace svod
