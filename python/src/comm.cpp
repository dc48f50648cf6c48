// svod.comm: communicators in Python. A svod.comm.Communicator is a
// svod::Communicator (svod/comm/communicator.h) whose collectives take numpy
// arrays, DLPack tensors and svod.Buffers, wrapped without copying; the GIL is
// released while a call waits for the other ranks, so the ranks of
// run_local (threads of this interpreter) meet.
#include "bindings.h"
#include "svod/comm/communicator.h"

namespace svod::python {

namespace {

// svod.comm.Communicator. `comm` is shared with the plans loaded with it; the
// world communicator is borrowed (it lives as long as the process).
struct PyComm {
  std::shared_ptr<Communicator> comm;
};

PyTypeObject* comm_type = nullptr;

ReduceOp op_argument(py::handle op, std::string_view what) {
  return parse_reduce_op(string_argument(op, what));
}

int int_argument(py::handle obj, std::string_view what) {
  const int64_t v = integer_value(obj.ptr(), [&] { return std::string(what); });
  if (v < INT32_MIN || v > INT32_MAX)
    throw make_error(ErrorKind::Validation, "{}: {} is outside the 32-bit integer range", what, v);
  return static_cast<int>(v);
}

// The shape Python gave `obj` (a numpy array's, a svod.Buffer's), or its
// element count as one dimension.
std::vector<size_t> shape_of(py::handle obj, const Buffer& buffer) {
  if (PyArray_Check(obj.ptr())) {
    auto* array = reinterpret_cast<PyArrayObject*>(obj.ptr());
    const npy_intp* dims = PyArray_DIMS(array);
    return {dims, dims + PyArray_NDIM(array)};
  }
  if (const PyBuffer* b = as_py_buffer(obj.ptr())) return b->shape;
  return {buffer.count()};
}

// A new host array of `dtype` and `shape`, and the buffer over it.
std::pair<py::object, Buffer> new_host_array(DType dtype, const std::vector<size_t>& shape, const std::string& what) {
  std::vector<npy_intp> dims(shape.begin(), shape.end());
  PyObject* array = PyArray_SimpleNew(static_cast<int>(dims.size()), dims.data(), numpy_type_of(dtype));
  if (array == nullptr) throw py::error_already_set();
  auto owned = py::reinterpret_steal<py::object>(array);
  Buffer buffer = wrap_array(reinterpret_cast<PyArrayObject*>(array), what, true);
  if (dtype == DType::BF16) buffer = buffer.view_bytes(0, buffer.bytes(), DType::BF16);  // numpy holds its bit patterns
  return {std::move(owned), std::move(buffer)};
}

// The output argument of all_gather and reduce_scatter: `out`, or a new
// numpy array of `shape` when it is None. Returns what the call returns.
std::pair<py::object, Buffer> output_argument(py::handle out, DType dtype, const std::vector<size_t>& shape,
                                              const std::string& what) {
  if (out.is_none()) return new_host_array(dtype, shape, what);
  return {py::reinterpret_borrow<py::object>(out), buffer_argument(out, what, true)};
}

Communicator& get(const PyComm& c) { return *c.comm; }

}  // namespace

std::shared_ptr<Communicator> communicator_from_object(py::handle obj, std::string_view what) {
  if (!PyObject_TypeCheck(obj.ptr(), comm_type)) throw type_error(what, "a svod.comm.Communicator", obj);
  return py::cast<const PyComm&>(obj).comm;
}

void bind_comm(py::module_& m) {
  py::class_<PyComm> cls(m, "Communicator",
                         "The ranks of a job and the collectives among them (svod.comm.world(),\n"
                         "svod.comm.run_local()). Every collective but send/recv is made by all ranks in the\n"
                         "same order with the same dtype, count, op and root; a mismatch raises\n"
                         "ValidationError on every rank, a failed rank ExecutionError, a rank that never comes\n"
                         "TimeoutError (SVOD_COMM_TIMEOUT seconds, 60 by default). Arrays are numpy arrays,\n"
                         "DLPack tensors or svod.Buffers, used in place without copying host memory.");
  comm_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  cls.def_property_readonly("rank", [](const PyComm& c) { return get(c).rank(); }, "This rank, 0 .. world_size-1.")
      .def_property_readonly("world_size", [](const PyComm& c) { return get(c).size(); }, "The number of ranks.")
      .def_property_readonly(
          "local_rank", [](const PyComm& c) { return get(c).local_rank(); },
          "This rank's index among the ranks on its own machine, 0 .. local_size-1 (mpi: found by MPI,\n"
          "whatever the launcher; local: rank). A plan loaded with this communicator whose device is\n"
          "\"CUDA:local\" or \"CL:local\" runs on device local_rank % the number of such devices.")
      .def_property_readonly(
          "local_size", [](const PyComm& c) { return get(c).local_size(); },
          "The number of ranks on this rank's machine (local: world_size).")
      .def_property_readonly("transport", [](const PyComm& c) { return std::string(get(c).transport()); },
                             "\"mpi\" (one rank per process) or \"local\" (ranks as threads).")
      .def_property_readonly("backend", [](const PyComm& c) { return std::string(get(c).transport()); },
                             "The old name of transport.")
      .def(
          "barrier",
          [](const PyComm& c) {
            GilReleased unlocked;
            get(c).barrier();
          },
          "Returns when every rank has called it.")
      .def(
          "all_reduce",
          [](const PyComm& c, py::handle x, py::handle op) {
            const ReduceOp reduce = op_argument(op, "all_reduce: op");
            const Buffer buffer = buffer_argument(x, "all_reduce: x", true);
            {
              GilReleased unlocked;
              get(c).all_reduce(buffer, reduce);
            }
            return py::reinterpret_borrow<py::object>(x);
          },
          py::arg("x"), py::arg("op") = "sum",
          "In place: x becomes the elementwise combination of every rank's x, in rank order (the same\n"
          "bits on every rank and every run). op: \"sum\", \"prod\", \"min\" or \"max\". Returns x.")
      .def(
          "all_gather",
          [](const PyComm& c, py::handle x, py::handle out) {
            const Buffer src = buffer_argument(x, "all_gather: x", false);
            std::vector<size_t> shape = shape_of(x, src);
            shape.insert(shape.begin(), static_cast<size_t>(get(c).size()));
            auto [result, dst] = output_argument(out, src.dtype(), shape, "all_gather: out");
            {
              GilReleased unlocked;
              get(c).all_gather(src, dst);
            }
            return result;
          },
          py::arg("x"), py::arg("out") = py::none(),
          "out holds rank k's x at index k (world_size times x's elements). Without out, a new numpy\n"
          "array of shape (world_size, *x.shape). Returns out.")
      .def(
          "reduce_scatter",
          [](const PyComm& c, py::handle x, py::handle out, py::handle op) {
            const ReduceOp reduce = op_argument(op, "reduce_scatter: op");
            const Buffer src = buffer_argument(x, "reduce_scatter: x", false);
            const std::vector<size_t> shape = {src.count() / static_cast<size_t>(get(c).size())};
            auto [result, dst] = output_argument(out, src.dtype(), shape, "reduce_scatter: out");
            {
              GilReleased unlocked;
              get(c).reduce_scatter(src, dst, reduce);
            }
            return result;
          },
          py::arg("x"), py::arg("out") = py::none(), py::arg("op") = "sum",
          "x holds world_size parts; rank k's out becomes the combination of every rank's k-th part.\n"
          "Without out, a new numpy array of x.size / world_size elements. Returns out.")
      .def(
          "broadcast",
          [](const PyComm& c, py::handle x, py::handle root) {
            const int from = int_argument(root, "broadcast: root");
            const Buffer buffer = buffer_argument(x, "broadcast: x", true);
            {
              GilReleased unlocked;
              get(c).broadcast(buffer, from);
            }
            return py::reinterpret_borrow<py::object>(x);
          },
          py::arg("x"), py::arg("root") = 0, "In place: every rank's x becomes rank root's. Returns x.")
      .def(
          "send",
          [](const PyComm& c, py::handle x, py::handle dest, py::handle tag) {
            const int to = int_argument(dest, "send: dest");
            const int t = int_argument(tag, "send: tag");
            const Buffer buffer = buffer_argument(x, "send: x", false);
            GilReleased unlocked;
            get(c).send(buffer, to, t);
          },
          py::arg("x"), py::arg("dest"), py::arg("tag") = 0,
          "Sends x to rank dest; returns once the message is handed over.")
      .def(
          "recv",
          [](const PyComm& c, py::handle x, py::handle source, py::handle tag) {
            const int from = int_argument(source, "recv: source");
            const int t = int_argument(tag, "recv: tag");
            const Buffer buffer = buffer_argument(x, "recv: x", true);
            {
              GilReleased unlocked;
              get(c).recv(buffer, from, t);
            }
            return py::reinterpret_borrow<py::object>(x);
          },
          py::arg("x"), py::arg("source"), py::arg("tag") = 0,
          "Receives into x what rank source sent with the same tag (dtype and count must match).\n"
          "Returns x.")
      .def(
          "abort", [](const PyComm& c, py::handle reason) { get(c).abort(string_argument(reason, "abort: reason")); },
          py::arg("reason"),
          "Declares this rank failed: the other ranks' collectives raise an error naming it and\n"
          "reason. The communicator is unusable afterwards.")
      .def("__repr__", [](const PyComm& c) {
        return fmt::format("svod.comm.Communicator(rank {} of {}, {})", get(c).rank(), get(c).size(),
                           get(c).transport());
      });
  refuse_construction(cls, "use svod.comm.world() or svod.comm.run_local()");

  m.def(
      "_comm_world",
      [](py::handle transport, py::handle backend) {
        const std::string name = renamed_string(transport, backend, "world", "transport", "backend").value_or("auto");
        GilReleased unlocked;  // MPI starts here, which takes a while
        return PyComm{borrowed(world_communicator(name))};
      },
      py::arg("transport"), py::arg("backend"));
  m.def(
      "_comm_run_local",
      [](py::handle ranks, py::handle fn) {
        const int64_t n = integer_value(ranks.ptr(), [] { return std::string("run_local: ranks"); });
        if (n < 1 || n > kMaxLocalRanks)
          throw make_error(ErrorKind::Validation, "run_local: ranks = {} is outside [1, {}]", n, kMaxLocalRanks);
        if (!PyCallable_Check(fn.ptr())) throw type_error("run_local: fn", "a callable", fn);
        std::vector<std::shared_ptr<Communicator>> comms;
        std::vector<Communicator*> group;
        for (auto& comm : create_local_communicators(static_cast<int>(n))) {
          group.push_back(comm.get());
          comms.emplace_back(std::move(comm));
        }
        std::vector<py::object> results(group.size());
        {
          GilReleased unlocked;
          run_local_ranks(group, [&](Communicator& comm) {
            const size_t rank = static_cast<size_t>(comm.rank());
            GilAcquired gil;
            // Plain references, no py::object: CPython ends a rank thread still in
            // Python at interpreter exit by unwinding it without the GIL, and a
            // destructor's Py_DECREF there races the finalizing main thread.
            PyObject* argument = py::cast(PyComm{comms[rank]}).release().ptr();
            PyObject* result = PyObject_CallOneArg(fn.ptr(), argument);
            Py_DECREF(argument);
            if (result == nullptr) throw py::error_already_set();
            results[rank] = py::reinterpret_steal<py::object>(result);
          });
        }
        py::list out;
        for (auto& r : results) out.append(std::move(r));
        return out;
      },
      py::arg("ranks"), py::arg("fn"));
}

}  // namespace svod::python
