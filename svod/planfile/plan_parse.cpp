// Plan file JSON → PlanFile: every field checked, every error naming its JSON path.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "svod/base/error.h"
#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_file.h"

namespace svod {

namespace {

namespace fs = std::filesystem;
// Ordered, so outputs and error messages follow the file's order.
using Json = nlohmann::ordered_json;
using detail::json_type_name;
using detail::is_variable_name;

// Buffers larger than this are surely a typo; it also keeps count * size far from overflow.
constexpr size_t kMaxBufferBytes = size_t{1} << 40;

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}
std::string item(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

class Parser {
 public:
  Parser(fs::path folder, std::string source) : folder_(std::move(folder)) { file_.source_name = std::move(source); }

  PlanFile parse(std::string_view text) {
    const Json root = parse_json(text);
    file_.folder = folder_;
    object(root, "(the plan)");
    allow(root, "", {"svod_plan", "description", "device", "variables", "buffers", "programs", "ops", "outputs"});
    const Json& version = need(root, "", "svod_plan");
    if (!version.is_number_integer() || version.get<int64_t>() != kPlanFileVersion) {
      fail("svod_plan", fmt::format("this svod reads plan format version {}, the file says {}", kPlanFileVersion,
                                    version.dump()));
    }
    if (const Json* d = find(root, "description")) str(*d, "description");
    if (const Json* d = find(root, "device")) file_.device = str(*d, "device");
    if (const Json* v = find(root, "variables")) variables(*v);
    buffers(need(root, "", "buffers"));
    if (const Json* p = find(root, "programs")) programs(*p);
    ops(need(root, "", "ops"));
    if (const Json* o = find(root, "outputs")) outputs(*o);
    return std::move(file_);
  }

  // A program object on its own (parse_program_text).
  PlanFileProgram parse_program(std::string_view text) {
    root_name_ = "(the program)";
    return program(parse_json(text), "", "");
  }

 private:
  Json parse_json(std::string_view text) const {
    try {
      return Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      throw make_error(ErrorKind::Validation, "{}: not valid JSON: {}", file_.source_name, e.what());
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
    return s;
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

  // --- sections -----------------------------------------------------------

  void variables(const Json& j) {
    object(j, "variables");
    for (const auto& [key, v] : j.items()) {
      const std::string path = child("variables", key);
      object(v, path);
      allow(v, path, {"min", "max", "value"});
      PlanFileVariable var;
      var.variable.name = key;
      if (key == kRankVariable || key == kWorldSizeVariable) {
        fail(path, fmt::format("\"{}\" is set by the launcher (svod run --ranks, mpirun) and cannot be declared", key));
      }
      if (!is_variable_name(key)) {
        fail(path, "a variable name is a letter or _ followed by letters, digits or _ (and not min or max)");
      }
      var.variable.min = integer(need(v, path, "min"), child(path, "min"));
      var.variable.max = integer(need(v, path, "max"), child(path, "max"));
      var.value = integer(need(v, path, "value"), child(path, "value"));
      if (var.variable.min > var.variable.max) {
        fail(path, fmt::format("min {} is greater than max {}", var.variable.min, var.variable.max));
      }
      if (var.value < var.variable.min || var.value > var.variable.max) {
        fail(child(path, "value"),
             fmt::format("{} is outside [{}, {}]", var.value, var.variable.min, var.variable.max));
      }
      variable_names_.insert(key);
      file_.variables.push_back(std::move(var));
    }
  }

  void buffers(const Json& j) {
    object(j, "buffers");
    if (j.empty()) fail("buffers", "a plan needs at least one buffer");
    // Bases first, so views can be checked against them wherever they appear.
    std::map<std::string, PlanFileBuffer> bases;
    for (const auto& [key, b] : j.items()) {
      const std::string path = child("buffers", key);
      object(b, path);
      if (key.empty()) fail(path, "a buffer needs a non-empty name");
      if (!find(b, "view")) bases.emplace(key, base_buffer(b, key, path));
    }
    for (const auto& [key, b] : j.items()) {
      const std::string path = child("buffers", key);
      if (auto it = bases.find(key); it != bases.end()) {
        file_.buffers.push_back(it->second);
      } else {
        file_.buffers.push_back(view_buffer(b, key, path, bases, j));
      }
    }
  }

  PlanFileBuffer base_buffer(const Json& b, const std::string& key, const std::string& path) const {
    allow(b, path, {"dtype", "count", "shape", "device", "init"});
    PlanFileBuffer buf;
    buf.name = key;
    const std::string dtype_path = child(path, "dtype");
    buf.dtype = parsed(dtype_path, str(need(b, path, "dtype"), dtype_path), parse_dtype);
    const Json* count_json = find(b, "count");
    const Json* shape_json = find(b, "shape");
    if ((count_json != nullptr) == (shape_json != nullptr)) fail(path, "give either \"count\" or \"shape\"");
    if (count_json) {
      buf.count = count(*count_json, child(path, "count"));
      buf.shape = {buf.count};
    } else {
      const std::string shape_path = child(path, "shape");
      array(*shape_json, shape_path);
      buf.count = 1;
      for (size_t i = 0; i < shape_json->size(); ++i) {
        const size_t d = count((*shape_json)[i], item(shape_path, i));
        buf.shape.push_back(d);
        if (d != 0 && buf.count > kMaxBufferBytes / d) fail(shape_path, "the buffer is too large");
        buf.count *= d;
      }
    }
    if (buf.count == 0) fail(path, "a buffer needs at least one element");
    if (buf.count > kMaxBufferBytes / size_of(buf.dtype)) fail(path, "the buffer is too large");
    if (const Json* d = find(b, "device")) buf.device = name(*d, child(path, "device"));
    if (const Json* init = find(b, "init")) buf.init = buffer_init(*init, buf, child(path, "init"));
    return buf;
  }

  // Checks that `value` is stored exactly in an integer or bool buffer.
  void representable(DType dtype, double value, const std::string& path) const {
    if (is_float(dtype)) return;
    alignas(8) std::byte cell[8];
    store_from_double(dtype, cell, value);
    if (!std::isfinite(value) || load_as_double(dtype, cell) != value) {
      fail(path, fmt::format("{} is not a {} value", value, to_string(dtype)));
    }
  }

  BufferInit buffer_init(const Json& j, const PlanFileBuffer& buf, const std::string& path) const {
    BufferInit init;
    if (j.is_string() && j.get<std::string>() == "zeros") return init;
    object(j, path);
    if (j.size() != 1) fail(path, "expected exactly one of: zeros, fill, arange, uniform, normal, npy");
    allow(j, path, {"zeros", "fill", "arange", "uniform", "normal", "npy"});
    // The one key; not through items(), whose proxy would die with the statement.
    const std::string kind = j.begin().key();
    const Json& v = j.begin().value();
    const std::string at = child(path, kind);
    auto need_float = [&] {
      if (!is_float(buf.dtype)) {
        fail(at, fmt::format("random initialisation needs a float buffer, this one is {}", to_string(buf.dtype)));
      }
    };
    if (kind == "zeros") {
      if (!(v.is_object() && v.empty()) && !(v.is_boolean() && v.get<bool>())) fail(at, "expected {} or true");
    } else if (kind == "fill") {
      init.kind = BufferInit::Kind::Fill;
      init.a = number(v, at);
      representable(buf.dtype, init.a, at);
    } else if (kind == "arange") {
      init.kind = BufferInit::Kind::Arange;
      object(v, at);
      allow(v, at, {"start", "step"});
      init.a = number(need(v, at, "start"), child(at, "start"));
      init.b = number(need(v, at, "step"), child(at, "step"));
      representable(buf.dtype, init.a, child(at, "start"));
      representable(buf.dtype, init.b, child(at, "step"));
      representable(buf.dtype, init.a + init.b * double(buf.count - 1), at);
    } else if (kind == "uniform" || kind == "normal") {
      need_float();
      const bool uniform = kind == "uniform";
      init.kind = uniform ? BufferInit::Kind::Uniform : BufferInit::Kind::Normal;
      object(v, at);
      const char* first = uniform ? "low" : "mean";
      const char* second = uniform ? "high" : "std";
      allow(v, at, {first, second, "seed"});
      init.a = number(need(v, at, first), child(at, first));
      init.b = number(need(v, at, second), child(at, second));
      init.seed = unsigned_integer(need(v, at, "seed"), child(at, "seed"));
      if (uniform && !(init.a <= init.b)) fail(at, fmt::format("low {} is greater than high {}", init.a, init.b));
      if (!uniform && !(init.b >= 0)) fail(child(at, "std"), "must not be negative");
    } else {
      init.kind = BufferInit::Kind::Npy;
      init.npy = file_path(v, at);
    }
    return init;
  }

  PlanFileBuffer view_buffer(const Json& b, const std::string& key, const std::string& path,
                             const std::map<std::string, PlanFileBuffer>& bases, const Json& all) const {
    allow(b, path, {"view", "offset", "count"});
    PlanFileBuffer view;
    view.name = key;
    const std::string base_name = name(need(b, path, "view"), child(path, "view"));
    auto base = bases.find(base_name);
    if (base == bases.end()) {
      fail(child(path, "view"), all.contains(base_name)
                                    ? fmt::format("\"{}\" is itself a view; give the base buffer it views", base_name)
                                    : fmt::format("no buffer named \"{}\"", base_name));
    }
    const PlanFileBuffer* base_buf = &base->second;
    view.view_of = base_name;
    view.dtype = base_buf->dtype;
    view.offset = count(need(b, path, "offset"), child(path, "offset"));
    view.count = count(need(b, path, "count"), child(path, "count"));
    if (view.count == 0) fail(child(path, "count"), "a view needs at least one element");
    if (view.offset > base_buf->count || view.count > base_buf->count - view.offset) {
      fail(path, fmt::format("elements [{}, {}) leave \"{}\", which has {}", view.offset, view.offset + view.count,
                             base_name, base_buf->count));
    }
    view.shape = {view.count};
    return view;
  }

  void programs(const Json& j) {
    object(j, "programs");
    for (const auto& [key, p] : j.items()) file_.programs.push_back(program(p, key, child("programs", key)));
  }

  // One program object, at JSON path `path`; `key` is its name (empty for a
  // program parsed alone, whose spec then goes by its entry).
  PlanFileProgram program(const Json& p, const std::string& key, const std::string& path) const {
    object(p, path);
    allow(p, path,
          {"language", "device", "source", "source_file", "entry", "buffers", "scalars", "global_size",
           "local_size", "defines", "flops", "bytes"});
    PlanFileProgram prog;
    prog.name = key;
    ProgramSpec& spec = prog.spec;
    spec.name = key;
    const std::string lang_path = child(path, "language");
    spec.language = parsed(lang_path, str(need(p, path, "language"), lang_path), parse_language);
    if (const Json* d = find(p, "device")) prog.device = name(*d, child(path, "device"));
    const Json* source = find(p, "source");
    const Json* source_file = find(p, "source_file");
    if ((source != nullptr) == (source_file != nullptr)) fail(path, "give either \"source\" or \"source_file\"");
    if (source) {
      spec.source = str(*source, child(path, "source"));
    } else {
      const fs::path file = file_path(*source_file, child(path, "source_file"));
      try {
        spec.source = detail::read_format_file(file, "source file");
      } catch (const Error& e) {
        throw make_error(e.kind(), "{}: {}: {}", file_.source_name, child(path, "source_file"), e.what());
      }
    }
    spec.entry = name(need(p, path, "entry"), child(path, "entry"));

    const std::string bufs_path = child(path, "buffers");
    const Json& bufs = need(p, path, "buffers");
    array(bufs, bufs_path);
    for (size_t i = 0; i < bufs.size(); ++i) {
      const std::string at = item(bufs_path, i);
      object(bufs[i], at);
      allow(bufs[i], at, {"name", "access", "dtype"});
      BufferParam param;
      param.name = name(need(bufs[i], at, "name"), child(at, "name"));
      if (const Json* a = find(bufs[i], "access")) {
        param.access = parsed(child(at, "access"), str(*a, child(at, "access")), parse_access);
      }
      if (const Json* d = find(bufs[i], "dtype")) {
        param.dtype = parsed(child(at, "dtype"), str(*d, child(at, "dtype")), parse_dtype);
      }
      spec.buffers.push_back(std::move(param));
    }

    std::set<std::string> size_names = variable_names_;
    if (const Json* scalars = find(p, "scalars")) {
      const std::string sc_path = child(path, "scalars");
      array(*scalars, sc_path);
      for (size_t i = 0; i < scalars->size(); ++i) {
        const std::string at = item(sc_path, i);
        const Json& s = (*scalars)[i];
        object(s, at);
        allow(s, at, {"name", "type", "min", "max"});
        ScalarParam param;
        param.name = name(need(s, at, "name"), child(at, "name"));
        param.type = parsed(child(at, "type"), str(need(s, at, "type"), child(at, "type")), parse_scalar_type);
        if (const Json* m = find(s, "min")) param.min = integer(*m, child(at, "min"));
        if (const Json* m = find(s, "max")) param.max = integer(*m, child(at, "max"));
        if (param.name != kCoreIdName) size_names.insert(param.name);
        spec.scalars.push_back(std::move(param));
      }
    }
    constexpr std::string_view kSizeNames = "plan variables and the program's scalars";
    for (const char* field : {"global_size", "local_size"}) {
      const Json* dims = find(p, field);
      if (!dims) continue;
      const std::string at = child(path, field);
      array(*dims, at);
      if (dims->empty() || dims->size() > 3) fail(at, fmt::format("expected 1 to 3 sizes, got {}", dims->size()));
      auto& target = std::string_view(field) == "global_size" ? spec.global_size : spec.local_size;
      for (size_t i = 0; i < dims->size(); ++i) target[i] = expr((*dims)[i], item(at, i), size_names, kSizeNames);
    }
    if (const Json* defines = find(p, "defines")) {
      const std::string at = child(path, "defines");
      object(*defines, at);
      for (const auto& [macro, value] : defines->items()) {
        std::string text;
        if (value.is_string()) text = value.get<std::string>();
        else if (value.is_boolean()) text = value.get<bool>() ? "1" : "0";
        else if (value.is_number()) text = value.dump();
        else fail(child(at, macro), fmt::format("expected a number or a string, got {}", json_type_name(value)));
        spec.defines.emplace_back(macro, std::move(text));
      }
    }
    if (const Json* f = find(p, "flops")) spec.flops = cost_expr(*f, child(path, "flops"), size_names);
    if (const Json* b = find(p, "bytes")) spec.bytes = cost_expr(*b, child(path, "bytes"), size_names);
    try {
      spec.validate();
    } catch (const Error& e) {
      fail(path, e.what());
    }
    return prog;
  }

  // flops/bytes may be written as JSON floats such as 1e9; they must still be whole numbers.
  Expr cost_expr(const Json& j, const std::string& path, const std::set<std::string>& names) const {
    if (j.is_number_float()) {
      const double v = j.get<double>();
      if (!(v >= 0 && v < 9.2e18) || v != std::floor(v)) fail(path, fmt::format("expected a whole number, got {}", v));
      return Expr::constant(static_cast<int64_t>(v));
    }
    return expr(j, path, names, "plan variables and the program's scalars");
  }

  std::string buffer_ref(const Json& j, const std::string& path) const {
    std::string n = name(j, path);
    if (!file_.find_buffer(n)) fail(path, fmt::format("no buffer named \"{}\"", n));
    return n;
  }

  std::vector<std::string> buffer_list(const Json& j, const std::string& path) const {
    array(j, path);
    std::vector<std::string> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(buffer_ref(j[i], item(path, i)));
    return out;
  }

  void ops(const Json& j) {
    array(j, "ops");
    std::map<std::string, size_t> ids;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string path = item("ops", i);
      object(j[i], path);
      if (const Json* id = find(j[i], "id")) {
        const std::string text = name(*id, child(path, "id"));
        if (auto [it, fresh] = ids.emplace(text, i); !fresh) {
          fail(child(path, "id"), fmt::format("id \"{}\" is already used by ops[{}]", text, it->second));
        }
      }
    }
    for (size_t i = 0; i < j.size(); ++i) file_.ops.push_back(op(j[i], item("ops", i), i, j.size(), ids));
  }

  PlanFileOp op(const Json& j, const std::string& path, size_t index, size_t op_count,
                const std::map<std::string, size_t>& ids) const {
    PlanFileOp op;
    const int kinds = (find(j, "run") ? 1 : 0) + (find(j, "copy") ? 1 : 0) + (find(j, "custom") ? 1 : 0) +
                      (find(j, "collective") ? 1 : 0);
    if (kinds != 1) fail(path, "an op has exactly one of \"run\", \"copy\", \"custom\" or \"collective\"");
    if (const Json* id = find(j, "id")) op.id = id->get<std::string>();
    if (const Json* after = find(j, "after")) {
      const std::string at = child(path, "after");
      array(*after, at);
      for (size_t k = 0; k < after->size(); ++k) {
        const Json& ref = (*after)[k];
        const std::string ref_path = item(at, k);
        if (ref.is_string()) {
          auto it = ids.find(ref.get<std::string>());
          if (it == ids.end()) fail(ref_path, fmt::format("no op with id \"{}\"", ref.get<std::string>()));
          if (it->second == index) fail(ref_path, "an op cannot run after itself");
          op.after.emplace_back(ref.get<std::string>());
        } else {
          const uint64_t other = unsigned_integer(ref, ref_path);
          if (other >= op_count) fail(ref_path, fmt::format("no op with index {} (the plan has {})", other, op_count));
          if (other == index) fail(ref_path, "an op cannot run after itself");
          op.after.emplace_back(static_cast<size_t>(other));
        }
      }
    }
    if (const Json* run = find(j, "run")) {
      allow(j, path, {"run", "buffers", "scalars", "id", "after"});
      op.kind = PlanFileOp::Kind::Run;
      op.target = name(*run, child(path, "run"));
      const PlanFileProgram* prog = file_.find_program(op.target);
      if (!prog) fail(child(path, "run"), fmt::format("no program named \"{}\"", op.target));
      const ProgramSpec& spec = prog->spec;
      const std::string bufs_path = child(path, "buffers");
      op.buffers = buffer_list(need(j, path, "buffers"), bufs_path);
      if (op.buffers.size() != spec.buffers.size()) {
        fail(bufs_path, fmt::format("program \"{}\" takes {} buffers, got {}", op.target, spec.buffers.size(),
                                    op.buffers.size()));
      }
      for (size_t k = 0; k < op.buffers.size(); ++k) {
        const DType have = file_.find_buffer(op.buffers[k])->dtype;
        if (spec.buffers[k].dtype && *spec.buffers[k].dtype != have) {
          fail(item(bufs_path, k), fmt::format("buffer \"{}\" is {}, parameter \"{}\" of \"{}\" takes {}",
                                               op.buffers[k], to_string(have), spec.buffers[k].name, op.target,
                                               to_string(*spec.buffers[k].dtype)));
        }
      }
      const std::string sc_path = child(path, "scalars");
      const Json* scalars = find(j, "scalars");
      if (scalars) {
        object(*scalars, sc_path);
        for (const auto& [key, value] : scalars->items()) {
          const bool declared = std::any_of(spec.scalars.begin(), spec.scalars.end(),
                                            [&](const ScalarParam& s) { return s.name == key; });
          if (!declared) fail(child(sc_path, key), fmt::format("program \"{}\" has no scalar named \"{}\"", op.target, key));
          if (key == kCoreIdName) fail(child(sc_path, key), "core_id is set by the runtime for each parallel slice");
        }
      }
      for (const auto& s : spec.scalars) {
        if (s.name == kCoreIdName) continue;
        const Json* value = scalars ? find(*scalars, s.name) : nullptr;
        if (!value) fail(sc_path, fmt::format("missing scalar \"{}\" of program \"{}\"", s.name, op.target));
        op.scalars.push_back(expr(*value, child(sc_path, s.name), variable_names_, "plan variables"));
      }
    } else if (const Json* copy = find(j, "copy")) {
      allow(j, path, {"copy", "id", "after"});
      op.kind = PlanFileOp::Kind::Copy;
      const std::string at = child(path, "copy");
      object(*copy, at);
      allow(*copy, at, {"dst", "src"});
      op.buffers = {buffer_ref(need(*copy, at, "dst"), child(at, "dst")),
                    buffer_ref(need(*copy, at, "src"), child(at, "src"))};
      const auto* dst = file_.find_buffer(op.buffers[0]);
      const auto* src = file_.find_buffer(op.buffers[1]);
      if (dst->bytes() != src->bytes()) {
        fail(at, fmt::format("dst \"{}\" has {} bytes, src \"{}\" has {}", dst->name, dst->bytes(), src->name,
                             src->bytes()));
      }
    } else if (const Json* collective = find(j, "collective")) {
      allow(j, path, {"collective", "id", "after"});
      collective_op(*collective, child(path, "collective"), op);
    } else {
      allow(j, path, {"custom", "buffers", "attrs", "id", "after"});
      op.kind = PlanFileOp::Kind::Custom;
      op.target = name(*find(j, "custom"), child(path, "custom"));
      if (const Json* bufs = find(j, "buffers")) op.buffers = buffer_list(*bufs, child(path, "buffers"));
      if (const Json* attrs = find(j, "attrs")) {
        const std::string at = child(path, "attrs");
        object(*attrs, at);
        for (const auto& [key, value] : attrs->items()) {
          if (value.is_number_integer()) op.attrs.emplace(key, integer(value, child(at, key)));
          else if (value.is_number_float()) op.attrs.emplace(key, value.get<double>());
          else if (value.is_string()) op.attrs.emplace(key, value.get<std::string>());
          else fail(child(at, key), fmt::format("expected a number or a string, got {}", json_type_name(value)));
        }
      }
    }
    return op;
  }

  // {"kind": ..., "buffers": [...]} or {"kind": ..., "src": ..., "dst": ...},
  // with "op" for reductions and "root" for broadcast. Sizes that depend on
  // the number of ranks are checked when the plan is loaded.
  void collective_op(const Json& j, const std::string& path, PlanFileOp& op) const {
    using Kind = PreparedCollective::Kind;
    object(j, path);
    const std::string kind_path = child(path, "kind");
    const std::string kind = str(need(j, path, "kind"), kind_path);
    op.kind = PlanFileOp::Kind::Collective;
    op.target = kind;
    if (kind == "all_reduce" || kind == "broadcast") {
      const bool reduce = kind == "all_reduce";
      op.collective = reduce ? Kind::AllReduce : Kind::Broadcast;
      if (reduce) allow(j, path, {"kind", "buffers", "op"});
      else allow(j, path, {"kind", "buffers", "root"});
      op.buffers = buffer_list(need(j, path, "buffers"), child(path, "buffers"));
      if (op.buffers.empty()) fail(child(path, "buffers"), "expected at least one buffer");
      for (size_t k = 0; k < op.buffers.size(); ++k)
        for (size_t m = 0; m < k; ++m)
          if (op.buffers[m] == op.buffers[k])
            fail(item(child(path, "buffers"), k), fmt::format("buffer \"{}\" is listed twice", op.buffers[k]));
    } else if (kind == "all_gather" || kind == "reduce_scatter") {
      const bool gather = kind == "all_gather";
      op.collective = gather ? Kind::AllGather : Kind::ReduceScatter;
      if (gather) allow(j, path, {"kind", "src", "dst"});
      else allow(j, path, {"kind", "src", "dst", "op"});
      op.buffers = {buffer_ref(need(j, path, "src"), child(path, "src")),
                    buffer_ref(need(j, path, "dst"), child(path, "dst"))};
      const PlanFileBuffer* src = file_.find_buffer(op.buffers[0]);
      const PlanFileBuffer* dst = file_.find_buffer(op.buffers[1]);
      if (src->dtype != dst->dtype) {
        fail(path, fmt::format("src \"{}\" is {} but dst \"{}\" is {}; the dtypes must match", src->name,
                               to_string(src->dtype), dst->name, to_string(dst->dtype)));
      }
      if (src->name == dst->name) fail(path, "src and dst must be different buffers");
    } else {
      fail(kind_path,
           fmt::format("unknown collective \"{}\" (expected all_reduce, broadcast, all_gather or reduce_scatter)", kind));
    }
    if (op.collective == Kind::AllReduce || op.collective == Kind::ReduceScatter) {
      const std::string op_path = child(path, "op");
      op.reduce = parsed(op_path, str(need(j, path, "op"), op_path), parse_reduce_op);
    }
    if (op.collective == Kind::Broadcast) {
      const std::string root_path = child(path, "root");
      const Json& root = need(j, path, "root");
      const uint64_t value = unsigned_integer(root, root_path);
      if (value > uint64_t(INT32_MAX)) fail(root_path, fmt::format("{} is too large", value));
      op.root = static_cast<int>(value);
    }
  }

  void outputs(const Json& j) {
    object(j, "outputs");
    for (const auto& [key, o] : j.items()) {
      const std::string path = child("outputs", key);
      const PlanFileBuffer* buf = file_.find_buffer(key);
      if (!buf) fail(path, fmt::format("no buffer named \"{}\"", key));
      object(o, path);
      allow(o, path, {"npy", "expect"});
      PlanFileOutput out;
      out.buffer = key;
      if (const Json* npy = find(o, "npy")) out.npy = name(*npy, child(path, "npy"));
      if (const Json* e = find(o, "expect")) out.expect = expect(*e, child(path, "expect"), *buf);
      file_.outputs.push_back(std::move(out));
    }
  }

  PlanFileExpect expect(const Json& j, const std::string& path, const PlanFileBuffer& buf) const {
    object(j, path);
    allow(j, path, {"npy", "values", "prefix", "rtol", "atol"});
    PlanFileExpect e;
    const Json* npy = find(j, "npy");
    const Json* values = find(j, "values");
    if ((npy != nullptr) == (values != nullptr)) fail(path, "give either \"npy\" or \"values\"");
    if (const Json* p = find(j, "prefix")) {
      if (!p->is_boolean()) fail(child(path, "prefix"), fmt::format("expected true or false, got {}", json_type_name(*p)));
      e.prefix = p->get<bool>();
    }
    for (const char* tol : {"rtol", "atol"}) {
      if (const Json* t = find(j, tol)) {
        const double v = number(*t, child(path, tol));
        if (!(v >= 0)) fail(child(path, tol), "must not be negative");
        (std::string_view(tol) == "rtol" ? e.rtol : e.atol) = v;
      }
    }
    if (npy) {
      e.npy = file_path(*npy, child(path, "npy"));
    } else {
      const std::string at = child(path, "values");
      array(*values, at);
      for (size_t i = 0; i < values->size(); ++i) e.values.push_back(number((*values)[i], item(at, i)));
      if (e.values.size() > buf.count || (!e.prefix && e.values.size() != buf.count)) {
        fail(at, fmt::format("{} values for {} elements of \"{}\"{}", e.values.size(), buf.count, buf.name,
                             e.prefix ? "" : " (add \"prefix\": true to check only the first ones)"));
      }
    }
    return e;
  }

  fs::path folder_;
  PlanFile file_;
  std::string root_name_ = "(the plan)";  // what errors call the top-level value
  // Every plan has rank and world_size.
  std::set<std::string> variable_names_{std::string(kRankVariable), std::string(kWorldSizeVariable)};
};

}  // namespace

const PlanFileBuffer* PlanFile::find_buffer(std::string_view name) const {
  for (const auto& b : buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const PlanFileProgram* PlanFile::find_program(std::string_view name) const {
  for (const auto& p : programs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

PlanFile parse_plan_text(std::string_view json_text, const std::filesystem::path& folder,
                         std::string_view source_name) {
  return Parser(folder, std::string(source_name)).parse(json_text);
}

PlanFileProgram parse_program_text(std::string_view json_text, const std::filesystem::path& folder,
                                   std::string_view source_name) {
  return Parser(folder, std::string(source_name)).parse_program(json_text);
}

PlanFile parse_plan_file(const std::filesystem::path& path) {
  const std::string text = detail::read_format_file(path, "plan file");
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  return parse_plan_text(text, folder, path.string());
}

}  // namespace svod
