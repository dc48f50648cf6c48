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

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

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

// Raises the svod.Error subclass of the exception in flight (svod::Error by
// kind; anything else as svod.InternalError), for entry points that do not go
// through pybind11's dispatcher. Call inside a catch block.
void set_python_error();
// The svod.Error subclass instance for `e` (not raised).
py::object python_error(const Error& e);
// Registers the Python classes for each ErrorKind (from svod/__init__.py).
void set_error_classes(py::object base, py::dict by_kind);

// An integer argument (anything with __index__ but bool) as 64 bits;
// Error(Validation) otherwise. `what()` names it, called only on failure.
template <typename What>
inline int64_t integer_value(PyObject* obj, What&& what) {
  py::object index;
  if (!PyLong_CheckExact(obj)) {
    if (PyBool_Check(obj) || !PyIndex_Check(obj))
      throw make_error(ErrorKind::Validation, "{}: expected an integer, got {}", what(), Py_TYPE(obj)->tp_name);
    index = py::reinterpret_steal<py::object>(PyNumber_Index(obj));
    if (!index) throw py::error_already_set();
    obj = index.ptr();
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: {} is outside the 64-bit integer range", what(),
                     py::cast<std::string>(py::str(obj)));
  return v;
}

// The svod DType of a numpy dtype (native byte order), if svod has one.
std::optional<DType> dtype_of(PyArray_Descr* descr);
// A dtype argument: a svod name ("f32"), a numpy name ("float32") or anything
// numpy.dtype() accepts.
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

// The program of a svod.Program (Error(Validation) for anything else).
std::shared_ptr<const Program> program_from_object(py::handle obj);

// The process's CPU device (the registry's), owner of wrapped host memory.
Device& host_device();

// The BenchmarkConfig of the _benchmark_* functions' arguments: `runs` is
// both the least and the most timed runs; times are in seconds.
BenchmarkConfig benchmark_config(int warmup, int runs, double min_total_s, double timeout_s);

// Profiles of what runs inside `with svod.profile()` (profile.cpp). While
// none is open, profiling() is one relaxed load and nothing else happens.
bool profiling() noexcept;
// Runs `run` (one launch of `program`) as one profiled run of the program.
void profile_program_call(const std::shared_ptr<const Program>& program, const std::function<void()>& run);
// Runs `run` with the open profile's observer for the plan `owner` holds
// (`labels` name its ops in tables, when given).
void profile_plan_run(const std::shared_ptr<void>& owner, const ExecutionPlan& plan,
                      const std::vector<std::string>* labels, const std::function<void(PlanObserver*)>& run);

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

void bind_buffers(py::module_& m);
void bind_devices(py::module_& m);
void bind_programs(py::module_& m);
void bind_plans(py::module_& m);
void bind_profile(py::module_& m);
void bind_capture(py::module_& m);

}  // namespace svod::python
