// Calling a svod.Program.
//
// Calling a Program is the hot path of a code generator that launches every
// kernel it emits, so svod.Program is called through CPython's vectorcall
// protocol (no argument tuple or keyword dict is built) rather than as a
// pybind11 method: the signature is worked out once when the program is
// compiled (numpy type numbers, which buffers are written, the parameter
// names as interned strings), and a call on a program that binds host
// arguments (the CPU's) checks the arguments in place and runs
// Program::run_bound on raw addresses — no svod::Buffer, no allocation — with
// the GIL released.
#include <Python.h>

#ifdef __GLIBCXX__
#include <cxxabi.h>
#endif

#include <array>

#include "program_object.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/staging.h"
#include "svod/program/cpu_abi.h"

namespace svod::python {

namespace {

PyTypeObject* program_type = nullptr;
PyObject* global_size_name = nullptr;  // interned "global_size" and "local_size"
PyObject* local_size_name = nullptr;

PyProgram& program_of(PyObject* self) {
  if (Py_TYPE(self) == program_type) {
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    return *static_cast<PyProgram*>(inst->get_value_and_holder().value_ptr());
  }
  if (!PyObject_TypeCheck(self, program_type)) throw type_error("svod.Program.__call__: self", "a svod.Program", self);
  return py::cast<PyProgram&>(py::handle(self));
}

std::string where(const PyProgram& p, size_t slot) {
  return fmt::format("program \"{}\": {} {} (\"{}\")", p.display_name(), slot < p.buffer_count ? "buffer" : "scalar",
                     slot < p.buffer_count ? slot : slot - p.buffer_count, p.name_text[slot]);
}

std::string numpy_dtype_text(PyArrayObject* a) {
  return py::cast<std::string>(py::str(reinterpret_cast<PyObject*>(PyArray_DESCR(a))));
}

// The keyword-only launch sizes of a call (null when not given).
struct SizeArgs {
  PyObject* global = nullptr;
  PyObject* local = nullptr;
};

// The slot of keyword `key`: a parameter's index, `total` for global_size,
// `total + 1` for local_size (unless parameters have those names), or
// nullopt. Interned names (the usual case) match by identity.
std::optional<size_t> keyword_slot(const PyProgram& p, PyObject* key, size_t total) {
  for (int equal = 0; equal < 2; ++equal) {
    auto same = [&](PyObject* name) { return equal ? PyUnicode_Compare(key, name) == 0 : key == name; };
    for (size_t i = 0; i < total; ++i)
      if (same(p.names[i].ptr())) return i;
    if (same(global_size_name)) return total;
    if (same(local_size_name)) return total + 1;
  }
  return std::nullopt;
}

// Puts positional then keyword arguments (CPython's vectorcall layout: the
// keywords' values follow the positional ones, `kwnames` names them) into
// their parameter slots, and global_size=/local_size= into `sizes`.
void gather(const PyProgram& p, PyObject* const* args, size_t positional, PyObject* kwnames, PyObject** slots,
            SizeArgs& sizes) {
  const size_t total = p.buffer_count + p.scalar_count;
  if (positional > total) [[unlikely]]
    throw ArgumentTypeError(fmt::format("program \"{}\" takes {} buffers and {} scalars ({} arguments), got {}",
                                        p.display_name(), p.buffer_count, p.scalar_count, total, positional));
  for (size_t i = 0; i < positional; ++i) slots[i] = args[i];
  for (size_t i = positional; i < total; ++i) slots[i] = nullptr;
  const size_t keywords = kwnames != nullptr ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
  for (size_t k = 0; k < keywords; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, static_cast<Py_ssize_t>(k));
    PyObject* value = args[positional + k];
    const auto slot = keyword_slot(p, key, total);
    if (!slot) {
      const char* text = PyUnicode_AsUTF8(key);
      if (text == nullptr) PyErr_Clear();
      throw ArgumentTypeError(fmt::format("program \"{}\" has no parameter named {}", p.display_name(),
                                          text != nullptr ? fmt::format("\"{}\"", text) : repr_text(key)));
    }
    if (*slot == total) {
      sizes.global = value;
    } else if (*slot == total + 1) {
      sizes.local = value;
    } else {
      if (slots[*slot] != nullptr) throw ArgumentTypeError(fmt::format("{}: given twice", where(p, *slot)));
      slots[*slot] = value;
    }
  }
  for (size_t i = 0; i < total; ++i) {
    if (slots[i] == nullptr) [[unlikely]]
      throw ArgumentTypeError(fmt::format("{}: missing (the program takes {} buffers and {} scalars)", where(p, i),
                                          p.buffer_count, p.scalar_count));
  }
}

int64_t scalar_value(const PyProgram& p, size_t slot, PyObject* obj) {
  return integer_value(obj, [&] { return where(p, slot); });
}

// A launch size argument (an int, or a sequence of one to three ints; the
// dimensions left out are 1) into `out`.
void launch_size(const PyProgram& p, PyObject* obj, const char* which, std::array<int64_t, 3>& out) {
  auto what = [&] { return fmt::format("program \"{}\": {}", p.display_name(), which); };
  out = {1, 1, 1};
  if (PyLong_Check(obj) || (PyIndex_Check(obj) && !PyTuple_Check(obj) && !PyList_Check(obj))) {
    out[0] = integer_value(obj, what);
  } else if (PyTuple_Check(obj) || PyList_Check(obj)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    if (n < 1 || n > 3)
      throw make_error(ErrorKind::Validation, "{}: expected 1 to 3 dimensions, got {}", what(), n);
    PyObject** items = PySequence_Fast_ITEMS(obj);
    for (Py_ssize_t d = 0; d < n; ++d)
      out[d] = integer_value(items[d], [&] { return fmt::format("{}[{}]", what(), d); });
  } else {
    throw type_error(what(), "an integer or a tuple of integers", obj);
  }
  for (size_t d = 0; d < 3; ++d)
    if (out[d] < 1)
      throw make_error(ErrorKind::Validation, "{}: dimension {} is {}; launch sizes are at least 1", what(), d, out[d]);
}

// Names the program and buffer as where() does.
void check_dtype(const PyProgram& p, size_t i, DType got, uint64_t address) {
  p.program->layout().check_dtype(i, got, address);
}

// A numpy argument's address after the checks; `bytes` receives its size.
void* array_address(const PyProgram& p, size_t i, PyArrayObject* a, size_t& bytes) {
  const int flags = PyArray_FLAGS(a);
  if (!(flags & NPY_ARRAY_C_CONTIGUOUS)) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: the array is not C-contiguous (use numpy.ascontiguousarray)",
                     where(p, i));
  if (!(flags & NPY_ARRAY_ALIGNED)) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: the array is not aligned", where(p, i));
  if (p.written[i] && !(flags & NPY_ARRAY_WRITEABLE)) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: the kernel writes it but the array is read-only", where(p, i));
  PyArray_Descr* descr = PyArray_DESCR(a);
  const int want = p.numpy_type[i];
  if (descr->type_num != want) {
    // Equivalent numbers (NPY_LONGLONG for NPY_INT64) pass; anything that is no
    // svod dtype (objects, strings) never does.
    const auto got = dtype_of(descr);
    if (!got)
      throw make_error(ErrorKind::Validation, "{}: numpy dtype {} has no svod element type", where(p, i),
                       numpy_dtype_text(a));
    if (want != NPY_NOTYPE && !PyArray_EquivTypenums(descr->type_num, want))
      check_dtype(p, i, *got, reinterpret_cast<uint64_t>(PyArray_DATA(a)));
  }
  if (PyArray_ISBYTESWAPPED(a)) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: the array is not in native byte order", where(p, i));
  bytes = static_cast<size_t>(PyArray_NBYTES(a));
  return PyArray_DATA(a);
}

// The storages of svod.Buffer arguments, held while the GIL is released
// (another thread may release() the Python buffer meanwhile), without
// allocating.
class HeldStorages {
 public:
  HeldStorages() {}
  ~HeldStorages() {
    for (size_t i = 0; i < count_; ++i) std::destroy_at(&slots_[i].held);
  }
  HeldStorages(const HeldStorages&) = delete;
  HeldStorages& operator=(const HeldStorages&) = delete;
  void hold(const std::shared_ptr<Storage>& storage) { std::construct_at(&slots_[count_++].held, storage); }

 private:
  union Slot {
    Slot() {}
    ~Slot() {}
    std::shared_ptr<Storage> held;
  };
  Slot slots_[kMaxKernelArgs];
  size_t count_ = 0;
};

// A DLPack argument, its storage kept alive in `keep`.
const Buffer& dlpack_buffer(const PyProgram& p, size_t i, PyObject* obj, std::vector<Buffer>& keep) {
  if (!PyObject_HasAttrString(obj, "__dlpack__"))
    throw type_error(where(p, i), "a numpy array, a svod.Buffer or an object with __dlpack__", obj);
  keep.push_back(wrap_dlpack(obj, where(p, i)).buffer);
  return keep.back();
}

// Runs `fn` with the GIL released (and profiled when a profile is open).
// (At interpreter exit, a daemon thread returning here is ended by CPython in
// PyEval_RestoreThread; its unwinding passes call_program by and calls no
// Python: take_gil's check would cost every call.)
template <typename Fn>
void run_unlocked(const PyProgram& p, Fn&& fn) {
  if (profiling()) [[unlikely]] {
    GilReleased unlocked;
    profile_program_call(p.program, fn);
    return;
  }
  InterruptScope interruptible;
  PyThreadState* state = PyEval_SaveThread();
  try {
    fn();
  } catch (...) {
    take_gil(state);
    throw;
  }
  PyEval_RestoreThread(state);
}

// The KernelFault of a kernel that wrote into the slack between a staged
// argument's end and its guard page (staging.h), which no fault stopped.
[[noreturn]] void throw_slack_write(const PyProgram& p, size_t i, size_t offset) {
  const BufferParam& b = p.program->spec().buffers[i];
  KernelFaultInfo info;
  info.access = "write";
  info.cause = "out of bounds";
  info.program = p.program->spec().display_name();
  info.entry = p.program->spec().entry;
  info.buffer = i;
  info.buffer_name = b.name;
  if (b.dtype) info.element = static_cast<int64_t>(offset / size_of(*b.dtype));
  throw KernelFault(std::move(info),
                    fmt::format("kernel fault: {}: wrote past the end of the array, {} bytes from its start{}, into the "
                                "bytes before its guard page (a canary there changed)\n  the launch failed; what it "
                                "wrote inside the array stays written",
                                where(p, i), offset,
                                b.dtype ? fmt::format(" (element {})", offset / size_of(*b.dtype)) : std::string()));
}

// A launch whose small foreign arguments run on guarded copies (staging.h),
// copied back whether the launch succeeded or not.
[[gnu::noinline]] void run_staged(const PyProgram& p, uint64_t* args, const size_t* bytes, const bool* foreign,
                                  int64_t slices) {
  bool written[kMaxKernelArgs];
  for (size_t i = 0; i < p.buffer_count; ++i) written[i] = p.written[i] != 0;
  StagedArguments staged(args, bytes, foreign, p.buffer_count);
  try {
    run_unlocked(p, [&] { p.program->run_bound(args, slices); });
  } catch (...) {
    staged.copy_back(written);
    throw;
  }
  staged.copy_back(written);
  if (const auto slack = staged.slack_written()) [[unlikely]]
    throw_slack_write(p, slack->argument, slack->offset);
}

void call_host(const PyProgram& p, PyObject** slots, const SizeArgs& sizes) {
  const Program& program = *p.program;
  const LaunchLayout& layout = program.layout();
  uint64_t args[kMaxKernelArgs];
  size_t bytes[kMaxKernelArgs];
  bool foreign[kMaxKernelArgs];  // memory svod does not own: numpy arrays, DLPack tensors
  bool any_foreign = false;
  HeldStorages held;
  std::vector<Buffer> keep;  // DLPack arguments; no allocation when there are none
  for (size_t i = 0; i < p.buffer_count; ++i) {
    PyObject* obj = slots[i];
    void* address;
    if (PyArray_Check(obj)) [[likely]] {
      address = array_address(p, i, reinterpret_cast<PyArrayObject*>(obj), bytes[i]);
      foreign[i] = any_foreign = true;
    } else {
      const PyBuffer* pb = as_py_buffer(obj);
      foreign[i] = pb == nullptr;
      any_foreign |= foreign[i];
      const Buffer& b = pb != nullptr ? pb->get() : dlpack_buffer(p, i, obj, keep);
      if (!b.is_host()) [[unlikely]]
        throw make_error(ErrorKind::Validation, "{}: the buffer is on {}, the program on {}", where(p, i),
                         b.device().name(), program.device().name());
      address = b.data();
      check_dtype(p, i, b.dtype(), reinterpret_cast<uint64_t>(address));
      if (p.written[i] && b.storage().read_only()) [[unlikely]]
        check_writable(b, where(p, i));
      if (pb != nullptr) held.hold(b.storage_ptr());
      bytes[i] = b.bytes();
    }
    args[i] = reinterpret_cast<uint64_t>(address);
  }
  int64_t caller[kMaxKernelArgs];
  for (size_t j = 0; j < p.scalar_count; ++j) caller[j] = scalar_value(p, p.buffer_count + j, slots[p.buffer_count + j]);
  auto* abi = reinterpret_cast<int64_t*>(args + p.buffer_count);
  layout.fill_scalars({caller, p.scalar_count}, abi);
  for (size_t i = 0; i < p.buffer_count; ++i) {
    if (auto need = layout.min_bytes(i, abi); need && bytes[i] < *need) [[unlikely]]
      throw make_error(ErrorKind::Validation, "{}: holds {} bytes but the launch needs {}", where(p, i), bytes[i], *need);
  }
  int64_t slices;
  if (sizes.global != nullptr) {
    std::array<int64_t, 3> global;
    launch_size(p, sizes.global, "global_size", global);
    slices = layout.host_slices(global);
  } else {
    slices = layout.global_size(0, abi);
    layout.check_slices(slices);
  }
  if (sizes.local != nullptr) {  // checked, though work-groups mean nothing on the host
    std::array<int64_t, 3> local;
    launch_size(p, sizes.local, "local_size", local);
  }
  if (any_foreign && staging_on()) [[likely]] {
    run_staged(p, args, bytes, foreign, slices);
    return;
  }
  run_unlocked(p, [&] { program.run_bound(args, slices); });
}

// Any other device, and the CPU in checked mode (memory), whose launch()
// stages numpy arrays and the other unguarded arguments through guarded
// memory: svod::Buffers through Program::launch, which checks devices,
// dtypes and sizes.
void call_device(const PyProgram& p, PyObject** slots, const SizeArgs& sizes) {
  std::vector<Buffer> buffers;
  buffers.reserve(p.buffer_count);
  for (size_t i = 0; i < p.buffer_count; ++i) {
    if (PyArray_Check(slots[i]) && p.host) {
      buffers.push_back(wrap_array(reinterpret_cast<PyArrayObject*>(slots[i]), where(p, i), p.written[i]));
      continue;
    }
    if (PyArray_Check(slots[i]))
      throw make_error(ErrorKind::Validation,
                       "{}: a numpy array cannot be passed to a program on {}; allocate a buffer there "
                       "(dev.allocate) and copy_from() the array",
                       where(p, i), p.program->device().name());
    if (const PyBuffer* pb = as_py_buffer(slots[i])) buffers.push_back(pb->get());
    else dlpack_buffer(p, i, slots[i], buffers);
  }
  std::vector<int64_t> scalars;
  for (size_t j = 0; j < p.scalar_count; ++j)
    scalars.push_back(scalar_value(p, p.buffer_count + j, slots[p.buffer_count + j]));
  LaunchDims dims;
  const bool sized = sizes.global != nullptr || sizes.local != nullptr;
  if (sized) {
    dims = p.program->layout().dims(scalars);
    if (sizes.global != nullptr) launch_size(p, sizes.global, "global_size", dims.global);
    if (sizes.local != nullptr) launch_size(p, sizes.local, "local_size", dims.local);
  }
  run_unlocked(p, [&] { p.program->launch(buffers, scalars, sized ? &dims : nullptr); });
}

// A call, in CPython's vectorcall layout (no tuple or dict is built for it).
PyObject* call_program(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  try {
    const PyProgram& p = program_of(self);
    PyObject* slots[kMaxKernelArgs];
    SizeArgs sizes;
    gather(p, args, PyVectorcall_NARGS(nargsf), kwnames, slots, sizes);
    if (Capture* c = capturing()) [[unlikely]] {
      capture_call(*c, p.program, {slots, p.buffer_count}, {slots + p.buffer_count, p.scalar_count}, sizes.global,
                   sizes.local);
      Py_RETURN_NONE;
    }
    if (p.host && !memory_checked()) [[likely]]
      call_host(p, slots, sizes);
    else
      call_device(p, slots, sizes);
    Py_RETURN_NONE;
#ifdef __GLIBCXX__
  } catch (abi::__forced_unwind&) {
    throw;  // CPython ends the thread (interpreter exit): nothing to report
#endif
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

// prog.__call__(...) spelled out: METH_FASTCALL's layout is vectorcall's, the
// program first (an unbound Program.__call__ gets anything there).
PyObject* call_method(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs < 1) {
    try {
      throw ArgumentTypeError("svod.Program.__call__: called without the program (self)");
    } catch (...) {
      set_python_error();
      return nullptr;
    }
  }
  return call_program(args[0], args + 1, static_cast<size_t>(nargs - 1), kwnames);
}

// Where svod.Program instances keep their vectorcall entry: a field appended
// to pybind11's instance layout, set by the type's tp_alloc for every new
// instance (pybind11 allocates through tp_alloc).
Py_ssize_t vectorcall_offset = 0;

PyObject* allocate_program(PyTypeObject* type, Py_ssize_t items) {
  PyObject* self = PyType_GenericAlloc(type, items);
  if (self != nullptr) *reinterpret_cast<vectorcallfunc*>(reinterpret_cast<char*>(self) + vectorcall_offset) = call_program;
  return self;
}

}  // namespace

KernelArgs kernel_args(const PyProgram& p, py::handle args_object, py::handle global_size, std::string_view what) {
  const auto args =
      sequence_argument(args_object, fmt::format("{}: args", what), "a sequence of the program's arguments");
  const size_t total = p.buffer_count + p.scalar_count;
  if (args.size() != total)
    throw make_error(ErrorKind::Validation, "{}: program \"{}\" takes {} arguments, got {}", what, p.display_name(),
                     total, args.size());
  KernelArgs out;
  for (size_t i = 0; i < p.buffer_count; ++i) {
    out.buffers.push_back(buffer_argument(args[i], where(p, i), p.written[i]));
    check_dtype(p, i, out.buffers.back().dtype(), out.buffers.back().first_byte());
  }
  for (size_t j = 0; j < p.scalar_count; ++j)
    out.scalars.push_back(scalar_value(p, p.buffer_count + j, args[p.buffer_count + j].ptr()));
  if (!global_size.is_none()) {
    out.dims = p.program->layout().dims(out.scalars);
    launch_size(p, global_size.ptr(), "global_size", out.dims->global);
  }
  return out;
}

void make_program_callable(py::handle cls) {
  // Calls take CPython's vectorcall path straight to call_program (tp_call
  // converts for the callers that use it); `__call__` in the type's dict is
  // the same function, for help() and explicit prog.__call__(...), as a
  // method that takes any `self` (call_program refuses what is no program
  // with svod's error). No instance exists yet, so the layout can still grow
  // by the entry's field.
  program_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  vectorcall_offset = program_type->tp_basicsize;
  program_type->tp_basicsize += static_cast<Py_ssize_t>(sizeof(vectorcallfunc));
  program_type->tp_vectorcall_offset = vectorcall_offset;
  program_type->tp_alloc = allocate_program;
  program_type->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  program_type->tp_call = PyVectorcall_Call;
  global_size_name = PyUnicode_InternFromString("global_size");
  local_size_name = PyUnicode_InternFromString("local_size");
  if (global_size_name == nullptr || local_size_name == nullptr) throw py::error_already_set();
  static PyMethodDef call_def = {
      "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_method)),
      METH_FASTCALL | METH_KEYWORDS,
      "prog(*buffers, *scalars) or prog(*buffers, name=value, ...): runs the kernel once, after checking\n"
      "every argument. Buffers: numpy arrays (in place, on CPU programs), svod.Buffers or DLPack producers."};
  auto call_function = py::reinterpret_steal<py::object>(PyCFunction_New(&call_def, nullptr));
  if (!call_function) throw py::error_already_set();
  auto call_descr = py::reinterpret_steal<py::object>(PyInstanceMethod_New(call_function.ptr()));
  if (!call_descr || PyDict_SetItemString(program_type->tp_dict, "__call__", call_descr.ptr()) < 0)
    throw py::error_already_set();
  PyType_Modified(program_type);
}

}  // namespace svod::python
