// Python arguments as svod values, with svod's errors: every conversion names
// the argument, a value of the wrong Python type raises
// svod.ArgumentTypeError (a svod.ValidationError and a TypeError) and a bad
// value svod.ValidationError (also a ValueError). And the guard that gives
// calls pybind11 refuses before any conversion (a missing, extra or unknown
// argument; `self` of another class) the same treatment instead of pybind11's
// "incompatible function arguments".
#include <cstring>

#include "bindings.h"

namespace svod::python {

ArgumentTypeError type_error(std::string_view what, std::string_view expected, py::handle obj) {
  return ArgumentTypeError(fmt::format("{}: expected {}, got {}", what, expected, Py_TYPE(obj.ptr())->tp_name));
}

std::string repr_text(py::handle obj) {
  PyObject* repr = PyObject_Repr(obj.ptr());
  const char* text = repr != nullptr ? PyUnicode_AsUTF8(repr) : nullptr;
  std::string out = text != nullptr ? text : fmt::format("<{} object>", Py_TYPE(obj.ptr())->tp_name);
  if (text == nullptr) PyErr_Clear();
  Py_XDECREF(repr);
  return out;
}

std::string string_argument(py::handle obj, std::string_view what) {
  if (!PyUnicode_Check(obj.ptr())) throw type_error(what, "a str", obj);
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (text == nullptr) {
    PyErr_Clear();
    throw make_error(ErrorKind::Validation, "{}: {} is not valid Unicode (it holds lone surrogates)", what,
                     repr_text(obj));
  }
  return std::string(text, static_cast<size_t>(size));
}

std::optional<std::string> optional_string(py::handle obj, std::string_view what) {
  if (obj.is_none()) return std::nullopt;
  return string_argument(obj, what);
}

std::optional<std::string> renamed_string(py::handle obj, py::handle old_obj, std::string_view function,
                                          std::string_view name, std::string_view old_name) {
  std::optional<std::string> value = optional_string(obj, fmt::format("{}: {}", function, name));
  std::optional<std::string> old = optional_string(old_obj, fmt::format("{}: {}", function, old_name));
  if (value && old && *value != *old)
    throw make_error(ErrorKind::Validation, "{}: {}=\"{}\" and {}=\"{}\" differ ({} is the old name of {}): give one",
                     function, name, *value, old_name, *old, old_name, name);
  return value ? value : old;
}

bool bool_argument(py::handle obj, std::string_view what) {
  if (obj.ptr() == Py_True) return true;
  if (obj.ptr() == Py_False) return false;
  // numpy.bool_, and integers as C spells truth.
  if (PyArray_IsScalar(obj.ptr(), Bool) || PyLong_Check(obj.ptr())) {
    const int truth = PyObject_IsTrue(obj.ptr());
    if (truth < 0) throw py::error_already_set();
    return truth == 1;
  }
  throw type_error(what, "a bool", obj);
}

size_t size_argument(py::handle obj, std::string_view what) {
  const int64_t v = integer_value(obj.ptr(), [&] { return std::string(what); });
  if (v < 0) throw make_error(ErrorKind::Validation, "{}: {} is negative", what, v);
  return static_cast<size_t>(v);
}

double float_argument(py::handle obj, std::string_view what) {
  if (PyFloat_CheckExact(obj.ptr())) return PyFloat_AS_DOUBLE(obj.ptr());
  if (PyBool_Check(obj.ptr()) || PyUnicode_Check(obj.ptr())) throw type_error(what, "a number", obj);
  const double v = PyFloat_AsDouble(obj.ptr());  // float subclasses, __float__, __index__ (ints)
  if (v == -1.0 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      throw make_error(ErrorKind::Validation, "{}: {} is outside the range of a double", what, repr_text(obj));
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    throw type_error(what, "a number", obj);
  }
  return v;
}

std::chrono::nanoseconds seconds_argument(py::handle obj, std::string_view what, bool zero) {
  const double seconds = float_argument(obj, what);
  constexpr double kMost = 9.2e9;  // seconds in INT64_MAX nanoseconds, rounded down
  if (!(seconds >= 0) || (!zero && seconds == 0) || seconds > kMost)
    throw make_error(ErrorKind::Validation, "{}: {} seconds is outside {}0, {:g}]", what, seconds, zero ? "[" : "(",
                     kMost);
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

std::filesystem::path path_argument(py::handle obj, std::string_view what) {
  auto fspath = py::reinterpret_steal<py::object>(PyOS_FSPath(obj.ptr()));  // str or bytes
  if (!fspath) {
    PyErr_Clear();
    throw type_error(what, "a path (str, bytes or os.PathLike)", obj);
  }
  py::object bytes = fspath;
  if (PyUnicode_Check(fspath.ptr())) {
    bytes = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(fspath.ptr()));
    if (!bytes) {
      PyErr_Clear();
      throw make_error(ErrorKind::Validation, "{}: the path {} cannot be encoded for the file system", what,
                       repr_text(fspath));
    }
  }
  const std::string text(PyBytes_AS_STRING(bytes.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.ptr())));
  if (text.find('\0') != std::string::npos)
    throw make_error(ErrorKind::Validation, "{}: the path {} holds a NUL character", what, repr_text(fspath));
  return std::filesystem::path(text);
}

std::vector<py::object> sequence_argument(py::handle obj, std::string_view what, std::string_view expected) {
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()) || PyDict_Check(obj.ptr()))
    throw type_error(what, expected, obj);
  auto fast = py::reinterpret_steal<py::object>(PySequence_Fast(obj.ptr(), ""));
  if (!fast) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();  // the iterator's own failure
    PyErr_Clear();
    throw type_error(what, expected, obj);
  }
  std::vector<py::object> items;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  for (Py_ssize_t i = 0; i < n; ++i)
    items.push_back(py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(fast.ptr(), i)));
  return items;
}

std::vector<size_t> size_list(py::handle obj, std::string_view what) {
  std::vector<size_t> out;
  const auto items = sequence_argument(obj, what, "a sequence of integers");
  for (size_t i = 0; i < items.size(); ++i) out.push_back(size_argument(items[i], fmt::format("{}[{}]", what, i)));
  return out;
}

std::vector<std::pair<std::string, py::object>> mapping_items(py::handle obj, std::string_view what) {
  // Dicts and collections.abc.Mappings; lists (of pairs, say) are no mappings.
  if (!PyDict_Check(obj.ptr())) {
    py::object mapping = py::module_::import("collections.abc").attr("Mapping");
    const int is_mapping = PyObject_IsInstance(obj.ptr(), mapping.ptr());
    if (is_mapping < 0) throw py::error_already_set();
    if (is_mapping == 0) throw type_error(what, "a dict", obj);
  }
  auto items = py::reinterpret_steal<py::object>(PyMapping_Items(obj.ptr()));
  if (!items) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_AttributeError))
      throw py::error_already_set();
    PyErr_Clear();
    throw type_error(what, "a dict", obj);
  }
  std::vector<std::pair<std::string, py::object>> out;
  for (py::handle item : items) {
    if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 2)
      throw type_error(fmt::format("{}: items()", what), "(key, value) pairs", item);
    py::handle key = PyTuple_GET_ITEM(item.ptr(), 0);
    if (!PyUnicode_Check(key.ptr()))
      throw type_error(fmt::format("{}: key {}", what, repr_text(key)), "a str", key);
    out.emplace_back(string_argument(key, what), py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(item.ptr(), 1)));
  }
  return out;
}

void note_main_thread() {
  main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

std::map<std::string, int64_t> vars_of(py::handle vars, std::string_view what) {
  std::map<std::string, int64_t> out;
  if (vars.is_none()) return out;
  for (const auto& [name, value] : mapping_items(vars, what))
    out[name] = integer_value(value.ptr(), [&] { return fmt::format("{}[\"{}\"]", what, name); });
  return out;
}

HeldBytes::HeldBytes(py::handle object, std::string_view what, std::string_view expected) {
  if (!PyObject_CheckBuffer(object.ptr())) throw type_error(what, expected, object);
  if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    throw make_error(ErrorKind::Validation, "{}: the {} is not one contiguous block of bytes", what,
                     Py_TYPE(object.ptr())->tp_name);
  }
}

namespace {

// The guard reads pybind11 2's function records; with another pybind11,
// calls keep pybind11's own TypeError.
#if PYBIND11_VERSION_MAJOR == 2
using Record = py::detail::function_record;

// pybind11's dispatcher, which every function it binds shares; the guarded
// functions call it through guarded_call.
PyCFunctionWithKeywords pybind11_dispatcher = nullptr;

// The record of a function pybind11 made, or null for any other callable.
const Record* record_of(PyObject* function) {
  if (!PyCFunction_Check(function)) return nullptr;
  PyObject* self = PyCFunction_GET_SELF(function);
  if (self == nullptr || !PyCapsule_CheckExact(self)) return nullptr;
  const char* name = PyCapsule_GetName(self);
  if (name != py::detail::get_function_record_capsule_name()) return nullptr;
  return static_cast<const Record*>(PyCapsule_GetPointer(self, name));
}

// "svod.Device" for a class of this module.
std::string class_name(PyObject* type) {
  PyObject* name = PyObject_GetAttrString(type, "__name__");
  const char* text = name != nullptr ? PyUnicode_AsUTF8(name) : nullptr;
  std::string out = text != nullptr ? fmt::format("svod.{}", text) : reinterpret_cast<PyTypeObject*>(type)->tp_name;
  if (text == nullptr) PyErr_Clear();
  Py_XDECREF(name);
  return out;
}

// "svod.device", "svod.Device.allocate", "svod.PlanBuilder" (its __init__).
std::string function_name(const Record& rec) {
  if (!rec.scope || !PyType_Check(rec.scope.ptr())) return fmt::format("svod.{}", rec.name);
  const std::string cls = class_name(rec.scope.ptr());
  if (rec.is_constructor) return cls;
  if (rec.name == nullptr || rec.name[0] == '\0') return fmt::format("{}'s property", cls);  // its getter
  return fmt::format("{}.{}", cls, rec.name);
}

// The i-th parameter's name as pybind11's signatures spell it.
std::string parameter_name(const Record& rec, size_t i) {
  if (i < rec.args.size() && rec.args[i].name != nullptr) return rec.args[i].name;
  if (i == 0 && rec.is_method) return "self";
  return fmt::format("arg{}", i - (rec.is_method ? 1 : 0));
}

bool has_default(const Record& rec, size_t i) { return i < rec.args.size() && rec.args[i].value; }

// "svod.Device.allocate(dtype, shape, *, zero=True)".
std::string signature(const Record& rec) {
  const size_t named = rec.nargs - rec.has_args - rec.has_kwargs;
  std::string params;
  auto add = [&](const std::string& p) { params += (params.empty() ? "" : ", ") + p; };
  for (size_t i = rec.is_method ? 1 : 0; i < rec.nargs; ++i) {
    if (rec.has_args && i == rec.nargs_pos) {
      add("*args");
      continue;
    }
    if (rec.has_kwargs && i == rec.nargs - 1u) {
      add("**kwargs");
      continue;
    }
    if (!rec.has_args && i == rec.nargs_pos && i < named) add("*");
    std::string p = parameter_name(rec, i);
    if (has_default(rec, i)) {
      const char* descr = rec.args[i].descr;
      p += descr != nullptr && std::strlen(descr) <= 12 ? fmt::format("={}", descr) : "=...";
    }
    add(p);
  }
  return fmt::format("{}({})", function_name(rec), params);
}

// What is wrong with a call pybind11 refused (`args` holds `self` first for
// methods), or nothing when the arguments fit the parameters (then a value's
// type did not).
std::optional<std::string> call_problem(const Record& rec, PyObject* args, PyObject* kwargs) {
  const size_t given = static_cast<size_t>(PyTuple_GET_SIZE(args));
  const size_t first = rec.is_method ? 1 : 0;
  if (rec.is_method && !rec.is_constructor && rec.scope) {
    if (given == 0) return fmt::format("called without `self` (a {})", class_name(rec.scope.ptr()));
    PyObject* self = PyTuple_GET_ITEM(args, 0);
    if (!PyObject_TypeCheck(self, reinterpret_cast<PyTypeObject*>(rec.scope.ptr())))
      return fmt::format("`self` is a {}, not a {}", Py_TYPE(self)->tp_name, class_name(rec.scope.ptr()));
  }
  if (!rec.has_args && given > rec.nargs_pos)
    return fmt::format("takes {} positional argument{}, got {}", rec.nargs_pos - first,
                       rec.nargs_pos - first == 1 ? "" : "s", given - first);
  const size_t named = rec.nargs - rec.has_args - rec.has_kwargs;
  std::vector<bool> bound(named, false);
  for (size_t i = 0; i < std::min<size_t>(given, rec.has_args ? rec.nargs_pos : named); ++i) bound[i] = true;
  if (kwargs != nullptr) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      const char* text = PyUnicode_AsUTF8(key);
      if (text == nullptr) {
        PyErr_Clear();
        return fmt::format("has no parameter named {}", repr_text(key));
      }
      std::optional<size_t> param;
      for (size_t i = std::max<size_t>(first, rec.nargs_pos_only); i < named; ++i) {
        if (rec.has_args && i == rec.nargs_pos) continue;
        if (parameter_name(rec, i) == text) param = i;
      }
      if (!param) {
        if (rec.has_kwargs) continue;
        return fmt::format("has no parameter named \"{}\"", text);
      }
      if (bound[*param]) return fmt::format("argument \"{}\" given twice (by position and by name)", text);
      bound[*param] = true;
    }
  }
  for (size_t i = first; i < named; ++i) {
    if (rec.has_args && i == rec.nargs_pos) continue;
    if (!bound[i] && !has_default(rec, i)) return fmt::format("missing argument \"{}\"", parameter_name(rec, i));
  }
  return std::nullopt;
}

// A pybind11 function's call: pybind11's own, with its refusal of the
// arguments ("incompatible function arguments", a TypeError) replaced by
// svod.ArgumentTypeError saying what is wrong.
PyObject* guarded_call(PyObject* capsule, PyObject* args, PyObject* kwargs) {
  PyObject* result = pybind11_dispatcher(capsule, args, kwargs);
  if (result != nullptr || !PyErr_ExceptionMatches(PyExc_TypeError)) return result;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  const auto* rec = static_cast<const Record*>(PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule)));
  PyObject* message = value != nullptr ? PyObject_Str(value) : nullptr;
  const char* text = message != nullptr ? PyUnicode_AsUTF8(message) : nullptr;
  const std::string refusal = fmt::format("{}(): incompatible ", rec->name != nullptr ? rec->name : "");
  const bool refused =
      type == PyExc_TypeError && text != nullptr && std::strncmp(text, refusal.c_str(), refusal.size()) == 0;
  Py_XDECREF(message);
  if (!refused) {
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);  // raised by the function itself
    return nullptr;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  try {
    if (auto problem = call_problem(*rec, args, kwargs))
      throw ArgumentTypeError(fmt::format("{}: {}", signature(*rec), *problem));
    // Every parameter got an argument: one had a type the binding does not
    // take (most take any object and check it themselves).
    std::string types;
    for (Py_ssize_t i = rec->is_method ? 1 : 0; i < PyTuple_GET_SIZE(args); ++i)
      types += fmt::format("{}{}", types.empty() ? "" : ", ", Py_TYPE(PyTuple_GET_ITEM(args, i))->tp_name);
    std::string expected = rec->signature != nullptr ? rec->signature : "";
    for (size_t at; (at = expected.find("svod._svod.")) != std::string::npos;) expected.erase(at + 4, 6);
    throw ArgumentTypeError(fmt::format("{}: an argument has the wrong type: the parameters are {}, the positional "
                                        "arguments given ({})",
                                        signature(*rec), expected, types));
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

// Calls of `function`, when pybind11 made it, go through guarded_call. (Its
// PyMethodDef is the function's own; CPython reads ml_meth at each call of
// a METH_VARARGS function.)
void guard(PyObject* function) {
  if (record_of(function) == nullptr) return;
  PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(function)->m_ml;
  if ((def->ml_flags & (METH_VARARGS | METH_KEYWORDS)) != (METH_VARARGS | METH_KEYWORDS)) return;
  auto* dispatch = reinterpret_cast<PyCFunctionWithKeywords>(reinterpret_cast<void (*)()>(def->ml_meth));
  if (dispatch == guarded_call) return;
  if (pybind11_dispatcher == nullptr) pybind11_dispatcher = dispatch;
  if (dispatch != pybind11_dispatcher) return;
  def->ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(guarded_call));
}

// The functions an attribute of the module or of a class holds: plain
// functions, methods (instancemethod), static methods and properties.
void guard_attribute(PyObject* attr) {
  if (PyInstanceMethod_Check(attr)) return guard(PyInstanceMethod_GET_FUNCTION(attr));
  if (Py_IS_TYPE(attr, &PyStaticMethod_Type) || PyObject_TypeCheck(attr, &PyProperty_Type)) {
    for (const char* name : {"__func__", "fget", "fset", "fdel"}) {
      if (!PyObject_HasAttrString(attr, name)) continue;
      py::object f = py::reinterpret_borrow<py::object>(attr).attr(name);
      guard(f.ptr());
    }
    return;
  }
  guard(attr);
}
#endif

}  // namespace

void guard_signatures(py::module_& m) {
#if PYBIND11_VERSION_MAJOR == 2
  for (auto [name, attr] : m.attr("__dict__").cast<py::dict>()) {
    if (!PyType_Check(attr.ptr())) {
      guard_attribute(attr.ptr());
      continue;
    }
    if (!py::detail::get_type_info(reinterpret_cast<PyTypeObject*>(attr.ptr()))) continue;  // not a bound class
    for (auto [member, value] : attr.attr("__dict__").cast<py::dict>()) guard_attribute(value.ptr());
  }
#endif
}

}  // namespace svod::python
