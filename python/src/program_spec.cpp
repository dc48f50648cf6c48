// Device.compile's arguments as a ProgramSpec. The arguments become the
// program object of a plan file as a JSON value in memory (no JSON text), read
// by the plan-file parser's program reader, the one spec builder that plan
// files and the C API's svod_program_compile also go through: Python and plan
// files accept exactly the same programs, with the same messages. Python adds
// numpy dtypes (and numpy's names) where a dtype is written, and, for C, the
// parameters read from the source when buffers=/scalars= are left out, and a
// check of declared ones against it (svod/program/c_signature.h).
#include <Python.h>

#include <filesystem>

#include "bindings.h"
#include "svod/program/c_signature.h"
#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_parser.h"

namespace svod::python {

namespace {

using Json = nlohmann::ordered_json;

// Where a value sits in the program object, rendered only for messages.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // a field, or empty for an item
  size_t index = 0;

  std::string text() const {
    std::string out = parent ? parent->text() : std::string();
    if (!key.empty()) {
      if (!out.empty()) out += '.';
      out += key;
    } else {
      out += fmt::format("[{}]", index);
    }
    return out;
  }
};

constexpr int kMaxDepth = 64;  // as deep as a program object sensibly goes; a list that holds itself ends here

Json string_json(PyObject* v, const std::string& what, const Path& path) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(v, &size);
  if (text == nullptr) {
    PyErr_Clear();
    throw make_error(ErrorKind::Validation, "{}: {}: the str is not valid Unicode", what, path.text());
  }
  return Json(std::string(text, static_cast<size_t>(size)));
}

// The dict `v` as a JSON object, each value made by
// value_json(key, value, its path); keys must be str.
template <typename ValueJson>
Json object_json(PyObject* v, const std::string& what, const Path& path, ValueJson&& value_json) {
  Json out = Json::object();
  PyObject* key;
  PyObject* value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(v, &pos, &key, &value)) {
    if (!PyUnicode_Check(key))
      throw type_error(fmt::format("{}: {}: key {}", what, path.text(), repr_text(key)), "a str", key);
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(key, &size);
    if (text == nullptr) throw py::error_already_set();
    const std::string_view k(text, static_cast<size_t>(size));
    const Path at{&path, k, 0};
    out[std::string(k)] = value_json(k, value, at);
  }
  return out;
}

// A Python value as the JSON value a plan file would hold there.
Json json_value(PyObject* v, const std::string& what, const Path& path, int depth) {
  if (depth > kMaxDepth)
    throw make_error(ErrorKind::Validation, "{}: {}: nested more than {} deep", what, path.text(), kMaxDepth);
  if (PyUnicode_Check(v)) return string_json(v, what, path);
  if (v == Py_True || v == Py_False) return Json(v == Py_True);
  if (PyArray_IsScalar(v, Bool)) return Json(PyObject_IsTrue(v) == 1);
  if (PyLong_Check(v) || (PyIndex_Check(v) && !PyFloat_Check(v) && !PyArray_Check(v))) {
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v));
    if (!index) throw py::error_already_set();
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow == 0) return Json(static_cast<int64_t>(i));
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
      if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return Json(static_cast<uint64_t>(u));
      PyErr_Clear();
    }
    throw make_error(ErrorKind::Validation, "{}: {}: {} is outside the 64-bit integer range", what, path.text(),
                     repr_text(v));
  }
  if (PyFloat_Check(v) || PyArray_IsScalar(v, Floating)) {
    const double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return Json(d);
  }
  if (v == Py_None) return Json(nullptr);
  if (PyList_Check(v) || PyTuple_Check(v)) {
    Json out = Json::array();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    PyObject** items = PySequence_Fast_ITEMS(v);
    for (Py_ssize_t i = 0; i < n; ++i) {
      const Path at{&path, {}, static_cast<size_t>(i)};
      out.push_back(json_value(items[i], what, at, depth + 1));
    }
    return out;
  }
  if (PyDict_Check(v)) {
    return object_json(v, what, path, [&](std::string_view, PyObject* value, const Path& at) {
      return json_value(value, what, at, depth + 1);
    });
  }
  throw type_error(fmt::format("{}: {}", what, path.text()),
                   "a JSON value (a str, int, float, bool, None, list or dict)", v);
}

// numpy's own names of the dtypes svod has: accepted as dtype strings beside
// svod's. Not every name numpy takes: numpy's "float" is float64 and "int"
// int64, which a C programmer reads as 32 bits.
constexpr std::pair<std::string_view, std::string_view> kNumpyNames[] = {
    {"bool", "bool"},     {"int8", "i8"},     {"uint8", "u8"},     {"int16", "i16"},
    {"uint16", "u16"},    {"int32", "i32"},   {"uint32", "u32"},   {"int64", "i64"},
    {"uint64", "u64"},    {"float16", "f16"}, {"float32", "f32"},  {"float64", "f64"}};

// A dtype field (buffers' "dtype", scalars' "type"): a str passes as it is,
// for the parser to check, but numpy's names ("float32") become svod's;
// numpy dtypes and scalar types (np.float32, np.dtype("<f4")) become svod's
// name.
Json dtype_json(PyObject* v, const std::string& what, const Path& path) {
  if (PyUnicode_Check(v)) {
    Json text = string_json(v, what, path);
    const std::string& s = text.get_ref<const std::string&>();
    for (const auto& [numpy_name, svod_name] : kNumpyNames)
      if (s == numpy_name) return Json(std::string(svod_name));
    return text;
  }
  try {
    return Json(std::string(to_string(dtype_from_object(v))));
  } catch (const ArgumentTypeError& e) {
    throw ArgumentTypeError(fmt::format("{}: {}: {}", what, path.text(), e.what()));
  } catch (const Error& e) {
    throw make_error(e.kind(), "{}: {}: {}", what, path.text(), e.what());
  }
}

// buffers= or scalars=: a list of objects, their dtype field (`dtype_key`)
// taken by dtype_json.
Json parameter_list(PyObject* v, std::string_view dtype_key, const std::string& what, const Path& path) {
  Json out = Json::array();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
  PyObject** items = PySequence_Fast_ITEMS(v);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const Path at{&path, {}, static_cast<size_t>(i)};
    PyObject* item = items[i];
    if (!PyDict_Check(item)) {
      out.push_back(json_value(item, what, at, 1));  // not an object: the parser says so
      continue;
    }
    out.push_back(object_json(item, what, at, [&](std::string_view key, PyObject* value, const Path& field) {
      return key == dtype_key ? dtype_json(value, what, field) : json_value(value, what, field, 2);
    }));
  }
  return out;
}

// The defines of a program object as the spec will hold them (the parser's
// rule: strings as they are, booleans 1/0, numbers as JSON writes them).
std::vector<std::pair<std::string, std::string>> define_values(const Json* defines) {
  std::vector<std::pair<std::string, std::string>> out;
  if (defines == nullptr || !defines->is_object()) return out;
  for (const auto& [macro, value] : defines->items()) {
    if (value.is_string()) out.emplace_back(macro, value.get<std::string>());
    else if (value.is_boolean()) out.emplace_back(macro, value.get<bool>() ? "1" : "0");
    else if (value.is_number()) out.emplace_back(macro, value.dump());
  }
  return out;
}

const Json* field(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// buffers= and scalars= from the source's signature (c_parameters) as a plan
// file's program gives them; nullopt with `problem` when it cannot say.
std::optional<std::pair<Json, Json>> inferred_parameters(const CSignature& sig, std::string& problem) {
  const std::optional<CParameters> parameters = c_parameters(sig, problem);
  if (!parameters) return std::nullopt;
  Json buffers = Json::array();
  Json scalars = Json::array();
  for (const BufferParam& p : parameters->buffers) {
    Json b = Json::object();
    b["name"] = p.name;
    b["access"] = std::string(to_string(p.access));
    if (p.dtype) b["dtype"] = std::string(to_string(*p.dtype));
    buffers.push_back(std::move(b));
  }
  for (const ScalarParam& p : parameters->scalars) {
    Json s = Json::object();
    s["name"] = p.name;
    s["type"] = std::string(to_string(p.type));
    scalars.push_back(std::move(s));
  }
  return std::make_pair(std::move(buffers), std::move(scalars));
}

// "3 buffers (o, a, b) and 1 scalar (n)".
std::string declared_text(const ProgramSpec& spec) {
  auto names = [](const auto& params) {
    std::string out;
    for (const auto& p : params) out += (out.empty() ? "" : ", ") + p.name;
    return out;
  };
  return fmt::format("{} buffer{}{} and {} scalar{}{}", spec.buffers.size(), spec.buffers.size() == 1 ? "" : "s",
                     spec.buffers.empty() ? "" : " (" + names(spec.buffers) + ")", spec.scalars.size(),
                     spec.scalars.size() == 1 ? "" : "s", spec.scalars.empty() ? "" : " (" + names(spec.scalars) + ")");
}

// A declared signature that disagrees with the source's: Error(Validation).
void check_declared(const ProgramSpec& spec, const CSignature& sig, const std::string& what) {
  if (!sig.understood) return;  // nothing certain to compare with
  const size_t nb = spec.buffers.size();
  const size_t total = nb + spec.scalars.size();
  size_t pointers = 0;
  for (const auto& p : sig.parameters) pointers += p.pointer;
  const std::string head = fmt::format("{}: program \"{}\": buffers= and scalars= declare {}, but the source's {}",
                                       what, spec.display_name(), declared_text(spec), sig.text(spec.entry));
  if (sig.parameters.size() != total)
    throw make_error(ErrorKind::Validation, "{} takes {} parameter{} ({} pointer{}, {} other{})", head,
                     sig.parameters.size(), sig.parameters.size() == 1 ? "" : "s", pointers, pointers == 1 ? "" : "s",
                     sig.parameters.size() - pointers, sig.parameters.size() - pointers == 1 ? "" : "s");
  for (size_t i = 0; i < total; ++i) {
    const CParameter& p = sig.parameters[i];
    if (p.pointer == (i < nb)) continue;
    if (i < nb)
      throw make_error(ErrorKind::Validation, "{}: parameter {} (\"{}\", {}) is no pointer, but buffer {} (\"{}\") is "
                       "declared there (svod passes every buffer before every scalar)",
                       head, i, p.name, p.type, i, spec.buffers[i].name);
    throw make_error(ErrorKind::Validation, "{}: parameter {} (\"{}\", {}) is a pointer, but scalar {} (\"{}\") is "
                     "declared there",
                     head, i, p.name, p.type, i - nb, spec.scalars[i - nb].name);
  }
}

}  // namespace

CompileArgs compile_args(py::handle dict, const std::string& what) {
  CompileArgs a;
  PyObject* key;
  PyObject* value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) throw type_error(fmt::format("{}: argument name {}", what, repr_text(key)), "a str", key);
    const std::string k = string_argument(key, what);
    py::handle* slot = k == "source"        ? &a.source
                       : k == "source_file" ? &a.source_file
                       : k == "entry"       ? &a.entry
                       : k == "language"    ? &a.language
                       : k == "buffers"     ? &a.buffers
                       : k == "scalars"     ? &a.scalars
                       : k == "global_size" ? &a.global_size
                       : k == "local_size"  ? &a.local_size
                       : k == "defines"     ? &a.defines
                       : k == "flops"       ? &a.flops
                       : k == "bytes"       ? &a.bytes
                       : k == "name"        ? &a.name
                                            : nullptr;
    if (slot == nullptr) throw make_error(ErrorKind::Validation, "{}: unknown argument \"{}\"", what, k);
    *slot = value;
  }
  return a;
}

ProgramSpec program_spec(const CompileArgs& args, const std::string& what, bool parameters) {
  auto given = [](py::handle h) { return h.ptr() != nullptr && !h.is_none(); };
  if (!given(args.entry)) throw make_error(ErrorKind::Validation, "{}: entry= is required", what);
  const std::string entry = string_argument(args.entry, fmt::format("{}: entry", what));
  std::string name = given(args.name) ? string_argument(args.name, fmt::format("{}: name", what)) : std::string();
  if (name.empty()) name = entry;
  const Path programs{nullptr, "programs", 0};
  const Path root{&programs, name, 0};

  Json program = Json::object();
  std::string language = "c";
  if (given(args.language)) language = string_argument(args.language, fmt::format("{}: language", what));
  program["language"] = language;
  std::string_view source_text;  // the source= str's UTF-8, while args.source lives
  if (given(args.source)) {
    Py_ssize_t size = 0;
    if (!PyUnicode_Check(args.source.ptr())) throw type_error(fmt::format("{}: source", what), "a str", args.source);
    const char* text = PyUnicode_AsUTF8AndSize(args.source.ptr(), &size);
    if (text == nullptr) {
      PyErr_Clear();
      throw make_error(ErrorKind::Validation, "{}: source: the str is not valid Unicode", what);
    }
    source_text = std::string_view(text, static_cast<size_t>(size));
    program["source"] = std::string(source_text);
  }
  bool relative_file = false;
  if (given(args.source_file)) {
    const auto path = path_argument(args.source_file, fmt::format("{}: source_file", what));
    relative_file = path.is_relative();
    program["source_file"] = path.string();
  }
  program["entry"] = entry;
  const bool infer_buffers = !given(args.buffers);
  const bool infer_scalars = !given(args.scalars);
  const std::pair<const char*, py::handle> lists[] = {{"buffers", args.buffers}, {"scalars", args.scalars}};
  for (const auto& [key, value] : lists) {
    if (!given(value)) continue;
    if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr()))
      throw type_error(fmt::format("{}: {}", what, key), "a list", value);
    const Path at{&root, key, 0};
    program[key] = parameter_list(value.ptr(), key == std::string_view("buffers") ? "dtype" : "type", what, at);
  }
  for (const auto& [key, value] : {std::pair<const char*, py::handle>{"global_size", args.global_size},
                                   {"local_size", args.local_size}}) {
    if (!given(value)) continue;
    if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr()))
      throw type_error(fmt::format("{}: {}", what, key), "a list", value);
    const Path at{&root, key, 0};
    program[key] = json_value(value.ptr(), what, at, 1);
  }
  if (given(args.defines)) {
    if (!PyDict_Check(args.defines.ptr())) throw type_error(fmt::format("{}: defines", what), "a dict", args.defines);
    const Path at{&root, "defines", 0};
    program["defines"] = json_value(args.defines.ptr(), what, at, 1);
  }
  for (const auto& [key, value] :
       {std::pair<const char*, py::handle>{"flops", args.flops}, {"bytes", args.bytes}}) {
    if (!given(value)) continue;
    if (!PyUnicode_Check(value.ptr()) && !(PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())))
      throw type_error(fmt::format("{}: {}", what, key), "an integer or an expression string", value);
    const Path at{&root, key, 0};
    program[key] = json_value(value.ptr(), what, at, 1);
  }

  // C parameters left out: read from the source. Other languages: none, as
  // before (their prototypes are not read).
  std::optional<CSignature> sig;
  const auto defines = [&] { return define_values(field(program, "defines")); };
  if (parameters && (infer_buffers || infer_scalars) && language == "c") {
    std::string file_text;
    bool have_source = given(args.source);
    if (!have_source && given(args.source_file)) {
      try {
        file_text = detail::read_format_file(program["source_file"].get<std::string>(), "source file");
        source_text = file_text;
        have_source = true;
      } catch (const Error&) {
        // The parser reports it, naming the field.
      }
    }
    if (have_source) {
      sig = parse_c_signature(source_text, entry, defines());
      std::string problem;
      if (auto inferred = inferred_parameters(*sig, problem)) {
        if (infer_buffers) program["buffers"] = std::move(inferred->first);
        if (infer_scalars) program["scalars"] = std::move(inferred->second);
      } else if (infer_buffers && infer_scalars) {
        throw make_error(ErrorKind::Validation,
                         "{}: program \"{}\": buffers= and scalars= are left out and cannot be read from the source: "
                         "{}; declare them",
                         what, name, sig->found ? fmt::format("{}: {}", sig->text(entry), problem) : problem);
      }
    }
  }
  if (!program.contains("buffers")) program["buffers"] = Json::array();
  if (!program.contains("scalars")) program["scalars"] = Json::array();

  PlanFileProgram parsed = detail::plan_parse::parse_program_value(
      program, name, relative_file ? std::filesystem::current_path() : std::filesystem::path(), what);
  ProgramSpec& spec = parsed.spec;
  // Declared parameters that disagree with the source: refused here rather
  // than as a wrong call later.
  if (parameters && language == "c" && !(infer_buffers && infer_scalars)) {
    if (!sig) sig = parse_c_signature(spec.source, spec.entry, spec.defines);
    if (sig->found) check_declared(spec, *sig, what);
  }
  return std::move(spec);
}

}  // namespace svod::python
