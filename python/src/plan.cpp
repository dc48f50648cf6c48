// svod.load_plan, svod.load_package and svod.Plan: plan files and
// ahead-of-time packages from Python, with numpy arrays bound to plan buffers
// by rebinding (no copy) and the GIL released while a plan runs. A sandboxed
// plan's side is in plan_sandbox.cpp, svod.PlanBuilder in plan_builder.cpp.
#include <pybind11/stl/filesystem.h>

#include <cstdlib>
#include <set>
#include <span>

#include "plan_objects.h"
#include "svod/compile/compile_policy.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/package/package.h"
#include "svod/package/signature.h"
#include "svod/planfile/plan_save.h"
#include "svod/plan/plan_writes.h"
#include "svod/planfile/plan_file.h"
#include "svod/sandbox/confined_compile.h"
#include "svod/tune/benchmark.h"

namespace svod::python {

namespace {

void execute(const PyPlan& p, const std::map<std::string, int64_t>& vars, bool sequential) {
  if (const std::shared_ptr<PySandbox> sandbox = p.shared->sandbox) {
    // The helper runs the ops one after another, unobserved: a profile sees
    // no sandboxed runs, and `sequential` is how they run anyway.
    GilReleased unlocked;
    sandbox->execute(vars);
    return;
  }
  auto run = [&](PlanObserver* observer) {
    ExecuteOptions options{.sequential = sequential, .observer = observer};
    if (vars.empty()) {
      p.loaded->execute(options);
    } else {
      p.plan().execute_with_vars(vars, options);
    }
  };
  GilReleased unlocked;
  if (profiling()) profile_plan_run(p.loaded, p.plan(), run);
  else run(nullptr);
}

// Binds `value` to the plan's slot `name`: numpy arrays and svod buffers of
// the slot's dtype and size replace the slot's buffer (no copy) on the CPU,
// and are copied into it on other devices.
void bind_buffer(const PyPlan& p, const std::string& name, py::handle value, const std::set<uint64_t>& written) {
  const size_t slot = p.slot(name);
  const Buffer& current = p.plan().buffer(slot);
  const std::string what = fmt::format("{}: buffer \"{}\"", p.source, name);
  Buffer replacement = buffer_argument(value, what, written.contains(current.storage_id()));
  if (replacement.dtype() != current.dtype() && !(current.dtype() == DType::BF16 && replacement.dtype() == DType::U16))
    throw make_error(ErrorKind::Validation, "{}: dtype {} does not match the plan's {}", what,
                     to_string(replacement.dtype()), to_string(current.dtype()));
  if (replacement.bytes() != current.bytes())
    throw make_error(ErrorKind::Validation, "{}: {} elements given, the plan's buffer holds {}", what,
                     replacement.count(), current.count());
  replacement = Buffer(replacement.storage_ptr(), current.dtype(), replacement.byte_offset(), replacement.bytes());
  if (const std::shared_ptr<PySandbox> sandbox = p.shared->sandbox) {
    GilReleased unlocked;
    sandbox->copy_in(current, replacement);
  } else if (current.is_host() && replacement.is_host()) {
    p.plan().rebind(slot, std::move(replacement));
  } else {
    GilReleased unlocked;
    current.device().copy(current, replacement);
  }
}

// plan.rebind(slot, buffer): the slot (an index or a name) now is `buffer`,
// on any device, without a copy. A buffer of the slot's byte size takes the
// slot's dtype when both dtypes match or either is byte storage (u8).
void rebind_slot(const PyPlan& p, py::handle slot_object, py::handle value) {
  if (p.shared->sandbox)
    throw make_error(ErrorKind::Unsupported,
                     "{}: rebind: a sandboxed plan's buffers stay in the memory it shares with its helper (bind() and "
                     "run() copy arrays into them)",
                     p.source);
  if (!PyUnicode_Check(slot_object.ptr()) && (PyBool_Check(slot_object.ptr()) || !PyIndex_Check(slot_object.ptr())))
    throw type_error(fmt::format("{}: rebind: slot", p.source), "a buffer index or name", slot_object);
  const size_t slot = PyUnicode_Check(slot_object.ptr())
                          ? p.slot(string_argument(slot_object, "rebind: slot"))
                          : size_argument(slot_object, fmt::format("{}: rebind: slot", p.source));
  if (slot >= p.plan().buffer_count())
    throw make_error(ErrorKind::Validation, "{}: rebind: buffer {} is out of range ({} buffers)", p.source, slot,
                     p.plan().buffer_count());
  const Buffer& current = p.plan().buffer(slot);
  const std::string what = fmt::format("{}: rebind buffer {}", p.source, slot);
  const PyBuffer* given = as_py_buffer(value.ptr());
  Buffer replacement = given != nullptr
                           ? given->get()
                           : buffer_argument(value, what, written_storages(p.plan()).contains(current.storage_id()));
  const bool bytes = current.dtype() == DType::U8 || replacement.dtype() == DType::U8;
  if (replacement.dtype() != current.dtype() && !bytes)
    throw make_error(ErrorKind::Validation, "{}: dtype {} does not match the plan's {}", what,
                     to_string(replacement.dtype()), to_string(current.dtype()));
  if (!dtype_accepts(current.dtype(), replacement.dtype(), replacement.first_byte()) && current.dtype() != DType::U8)
    throw make_error(ErrorKind::Validation, "{}: u8 storage at {:#x} is not aligned to the plan's {}", what,
                     replacement.first_byte(), to_string(current.dtype()));
  replacement = Buffer(replacement.storage_ptr(), current.dtype(), replacement.byte_offset(), replacement.bytes());
  GilReleased unlocked;
  p.plan().rebind(slot, std::move(replacement));
}

// Binds each keyword argument to the plan's buffer of that name (bind_buffer).
void bind_arrays(const PyPlan& p, const py::kwargs& arrays) {
  const auto written = written_storages(p.plan());
  for (auto [name, value] : arrays) bind_buffer(p, string_argument(name, "bind: buffer name"), value, written);
}

// A copy of the plan's buffer `slot`: the next run overwrites the buffer.
py::object output_array(const PyPlan& p, size_t slot) { return to_numpy(p.buffer(slot)); }

void check_outputs(const PyPlan& p) {
  std::string failures;
  for (const LoadedOutput& out : p.loaded->outputs) {
    if (!out.expect) continue;
    const Buffer& b = p.plan().buffer(out.slot);
    const auto* data = static_cast<const std::byte*>(b.data());
    const OutputCheck check = check_output(out, b.dtype(), {data, b.bytes()});
    if (check.passed()) continue;
    std::string first;
    for (const auto& m : check.first)
      first += fmt::format("{}[{}] got {:.9g} expected {:.9g}", first.empty() ? "" : ", ", m.index, m.got, m.expected);
    failures += fmt::format("{}outputs.{}: {} of {} values differ (max abs error {:.3g}); first: {}",
                            failures.empty() ? "" : "; ", out.name, check.mismatches, check.compared,
                            check.max_abs_error, first);
  }
  if (!failures.empty()) throw make_error(ErrorKind::Validation, "{}: expectations failed: {}", p.source, failures);
}

// The Python plan over a loaded plan file, or a package's plan: the file's
// buffer names and shapes, and its variables.
PyPlan make_plan(const PlanFile& file, LoadedPlan loaded) {
  PyPlan p;
  p.source = file.source_name;
  p.loaded = std::make_shared<LoadedPlan>(std::move(loaded));
  p.names.resize(p.plan().buffer_count());
  p.shapes.resize(p.plan().buffer_count());
  for (size_t i = 0; i < p.shapes.size(); ++i) p.shapes[i] = {p.plan().buffer(i).count()};
  for (const auto& b : file.buffers) {
    if (auto s = p.plan().find_buffer(b.name)) {
      p.names[*s] = b.name;
      p.shapes[*s] = b.shape;
    }
  }
  for (const auto& v : file.variables) p.variables.push_back(v.variable.name);
  return p;
}

PyPlan load(py::handle path_object, py::handle vars, py::handle compiler_object, py::handle comm,
            py::handle backend_object, py::handle sandbox, py::handle wall_limit, py::handle memory_limit) {
  const std::filesystem::path path = path_argument(path_object, "load_plan: path");
  const auto sandboxed = sandbox_options(sandbox, wall_limit, memory_limit, "load_plan");
  LoadOptions options;
  options.vars = vars_of(vars, "vars");
  if (!comm.is_none()) options.communicator = communicator_from_object(comm, "load_plan: comm");
  if (const auto compiler = renamed_string(compiler_object, backend_object, "load_plan", "cpu_compiler", "backend"))
    options.cpu_compiler = to_string(parse_cpu_compiler(*compiler));
  // sandbox=True: the plan's sources are compiled confined, as `svod run --sandbox` compiles them.
  if (sandboxed)
    options.build_program = [](const PlanFileProgram& program, Device& device) {
      return load_confined(device, program.spec);
    };
  PyPlan p;
  {
    GilReleased unlocked;
    PlanFile file = parse_plan_file(path);
    p = make_plan(file, svod::load_plan(file, options));
  }
  if (sandboxed) sandbox_plan(p, *sandboxed);
  return p;
}

// svod.load_package: a str or os.PathLike is a package file to read; anything
// with the buffer protocol (bytes, bytearray, memoryview, a uint8 array) is
// the package in memory, read only during the call.
PyPlan load_package_object(py::handle package, py::handle vars, py::handle comm, py::handle on_cpu_mismatch,
                           py::handle sandbox, py::handle wall_limit, py::handle memory_limit) {
  const auto sandboxed = sandbox_options(sandbox, wall_limit, memory_limit, "load_package");
  PackageLoadOptions options;
  options.vars = vars_of(vars, "vars");
  if (!comm.is_none()) options.communicator = communicator_from_object(comm, "load_package: comm");
  if (const auto policy = optional_string(on_cpu_mismatch, "load_package: on_cpu_mismatch"))
    options.on_cpu_mismatch = parse_cpu_mismatch(*policy);
  // sandbox=True: a program compiled from its packaged source is compiled confined.
  if (sandboxed)
    options.compile_source = [](Device& device, const ProgramSpec& spec) { return load_confined(device, spec); };
  PyPlan p;
  if (PyUnicode_Check(package.ptr()) || py::hasattr(package, "__fspath__")) {
    const auto path = path_argument(package, "load_package: package");
    GilReleased unlocked;
    LoadedPackage loaded = svod::load_package(path, options);
    p = make_plan(loaded.file, std::move(loaded.loaded));
  } else {
    const HeldBytes held(package, "load_package", "the package's bytes or a path");
    GilReleased unlocked;
    LoadedPackage loaded = svod::load_package(held.bytes(), options);
    p = make_plan(loaded.file, std::move(loaded.loaded));
  }
  if (sandboxed) sandbox_plan(p, *sandboxed);
  return p;
}

// A buffer of the plan by name (str) or slot (int), as Plan.save takes them.
BufferRef buffer_ref(const PyPlan& p, py::handle obj, const std::string& what) {
  if (PyUnicode_Check(obj.ptr())) return string_argument(obj, what);
  if (PyLong_Check(obj.ptr())) return size_argument(obj, what);
  throw type_error(what, "a buffer name (str) or slot (int)", obj);
}

// Plan.save's inputs= or outputs=: buffers (names or slots), each saved under
// its name with the shape Python knows, or a mapping {buffer: shape}, whose
// shapes may name plan variables ("batch"), or {buffer: {"dtype": ...,
// "shape": ..., "name": ...}} for byte storage (a capture's) seen as typed
// elements, under a name of the caller's (default: the buffer's).
std::vector<PlanPort> ports_of(const PyPlan& p, py::handle obj, const std::string& what) {
  std::vector<std::pair<py::object, py::object>> entries;
  if (PyDict_Check(obj.ptr())) {
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(obj))
      entries.emplace_back(py::reinterpret_borrow<py::object>(key), py::reinterpret_borrow<py::object>(value));
  } else {
    for (py::object item : sequence_argument(obj, what, "a sequence of buffer names or slots, or a dict"))
      entries.emplace_back(item, py::none());
  }
  std::vector<PlanPort> ports;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, shape] = entries[i];
    const std::string at = fmt::format("{}[{}]", what, i);
    PlanPort port;
    port.buffer = buffer_ref(p, key, at);
    const size_t slot = std::holds_alternative<size_t>(port.buffer) ? std::get<size_t>(port.buffer)
                                                                    : p.slot(std::get<std::string>(port.buffer));
    if (slot >= p.names.size())
      throw make_error(ErrorKind::Validation, "{}: buffer {} is out of range ({} buffers)", at, slot, p.names.size());
    port.name = p.names[slot].empty() ? fmt::format("buffer{}", slot) : p.names[slot];
    py::object dims = shape;
    if (PyDict_Check(shape.ptr())) {  // {"dtype": ..., "shape": ...}
      const py::dict spec = py::reinterpret_borrow<py::dict>(shape);
      if (!spec.contains("shape")) throw make_error(ErrorKind::Validation, "{}: a dict without \"shape\"", at);
      if (spec.contains("dtype")) port.dtype = dtype_from_object(spec["dtype"]);
      if (spec.contains("name")) port.name = string_argument(spec["name"], at + " name");
      dims = spec["shape"];
    }
    if (dims.is_none()) {
      for (const size_t d : p.shapes[slot]) port.shape.emplace_back(static_cast<int64_t>(d));
    } else {
      for (py::object d : sequence_argument(dims, at + " shape", "a sequence of sizes and variable names")) {
        if (PyUnicode_Check(d.ptr())) port.shape.emplace_back(string_argument(d, at + " shape"));
        else port.shape.emplace_back(static_cast<int64_t>(size_argument(d, at + " shape")));
      }
    }
    ports.push_back(std::move(port));
  }
  return ports;
}

SaveOptions save_options(const PyPlan& p, py::handle inputs, py::handle outputs, py::handle roles) {
  SaveOptions options;
  if (!inputs.is_none()) options.inputs = ports_of(p, inputs, "inputs");
  if (!outputs.is_none()) {
    options.outputs = ports_of(p, outputs, "outputs");
  } else {
    // The plan's outputs, in the shapes Python knows (the plan itself knows only counts).
    options.outputs.emplace();
    for (const LoadedOutput& o : p.loaded->outputs) {
      PlanPort port{o.name, o.slot, std::nullopt, {}};
      for (const size_t d : p.shapes[o.slot]) port.shape.emplace_back(static_cast<int64_t>(d));
      options.outputs->push_back(std::move(port));
    }
  }
  if (!roles.is_none()) {
    if (!PyDict_Check(roles.ptr())) throw type_error("roles", "a dict {buffer: role}", roles);
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(roles))
      options.roles.emplace_back(buffer_ref(p, key, "roles"), parse_buffer_role(string_argument(value, "roles")));
  }
  return options;
}

// svod.Plan.
void bind_plan_class(py::module_& m) {
  py::class_<PyPlan> cls(m, "Plan",
                         "An execution plan: kernels, copies and host functions over named buffers, run in\n"
                         "dependency order (independent ops in parallel).");
  // Here and below, objects rather than typed parameters: svod checks them and
  // names the argument in its errors.
  cls.def(
         "execute",
         [](const PyPlan& p, py::handle vars, py::handle sequential) {
           execute(p, vars_of(vars, "vars"), bool_argument(sequential, "execute: sequential"));
         },
          py::arg("vars") = py::none(), py::arg("sequential") = false,
          "Runs the plan once. vars= sets plan variables (checked before anything runs).")
      .def(
          "run",
          [](const PyPlan& p, py::handle vars, py::handle check_object, py::handle sequential_object,
             py::kwargs arrays) {
            const bool check = bool_argument(check_object, "run: check");
            const bool sequential = bool_argument(sequential_object, "run: sequential");
            const auto values = vars_of(vars, "vars");
            std::unique_lock lock(p.shared->run_lock, std::defer_lock);
            {
              GilReleased unlocked;  // another run may hold it while it waits for the GIL
              lock.lock();
            }
            if (arrays.size() > 0) bind_arrays(p, arrays);
            execute(p, values, sequential);
            if (check) check_outputs(p);
            py::dict out;
            for (const LoadedOutput& o : p.loaded->outputs) out[py::str(o.name)] = output_array(p, o.slot);
            return out;
          },
          py::kw_only(), py::arg("vars") = py::none(), py::arg("check") = false, py::arg("sequential") = false,
          "Binds named buffers to arrays (numpy arrays of the buffer's dtype and size are used in\n"
          "place, without a copy, and stay bound), runs the plan, checks the file's expectations when\n"
          "check=True (ValidationError on a mismatch) and returns {output name: numpy array}, each a\n"
          "copy (later runs do not change it). Runs of one plan from several threads take turns.")
      .def(
          "bind",
          [](const PyPlan& p, py::kwargs arrays) { bind_arrays(p, arrays); },
          "Binds named buffers as run() does, without running.")
      .def("rebind", &rebind_slot, py::arg("slot"), py::arg("buffer"),
           "Makes buffer `slot` (an index, as PlanBuilder and capture return, or a name) `buffer`, on\n"
           "any device, without a copy; the views derived from the slot follow it. The buffer must hold\n"
           "the slot's bytes in its dtype (or either is u8 byte storage); ValidationError otherwise.\n"
           "A plan poisoned by a failed run (and without peers) runs again after a rebind.")
      .def(
          "save",
          [](const PyPlan& p, py::handle path, py::handle inputs, py::handle outputs, py::handle roles) {
            const SaveOptions options = save_options(p, inputs, outputs, roles);
            const std::filesystem::path folder = path_argument(path, "save: path");
            GilReleased unlocked;
            save_plan(p.plan(), folder, options);
          },
          py::arg("path"), py::kw_only(), py::arg("inputs") = py::none(), py::arg("outputs") = py::none(),
          py::arg("roles") = py::none(),
          "Saves the plan as a plan file in folder `path` (plan.json, and an .npy file per constant\n"
          "and state buffer), which svod.load_plan loads into a plan that computes bitwise the same.\n"
          "inputs= names the buffers a caller fills: buffer names or slots, saved with the shapes\n"
          "Python knows, or {buffer: shape}, a shape's entries sizes or plan variable names (a\n"
          "dynamic batch), or {buffer: {\"dtype\": \"f32\", \"shape\": [...]}} for byte storage (a\n"
          "capture's buffers are), with \"name\": \"x\" to save it under another name than the\n"
          "buffer's. outputs= likewise (default: the plan's outputs); roles= {buffer: role}\n"
          "overrides a derived role (\"constant\", \"state\", \"scratch\", ...). The folder is\n"
          "written whole or not at all; an earlier save there is replaced.")
      .def(
          "pack",
          [](const PyPlan& p, py::handle path, py::handle sign, py::handle inputs, py::handle outputs,
             py::handle roles, py::handle exporter, py::handle vars, py::handle target_cpu, bool sources_only) {
            const SaveOptions save = save_options(p, inputs, outputs, roles);
            PackOptions options;
            options.vars = vars_of(vars, "pack: vars");
            options.exporter = optional_string(exporter, "pack: exporter").value_or("");
            options.target_cpu = optional_string(target_cpu, "pack: target_cpu").value_or("");
            options.sources_only = sources_only;
            options.plan_name = p.source;
            const std::filesystem::path out = path_argument(path, "pack: path");
            const std::optional<std::string> key = optional_string(sign, "pack: sign");
            GilReleased unlocked;
            std::vector<std::byte> bytes = pack_plan(p.plan(), save, options);
            if (key) bytes = sign_package(std::move(bytes), read_secret_key(*key));
            write_package(out, bytes);
          },
          py::arg("path"), py::kw_only(), py::arg("sign") = py::none(), py::arg("inputs") = py::none(),
          py::arg("outputs") = py::none(), py::arg("roles") = py::none(), py::arg("exporter") = py::none(),
          py::arg("vars") = py::none(), py::arg("target_cpu") = py::none(), py::arg("sources_only") = false,
          "Writes the plan as a package (.svodpkg) to `path`: its programs' objects as they were\n"
          "loaded (nothing compiles), its constant and state data, and its inputs and outputs by name\n"
          "(inputs=, outputs=, roles= as for save). sign= a secret key file (svod pack --keygen)\n"
          "signs it; exporter= records what made it (\"svod.tinygrad\"); vars= sets variables' values.\n"
          "target_cpu= builds the CPU objects for another CPU instead of this one (\"x86-64-v3\",\n"
          "\"x86-64-v2\", a name clang's -march takes; needs clang); sources_only=True packs sources\n"
          "only, compiled wherever the package loads.");
  bind_plan_sandbox(cls);
  cls.def_property_readonly("buffers",
                             [](const PyPlan& p) {
                               py::dict out;
                               for (size_t i = 0; i < p.names.size(); ++i) {
                                 if (!p.names[i].empty()) out[py::str(p.names[i])] = p.buffer(i);
                               }
                               return out;
                             },
                             "{name: svod.Buffer} of the plan's named buffers (as currently bound).")
      .def_property_readonly("outputs",
                             [](const PyPlan& p) {
                               py::list out;
                               for (const auto& o : p.loaded->outputs) out.append(o.name);
                               return out;
                             })
      .def_property_readonly("variables",
                             [](const PyPlan& p) {
                               py::dict out;
                               for (const auto& v : p.variables) {
                                 std::optional<int64_t> value;
                                 {
                                   GilReleased unlocked;
                                   value = p.plan().variable(v);
                                 }
                                 if (value) out[py::str(v)] = *value;
                               }
                               return out;
                             },
                             "{name: current value} of the plan variables.")
      .def_property_readonly("op_count", [](const PyPlan& p) { return p.plan().op_count(); })
      .def_property_readonly("poisoned", [](const PyPlan& p) { return p.plan().poisoned(); })
      .def("__repr__", [](const PyPlan& p) {
        return fmt::format("svod.Plan({}, {} ops, {} buffers)", p.source, p.plan().op_count(), p.plan().buffer_count());
      });
  refuse_construction(cls, "use svod.load_plan(), svod.load_package(), PlanBuilder.build() or Device.capture()");
}

// svod.load_plan and svod.load_package, and the private _compile_count.
void bind_load_functions(py::module_& m) {
  m.def("load_plan", &load, py::arg("path"), py::arg("vars") = py::none(), py::arg("cpu_compiler") = py::none(),
        py::arg("comm") = py::none(), py::kw_only(), py::arg("backend") = py::none(), py::arg("sandbox") = false,
        py::arg("sandbox_wall_limit") = py::none(), py::arg("sandbox_memory_limit") = py::none(),
        "Loads a plan file: allocates and initialises its buffers, compiles its programs and builds\n"
        "the plan. vars= overrides variable values; cpu_compiler= (backend= is its old name) picks\n"
        "the compiler of the plan's CPU devices (\"llvm\", \"clang\" or \"dlopen\"; default:\n"
        "SVOD_CPU_COMPILER, else llvm when its plugin is there, else clang), at any time; comm= (a\n"
        "svod.comm.Communicator) is the ranks its collectives run on, this process or thread being\n"
        "comm.rank (the ranks first check that they loaded the same plan and values). sandbox=True\n"
        "returns the plan sandboxed, as Plan.sandbox() makes it, with sandbox_wall_limit= and\n"
        "sandbox_memory_limit= as its wall_limit= and memory_limit=; the file's sources are compiled\n"
        "in this process first, outside the sandbox.");
  m.def("load_package", &load_package_object, py::arg("package"), py::arg("vars") = py::none(),
        py::arg("comm") = py::none(), py::kw_only(), py::arg("on_cpu_mismatch") = py::none(),
        py::arg("sandbox") = false, py::arg("sandbox_wall_limit") = py::none(),
        py::arg("sandbox_memory_limit") = py::none(),
        "Loads an ahead-of-time package (made by `svod pack`) into a Plan, without compiling when\n"
        "its CPU objects suit this machine. `package` is its bytes (bytes, bytearray, memoryview;\n"
        "read only during the call) or a path (the file is read once into private memory, where\n"
        "initial data is used in place). vars= overrides the variable values it was packed with;\n"
        "comm= as for load_plan. on_cpu_mismatch= says what CPU objects this CPU cannot run do:\n"
        "\"recompile\" (the default: from the package's sources) or \"refuse\" (UnsupportedError naming\n"
        "the features this CPU lacks). A damaged package raises LoadError (ValidationError when it\n"
        "is not a package at all) naming the section. sandbox=True returns the plan sandboxed, as\n"
        "Plan.sandbox() makes it, with sandbox_wall_limit= and sandbox_memory_limit= as its\n"
        "wall_limit= and memory_limit=; UnsupportedError when the sandbox cannot be had, and no plan.");
  m.def("_compile_count", &compile_count, "Kernels compiled in this process so far (all devices).");
}

}  // namespace

size_t PyPlan::slot(const std::string& name) const {
  if (auto s = plan().find_buffer(name)) return *s;
  std::string known;
  for (const auto& n : names) {
    if (!n.empty()) known += (known.empty() ? "" : ", ") + n;
  }
  throw make_error(ErrorKind::Validation, "{}: no buffer named \"{}\" (buffers: {})", source, name, known);
}

std::optional<BenchmarkResult> benchmark_if_plan(py::handle target, py::handle args, const BenchmarkConfig& config) {
  if (!py::isinstance<PyPlan>(target)) return std::nullopt;
  if (!sequence_argument(args, "benchmark: args", "a sequence").empty())
    throw make_error(ErrorKind::Validation, "benchmark: a plan takes no args; bind arrays with plan.bind() first");
  const PyPlan& p = py::cast<const PyPlan&>(target);
  const std::shared_ptr<PySandbox> sandbox = p.shared->sandbox;
  GilReleased unlocked;
  return benchmark_operation(
      [&] {
        const auto start = std::chrono::steady_clock::now();
        if (sandbox) sandbox->execute({});
        else p.loaded->execute();
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
      },
      cpu_device(), config);
}

// svod.Plan is registered first, so that the signatures of the functions (and
// PlanBuilder.build) that return one name it.
void bind_plans(py::module_& m) {
  bind_plan_class(m);
  bind_load_functions(m);
  bind_plan_builder(m);
}

}  // namespace svod::python
