// Plan file JSON → PlanFile: every field checked, every error naming its JSON path.
// The plan as a whole, its variables, buffers and outputs, and the entry points;
// programs and ops are read in plan_parse_program.cpp and plan_parse_ops.cpp.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_file.h"
#include "svod/planfile/plan_parser.h"

namespace svod {

namespace detail::plan_parse {

PlanFile Parser::parse(std::string_view text) {
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

void Parser::variables(const Json& j) {
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

void Parser::buffers(const Json& j) {
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

PlanFileBuffer Parser::base_buffer(const Json& b, const std::string& key, const std::string& path) const {
  allow(b, path, {"dtype", "count", "shape", "device", "init", "role"});
  PlanFileBuffer buf;
  buf.name = key;
  const std::string dtype_path = child(path, "dtype");
  buf.dtype = parsed(dtype_path, str(need(b, path, "dtype"), dtype_path), parse_dtype);
  count_or_shape(b, path, buf);
  if (buf.count == 0) fail(path, "a buffer needs at least one element");
  if (buf.count > kMaxBufferBytes / size_of(buf.dtype)) fail(path, "the buffer is too large");
  if (const Json* d = find(b, "device")) buf.device = name(*d, child(path, "device"));
  if (const Json* init = find(b, "init")) buf.init = buffer_init(*init, buf, child(path, "init"));
  if (const Json* role = find(b, "role")) {
    const std::string role_path = child(path, "role");
    buf.role = parsed(role_path, str(*role, role_path), parse_buffer_role);
  }
  return buf;
}

// "count", or "shape" (whose dimensions may name plan variables, counted at
// their max): exactly one of them.
void Parser::count_or_shape(const Json& b, const std::string& path, PlanFileBuffer& buf) const {
  const Json* count_json = find(b, "count");
  const Json* shape_json = find(b, "shape");
  if ((count_json != nullptr) == (shape_json != nullptr)) fail(path, "give either \"count\" or \"shape\"");
  if (count_json) {
    buf.count = count(*count_json, child(path, "count"));
    buf.shape = {buf.count};
    return;
  }
  const std::string shape_path = child(path, "shape");
  array(*shape_json, shape_path);
  buf.count = 1;
  bool variable = false;
  std::vector<std::string> names;
  for (size_t i = 0; i < shape_json->size(); ++i) {
    const Json& dim = (*shape_json)[i];
    const std::string at = item(shape_path, i);
    size_t d = 0;
    names.emplace_back();
    if (dim.is_string()) {
      const std::string var = dim.get<std::string>();
      const auto it = std::find_if(file_.variables.begin(), file_.variables.end(),
                                   [&](const PlanFileVariable& v) { return v.variable.name == var; });
      if (it == file_.variables.end())
        fail(at, fmt::format("\"{}\" is no variable of the plan (a dimension is a count or a variable's name)", var));
      if (it->variable.min < 0)
        fail(at, fmt::format("variable \"{}\" may be {}, and a dimension is never negative", var, it->variable.min));
      if (uint64_t(it->variable.max) > kMaxBufferBytes) fail(at, fmt::format("variable \"{}\"'s max is too large", var));
      d = static_cast<size_t>(it->variable.max);
      names.back() = var;
      variable = true;
    } else {
      d = count(dim, at);
    }
    buf.shape.push_back(d);
    if (d != 0 && buf.count > kMaxBufferBytes / d) fail(shape_path, "the buffer is too large");
    buf.count *= d;
  }
  if (variable) buf.dim_variables = std::move(names);
}

// Checks that `value` is stored exactly in an integer or bool buffer.
void Parser::representable(DType dtype, double value, const std::string& path) const {
  if (is_float(dtype)) return;
  alignas(8) std::byte cell[8];
  store_from_double(dtype, cell, value);
  if (!std::isfinite(value) || load_as_double(dtype, cell) != value) {
    fail(path, fmt::format("{} is not a {} value", value, to_string(dtype)));
  }
}

BufferInit Parser::buffer_init(const Json& j, const PlanFileBuffer& buf, const std::string& path) const {
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

PlanFileBuffer Parser::view_buffer(const Json& b, const std::string& key, const std::string& path,
                                   const std::map<std::string, PlanFileBuffer>& bases, const Json& all) const {
  allow(b, path, {"view", "offset", "byte_offset", "count", "shape", "dtype"});
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
  if (const Json* d = find(b, "dtype")) {
    const std::string dtype_path = child(path, "dtype");
    view.dtype = parsed(dtype_path, str(*d, dtype_path), parse_dtype);
  }
  const Json* offset = find(b, "offset");
  const Json* byte_offset = find(b, "byte_offset");
  if ((offset != nullptr) == (byte_offset != nullptr)) fail(path, "give either \"offset\" or \"byte_offset\"");
  if (offset) {
    view.byte_offset = count(*offset, child(path, "offset")) * size_of(base_buf->dtype);
  } else {
    view.byte_offset = count(*byte_offset, child(path, "byte_offset"));
  }
  count_or_shape(b, path, view);
  if (view.count == 0) fail(path, "a view needs at least one element");
  if (view.count > kMaxBufferBytes / size_of(view.dtype)) fail(path, "the view is too large");
  if (view.byte_offset > base_buf->bytes() || view.bytes() > base_buf->bytes() - view.byte_offset) {
    fail(path, view.dtype == base_buf->dtype && view.byte_offset % size_of(view.dtype) == 0
                   ? fmt::format("elements [{}, {}) leave \"{}\", which has {}", view.byte_offset / size_of(view.dtype),
                                 view.byte_offset / size_of(view.dtype) + view.count, base_name, base_buf->count)
                   : fmt::format("bytes [{}, {}) leave \"{}\", which has {}", view.byte_offset,
                                 view.byte_offset + view.bytes(), base_name, base_buf->bytes()));
  }
  return view;
}

void Parser::outputs(const Json& j) {
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

PlanFileExpect Parser::expect(const Json& j, const std::string& path, const PlanFileBuffer& buf) const {
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

}  // namespace detail::plan_parse

namespace fs = std::filesystem;
using detail::plan_parse::Parser;

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
