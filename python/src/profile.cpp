// svod.profile(): while a profile is open, every plan execution and every
// program call is recorded by a svod::Profiler — one per plan, and one per
// program whose single op is the kernel — and the profile renders them all
// together: tables, Chrome traces and JSON as svod/profile makes them.
#include <pybind11/stl/filesystem.h>

#include <atomic>
#include <mutex>

#include "bindings.h"
#include "svod/profile/profile.h"

namespace svod::python {

namespace {

// Everything one `with svod.profile()` block recorded.
class ProfileSession {
 public:
  // Runs `run` as one profiled run of the profiler kept for `owner`. Runs of
  // one owner are serialized: a Profiler records one run at a time.
  template <typename MakeOps, typename Run>
  void record(const std::shared_ptr<const void>& owner, MakeOps&& make_ops, Run&& run) {
    Entry& entry = entry_for(owner, make_ops);
    std::lock_guard lock(entry.run_mutex);
    entry.profiler->begin_run();
    run(*entry.profiler);
    entry.profiler->end_run();
  }

  // One PlanProfile of every op of every owner: each owner's runs, with the
  // ops of the others marked as not run. Times are per profiler (each has its
  // own origin), so spans of different owners are not aligned exactly.
  PlanProfile merged() {
    std::lock_guard lock(mutex_);
    PlanProfile out;
    for (const auto& e : entries_) {
      std::lock_guard run_lock(e->run_mutex);
      const PlanProfile& p = e->profiler->profile();
      const size_t offset = out.ops.size();
      out.ops.insert(out.ops.end(), p.ops.begin(), p.ops.end());
      for (const RunProfile& r : p.runs) {
        RunProfile run{r.start_ns, r.end_ns, {}};
        run.ops.resize(offset);
        run.ops.insert(run.ops.end(), r.ops.begin(), r.ops.end());
        out.runs.push_back(std::move(run));
      }
    }
    for (RunProfile& r : out.runs) r.ops.resize(out.ops.size());
    return out;
  }

 private:
  struct Entry {
    std::shared_ptr<const void> owner;
    std::unique_ptr<Profiler> profiler;
    std::mutex run_mutex;
  };

  template <typename MakeOps>
  Entry& entry_for(const std::shared_ptr<const void>& owner, MakeOps&& make_ops) {
    std::lock_guard lock(mutex_);
    for (const auto& e : entries_) {
      if (e->owner == owner) return *e;
    }
    auto e = std::make_unique<Entry>();
    e->owner = owner;
    e->profiler = std::make_unique<Profiler>(make_ops());
    entries_.push_back(std::move(e));
    return *entries_.back();
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

std::atomic<bool> open_flag{false};
std::mutex open_mutex;
std::shared_ptr<ProfileSession> open_session;  // guarded by open_mutex

std::shared_ptr<ProfileSession> current() {
  std::lock_guard lock(open_mutex);
  return open_session;
}

// The Python object of `with svod.profile() as p`.
struct PyProfile {
  std::shared_ptr<ProfileSession> session = std::make_shared<ProfileSession>();

  void start() {
    std::lock_guard lock(open_mutex);
    if (open_session)
      throw make_error(ErrorKind::Validation, "svod.profile(): a profile is already open (they do not nest)");
    open_session = session;
    open_flag.store(true, std::memory_order_relaxed);
  }
  void stop() {
    std::lock_guard lock(open_mutex);
    if (open_session == session) {
      open_session.reset();
      open_flag.store(false, std::memory_order_relaxed);
    }
  }
};

}  // namespace

bool profiling() noexcept { return open_flag.load(std::memory_order_relaxed); }

void profile_program_call(const std::shared_ptr<const Program>& program, const std::function<void()>& run) {
  auto session = current();
  if (!session) {
    run();
    return;
  }
  session->record(
      program,
      [&] { return std::vector<OpDescription>{describe_call(*program)}; },
      [&](Profiler& profiler) {
        profiler.op_started(0);
        run();
        profiler.op_finished(0);
      });
}

void profile_plan_run(const std::shared_ptr<void>& owner, const ExecutionPlan& plan,
                      const std::function<void(PlanObserver*)>& run) {
  auto session = current();
  if (!session) {
    run(nullptr);
    return;
  }
  session->record(
      owner,
      [&] { return describe_ops(plan); },
      [&](Profiler& profiler) { run(&profiler); });
}

void bind_profile(py::module_& m) {
  py::class_<PyProfile>(m, "Profile", "What ran inside a `with svod.profile() as p:` block.")
      .def(py::init<>())
      .def("_start", &PyProfile::start)
      .def("_stop", &PyProfile::stop)
      .def("__enter__",
           [](py::object self) {
             py::cast<PyProfile&>(self).start();
             return self;
           })
      .def(
          "__exit__",
          [](PyProfile& p, py::handle, py::handle, py::handle) {
            p.stop();
            return false;
          },
          py::arg("exc_type"), py::arg("exc_value"), py::arg("traceback"))
      .def(
          "table",
          [](const PyProfile& p, py::handle per_op) {
            const PlanProfile profile = p.session->merged();
            return bool_argument(per_op, "Profile.table: per_op") ? render_table(aggregate_ops(profile), "op")
                                                                   : render_table(aggregate(profile));
          },
          py::arg("per_op") = false, "A text table per kernel (per op with per_op=True), sorted by total time.")
      .def(
          "chrome_trace",
          [](const PyProfile& p, py::handle path) {
            write_chrome_trace(p.session->merged(), path_argument(path, "Profile.chrome_trace: path"));
          },
          py::arg("path"), "Writes a Chrome trace (Perfetto, chrome://tracing) of every recorded op.")
      .def("json", [](const PyProfile& p) { return profile_json(p.session->merged()); },
           "The profile as JSON text (runs, per-kernel and per-op rows).")
      .def_property_readonly("runs", [](const PyProfile& p) { return p.session->merged().runs.size(); },
                             "How many plan executions and program calls were recorded.");
  m.def(
      "profile", [] { return PyProfile(); },
      "Records every plan execution and program call inside the block:\n\n"
      "    with svod.profile() as p:\n"
      "        plan.execute()\n"
      "    print(p.table())\n"
      "    p.chrome_trace(\"trace.json\")");
}

}  // namespace svod::python
