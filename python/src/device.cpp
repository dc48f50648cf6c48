// svod.Device and svod.devices(): opening devices, compiling programs on them
// (compile, compile_binary, load_binary, compile_many) and allocating buffers.
#include "program_object.h"
#include "svod/device/compile_many.h"
#include "svod/package/program_binary.h"
#include "svod/registry/registry.h"
#include "svod/sandbox/confined_compile.h"

namespace svod::python {

namespace {

// Every argument an object: program_spec checks their types.
std::shared_ptr<PyProgram> compile(const std::shared_ptr<Device>& device, py::object source, py::object source_file,
                                   py::object entry, py::object language, py::object buffers, py::object scalars,
                                   py::object global_size, py::object local_size, py::object defines, py::object flops,
                                   py::object bytes, py::object name, bool confined) {
  static const std::string what = "compile";
  const ProgramSpec spec = program_spec(CompileArgs{source, source_file, entry, language, buffers, scalars,
                                                    global_size, local_size, defines, flops, bytes, name},
                                        what);
  std::shared_ptr<const Program> compiled;
  {
    GilReleased unlocked;
    compiled = confined ? load_confined(*device, spec) : device->compile(spec);
  }
  return std::make_shared<PyProgram>(std::move(compiled));
}

// dev.compile_binary: what compile() would load, as a program binary
// (svod/package/program_binary.h); the parameters do not shape it.
py::bytes compile_binary(const std::shared_ptr<Device>& device, py::object source, py::object source_file,
                         py::object entry, py::object language, py::object defines, py::object name) {
  const ProgramSpec spec = program_spec(
      CompileArgs{source, source_file, entry, language, {}, {}, {}, {}, defines, {}, {}, name}, "compile_binary",
      /*parameters=*/false);
  std::vector<std::byte> binary;
  {
    GilReleased unlocked;
    binary = compile_program_binary(*device, spec);
  }
  return py::bytes(reinterpret_cast<const char*>(binary.data()), binary.size());
}

// dev.load_binary: compile()'s arguments with the source a program binary holds.
std::shared_ptr<PyProgram> load_binary(const std::shared_ptr<Device>& device, py::handle binary_object,
                                       py::object entry, py::object language, py::object buffers, py::object scalars,
                                       py::object global_size, py::object local_size, py::object defines,
                                       py::object flops, py::object bytes, py::object name) {
  const HeldBytes bytes_held(binary_object, "load_binary", "a program binary's bytes");
  const ProgramBinary binary(bytes_held.bytes());
  const py::str source(binary.source().data(), binary.source().size());
  const ProgramSpec spec = program_spec(CompileArgs{source, {}, entry, language, buffers, scalars, global_size,
                                                    local_size, defines, flops, bytes, name},
                                        "load_binary");
  std::shared_ptr<const Program> loaded;
  {
    GilReleased unlocked;
    loaded = binary.load(*device, spec);
  }
  return std::make_shared<PyProgram>(std::move(loaded));
}

// dev.compile_many: every program's arguments as a dict; compiled together on
// svod's pool with the GIL released. errors="raise" raises the first
// failure (by position) after all have finished; "return" puts the
// svod.Error in that position instead.
py::list compile_many_programs(const std::shared_ptr<Device>& device, py::handle programs_object,
                               py::handle errors_object) {
  const std::string errors = string_argument(errors_object, "compile_many: errors");
  if (errors != "raise" && errors != "return")
    throw make_error(ErrorKind::Validation, "compile_many: errors= is \"raise\" or \"return\", got \"{}\"", errors);
  const auto programs = sequence_argument(programs_object, "compile_many: programs", "a list of dicts");
  std::vector<ProgramSpec> specs;
  for (size_t i = 0; i < programs.size(); ++i) {
    const py::object& item = programs[i];
    if (!PyDict_Check(item.ptr()))
      throw make_error(ErrorKind::Validation, "compile_many: programs[{}]: expected a dict of compile() arguments, got {}",
                       i, Py_TYPE(item.ptr())->tp_name);
    const std::string what = fmt::format("compile_many: programs[{}]", i);
    specs.push_back(program_spec(compile_args(item, what), what));
  }
  std::vector<CompileResult> results;
  {
    GilReleased unlocked;
    results = compile_many(*device, specs);
  }
  py::list out;
  for (auto& r : results) {
    if (auto* program = std::get_if<std::shared_ptr<const Program>>(&r)) {
      out.append(std::make_shared<PyProgram>(std::move(*program)));
    } else if (errors == "raise") {
      throw std::get<Error>(r);
    } else {
      out.append(python_error(std::get<Error>(r)));
    }
  }
  return out;
}

}  // namespace

void bind_devices(py::module_& m) {
  py::class_<DeviceListing> info(m, "DeviceInfo", "A row of svod.devices().");
  info.def_readonly("name", &DeviceListing::name)
      .def_readonly("description", &DeviceListing::description, "What it is, or why it is unavailable.")
      .def_readonly("available", &DeviceListing::available)
      .def("__repr__", [](const DeviceListing& d) {
        return fmt::format("DeviceInfo({}, {}{})", d.name, d.available ? "" : "unavailable: ", d.description);
      });
  refuse_construction(info, "svod.devices() lists them");
  m.def(
      "devices",
      [] {
        GilReleased unlocked;
        return device_registry().list_devices();
      },
      "Every device svod knows, available or not (like `svod info`).");
  m.def(
      "device",
      [](py::handle name_object, py::handle compiler_object, py::handle backend_object) -> std::shared_ptr<Device> {
        const std::string name = string_argument(name_object, "svod.device: name");
        const auto compiler = renamed_string(compiler_object, backend_object, "svod.device", "cpu_compiler", "backend");
        GilReleased unlocked;
        return device_registry().open(name, compiler.value_or(""));
      },
      py::arg("name") = "CPU", py::arg("cpu_compiler") = py::none(), py::kw_only(), py::arg("backend") = py::none(),
      "The device named `name` (\"CPU\", \"CL:0\", \"CUDA:0\"), shared across the process.\n"
      "cpu_compiler= picks the CPU compiler (\"llvm\", \"clang\" or \"dlopen\"); backend= is its old name.");

  py::class_<Device, std::shared_ptr<Device>> device(m, "Device", "A device: compiles programs and allocates buffers.");
  device.def_property_readonly("name", &Device::name)
      .def("compile", &compile, py::arg("source") = py::none(), py::kw_only(), py::arg("source_file") = py::none(),
           py::arg("entry"), py::arg("language") = "c", py::arg("buffers") = py::none(),
           py::arg("scalars") = py::none(), py::arg("global_size") = py::none(), py::arg("local_size") = py::none(),
           py::arg("defines") = py::none(), py::arg("flops") = py::none(), py::arg("bytes") = py::none(),
           py::arg("name") = py::none(), py::arg("confined") = false,
           "Compiles and loads a kernel. buffers and scalars are lists of dicts as in a plan file's\n"
           "program ({\"name\": \"o\", \"access\": \"write\", \"dtype\": \"f32\"}, {\"name\": \"n\", \"type\": \"i32\"});\n"
           "a dtype may also be a numpy dtype (np.float32) or numpy's name (\"float32\"). Left out, for C they\n"
           "are read from the entry's definition (pointers: buffers, read-only when const, the pointee the\n"
           "dtype; 32- and 64-bit integers: scalars), and declared ones that disagree with it in number or\n"
           "kind are a ValidationError; other languages: none.\n"
           "a buffer may also give \"min_count\", the elements a launch needs (an expression over the\n"
           "scalars except core_id, as in plan files). Raises CompileError (with .log) when the compiler refuses the source.\n"
           "confined=True compiles a C or LLVM IR source you do not trust in the sandbox's confined compiler\n"
           "(CPU only; never cached): an #include of a file outside the toolchain raises SandboxViolation\n"
           "naming it; run the program with plan.sandbox() (docs/SECURITY.md, \"The sandbox\").")
      .def("compile_binary", &compile_binary, py::arg("source") = py::none(), py::kw_only(),
           py::arg("source_file") = py::none(), py::arg("entry"), py::arg("language") = "c",
           py::arg("defines") = py::none(), py::arg("name") = py::none(),
           "Compiles a kernel as compile() does (through svod's caches) and returns it as a program binary:\n"
           "bytes that hold the compiled code, the compiler it came from and the source, for a cache of\n"
           "the caller's own (tinygrad's keeps svod's kernels so). load_binary() loads it.")
      .def("load_binary", &load_binary, py::arg("binary"), py::kw_only(), py::arg("entry"), py::arg("language") = "c",
           py::arg("buffers") = py::none(), py::arg("scalars") = py::none(), py::arg("global_size") = py::none(),
           py::arg("local_size") = py::none(), py::arg("defines") = py::none(), py::arg("flops") = py::none(),
           py::arg("bytes") = py::none(), py::arg("name") = py::none(),
           "A Program from a program binary (compile_binary), without compiling where its code suits this\n"
           "machine (else its source is compiled). Arguments as compile()'s, the source the binary's; the\n"
           "entry, language and defines must be those it was compiled with (else ValidationError).\n"
           "A corrupt or truncated binary is a LoadError.")
      .def("compile_many", &compile_many_programs, py::arg("programs"), py::kw_only(), py::arg("errors") = "raise",
           "Compiles many programs at once on svod's thread pool, with the GIL released: `programs` is a\n"
           "list of dicts of compile()'s keyword arguments; returns the Programs in order. errors=\"raise\"\n"
           "raises the first failure once all are done; errors=\"return\" puts the svod.Error there instead.")
      .def(
          "allocate",
          [](Device& d, py::handle dtype, py::handle shape, py::handle zero) {
            return allocate_buffer(d, dtype, shape, bool_argument(zero, "allocate: zero"));
          },
          py::arg("dtype"), py::arg("shape"), py::kw_only(), py::arg("zero") = true,
           "A new zero-filled buffer of `shape` (an element count or a tuple) elements of `dtype`.\n"
           "zero=False: memory from the device's block cache, whatever it holds — freed buffers of the same\n"
           "byte size are reused (bounded by SVOD_BLOCK_CACHE_MB, default 1024; svod.free_cached()\n"
           "gives them back).")
      .def(
          "free_cached",
          [](Device& d) {
            GilReleased unlocked;
            d.free_cached();
          },
          "Gives this device's blocks held for reuse back.")
      .def(
          "synchronize",
          [](Device& d) {
            GilReleased unlocked;
            d.synchronize();
          },
          "Waits for all work submitted to the device.")
      .def("__repr__", [](const Device& d) { return fmt::format("svod.Device({})", d.name()); });
  refuse_construction(device, "svod.device(name) opens one");
}

}  // namespace svod::python
