// svod.Buffer, host arrays as svod buffers (numpy, DLPack) and svod buffers
// as numpy arrays and DLPack tensors — all without copying host memory.
#include <dlpack/dlpack.h>

#include <cstring>

#include "bindings.h"
#include "svod/device/block_cache.h"

namespace svod::python {

namespace {

// Host memory someone else owns (a numpy array, a DLPack producer), lent to
// svod. `release` gives it back; it runs when the last svod::Buffer over it
// goes, on whatever thread that is, so it takes the GIL itself.
class BorrowedStorage final : public Storage {
 public:
  BorrowedStorage(void* data, size_t bytes, std::function<void()> release, bool read_only = false)
      : Storage(cpu_device(), bytes, data), release_(std::move(release)) {
    if (read_only) set_read_only();
  }
  ~BorrowedStorage() override {
    // At interpreter exit the owner is gone with the interpreter.
    if (!Py_IsInitialized()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    release_();
    PyGILState_Release(state);
  }

 private:
  std::function<void()> release_;
};

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

// "TypeError: the message" of a Python exception caught as
// error_already_set, without the traceback its what() carries.
std::string exception_text(const py::error_already_set& e) {
  const py::handle value = e.value();
  std::string text;
  try {
    text = py::cast<std::string>(py::str(value));
  } catch (const py::error_already_set&) {
    text = "(its message cannot be read)";
  }
  const std::string type = type_name(value);
  return text.empty() ? type : fmt::format("{}: {}", type, text);
}

// A svod.Buffer's shape as numpy dims.
std::vector<npy_intp> dims_of(const std::vector<size_t>& shape) { return {shape.begin(), shape.end()}; }

// DLPack's bool type code, added in DLPack 0.8 (Debian's header is 0.6).
constexpr uint8_t kDLBoolCode = 6;

// A DLPack element type as a DType.
std::optional<DType> dtype_of_dl(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLBoolCode:
      if (t.bits == 8) return DType::Bool;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::I8;
      if (t.bits == 16) return DType::I16;
      if (t.bits == 32) return DType::I32;
      if (t.bits == 64) return DType::I64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::U8;
      if (t.bits == 16) return DType::U16;
      if (t.bits == 32) return DType::U32;
      if (t.bits == 64) return DType::U64;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::F16;
      if (t.bits == 32) return DType::F32;
      if (t.bits == 64) return DType::F64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BF16;
      break;
  }
  return std::nullopt;
}

DLDataType dl_dtype(DType dtype) {
  DLDataType t{};
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(size_of(dtype) * 8);
  if (dtype == DType::Bool) t.code = kDLBoolCode;
  else if (dtype == DType::BF16) t.code = kDLBfloat;
  else if (is_float(dtype)) t.code = kDLFloat;
  else t.code = is_signed(dtype) ? kDLInt : kDLUInt;
  return t;
}

// What a DLPack export owns: the buffer (its storage stays alive) and the
// shape the tensor points into.
struct DlpackExport {
  DLManagedTensor tensor{};
  Buffer buffer;
  std::vector<int64_t> shape;
};

void delete_export(DLManagedTensor* tensor) { delete static_cast<DlpackExport*>(tensor->manager_ctx); }

// A capsule no consumer took still owns its tensor.
void dlpack_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    tensor->deleter(tensor);
  }
}

py::capsule export_dlpack(const PyBuffer& self) {
  const Buffer& buffer = self.get();
  if (!buffer.is_host())
    throw make_error(ErrorKind::Unsupported, "svod.Buffer on {}: DLPack export needs host memory; use to_numpy()",
                     buffer.device().name());
  // A DLPack tensor cannot say that its memory is read-only (numpy refuses
  // such exports too); its consumer would write into it.
  if (buffer.storage().read_only())
    throw make_error(ErrorKind::Unsupported,
                     "svod.Buffer.__dlpack__: the memory is read-only and a DLPack tensor cannot say so; use "
                     "numpy() for a read-only view or to_numpy() for a copy");
  auto owner = std::make_unique<DlpackExport>();
  owner->buffer = buffer;
  owner->shape.assign(self.shape.begin(), self.shape.end());
  DLTensor& t = owner->tensor.dl_tensor;
  t.data = buffer.storage().host_data();
  t.byte_offset = buffer.byte_offset();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(owner->shape.size());
  t.dtype = dl_dtype(buffer.dtype());
  t.shape = owner->shape.data();
  t.strides = nullptr;  // compact row-major
  owner->tensor.manager_ctx = owner.get();
  owner->tensor.deleter = delete_export;
  PyObject* capsule = PyCapsule_New(&owner->tensor, "dltensor", dlpack_capsule_destructor);
  if (capsule == nullptr) throw py::error_already_set();
  owner.release();
  return py::reinterpret_steal<py::capsule>(capsule);
}

bool is_integer(py::handle obj) { return !PyBool_Check(obj.ptr()) && PyIndex_Check(obj.ptr()); }

// A dimension (an integer: int, numpy integers, __index__) below 2^63, which
// numpy's dimensions and Python's len() hold; nullopt for a negative or
// larger one. `what()` names it for a value that is no integer.
template <typename What>
std::optional<size_t> dimension(py::handle d, What&& what) {
  if (!is_integer(d)) throw type_error(what(), "integers", d);
  auto index = py::reinterpret_steal<py::object>(PyNumber_Index(d.ptr()));
  if (!index) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    throw type_error(what(), "integers", d);
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || v < 0) return std::nullopt;
  return static_cast<size_t>(v);
}

std::vector<size_t> shape_from_object(py::handle count_or_shape) {
  std::vector<size_t> shape;
  if (is_integer(count_or_shape) && !PySequence_Check(count_or_shape.ptr())) {
    const auto n = dimension(count_or_shape, [] { return std::string("allocate: count"); });
    if (!n)
      throw make_error(ErrorKind::Validation,
                       "allocate: count {} is not a non-negative 64-bit element count (below 2^63)",
                       repr_text(count_or_shape));
    shape.push_back(*n);
    return shape;
  }
  // Sequences only: the elements of a set or dict's keys have no order.
  if (!PySequence_Check(count_or_shape.ptr()) || PyUnicode_Check(count_or_shape.ptr()) ||
      PyBytes_Check(count_or_shape.ptr()))
    throw type_error("allocate: shape", "an element count or a sequence of dimensions", count_or_shape);
  for (const py::object& d : sequence_argument(count_or_shape, "allocate: shape", "a sequence of dimensions")) {
    const auto n = dimension(
        d, [&] { return fmt::format("allocate: shape {} holds {}", repr_text(count_or_shape), repr_text(d)); });
    if (!n)
      throw make_error(ErrorKind::Validation,
                       "allocate: shape {} holds {} (expected non-negative 64-bit integers below 2^63)",
                       repr_text(count_or_shape), repr_text(d));
    shape.push_back(*n);
  }
  return shape;
}

// The element count of `shape`, refused (naming `what`) when it or its byte
// size for `dtype` is more than 64 bits hold.
size_t checked_count(const std::vector<size_t>& shape, DType dtype, std::string_view what) {
  const auto count = element_count(shape);
  if (!count || !byte_size(dtype, *count)) {
    std::string dims;
    for (size_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw make_error(ErrorKind::Validation, "{}: shape ({}{}) of {} elements is more bytes than fit in 64 bits", what,
                     dims, shape.size() == 1 ? "," : "", to_string(dtype));
  }
  return *count;
}

// Copies between a svod buffer and a numpy array through the buffer's device.
void copy_with_host(const Buffer& device_buffer, py::handle array, bool to_device, const std::string& what) {
  if (!PyArray_Check(array.ptr()))
    throw type_error(what, "a numpy array or a svod.Buffer", array);
  auto* arr = reinterpret_cast<PyArrayObject*>(array.ptr());
  const auto dtype = dtype_of(PyArray_DESCR(arr));
  if (!dtype || size_of(*dtype) != size_of(device_buffer.dtype()) ||
      (*dtype != device_buffer.dtype() && device_buffer.dtype() != DType::BF16))
    throw make_error(ErrorKind::Validation, "{}: array dtype {} does not match the buffer's {}", what,
                     py::cast<std::string>(py::str(reinterpret_cast<PyObject*>(PyArray_DESCR(arr)))),
                     to_string(device_buffer.dtype()));
  if (static_cast<size_t>(PyArray_NBYTES(arr)) != device_buffer.bytes())
    throw make_error(ErrorKind::Validation, "{}: the array holds {} bytes, the buffer {}", what,
                     static_cast<size_t>(PyArray_NBYTES(arr)), device_buffer.bytes());
  Buffer host = wrap_array(arr, what, !to_device);
  host = Buffer(host.storage_ptr(), device_buffer.dtype(), host.byte_offset(), host.bytes());
  GilReleased unlocked;
  if (to_device) device_buffer.device().copy(device_buffer, host);
  else device_buffer.device().copy(host, device_buffer);
}


// buf.copy_from(source): recorded when a capture is open.
void copy_from(const PyBuffer& b, py::handle source) {
  const Buffer& dst = b.get();
  check_writable(dst, "copy_from: the destination");
  if (capture_copy(dst, source)) return;
  const PyBuffer* from = as_py_buffer(source.ptr());
  if (from == nullptr) return copy_with_host(dst, source, true, "copy_from");
  const Buffer& src = from->get();
  if (src.bytes() != dst.bytes() ||
      (src.dtype() != dst.dtype() && src.dtype() != DType::U8 && dst.dtype() != DType::U8))
    throw make_error(ErrorKind::Validation, "copy_from: the source is {} bytes of {}, the destination {} bytes of {}",
                     src.bytes(), to_string(src.dtype()), dst.bytes(), to_string(dst.dtype()));
  GilReleased unlocked;
  copy_buffer(dst, src);
}

PyTypeObject* buffer_type = nullptr;  // svod.Buffer, set by bind_buffers

// buf.view(byte_offset, count, dtype): `count` elements of `dtype` (the
// buffer's own when None) from `byte_offset` bytes into this buffer.
PyBuffer view_of(const PyBuffer& b, py::handle byte_offset_object, py::handle count_object, py::handle dtype) {
  const size_t byte_offset = size_argument(byte_offset_object, "svod.Buffer.view: byte_offset");
  const size_t count = size_argument(count_object, "svod.Buffer.view: count");
  const Buffer& base = b.get();
  const DType type = dtype.is_none() ? base.dtype() : dtype_from_object(dtype);
  const auto fits = byte_size(type, count);
  if (!fits)
    throw make_error(ErrorKind::Validation, "svod.Buffer.view: {} {} elements are more bytes than fit in 64 bits", count,
                     to_string(type));
  const size_t bytes = *fits;
  if (byte_offset > base.bytes() || bytes > base.bytes() - byte_offset)
    throw make_error(ErrorKind::Validation,
                     "svod.Buffer.view: {} {} elements ({} bytes) at byte offset {} leave the buffer of {} bytes", count,
                     to_string(type), bytes, byte_offset, base.bytes());
  return PyBuffer{base.view_bytes(byte_offset, bytes, type), {count}};
}

}  // namespace

py::object to_numpy(const PyBuffer& self) {
  const Buffer& buffer = self.get();
  if (buffer.is_host()) return numpy_view(buffer, self.shape).attr("copy")();
  auto dims = dims_of(self.shape);
  py::object out = py::reinterpret_steal<py::object>(
      PyArray_SimpleNew(static_cast<int>(dims.size()), dims.data(), numpy_type_of(buffer.dtype())));
  if (!out) throw py::error_already_set();
  copy_with_host(buffer, out, false, "to_numpy");
  return out;
}

const PyBuffer* as_py_buffer(PyObject* obj) noexcept {
  if (Py_TYPE(obj) != buffer_type) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(obj);
  return static_cast<const PyBuffer*>(inst->get_value_and_holder().value_ptr());
}

const Buffer& PyBuffer::get() const {
  if (!buffer.valid()) throw make_error(ErrorKind::Validation, "svod.Buffer: used after release()");
  return buffer;
}

PyBuffer allocate_buffer(Device& device, py::handle dtype, py::handle shape, bool zero) {
  PyBuffer b;
  b.shape = shape_from_object(shape);
  const DType type = dtype_from_object(dtype);
  const size_t count = checked_count(b.shape, type, "allocate");
  GilReleased unlocked;
  b.buffer = zero ? device.allocate(type, count) : device.allocate_cached(type, count);
  return b;
}

Buffer wrap_array(PyArrayObject* array, const std::string& what, bool writable) {
  PyArray_Descr* descr = PyArray_DESCR(array);
  const auto dtype = dtype_of(descr);
  if (!dtype)
    throw make_error(ErrorKind::Validation, "{}: numpy dtype {} has no svod element type{}", what,
                     py::cast<std::string>(py::str(reinterpret_cast<PyObject*>(descr))),
                     PyArray_ISBYTESWAPPED(array) ? " (non-native byte order)" : "");
  if (!PyArray_IS_C_CONTIGUOUS(array))
    throw make_error(ErrorKind::Validation, "{}: the array is not C-contiguous (use numpy.ascontiguousarray)", what);
  if (!PyArray_ISALIGNED(array)) throw make_error(ErrorKind::Validation, "{}: the array is not aligned", what);
  if (writable && !PyArray_ISWRITEABLE(array)) throw make_error(ErrorKind::Validation, "{}: the array is read-only", what);
  PyObject* owner = reinterpret_cast<PyObject*>(array);
  Py_INCREF(owner);
  auto storage = std::make_shared<BorrowedStorage>(PyArray_DATA(array), static_cast<size_t>(PyArray_NBYTES(array)),
                                                   [owner] { Py_DECREF(owner); }, !PyArray_ISWRITEABLE(array));
  return Buffer(std::move(storage), *dtype);
}

PyBuffer wrap_dlpack(py::handle producer, const std::string& what) {
  // numpy arrays directly: numpy refuses to export read-only arrays (DLPack
  // cannot say so), svod wraps them read-only.
  if (PyArray_Check(producer.ptr())) {
    auto* array = reinterpret_cast<PyArrayObject*>(producer.ptr());
    PyBuffer b;
    b.buffer = wrap_array(array, what, false);
    b.shape.assign(PyArray_DIMS(array), PyArray_DIMS(array) + PyArray_NDIM(array));
    return b;
  }
  if (!py::hasattr(producer, "__dlpack__"))
    throw ArgumentTypeError(fmt::format("{}: {} has no __dlpack__", what, type_name(producer)));
  py::object capsule;
  try {
    capsule = producer.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    // The producer refused (a read-only or non-host tensor, one that needs a
    // gradient...): an argument svod cannot take. KeyboardInterrupt and such
    // pass through.
    if (!e.matches(PyExc_Exception) || e.matches(PyExc_MemoryError)) throw;
    // The exception's type and message, not e.what(): pybind11 appends the
    // Python traceback there ("\n\nAt:\n  file(line): function").
    const std::string reason = exception_text(e);
    throw make_error(ErrorKind::Validation, "{}: {}.__dlpack__() refused: {}", what, type_name(producer), reason);
  }
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw make_error(ErrorKind::Validation, "{}: __dlpack__ of {} did not return an unused DLPack capsule", what,
                     type_name(producer));
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& t = tensor->dl_tensor;
  // Refusals leave the capsule unconsumed: its destructor gives the tensor back.
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
    throw make_error(ErrorKind::Unsupported, "{}: DLPack tensor on device type {}: svod wraps host tensors only", what,
                     static_cast<int>(t.device.device_type));
  const auto dtype = dtype_of_dl(t.dtype);
  if (!dtype)
    throw make_error(ErrorKind::Validation, "{}: DLPack dtype (code {}, {} bits, {} lanes) has no svod element type",
                     what, static_cast<int>(t.dtype.code), static_cast<int>(t.dtype.bits),
                     static_cast<int>(t.dtype.lanes));
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr))
    throw make_error(ErrorKind::Validation, "{}: the DLPack tensor has no shape ({} dimensions)", what, t.ndim);
  std::vector<size_t> shape;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      throw make_error(ErrorKind::Validation, "{}: the DLPack tensor's dimension {} is {}", what, d, t.shape[d]);
    shape.push_back(static_cast<size_t>(t.shape[d]));
  }
  const size_t count = checked_count(shape, *dtype, what);
  if (t.strides != nullptr && count > 1) {
    size_t expected = 1;  // at most count: no overflow
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && t.strides[d] < 0)
        throw make_error(ErrorKind::Validation,
                         "{}: the DLPack tensor has a negative stride ({} in dimension {}); svod takes C-contiguous "
                         "tensors (copy it first)",
                         what, t.strides[d], d);
      if (shape[d] != 1 && static_cast<size_t>(t.strides[d]) != expected)
        throw make_error(ErrorKind::Validation,
                         "{}: the DLPack tensor is not C-contiguous (stride {} in dimension {}, {} expected); copy it "
                         "first",
                         what, t.strides[d], d, expected);
      expected *= shape[d];
    }
  }
  // The first element's address: data plus byte_offset, inside the address
  // space, with the tensor's bytes after it, and aligned to its elements.
  const size_t bytes = count * size_of(*dtype);
  const auto data = reinterpret_cast<uintptr_t>(t.data);
  if (data == 0 && bytes > 0)
    throw make_error(ErrorKind::Validation, "{}: the DLPack tensor of {} bytes has a null data pointer", what, bytes);
  if (t.byte_offset > UINTPTR_MAX - data || bytes > UINTPTR_MAX - data - t.byte_offset)
    throw make_error(ErrorKind::Validation,
                     "{}: the DLPack tensor's byte_offset {} and {} bytes from data pointer {:#x} run past the end of "
                     "the address space",
                     what, t.byte_offset, bytes, data);
  const uintptr_t first = data + t.byte_offset;
  if (first % size_of(*dtype) != 0)
    throw make_error(ErrorKind::Validation,
                     "{}: the DLPack tensor's first element at {:#x} is not aligned to its {}-byte {} elements", what,
                     first, size_of(*dtype), to_string(*dtype));
  // Consumed: from here the storage calls the producer's deleter.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  auto storage = std::make_shared<BorrowedStorage>(reinterpret_cast<void*>(first), bytes, [tensor] {
    if (tensor->deleter) tensor->deleter(tensor);
  });
  return PyBuffer{Buffer(std::move(storage), *dtype), std::move(shape)};
}

Buffer buffer_argument(py::handle obj, const std::string& what, bool writable) {
  if (PyArray_Check(obj.ptr())) return wrap_array(reinterpret_cast<PyArrayObject*>(obj.ptr()), what, writable);
  if (const PyBuffer* b = as_py_buffer(obj.ptr())) return b->get();
  if (py::hasattr(obj, "__dlpack__")) return wrap_dlpack(obj, what).buffer;
  throw type_error(what, "a numpy array, a svod.Buffer or an object with __dlpack__", obj);
}

py::object numpy_view(const Buffer& buffer, const std::vector<size_t>& shape) {
  if (!buffer.is_host())
    throw make_error(ErrorKind::Unsupported, "svod.Buffer on {} is device memory: use to_numpy() to copy it",
                     buffer.device().name());
  auto dims = dims_of(shape);
  PyObject* array = PyArray_SimpleNewFromData(static_cast<int>(dims.size()), dims.data(),
                                              numpy_type_of(buffer.dtype()), buffer.data());
  if (array == nullptr) throw py::error_already_set();
  // Memory svod holds read-only (a read-only array it wraps) stays so.
  if (buffer.storage().read_only()) PyArray_CLEARFLAGS(reinterpret_cast<PyArrayObject*>(array), NPY_ARRAY_WRITEABLE);
  // The array's base owns a reference to the storage.
  py::capsule owner(new Buffer(buffer), [](void* p) { delete static_cast<Buffer*>(p); });
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), owner.release().ptr()) < 0) {
    Py_DECREF(array);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(array);
}

void bind_buffers(py::module_& m) {
  py::class_<PyBuffer> cls(m, "Buffer",
                           "Memory on a device, typed and shaped. CPU buffers are host memory: numpy.asarray(buf),\n"
                           "buf.numpy() and numpy.from_dlpack(buf) view them without a copy. Device buffers\n"
                           "(CL, CUDA) copy with copy_from(array) and to_numpy().");
  buffer_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  cls
      .def_property_readonly("dtype", [](const PyBuffer& b) { return std::string(to_string(b.get().dtype())); },
                             "Element type, a svod name (\"f32\"): a str rather than a numpy.dtype because svod has\n"
                             "types numpy lacks (bf16) and plan files, compile() and Program.buffers use the same names.")
      .def_property_readonly(
          "numpy_dtype",
          [](const PyBuffer& b) {
            PyObject* descr = reinterpret_cast<PyObject*>(PyArray_DescrFromType(numpy_type_of(b.get().dtype())));
            if (descr == nullptr) throw py::error_already_set();
            return py::reinterpret_steal<py::object>(descr);
          },
          "The numpy.dtype of numpy()'s array: the same type, or for bf16 (which numpy lacks) uint16,\n"
          "its bit patterns.")
      .def_property_readonly("shape", [](const PyBuffer& b) { return py::tuple(py::cast(b.shape)); })
      .def_property_readonly("count", [](const PyBuffer& b) { return b.get().count(); }, "Number of elements.")
      .def_property_readonly("nbytes", [](const PyBuffer& b) { return b.get().bytes(); })
      .def_property_readonly("device", [](const PyBuffer& b) { return b.get().device().name(); },
                             "Name of the device holding the memory (\"CPU\", \"CL:0\").")
      .def_property_readonly("is_host", [](const PyBuffer& b) { return b.get().is_host(); })
      .def_property_readonly("released", [](const PyBuffer& b) { return !b.buffer.valid(); })
      .def_property_readonly(
          "data_ptr", [](const PyBuffer& b) { return reinterpret_cast<uintptr_t>(b.get().data()); },
          "Host address of the first element (host buffers only).")
      .def("__len__", [](const PyBuffer& b) { return b.shape.empty() ? size_t{1} : b.shape[0]; })
      .def("numpy", [](const PyBuffer& b) { return numpy_view(b.get(), b.shape); },
           "A numpy array over this host buffer (no copy); it keeps the memory alive.")
      .def(
          "__array__",
          [](const PyBuffer& b, py::handle dtype, py::handle copy) {
            const bool copied = !copy.is_none() && bool_argument(copy, "svod.Buffer.__array__: copy");
            py::object type;
            if (!dtype.is_none()) {
              PyArray_Descr* descr = nullptr;
              if (!PyArray_DescrConverter(dtype.ptr(), &descr)) {
                PyErr_Clear();
                throw type_error(fmt::format("svod.Buffer.__array__: dtype {}", repr_text(dtype)), "a numpy dtype",
                                 dtype);
              }
              type = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(descr));
            }
            py::object out = b.get().is_host() ? numpy_view(b.get(), b.shape) : to_numpy(b);
            if (type) out = out.attr("astype")(type, py::arg("copy") = false);
            if (copied && b.get().is_host()) out = out.attr("copy")();
            return out;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("to_numpy", &to_numpy, "A new numpy array holding a copy of the buffer (any device).")
      .def("copy_from", &copy_from, py::arg("source"),
           "Copies a numpy array of the same dtype and size, or a svod.Buffer (any device) of the same\n"
           "byte size and dtype (or either u8 byte storage), into the buffer.")
      .def("view", &view_of, py::arg("byte_offset"), py::arg("count"), py::arg("dtype") = py::none(),
           "A buffer of `count` elements of `dtype` (this buffer's when None) starting `byte_offset`\n"
           "bytes in, sharing this buffer's memory on any device; usable wherever a buffer is.\n"
           "ValidationError when the range leaves the buffer.")
      .def("release", [](PyBuffer& b) { b.buffer = Buffer(); },
           "Drops this handle's reference to the memory; later use raises ValidationError.")
      .def(
          "__dlpack__",
          [](const PyBuffer& b, py::handle stream, py::handle max_version, py::handle dl_device, py::handle copy) {
            // Host memory has no stream to order work on: any stream number is
            // accepted (and nothing is waited on).
            if (!stream.is_none() && !is_integer(stream))
              throw type_error("svod.Buffer.__dlpack__: stream", "None or an integer", stream);
            if (!max_version.is_none() && !PyTuple_Check(max_version.ptr()))
              throw type_error("svod.Buffer.__dlpack__: max_version", "None or a (major, minor) tuple", max_version);
            if (!dl_device.is_none()) {
              const auto device = sequence_argument(dl_device, "svod.Buffer.__dlpack__: dl_device",
                                                    "None or a (device_type, device_id) tuple");
              if (device.size() != 2 || !is_integer(device[0]) || !is_integer(device[1]))
                throw make_error(ErrorKind::Validation,
                                 "svod.Buffer.__dlpack__: dl_device {} is not a (device_type, device_id) pair",
                                 repr_text(dl_device));
              if (integer_value(device[0].ptr(), [] { return std::string("dl_device"); }) != kDLCPU ||
                  integer_value(device[1].ptr(), [] { return std::string("dl_device"); }) != 0)
                throw make_error(ErrorKind::Unsupported,
                                 "svod.Buffer.__dlpack__: dl_device {}: svod exports host buffers as CPU tensors "
                                 "(device type {}, id 0) only",
                                 repr_text(dl_device), static_cast<int>(kDLCPU));
            }
            if (!copy.is_none() && bool_argument(copy, "svod.Buffer.__dlpack__: copy"))
              throw make_error(ErrorKind::Unsupported, "svod.Buffer.__dlpack__: copy=True is not supported");
            return export_dlpack(b);
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "A DLPack capsule sharing this host buffer's memory.")
      .def("__dlpack_device__",
           [](const PyBuffer& b) {
             if (!b.get().is_host())
               throw make_error(ErrorKind::Unsupported, "svod.Buffer on {}: only host buffers export DLPack",
                                b.get().device().name());
             return py::make_tuple(static_cast<int>(kDLCPU), 0);
           })
      .def("__repr__", [](const PyBuffer& b) {
        if (!b.buffer.valid()) return std::string("svod.Buffer(released)");
        std::string shape;
        for (size_t d : b.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        return fmt::format("svod.Buffer(dtype={}, shape=({}{}), device={})", to_string(b.buffer.dtype()), shape,
                           b.shape.size() == 1 ? "," : "", b.buffer.device().name());
      });

  refuse_construction(cls, "use Device.allocate(), svod.asbuffer() or svod.from_dlpack()");

  m.def(
      "free_cached",
      [] {
        GilReleased unlocked;
        free_cached_blocks();
      },
      "Gives the memory that buffers allocated with zero=False left for reuse back, on every device.");
  m.def(
      "from_dlpack", [](py::handle obj) { return wrap_dlpack(obj, "from_dlpack"); }, py::arg("obj"),
      "Wraps a DLPack producer's host tensor (numpy array, torch tensor, ...) as a svod.Buffer\n"
      "sharing its memory; the producer stays alive as long as the buffer.");
  m.def(
      "asbuffer",
      [](py::handle array) {
        if (!PyArray_Check(array.ptr())) throw type_error("svod.asbuffer", "a numpy array", array);
        auto* arr = reinterpret_cast<PyArrayObject*>(array.ptr());
        PyBuffer b;
        b.buffer = wrap_array(arr, "svod.asbuffer", false);
        b.shape.assign(PyArray_DIMS(arr), PyArray_DIMS(arr) + PyArray_NDIM(arr));
        return b;
      },
      py::arg("array"),
      "A CPU svod.Buffer sharing a numpy array's memory (the array stays alive with it; a read-only\n"
      "array makes a read-only buffer).");
}

}  // namespace svod::python
