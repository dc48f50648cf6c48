// svod.Program's object, shared by the files that bind it: program.cpp (the
// class and svod.benchmark), call.cpp (calling one, the hot path) and
// device.cpp (Device.compile and the others that make one).
#pragma once

#include "bindings.h"
#include "svod/tune/benchmark.h"

namespace svod::python {

// A compiled program and its call signature.
struct PyProgram {
  std::shared_ptr<const Program> program;
  bool host = false;  // the program runs on the host with pre-bound arguments (the CPU)
  size_t buffer_count = 0;
  size_t scalar_count = 0;     // the caller's scalars (core_id excluded)
  std::vector<int> numpy_type;  // per buffer: the declared dtype's type number, or NPY_NOTYPE
  std::vector<char> written;
  std::vector<py::object> names;  // buffers then caller scalars, interned
  std::vector<std::string> name_text;

  explicit PyProgram(std::shared_ptr<const Program> p) : program(std::move(p)) {
    host = program->binds_host_arguments();
    const ProgramSpec& spec = program->spec();
    buffer_count = spec.buffers.size();
    for (const auto& b : spec.buffers) {
      numpy_type.push_back(b.dtype ? numpy_type_of(*b.dtype) : NPY_NOTYPE);
      written.push_back(writes(b.access));
      name_text.push_back(b.name);
    }
    for (const auto& s : spec.scalars) {
      if (s.name == kCoreIdName) continue;
      ++scalar_count;
      name_text.push_back(s.name);
    }
    for (const auto& n : name_text) {
      PyObject* s = PyUnicode_InternFromString(n.c_str());
      if (s == nullptr) throw py::error_already_set();
      names.push_back(py::reinterpret_steal<py::object>(s));
    }
  }
  const std::string& display_name() const { return program->spec().display_name(); }
};

// Makes the svod.Program class `cls` callable through CPython's vectorcall
// protocol (call.cpp). Called once, when the class is bound and before any
// instance exists.
void make_program_callable(py::handle cls);

// The arguments of svod.benchmark (`what` names them in errors): like a
// call's, as svod buffers, and global_size (None: the program's own).
KernelArgs kernel_args(const PyProgram& p, py::handle args_object, py::handle global_size, std::string_view what);

}  // namespace svod::python
