// The `svod._svod` extension module: error translation, dtypes and the host
// device shared by the other files, and the module definition.
#define SVOD_NUMPY_IMPORT
#include "bindings.h"

#include <Python.h>

#ifdef __GLIBCXX__
#include <cxxabi.h>
#endif

#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "svod/base/env.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/watchdog.h"
#include "svod/package/program_binary.h"
#include "svod/registry/registry.h"

namespace svod::python {

namespace {

// The svod.Error classes, set once by svod/__init__.py. Leaked on purpose: the
// translator may run while the interpreter tears the module down.
PyObject* error_base = nullptr;
PyObject* error_by_kind[static_cast<int>(kLastErrorKind) + 1] = {};
PyObject* argument_type_error = nullptr;  // svod.ArgumentTypeError

PyObject* error_class(ErrorKind kind) {
  PyObject* cls = error_by_kind[static_cast<int>(kind)];
  if (cls == nullptr) cls = error_base ? error_base : PyExc_RuntimeError;
  return cls;
}

// `s` as a new str (invalid UTF-8 replaced), or null with the Python error set.
PyObject* text(std::string_view s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}

// A new svod.Error of `kind` (with .kind, and .log for compile errors), or
// null with the Python error set.
PyObject* new_error(ErrorKind kind, const char* message) {
  PyObject* message_text = text(message);
  PyObject* exc = message_text ? PyObject_CallOneArg(error_class(kind), message_text) : nullptr;
  Py_XDECREF(message_text);
  if (exc == nullptr) return nullptr;
  PyObject* kind_text = text(to_string(kind));
  if (kind_text) PyObject_SetAttrString(exc, "kind", kind_text);
  Py_XDECREF(kind_text);
  if (kind == ErrorKind::Compile) {
    // Compiler diagnostics follow the message's first line.
    const char* newline = std::strchr(message, '\n');
    PyObject* log = text(newline ? newline + 1 : message);
    if (log) PyObject_SetAttrString(exc, "log", log);
    Py_XDECREF(log);
  }
  return exc;
}

void raise_error(ErrorKind kind, const char* message) {
  PyObject* exc = new_error(kind, message);
  if (exc == nullptr) return;  // the call set its own error
  PyErr_SetObject(error_class(kind), exc);
  Py_DECREF(exc);
}

// Sets `name` on `exc` to `value` (a new reference; null: left unset).
void set_attribute(PyObject* exc, const char* name, PyObject* value) {
  if (value == nullptr) {
    PyErr_Clear();
    return;
  }
  PyObject_SetAttrString(exc, name, value);
  Py_DECREF(value);
}

template <typename T>
PyObject* number_or_none(const std::optional<T>& v) {
  if (!v) Py_RETURN_NONE;
  if constexpr (std::is_signed_v<T>) return PyLong_FromLongLong(static_cast<long long>(*v));
  else return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(*v));
}

// svod.KernelFault with the fault's info as attributes.
void raise_kernel_fault(const KernelFault& e) {
  PyObject* exc = new_error(e.kind(), e.what());
  if (exc == nullptr) return;
  const KernelFaultInfo& f = e.info();
  set_attribute(exc, "signal", PyLong_FromLong(f.signal));
  set_attribute(exc, "signal_name", text(f.signal_name));
  set_attribute(exc, "address", number_or_none(f.address));
  set_attribute(exc, "access", text(f.access));
  set_attribute(exc, "cause", text(f.cause));
  set_attribute(exc, "program", text(f.program));
  set_attribute(exc, "entry", text(f.entry));
  set_attribute(exc, "slice", number_or_none(f.slice >= 0 ? std::optional<int64_t>(f.slice) : std::nullopt));
  set_attribute(exc, "op", number_or_none(f.op));
  set_attribute(exc, "op_label", text(f.op_label));
  set_attribute(exc, "rank", number_or_none(f.rank));
  set_attribute(exc, "buffer", number_or_none(f.buffer));
  set_attribute(exc, "buffer_name", text(f.buffer_name));
  set_attribute(exc, "element", number_or_none(f.element));
  set_attribute(exc, "in_called_function", PyBool_FromLong(f.in_called_function));
  PyErr_SetObject(error_class(e.kind()), exc);
  Py_DECREF(exc);
}

// An argument of the wrong type: svod.ArgumentTypeError (a
// svod.ValidationError) once svod/__init__.py registered it.
void raise_type_error(const char* message) {
  if (argument_type_error == nullptr) return raise_error(ErrorKind::Validation, message);
  PyObject* message_text = text(message);
  PyObject* exc = message_text ? PyObject_CallOneArg(argument_type_error, message_text) : nullptr;
  Py_XDECREF(message_text);
  if (exc == nullptr) return;
  PyErr_SetObject(argument_type_error, exc);
  Py_DECREF(exc);
}

}  // namespace

void set_python_error() {
  try {
    throw;
#ifdef __GLIBCXX__
  } catch (abi::__forced_unwind&) {
    throw;  // the thread is ending (pthread_exit): not an error to report
#endif
  } catch (const ArgumentTypeError& e) {
    raise_type_error(e.what());
  } catch (const Error& e) {
    // A kernel stopped by Ctrl-C (svod/guard/interrupt.h), or any error met
    // while one is pending: Python's handler noted it, and raising it here
    // is KeyboardInterrupt.
    if (PyErr_CheckSignals() != 0) return;
    if (const auto* fault = dynamic_cast<const KernelFault*>(&e)) raise_kernel_fault(*fault);
    else raise_error(e.kind(), e.what());
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::cast_error& e) {
    // A Python value of the wrong type where the bindings expected another.
    raise_type_error(e.what());
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    raise_error(ErrorKind::Internal, e.what());
  } catch (...) {
    raise_error(ErrorKind::Internal, "unknown C++ exception");
  }
}

py::object python_error(const Error& e) {
  PyObject* exc = new_error(e.kind(), e.what());
  if (exc == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(exc);
}

// svod.time_limit(seconds): a TimeLimit (svod/guard/watchdog.h) over the
// with block, on the thread that entered it.
class PyTimeLimit {
 public:
  explicit PyTimeLimit(py::handle seconds)
      : limit_ns_(seconds_argument(seconds, "time_limit: seconds", false)),
        what_(fmt::format("the svod.time_limit({:g}) block", static_cast<double>(limit_ns_.count()) * 1e-9)) {}
  void enter() {
    if (limit_) throw make_error(ErrorKind::Validation, "{}: entered twice", what_);
    limit_.emplace(limit_ns_, what_);
    thread_ = std::this_thread::get_id();
  }
  void exit() {
    if (!limit_) return;
    if (thread_ != std::this_thread::get_id() || launch_stop_scope() != &limit_->scope())
      throw make_error(ErrorKind::Validation, "{}: left on another thread or around a block still open inside it",
                       what_);
    passed_ = limit_->passed();
    limit_.reset();
  }
  bool passed() const { return limit_ ? limit_->passed() : passed_; }

 private:
  std::chrono::nanoseconds limit_ns_;
  std::string what_;
  std::optional<TimeLimit> limit_;
  std::thread::id thread_;
  bool passed_ = false;  // whether the block, once left, had passed its limit
};

void set_error_classes(py::object base, py::dict by_kind, py::object type_error_class) {
  error_base = base.release().ptr();
  argument_type_error = type_error_class.release().ptr();
  for (auto [key, cls] : by_kind) {
    const std::string name = py::cast<std::string>(key);
    for (int k = 0; k <= static_cast<int>(kLastErrorKind); ++k) {
      if (to_string(static_cast<ErrorKind>(k)) == name) error_by_kind[k] = py::reinterpret_borrow<py::object>(cls).release().ptr();
    }
  }
}

std::optional<DType> dtype_of(PyArray_Descr* descr) {
  if (!PyArray_ISNBO(descr->byteorder)) return std::nullopt;
  const int size = static_cast<int>(descr->elsize);
  switch (descr->kind) {
    case 'b':
      return DType::Bool;
    case 'i':
      if (size == 1) return DType::I8;
      if (size == 2) return DType::I16;
      if (size == 4) return DType::I32;
      if (size == 8) return DType::I64;
      break;
    case 'u':
      if (size == 1) return DType::U8;
      if (size == 2) return DType::U16;
      if (size == 4) return DType::U32;
      if (size == 8) return DType::U64;
      break;
    case 'f':
      if (size == 2) return DType::F16;
      if (size == 4) return DType::F32;
      if (size == 8) return DType::F64;
      break;
  }
  return std::nullopt;
}

int numpy_type_of(DType dtype) {
  switch (dtype) {
    case DType::Bool: return NPY_BOOL;
    case DType::I8: return NPY_INT8;
    case DType::U8: return NPY_UINT8;
    case DType::I16: return NPY_INT16;
    case DType::U16: return NPY_UINT16;
    case DType::I32: return NPY_INT32;
    case DType::U32: return NPY_UINT32;
    case DType::I64: return NPY_INT64;
    case DType::U64: return NPY_UINT64;
    case DType::F16: return NPY_FLOAT16;
    case DType::BF16: return NPY_UINT16;  // numpy has no bfloat16: its bit patterns
    case DType::F32: return NPY_FLOAT32;
    case DType::F64: return NPY_FLOAT64;
  }
  return NPY_NOTYPE;
}

DType dtype_from_object(py::handle obj) {
  const bool named = PyUnicode_Check(obj.ptr());
  if (named) {
    try {
      return parse_dtype(string_argument(obj, "dtype"));
    } catch (const Error&) {
      // Not a svod name; numpy may know it ("f4", "<f4").
    }
  }
  PyArray_Descr* descr = nullptr;
  if (obj.is_none() || !PyArray_DescrConverter(obj.ptr(), &descr)) {
    PyErr_Clear();
    const std::string message = fmt::format("dtype {}: not a svod or numpy dtype", repr_text(obj));
    if (!named) throw ArgumentTypeError(message);  // None (numpy's float64), numbers, arbitrary objects
    throw make_error(ErrorKind::Validation, "{}", message);
  }
  const auto dtype = dtype_of(descr);
  if (dtype) {
    Py_DECREF(descr);
    return *dtype;
  }
  const std::string text = py::cast<std::string>(py::str(reinterpret_cast<PyObject*>(descr)));
  Py_DECREF(descr);
  throw make_error(ErrorKind::Validation, "dtype {}: svod has no such element type", text);
}

Device& cpu_device() {
  static Device& device = *open_device("CPU");
  return device;
}

void bind_log(py::module_& m);  // log.cpp: svod.log_to_python, svod.flush_log
void bind_variants(py::module_& m);  // variants.cpp: Plan.choose_variants, svod.choose_variant

}  // namespace svod::python

PYBIND11_MODULE(_svod, m) {
  using namespace svod::python;
  if (_import_array() < 0) throw py::error_already_set();
  note_main_thread();
  m.doc() = "The compiled part of the svod package; use `import svod`.";
  m.attr("__version__") = SVOD_VERSION;
  // What a cache of program binaries (compile_binary) is keyed by, as
  // svod.tinygrad's is: svod.program_binary_format.
  m.attr("program_binary_format") = svod::program_binary_format();
  // The name of the recipe CPU kernels are compiled with, which such a cache
  // is keyed by too: svod.cpu_recipe.
  m.attr("cpu_recipe") = std::string(svod::kDefaultCpuRecipe.name);
  // Ctrl-C stops the kernels a call from Python is waiting for
  // (svod/guard/interrupt.h); the handler Python installed runs after svod's.
  svod::install_interrupt_stop();
  // Errors raised inside pybind11-bound functions take the same path as the
  // raw entry points.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (...) {
      set_python_error();
    }
  });
  m.def("_set_error_classes", &set_error_classes);
  // Checked mode (svod/guard/checked_mode.h), behind svod.checked().
  m.def("_check_mode", [] { return svod::to_string(svod::check_mode()); });
  m.def("_set_check_mode", [](py::handle what) {
    svod::set_check_mode(svod::parse_check_mode(string_argument(what, "checked: what"), "checked"));
  });
  m.def("_check_mode_of", [](py::handle what) {
    return svod::to_string(svod::parse_check_mode(string_argument(what, "checked: what"), "checked"));
  });
  m.def(
      "_env_switch",
      [](std::string_view name, bool unset) {
        for (const svod::EnvVariable& v : svod::env_variables())
          if (v.name == name && v.type == svod::EnvType::Switch) return svod::env_switch(v.var).value_or(unset);
        throw svod::make_error(svod::ErrorKind::Validation, "_env_switch: {} is no switch of svod's", name);
      },
      py::arg("name"), py::arg("unset"),
      "The switch `name` (SVOD_BEAM, SVOD_VARIANTS: docs/ENVIRONMENT.md) as a bool, `unset` when it is not set; "
      "ValidationError when malformed. For svod.tinygrad.");
  m.def(
      "_env_seconds",
      [](std::string_view name) {
        for (const svod::EnvVariable& v : svod::env_variables())
          if (v.name == name && v.type == svod::EnvType::Seconds) return svod::env_seconds(v.var);
        throw svod::make_error(svod::ErrorKind::Validation, "_env_seconds: {} is no duration of svod's", name);
      },
      py::arg("name"),
      "The duration `name` (SVOD_BEAM_SKIP_BELOW: docs/ENVIRONMENT.md) in seconds, None when it is not set; "
      "ValidationError when malformed. For svod.tinygrad.");
  py::class_<PyTimeLimit>(m, "time_limit",
                          "with svod.time_limit(seconds): kernels that this thread launches in the block (alone or in "
                          "plans) and that still run `seconds` after it opened are stopped, their launch raising "
                          "svod.TimeoutError. Nothing ends the process: a kernel that cannot be stopped (in a system "
                          "call or a library function) runs to its end.")
      .def(py::init<py::handle>(), py::arg("seconds"))
      .def("__enter__",
           [](py::object self) {
             py::cast<PyTimeLimit&>(self).enter();
             return self;
           })
      .def("__exit__", [](PyTimeLimit& t, py::args) { t.exit(); })
      .def_property_readonly("passed", &PyTimeLimit::passed, "whether the block ran past its limit");
  // Classes before the functions that return them, so signatures name them.
  bind_buffers(m);
  bind_programs(m);
  bind_devices(m);
  bind_comm(m);
  bind_plans(m);
  bind_variants(m);
  bind_capture(m);
  bind_profile(m);
  bind_log(m);
  guard_signatures(m);
}
