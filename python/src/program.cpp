// svod.Program (the class; calling one is call.cpp) and svod.benchmark.
#include "program_object.h"

namespace svod::python {

namespace {

py::dict param_dict(const BufferParam& b) {
  py::dict d;
  d["name"] = b.name;
  d["access"] = std::string(to_string(b.access));
  if (b.dtype) d["dtype"] = std::string(to_string(*b.dtype));
  return d;
}

// A count of runs for benchmark (`least` or more, at most what an int holds).
int run_count(py::handle obj, std::string_view what, int64_t least) {
  const int64_t n = integer_value(obj.ptr(), [&] { return std::string(what); });
  if (n < least || n > INT_MAX)
    throw make_error(ErrorKind::Validation, "{}: {} is outside [{}, {}]", what, n, least, INT_MAX);
  return static_cast<int>(n);
}

}  // namespace

BenchmarkConfig benchmark_config(py::handle warmup, py::handle runs, py::handle min_total_s, py::handle timeout_s) {
  BenchmarkConfig config;
  config.warmup_runs = run_count(warmup, "benchmark: warmup", 0);
  config.min_runs = run_count(runs, "benchmark: runs", 1);
  config.max_runs = config.min_runs;
  config.min_total = seconds_argument(min_total_s, "benchmark: min_total", true);
  config.timeout = seconds_argument(timeout_s, "benchmark: timeout", false);
  return config;
}

std::shared_ptr<const Program> program_from_object(py::handle obj, std::string_view what) {
  if (!py::isinstance<PyProgram>(obj)) throw type_error(what, "a svod.Program", obj);
  return py::cast<const PyProgram&>(obj).program;
}

void bind_programs(py::module_& m) {
  py::class_<PyProgram, std::shared_ptr<PyProgram>> cls(
      m, "Program",
      "A compiled kernel. Call it with its buffers then its scalars, positionally or by name:\n"
      "prog(o, a, b, 1024) or prog(o, a, b, n=1024). Buffers are numpy arrays (passed without a\n"
      "copy to CPU programs), svod.Buffers or DLPack producers. Everything is checked before the\n"
      "kernel runs; the GIL is released while it runs.");
  cls.def_property_readonly("name", &PyProgram::display_name)
      .def_property_readonly("entry", [](const PyProgram& p) { return p.program->spec().entry; })
      .def_property_readonly("device", [](const PyProgram& p) { return p.program->device().name(); })
      .def_property_readonly("buffers",
                             [](const PyProgram& p) {
                               py::list out;
                               for (const auto& b : p.program->spec().buffers) out.append(param_dict(b));
                               return out;
                             })
      .def_property_readonly("scalars",
                             [](const PyProgram& p) {
                               py::list out;
                               for (const auto& s : p.program->spec().scalars) {
                                 py::dict d;
                                 d["name"] = s.name;
                                 d["type"] = std::string(to_string(s.type));
                                 if (s.min) d["min"] = *s.min;
                                 if (s.max) d["max"] = *s.max;
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly(
          "entry_address",
          [](const PyProgram& p) -> std::optional<uintptr_t> {
            if (!p.program->host_entry()) return std::nullopt;
            return reinterpret_cast<uintptr_t>(p.program->host_entry());
          },
          "Address of the loaded CPU entry point (None on other devices), e.g. for ctypes.")
      .def("__repr__", [](const PyProgram& p) {
        return fmt::format("svod.Program({}, device={})", p.display_name(), p.program->device().name());
      });
  refuse_construction(cls, "Device.compile() makes one");
  make_program_callable(cls);

  py::class_<BenchmarkResult> result(m, "BenchmarkResult", "Timed runs of svod.benchmark, in nanoseconds.");
  result.def_property_readonly("min", [](const BenchmarkResult& r) { return r.stats.min; })
      .def_property_readonly("median", [](const BenchmarkResult& r) { return r.stats.median; })
      .def_property_readonly("mean", [](const BenchmarkResult& r) { return r.stats.mean; })
      .def_property_readonly("stddev", [](const BenchmarkResult& r) { return r.stats.stddev; })
      .def_readonly("samples", &BenchmarkResult::samples)
      .def_readonly("runs", &BenchmarkResult::runs)
      .def_readonly("stopped_early", &BenchmarkResult::stopped_early)
      .def_readonly("timed_out", &BenchmarkResult::timed_out)
      .def("__repr__", [](const BenchmarkResult& r) {
        return fmt::format("BenchmarkResult(runs={}, median={:.0f} ns, min={:.0f} ns)", r.runs, r.stats.median,
                           r.stats.min);
      });
  refuse_construction(result, "svod.benchmark() returns one");
  m.def(
      "benchmark",
      [](py::handle target, py::handle args, py::handle warmup, py::handle runs, py::handle min_total,
         py::handle timeout, py::handle global_size) {
        const BenchmarkConfig config = benchmark_config(warmup, runs, min_total, timeout);
        if (auto result = benchmark_if_plan(target, args, config)) {
          if (!global_size.is_none())
            throw make_error(ErrorKind::Validation, "benchmark: a plan takes no global_size; its ops have theirs");
          return std::move(*result);
        }
        if (!py::isinstance<PyProgram>(target))
          throw type_error("benchmark: target", "a svod.Program or svod.Plan", target);
        const PyProgram& p = py::cast<const PyProgram&>(target);
        KernelArgs kargs = kernel_args(p, args, global_size, "benchmark");
        GilReleased unlocked;
        return benchmark_kernel(*p.program, kargs, config);
      },
      py::arg("target"), py::arg("args") = py::tuple(), py::arg("warmup") = 1, py::arg("runs") = 10,
      py::arg("min_total") = 0.0, py::arg("timeout") = 10.0, py::kw_only(), py::arg("global_size") = py::none(),
      "Times a Program on `args` (buffers then scalars, as in a call; global_size as a call's), or a\n"
      "Plan's execute(). Returns a BenchmarkResult: min, median, mean, stddev (nanoseconds), samples,\n"
      "runs. `min_total` (seconds) keeps timing up to `runs` runs; `timeout` (seconds) caps the whole.");

  py::class_<RoundRobinResult> round_robin(m, "RoundRobinResult", "What svod.benchmark_round_robin measured.");
  round_robin.def_readonly("results", &RoundRobinResult::results, "a BenchmarkResult per candidate, in order")
      .def_readonly("errors", &RoundRobinResult::errors,
                    "per candidate: why it was left out (its first failing launch), else None")
      .def_readonly("retired", &RoundRobinResult::retired,
                    "per candidate: its timing stopped early, sure to lose to the best")
      .def_property_readonly(
          "best",
          [](const RoundRobinResult& r) -> std::optional<size_t> {
            if (r.best == SIZE_MAX) return std::nullopt;
            return r.best;
          },
          "the index of the candidate with the lowest median, never a retired one; None when none ran")
      .def("__repr__", [](const RoundRobinResult& r) {
        return fmt::format("RoundRobinResult({} candidates, best {})", r.results.size(),
                           r.best == SIZE_MAX ? "none" : std::to_string(r.best));
      });
  refuse_construction(round_robin, "svod.benchmark_round_robin() returns one");
  m.def(
      "benchmark_round_robin",
      [](py::handle candidates_object, py::handle warmup, py::handle runs, py::handle min_total, py::handle timeout,
         py::handle early_stop, py::handle best_known, py::handle launch_timeout) {
        BenchmarkConfig config = benchmark_config(warmup, runs, min_total, timeout);
        config.early_stop_factor = float_argument(early_stop, "benchmark_round_robin: early_stop");
        if (!best_known.is_none()) config.best_known = seconds_argument(best_known, "benchmark_round_robin: best_known", false);
        if (!launch_timeout.is_none())
          config.launch_timeout = seconds_argument(launch_timeout, "benchmark_round_robin: launch_timeout", false);
        const auto items = sequence_argument(candidates_object, "benchmark_round_robin: candidates",
                                             "a sequence of (program, args) or (program, args, global_size)");
        std::vector<RoundRobinCandidate> candidates;
        for (size_t i = 0; i < items.size(); ++i) {
          const std::string what = fmt::format("benchmark_round_robin: candidates[{}]", i);
          const auto parts = sequence_argument(items[i], what, "(program, args) or (program, args, global_size)");
          if (parts.size() != 2 && parts.size() != 3)
            throw make_error(ErrorKind::Validation, "{}: expected (program, args) or (program, args, global_size), got {} items",
                             what, parts.size());
          const auto program = program_from_object(parts[0], what + "[0]");
          const PyProgram& p = py::cast<const PyProgram&>(parts[0]);
          candidates.push_back({program, kernel_args(p, parts[1], parts.size() == 3 ? parts[2] : py::none(), what)});
        }
        GilReleased unlocked;
        return benchmark_round_robin(candidates, config);
      },
      py::arg("candidates"), py::kw_only(), py::arg("warmup") = 1, py::arg("runs") = 3, py::arg("min_total") = 0.0,
      py::arg("timeout") = 10.0, py::arg("early_stop") = 3.0, py::arg("best_known") = py::none(),
      py::arg("launch_timeout") = py::none(),
      "Times many Programs together, one run of each in turn, so that the machine's drift hits them alike.\n"
      "`candidates`: (program, args) or (program, args, global_size), as svod.benchmark takes them.\n"
      "`runs` timed runs each after `warmup`; a candidate is retired once more than half of the runs it is\n"
      "owed were over `early_stop` times the best median (or `best_known`, seconds, when lower), and a\n"
      "run past `launch_timeout` seconds is stopped and leaves its candidate out with the error, as a\n"
      "candidate whose launch fails is. Returns a RoundRobinResult; the GIL is released meanwhile.");
}

}  // namespace svod::python
