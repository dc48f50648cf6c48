// Sandboxed plans from Python: Plan.sandbox() and Plan.sandbox_info, the
// loaders' sandbox= options, and PySandbox, through whose helper a sandboxed
// plan's runs go and into whose shared memory bind() and run() copy arrays.
#include <algorithm>
#include <chrono>

#include "plan_objects.h"

namespace svod::python {

namespace {

// A sandbox's wall_limit (seconds, 60 by default) and memory_limit (bytes,
// 1 GiB by default); None keeps the default. `prefix` names them in errors.
SandboxOptions limits_of(py::handle wall_limit, py::handle memory_limit, const std::string& prefix) {
  SandboxOptions options;
  if (!wall_limit.is_none()) {
    const auto limit = seconds_argument(wall_limit, prefix + "wall_limit", false);
    // SandboxOptions counts whole milliseconds: a shorter limit would be none.
    options.wall_limit = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(limit),
                                  std::chrono::milliseconds(1));
  }
  if (!memory_limit.is_none()) {
    options.memory_limit = size_argument(memory_limit, prefix + "memory_limit");
    if (options.memory_limit == 0)
      throw make_error(ErrorKind::Validation, "{}memory_limit: 0 bytes leaves the helper no memory to run in", prefix);
  }
  return options;
}

}  // namespace

std::optional<SandboxOptions> sandbox_options(py::handle sandbox, py::handle wall_limit, py::handle memory_limit,
                                              std::string_view function) {
  if (!bool_argument(sandbox, fmt::format("{}: sandbox", function))) {
    if (!wall_limit.is_none() || !memory_limit.is_none())
      throw make_error(ErrorKind::Validation, "{}: sandbox_{} is given without sandbox=True", function,
                       wall_limit.is_none() ? "memory_limit" : "wall_limit");
    return std::nullopt;
  }
  return limits_of(wall_limit, memory_limit, fmt::format("{}: sandbox_", function));
}

void sandbox_plan(PyPlan& p, const SandboxOptions& options) {
  // No run() is half done meanwhile. The lock is taken without the GIL, as
  // run() takes it; nothing waits for it with the GIL held.
  std::unique_lock lock(p.shared->run_lock, std::defer_lock);
  {
    GilReleased unlocked;
    lock.lock();
  }
  if (p.shared->sandbox) throw make_error(ErrorKind::Validation, "{}: the plan is sandboxed already", p.source);
  std::shared_ptr<PySandbox> sandbox;
  {
    GilReleased unlocked;
    sandbox = std::make_shared<PySandbox>(p.loaded, options);
  }
  p.shared->sandbox = std::move(sandbox);
}

void PySandbox::execute(const std::map<std::string, int64_t>& vars) {
  std::lock_guard lock(mutex);
  loaded->plan.set_variables(vars);
  sandboxed.execute();
}

void PySandbox::copy_in(const Buffer& to, const Buffer& from) {
  std::lock_guard lock(mutex);
  if (from.first_byte() == to.first_byte() && from.is_host()) return;  // the plan's own buffer, given back
  copy_buffer(to, from);
  copied_bytes += to.bytes();
  ++copies;
}

// Plan.sandbox() and Plan.sandbox_info.
void bind_plan_sandbox(py::class_<PyPlan>& cls) {
  cls.def(
          "sandbox",
          [](py::object self, py::handle wall_limit, py::handle memory_limit) {
            sandbox_plan(py::cast<PyPlan&>(self), limits_of(wall_limit, memory_limit, "sandbox: "));
            return self;
          },
          py::kw_only(), py::arg("wall_limit") = py::none(), py::arg("memory_limit") = py::none(),
          "Runs the plan in svod's sandbox from now on and returns it (docs/SECURITY.md, \"The sandbox\"):\n"
          "a helper process, started now and kept between runs, that can do nothing but compute on the\n"
          "plan's buffers. Every execute() and run() of the plan (of every object for it) goes there,\n"
          "one round trip each. The buffers move (are copied once) into memory shared with the helper,\n"
          "where they stay: bind() and run() copy arrays into them (sandbox_info counts the bytes) and\n"
          "rebind() is refused. wall_limit= is the seconds one run may take (60 by default; past it the\n"
          "helper is killed), memory_limit= the bytes the helper may map beyond what it holds (1 GiB).\n"
          "UnsupportedError, with nothing changed, when the sandbox cannot be had here or an op cannot\n"
          "run there (host functions, collectives, device kernels), naming it. A kernel that breaks a\n"
          "rule raises svod.SandboxViolation naming the op and the rule; the next run starts a fresh\n"
          "helper. The plan's programs were compiled in this process before, outside the sandbox: a\n"
          "source can #include this machine's files (sandbox packages, or sources you trust).")
      .def_property_readonly(
          "sandbox_info",
          [](const PyPlan& p) -> py::object {
            const std::shared_ptr<PySandbox> sandbox = p.shared->sandbox;
            if (!sandbox) return py::none();
            py::dict info;
            uint64_t copied_bytes = 0, copies = 0;
            int pid = 0;
            std::string layers;
            {
              GilReleased unlocked;
              std::lock_guard lock(sandbox->mutex);
              copied_bytes = sandbox->copied_bytes;
              copies = sandbox->copies;
              pid = sandbox->sandboxed.helper_pid();
              layers = sandbox->sandboxed.layers().describe();
            }
            info["layers"] = layers;
            info["helper_pid"] = pid;
            info["moved_bytes"] = sandbox->sandboxed.copied_bytes();
            info["copied_bytes"] = copied_bytes;
            info["copies"] = copies;
            return info;
          },
          "None for a plan that is not sandboxed; else {\"layers\": the helper's layers of confinement,\n"
          "\"helper_pid\": its process id (0 until the run after a failure starts one), \"moved_bytes\":\n"
          "the plan's buffers' bytes copied into the shared memory when it was sandboxed, \"copied_bytes\"\n"
          "and \"copies\": the bytes and number of arrays (numpy, DLPack, svod.Buffer) bind() and run()\n"
          "copied into it since}.");
}

}  // namespace svod::python
