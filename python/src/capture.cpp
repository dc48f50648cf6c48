// dev.capture(): turns a sequence of launches and copies into a plan.
//
//     with cpu.capture() as g:
//         n = g.variable("n", 1024, min=1, max=4096)
//         scale(x, y, n)            # recorded, not run
//         y2.copy_from(y)
//     g.plan.execute(vars={"n": 512})
//
// While the block is open on a thread, svod.Program calls and copies between
// svod.Buffers on the captured device from that thread are recorded as plan
// ops in call order (the plan then runs independent ops in parallel and
// orders the rest by their buffers). Each storage a recorded buffer lives in
// becomes one slot of the whole storage as bytes; the buffers themselves are
// views of it, so that plan.rebind(g.slot(buf), other) moves every view.
#include "plan_objects.h"

#include <map>
#include <thread>
#include <tuple>

namespace svod::python {

struct Capture;

namespace {
thread_local Capture* open_capture = nullptr;
}  // namespace

struct Capture {
  // A capture dropped while open (its __exit__ never called) stops capturing.
  ~Capture() {
    if (open_capture == this) open_capture = nullptr;
  }

  std::shared_ptr<Device> device;
  std::thread::id thread;
  bool open = false;
  bool closed = false;
  PyPlanBuilder builder;
  std::map<uint64_t, size_t> storage_slots;  // storage id -> slot of the whole storage
  std::map<std::tuple<uint64_t, size_t, size_t, DType>, size_t> view_slots;
  std::optional<PyPlan> plan;

  std::string where() const { return fmt::format("capture on {}", device->name()); }

  // The slot of the whole storage of `b`, added on first use.
  size_t storage_slot(const Buffer& b) {
    auto [it, added] = storage_slots.try_emplace(b.storage_id(), 0);
    if (added) {
      const std::string name = fmt::format("s{}", storage_slots.size() - 1);
      it->second = builder.add(Buffer(b.storage_ptr(), DType::U8), {b.storage().bytes()}, name);
    }
    return it->second;
  }

  // The slot that is exactly `b` (a view of its storage's slot).
  size_t slot(const Buffer& b) {
    const size_t base = storage_slot(b);
    if (b.dtype() == DType::U8 && b.byte_offset() == 0 && b.bytes() == b.storage().bytes()) return base;
    auto [it, added] = view_slots.try_emplace({b.storage_id(), b.byte_offset(), b.bytes(), b.dtype()}, 0);
    if (added) {
      const std::string name = fmt::format("{}[{}:+{}]:{}", builder.names[base], b.byte_offset(), b.bytes(),
                                           to_string(b.dtype()));
      it->second = builder.add_view(base, b.byte_offset(), b.bytes(), b.dtype(), name);
    }
    return it->second;
  }

  // Error(Validation) unless `b` is memory of the captured device.
  void check_device(const Buffer& b, const std::string& what) const {
    if (&b.device() != device.get() && !(device->memory_is_host() && b.device().memory_is_host()))
      throw make_error(ErrorKind::Validation, "{}: {}: the buffer is on {}", where(), what, b.device().name());
  }

  // A recorded buffer argument: svod.Buffers only, on the captured device.
  const Buffer& buffer(py::handle obj, const std::string& what) const {
    const PyBuffer* b = as_py_buffer(obj.ptr());
    if (b == nullptr)
      throw make_error(ErrorKind::Validation,
                       "{}: {}: a capture records svod.Buffers (a plan owns its buffers), got {}; wrap an array once "
                       "with svod.asbuffer() and pass that",
                       where(), what, Py_TYPE(obj.ptr())->tp_name);
    check_device(b->get(), what);
    return b->get();
  }
};

namespace {

Capture& enter(Capture& c) {
  if (c.open || c.closed)
    throw make_error(ErrorKind::Validation, "{}: a capture records one block; start another with dev.capture()",
                     c.where());
  if (open_capture != nullptr)
    throw make_error(ErrorKind::Validation, "{}: this thread is already capturing on {}", c.where(),
                     open_capture->device->name());
  c.open = true;
  c.thread = std::this_thread::get_id();
  open_capture = &c;
  return c;
}

// Ends the block: builds the plan unless the block raised (then nothing is kept).
void leave(Capture& c, py::handle exc_type) {
  if (!c.open) throw make_error(ErrorKind::Validation, "{}: not open", c.where());
  if (c.thread != std::this_thread::get_id())
    throw make_error(ErrorKind::Validation, "{}: the block must end on the thread that started it", c.where());
  c.open = false;
  c.closed = true;
  open_capture = nullptr;
  if (!exc_type.is_none()) {
    c.builder = PyPlanBuilder();
    return;
  }
  c.plan = c.builder.build(c.where());
}

}  // namespace

Capture* capturing() noexcept { return open_capture; }

void capture_call(Capture& c, const std::shared_ptr<const Program>& program, std::span<PyObject* const> buffers,
                  std::span<PyObject* const> scalars, PyObject* global_size, PyObject* local_size) {
  const std::string name = program->spec().display_name();
  if (&program->device() != c.device.get())
    throw make_error(ErrorKind::Validation, "{}: program \"{}\" runs on {}; a capture records one device's work",
                     c.where(), name, program->device().name());
  KernelOp k;
  k.program = program;
  const auto& params = program->spec().buffers;
  for (size_t i = 0; i < buffers.size(); ++i)
    k.buffers.push_back(c.slot(c.buffer(buffers[i], fmt::format("program \"{}\": buffer \"{}\"", name, params[i].name))));
  for (size_t j = 0; j < scalars.size(); ++j)
    k.scalars.push_back(expr_of(scalars[j], fmt::format("{}: program \"{}\": scalar {}", c.where(), name, j)));
  if (global_size != nullptr) k.global = size_exprs(global_size, fmt::format("{}: program \"{}\": global_size", c.where(), name));
  if (local_size != nullptr) k.local = size_exprs(local_size, fmt::format("{}: program \"{}\": local_size", c.where(), name));
  c.builder.add_op(std::move(k), OpOptions{.id = {}, .after_ids = {}, .after = {}, .label = name});
}

bool capture_copy(const Buffer& dst, py::handle src) {
  Capture* c = open_capture;
  if (c == nullptr) return false;
  c->check_device(dst, "copy_from: the destination");
  const Buffer& from = c->buffer(src, "copy_from: the source");
  if (from.bytes() != dst.bytes())
    throw make_error(ErrorKind::Validation, "{}: copy_from: the source holds {} bytes, the destination {}", c->where(),
                     from.bytes(), dst.bytes());
  const size_t d = c->slot(dst.view_bytes(0, dst.bytes(), DType::U8));
  const size_t s = c->slot(from.view_bytes(0, from.bytes(), DType::U8));
  c->builder.add_op(CopyOp{d, s}, OpOptions{.id = {}, .after_ids = {}, .after = {}, .label = "copy"});
  return true;
}

void bind_capture(py::module_& m) {
  py::class_<Capture, std::shared_ptr<Capture>> cls(
      m, "Capture",
      "A plan recorded from calls: `with dev.capture() as g:` records the device's program calls and\n"
      "svod.Buffer copies made by this thread (nothing runs), then g.plan is the plan.");
  cls.def("__enter__", &enter, py::return_value_policy::reference)
      .def(
          "__exit__",
          [](Capture& c, py::handle type, py::handle, py::handle) {
            leave(c, type);
            return false;
          },
          py::arg("exc_type"), py::arg("exc_value"), py::arg("traceback"))
      .def(
          "variable",
          [](Capture& c, py::handle name_object, py::handle value, py::handle min, py::handle max) {
            auto integer = [](py::handle v, const char* what) {
              return integer_value(v.ptr(), [&] { return fmt::format("Capture.variable: {}", what); });
            };
            const std::string name = string_argument(name_object, "Capture.variable: name");
            c.builder.add_variable(name, integer(value, "value"), integer(min, "min"), integer(max, "max"));
            return name;
          },
          py::arg("name"), py::arg("value"), py::kw_only(), py::arg("min") = INT64_MIN, py::arg("max") = INT64_MAX,
          "Declares a plan variable (set per run with plan.execute(vars=...)) and returns its name:\n"
          "scalars and launch sizes of recorded calls may be expressions over it (\"n\", \"n * 4\").")
      .def(
          "slot",
          [](Capture& c, py::handle buffer) {
            const PyBuffer* b = as_py_buffer(buffer.ptr());
            if (b == nullptr) throw type_error(fmt::format("{}: slot: buffer", c.where()), "a svod.Buffer", buffer);
            auto it = c.storage_slots.find(b->get().storage_id());
            if (it == c.storage_slots.end())
              throw make_error(ErrorKind::Validation, "{}: the buffer was not used by any recorded call", c.where());
            return it->second;
          },
          py::arg("buffer"),
          "The plan slot of the storage `buffer` lives in, for plan.rebind(slot, other): the captured\n"
          "views of it follow the replacement.")
      .def_property_readonly(
          "plan",
          [](const Capture& c) {
            if (!c.plan) throw make_error(ErrorKind::Validation, "{}: the plan exists after the with block", c.where());
            return *c.plan;
          },
          "The recorded plan (after the with block).");
  refuse_construction(cls, "Device.capture() starts one");

  py::object device_class = m.attr("Device");
  py::cpp_function start(
      [](const std::shared_ptr<Device>& device) {
        auto c = std::make_shared<Capture>();
        c->device = device;
        return c;
      },
      py::name("capture"), py::is_method(device_class),
      "A Capture: `with dev.capture() as g:` records the program calls and svod.Buffer copies this\n"
      "thread makes on the device (nothing runs; other devices' work is refused meanwhile) into\n"
      "g.plan. Scalars and launch sizes may be expressions over g.variable()s.");
  py::setattr(device_class, "capture", start);
}

}  // namespace svod::python
