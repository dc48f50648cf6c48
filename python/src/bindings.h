// What the parts of the `svod._svod` extension share: the Python-side
// objects (svod.Buffer, svod.Program), turning svod::Error into the svod.Error
// subclass of its kind, and wrapping host arrays (numpy, DLPack) as svod
// buffers without copying.
#pragma once

// numpy's C API lives in a table that import_array() fills once per
// extension; every file of this extension uses the one in module.cpp.
#define PY_ARRAY_UNIQUE_SYMBOL svod_numpy_api
#ifndef SVOD_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <numpy/arrayobject.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "svod/guard/interrupt.h"
#include "svod/base/error.h"
#include "svod/device/buffer.h"
#include "svod/device/device.h"
#include "svod/plan/execution_plan.h"
#include "svod/tune/benchmark.h"

namespace svod::python {

namespace py = pybind11;

// svod.Buffer: a svod::Buffer with the shape Python sees. release() drops
// this handle's reference; numpy views and DLPack exports made before keep
// the memory alive on their own.
struct PyBuffer {
  Buffer buffer;
  std::vector<size_t> shape;

  // The buffer, or Error(Validation) when it was released.
  const Buffer& get() const;
};

// The svod.Buffer `obj` is, or null when it is anything else: one type
// compare, for the per-call path.
const PyBuffer* as_py_buffer(PyObject* obj) noexcept;

// An argument of the wrong Python type: an Error(Validation) that Python
// raises as svod.ArgumentTypeError, both a svod.ValidationError and a
// TypeError.
class ArgumentTypeError : public Error {
 public:
  explicit ArgumentTypeError(const std::string& message) : Error(ErrorKind::Validation, message) {}
};
// "{what}: expected {expected}, got {the type of obj}".
ArgumentTypeError type_error(std::string_view what, std::string_view expected, py::handle obj);

// Raises the svod.Error subclass of the exception in flight (svod::Error by
// kind; anything else as svod.InternalError), for entry points that do not go
// through pybind11's dispatcher. Call inside a catch block.
void set_python_error();
// The svod.Error subclass instance for `e` (not raised).
py::object python_error(const Error& e);
// Registers the Python classes for each ErrorKind and ArgumentTypeError's
// (from svod/__init__.py).
void set_error_classes(py::object base, py::dict by_kind, py::object type_error_class);
// Makes every function the module's pybind11 bindings define raise
// svod.ArgumentTypeError, naming the parameter, for calls pybind11 refuses
// (missing, extra or unknown arguments) instead of its TypeError. Called
// once, after everything is bound.
void guard_signatures(py::module_& m);

// The interpreter's main thread (PyThread_get_thread_ident), the one that
// finalizes it; note_main_thread() sets it when the module loads.
inline unsigned long main_thread_ident = 0;
void note_main_thread();

// Takes the GIL back after PyEval_SaveThread. A thread other than the main
// one coming back once the interpreter began to finalize (a daemon thread
// whose svod call outlived the main thread) waits there for the process to
// end, as Python 3.14 makes such threads do: before it CPython ends the
// thread with pthread_exit, whose unwinding aborts the process at the first
// noexcept frame (pybind11's GIL guards) and runs destructors that touch
// Python objects without the GIL.
inline void park_if_finalizing() {
#if PY_VERSION_HEX < 0x030E0000
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing && PyThread_get_thread_ident() != main_thread_ident) [[unlikely]] {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
  }
#endif
}

inline void take_gil(PyThreadState* state) {
  park_if_finalizing();
  PyEval_RestoreThread(state);
}

// The GIL taken by a thread Python did not start (a local rank's), as
// py::gil_scoped_acquire does, with take_gil's care at interpreter exit:
// run_local called from a daemon thread used to abort the interpreter as it
// finalized.
class GilAcquired {
 public:
  GilAcquired() {
    park_if_finalizing();
    state_ = PyGILState_Ensure();
  }
  // CPython (before 3.14) ends a thread that takes the GIL after
  // finalization began with pthread_exit; unwinding through here, the thread
  // no longer holds it, and releasing would be a fatal error.
  ~GilAcquired() {
    if (PyGILState_Check()) PyGILState_Release(state_);
  }
  GilAcquired(const GilAcquired&) = delete;
  GilAcquired& operator=(const GilAcquired&) = delete;

 private:
  PyGILState_STATE state_;
};

// The GIL released for the guard's lifetime; svod's py::gil_scoped_release,
// safe at interpreter exit (take_gil). Not noexcept: should finalization
// begin between take_gil's check and CPython's, the thread's unwinding passes
// through.
// (The kernels launched meanwhile stop at Ctrl-C: svod/guard/interrupt.h; the
// launch's error then becomes Python's KeyboardInterrupt, set_python_error.)
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() noexcept(false) { take_gil(state_); }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  InterruptScope interruptible_;
  PyThreadState* state_;
};

// Gives a class that Python code cannot create an __init__ that says how to
// get one (svod.ArgumentTypeError, the TypeError CPython raises for such
// classes), instead of pybind11's "No constructor defined!".
template <typename... Options>
void refuse_construction(py::class_<Options...>& cls, std::string_view how) {
  using Holder = typename py::class_<Options...>::holder_type;
  const std::string message =
      fmt::format("svod.{} cannot be created directly: {}", py::cast<std::string>(cls.attr("__name__")), how);
  cls.def(py::init([message](const py::args&, const py::kwargs&) -> Holder { throw ArgumentTypeError(message); }));
}

// Arguments, converted and checked by svod: `what` names the argument in
// errors ("Device.allocate: zero"); a value of the wrong type raises
// svod.ArgumentTypeError, a bad value svod.ValidationError.

// An integer argument (anything with __index__ but bool) as 64 bits. `what()`
// names it, called only on failure.
template <typename What>
inline int64_t integer_value(PyObject* obj, What&& what) {
  py::object index;
  if (!PyLong_CheckExact(obj)) {
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) throw type_error(what(), "an integer", obj);
    index = py::reinterpret_steal<py::object>(PyNumber_Index(obj));
    if (!index) {  // a numpy array of more than one element, say
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
      throw type_error(what(), "an integer", obj);
    }
    obj = index.ptr();
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: {} is outside the 64-bit integer range", what(),
                     py::cast<std::string>(py::str(obj)));
  return v;
}

// repr(obj), or "<type object>" when its __repr__ fails.
std::string repr_text(py::handle obj);
// A str (valid Unicode) argument.
std::string string_argument(py::handle obj, std::string_view what);
// A str argument, or nullopt for None.
std::optional<std::string> optional_string(py::handle obj, std::string_view what);
// A str argument of `function` that has an old name too (cpu_compiler= and
// backend=): the one given, or nullopt when both are None. Both given with
// different values is Error(Validation) naming both.
std::optional<std::string> renamed_string(py::handle obj, py::handle old_obj, std::string_view function,
                                          std::string_view name, std::string_view old_name);
// A bool argument: True or False, a numpy.bool_ or an integer.
bool bool_argument(py::handle obj, std::string_view what);
// A non-negative integer argument (below 2^63).
size_t size_argument(py::handle obj, std::string_view what);
// A number argument (float, int, numpy scalars) as a double.
double float_argument(py::handle obj, std::string_view what);
// A duration given in seconds, as nanoseconds (which hold ~292 years);
// Error(Validation) naming `what` when negative, not a number, too long, or
// zero unless `zero`.
std::chrono::nanoseconds seconds_argument(py::handle obj, std::string_view what, bool zero);
// A path argument: str, bytes or os.PathLike, without NUL characters.
std::filesystem::path path_argument(py::handle obj, std::string_view what);
// The items of a list, tuple or other iterable argument (a str, bytes or dict
// is refused); `expected` describes it in the refusal.
std::vector<py::object> sequence_argument(py::handle obj, std::string_view what, std::string_view expected);
// A sequence of non-negative integers (slot indices).
std::vector<size_t> size_list(py::handle obj, std::string_view what);
// The items of a dict (or other mapping) argument keyed by str.
std::vector<std::pair<std::string, py::object>> mapping_items(py::handle obj, std::string_view what);
// Plan variables: a dict of names to integers, or None for none.
std::map<std::string, int64_t> vars_of(py::handle vars, std::string_view what);
// The bytes of an object with the buffer protocol (bytes, bytearray,
// memoryview, a uint8 array), held while this lives — also with the GIL
// released, and a bytearray cannot resize meanwhile. Error(ArgumentType)
// for another object, Error(Validation) for memory that is not one block.
class HeldBytes {
 public:
  HeldBytes(py::handle object, std::string_view what, std::string_view expected);
  ~HeldBytes() { PyBuffer_Release(&view_); }
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;
  std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(view_.buf), static_cast<size_t>(view_.len)};
  }

 private:
  Py_buffer view_;
};

// Device.compile's arguments (null handles: not given; None is the same).
struct CompileArgs {
  py::handle source, source_file, entry, language, buffers, scalars, global_size, local_size, defines, flops, bytes,
      name;
};
// The arguments of a dict of compile()'s keywords (compile_many); an unknown
// key is Error(Validation).
CompileArgs compile_args(py::handle dict, const std::string& what);
// The ProgramSpec of compile()'s arguments (program_spec.cpp): through the
// plan-file parser's program reader, with numpy dtypes, C parameters inferred
// from the source when buffers=/scalars= are left out, and declared ones
// checked against it. `what` ("compile") begins every message. Without
// `parameters` (compile_binary: the compiled code does not depend on them),
// buffers and scalars are neither read from the source nor checked.
ProgramSpec program_spec(const CompileArgs& args, const std::string& what, bool parameters = true);

// The svod DType of a numpy dtype (native byte order), if svod has one.
std::optional<DType> dtype_of(PyArray_Descr* descr);
// A dtype argument: a svod name ("f32"), a numpy name ("float32") or anything
// numpy.dtype() accepts but None (numpy's float64).
DType dtype_from_object(py::handle obj);
// The numpy type number for a DType (bf16 as its uint16 bit patterns).
int numpy_type_of(DType dtype);

// A new buffer on `device`: `shape` is an element count or a sequence of
// sizes. zero=false takes it from the device's block cache, uncleared.
PyBuffer allocate_buffer(Device& device, py::handle dtype, py::handle shape, bool zero);

// Wraps a C-contiguous, aligned, native-order numpy array as a CPU buffer of
// its own memory (no copy), keeping the array alive as long as the buffer.
// `what` names the argument in errors. `writable` requires a writable array.
Buffer wrap_array(PyArrayObject* array, const std::string& what, bool writable);
// Wraps a DLPack producer's host tensor the same way (from_dlpack).
PyBuffer wrap_dlpack(py::handle producer, const std::string& what);
// An argument that may be a svod.Buffer, a numpy array or a DLPack producer,
// as a svod::Buffer (arrays wrapped without copying).
Buffer buffer_argument(py::handle obj, const std::string& what, bool writable);

// A new numpy array holding a copy of the buffer (any device).
py::object to_numpy(const PyBuffer& buffer);

// A numpy array over the host memory of `buffer` (no copy), keeping the
// storage alive.
py::object numpy_view(const Buffer& buffer, const std::vector<size_t>& shape);

// The program of a svod.Program (svod.ArgumentTypeError, naming `what`, for
// anything else).
std::shared_ptr<const Program> program_from_object(py::handle obj, std::string_view what);

// The process's CPU device (the registry's, as svod::cpu_device()), owner of
// wrapped host memory. (svod::host_device() is the kernel-less device that
// stages copies.)
Device& cpu_device();

// The BenchmarkConfig of svod.benchmark's arguments: `runs` is both the
// least and the most timed runs; times are in seconds.
BenchmarkConfig benchmark_config(py::handle warmup, py::handle runs, py::handle min_total_s, py::handle timeout_s);
// svod.benchmark of a svod.Plan (plan.cpp); null when `target` is no plan.
std::optional<BenchmarkResult> benchmark_if_plan(py::handle target, py::handle args, const BenchmarkConfig& config);

// Profiles of what runs inside `with svod.profile()` (profile.cpp). While
// none is open, profiling() is one relaxed load and nothing else happens.
bool profiling() noexcept;
// Runs `run` (one launch of `program`) as one profiled run of the program.
void profile_program_call(const std::shared_ptr<const Program>& program, const std::function<void()>& run);
// Runs `run` with the open profile's observer for the plan `owner` holds.
void profile_plan_run(const std::shared_ptr<void>& owner, const ExecutionPlan& plan,
                      const std::function<void(PlanObserver*)>& run);

// dev.capture() (capture.cpp): while one is open on this thread, program
// calls and copies are recorded into its plan instead of run.
struct Capture;
Capture* capturing() noexcept;
// Records a call of `program` (its buffer and scalar arguments, and the
// launch sizes when given); Error(Validation) for anything a plan cannot hold.
void capture_call(Capture& capture, const std::shared_ptr<const Program>& program, std::span<PyObject* const> buffers,
                  std::span<PyObject* const> scalars, PyObject* global_size, PyObject* local_size);
// Records dst.copy_from(src) and returns true when a capture is open.
bool capture_copy(const Buffer& dst, py::handle src);

// The communicator of a svod.comm.Communicator (svod.ArgumentTypeError,
// naming `what`, for anything else), shared with what keeps it (comm.cpp).
std::shared_ptr<Communicator> communicator_from_object(py::handle obj, std::string_view what);

void bind_buffers(py::module_& m);
void bind_devices(py::module_& m);
void bind_programs(py::module_& m);
void bind_plans(py::module_& m);
void bind_profile(py::module_& m);
void bind_capture(py::module_& m);
void bind_comm(py::module_& m);

}  // namespace svod::python
