#include "svod/tune/tune_worker.h"

#include <sys/time.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <fstream>
#include <set>

#include "svod/base/file_write.h"
#include "svod/base/thread_pool.h"
#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/device/compile_many.h"
#include "svod/registry/registry.h"
#include "svod/plan/execution_plan.h"
#include "svod/planfile/plan_file.h"
#include "svod/sandbox/confined_compile.h"
#include "svod/sandbox/sandbox.h"
#include "svod/tune/tune_file.h"

namespace svod {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

void emit(std::FILE* out, const Json& event) {
  const std::string line = event.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

// Arms the process's interval timer; SIGALRM's default action ends the
// process, which the tuner reads as a hang of the candidate in flight.
void arm_timer(std::chrono::milliseconds timeout) {
  itimerval timer{};
  timer.it_value.tv_sec = timeout.count() / 1000;
  timer.it_value.tv_usec = (timeout.count() % 1000) * 1000;
  ::setitimer(ITIMER_REAL, &timer, nullptr);
}
void disarm_timer() {
  itimerval timer{};
  ::setitimer(ITIMER_REAL, &timer, nullptr);
}

fs::path reference_file(const fs::path& dir, size_t index) { return dir / fmt::format("out{}.bin", index); }

// The plan with only the ops before the tuned one and the programs they run:
// executing it leaves the buffers as the tuned op finds them.
PlanFile prefix_plan(const TuneFile& tune) {
  PlanFile prefix = tune.plan;
  prefix.ops.resize(tune.op);
  prefix.outputs.clear();
  std::set<std::string> ids;
  for (const auto& op : prefix.ops) {
    if (!op.id.empty()) ids.insert(op.id);
  }
  for (auto& op : prefix.ops) {
    // Edges to the tuned op or later ones do not order the ops before it.
    std::erase_if(op.after, [&](const OpRef& ref) {
      if (const auto* id = std::get_if<std::string>(&ref)) return !ids.contains(*id);
      return std::get<size_t>(ref) >= tune.op;
    });
  }
  std::erase_if(prefix.programs, [&](const PlanFileProgram& p) {
    return std::none_of(prefix.ops.begin(), prefix.ops.end(), [&](const PlanFileOp& op) {
      return op.kind == PlanFileOp::Kind::Run && op.target == p.name;
    });
  });
  return prefix;
}

class Worker {
 public:
  Worker(const Json& job, std::FILE* out) : out_(out) {
    tune_ = parse_tune_file(job.at("tune_file").get<std::string>());
    reference_dir_ = job.at("reference_dir").get<std::string>();
    cpu_compiler_ = job.at("cpu_compiler").get<std::string>();
    write_reference_ = job.at("write_reference").get<bool>();
    if (!job.at("best_known_ns").is_null()) best_ns_ = job.at("best_known_ns").get<double>();
    sandbox_ = job.value("sandbox", false);
    for (const auto& c : job.at("candidates")) points_.push_back(c.get<TunePoint>());

    LoadOptions load;
    load.vars = tune_.vars;
    load.cpu_compiler = cpu_compiler_;
    if (sandbox_) {
      // Refuses before anything compiles where the sandbox cannot be had.
      probe_sandbox();
      load.build_program = [](const PlanFileProgram& program, Device& device) {
        return load_confined(device, program.spec);
      };
    }
    loaded_.emplace(load_plan(prefix_plan(tune_), load));
    if (sandbox_ && loaded_->plan.op_count() > 0) {
      // The ops before the tuned one run in a helper of their own; their
      // buffers stay in its shared memory, where the snapshot below reads them.
      prefix_sandbox_ = std::make_unique<SandboxedPlan>(loaded_->plan, sandbox_options());
      prefix_sandbox_->execute();
    } else if (!sandbox_) {
      loaded_->execute();
    }

    const PlanFileOp& op = tune_.plan.ops[tune_.op];
    const ProgramSpec& spec = tune_.program().spec;
    for (size_t i = 0; i < op.buffers.size(); ++i) {
      const Buffer& b = loaded_->plan.buffer(*loaded_->plan.find_buffer(op.buffers[i]));
      args_.buffers.push_back(b);
      Buffer saved = b.device().allocate_host(b.dtype(), b.count());
      b.device().copy(saved, b);
      saved_.push_back(std::move(saved));
      if (!writes(spec.buffers[i].access)) continue;
      LoadedOutput output;
      output.name = op.buffers[i];
      output.shape = {b.count()};
      output.expect.emplace();
      output.expect->rtol = tune_.rtol;
      output.expect->atol = tune_.atol;
      written_.push_back(i);
      outputs_.push_back(std::move(output));
      got_.push_back(b.device().allocate_host(b.dtype(), b.count()));
    }
    if (!write_reference_) {
      for (size_t w = 0; w < written_.size(); ++w) read_reference(w);
    }
    std::string device = tune_.program().device.empty() ? tune_.plan.device : tune_.program().device;
    device_ = open_device(device, cpu_compiler_);
  }

  void run() {
    std::vector<ProgramSpec> specs;
    for (const auto& p : points_) specs.push_back(candidate_spec(tune_, p));
    const std::vector<CompileResult> compiled =
        sandbox_ ? compile_candidates_confined(specs) : compile_many(*device_, specs);
    for (size_t k = 0; k < points_.size(); ++k) {
      if (const Error* e = std::get_if<Error>(&compiled[k])) {
        emit(out_, {{"event", "result"}, {"candidate", k}, {"status", "compile_error"}, {"message", e->what()}});
        continue;
      }
      emit(out_, {{"event", "start"}, {"candidate", k}});
      const auto& program = std::get<std::shared_ptr<const Program>>(compiled[k]);
      Json result;
      try {
        result = evaluate(program, points_[k], k == 0 && write_reference_);
      } catch (const KernelFault& e) {
        // Stopped at the fault: the worker goes on with the next candidate.
        disarm_timer();
        result = {{"status", "crashed"}, {"message", e.what()}};
      } catch (const Error& e) {
        disarm_timer();
        if (e.kind() == ErrorKind::SandboxViolation) {
          // The helper was ended; the next candidate gets a fresh one.
          const bool hung = std::chrono::steady_clock::now() - run_started_ >= tune_.timeout;
          result = {{"status", hung ? "timeout" : "crashed"}, {"message", e.what()}};
        } else {
          result = {{"status", "error"}, {"message", fmt::format("{} error: {}", to_string(e.kind()), e.what())}};
        }
      }
      result["event"] = "result";
      result["candidate"] = k;
      emit(out_, result);
    }
    emit(out_, {{"event", "done"}});
  }

 private:
  // The op's scalars, whose expressions over plan variables see the
  // candidate's values of parameters that are plan variables.
  std::vector<int64_t> scalars(const TunePoint& point) const {
    auto values = plan_variable_values(tune_);
    for (size_t i = 0; i < tune_.parameters.size(); ++i) {
      const TuneValue& v = tune_.parameters[i].values.at(point.at(i));
      if (v.integer && values.contains(tune_.parameters[i].name)) values[tune_.parameters[i].name] = *v.integer;
    }
    std::vector<int64_t> out;
    for (const Expr& e : tune_.plan.ops[tune_.op].scalars) {
      std::vector<int64_t> args;
      for (const auto& name : e.variables()) args.push_back(values.at(name));
      out.push_back(e.evaluate(args));
    }
    return out;
  }

  void restore(const std::vector<Buffer>& buffers) {
    for (size_t i = 0; i < saved_.size(); ++i) buffers[i].device().copy(buffers[i], saved_[i]);
  }

  void read_reference(size_t w) {
    const Buffer& b = got_[w];
    const fs::path path = reference_file(reference_dir_, w);
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes(b.bytes());
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())) || in.peek() != EOF) {
      throw make_error(ErrorKind::Io, "cannot read the reference output {}", path.string());
    }
    const size_t size = size_of(b.dtype());
    auto& expected = outputs_[w].expected;
    expected.resize(b.count());
    for (size_t i = 0; i < expected.size(); ++i) {
      expected[i] = load_as_double(b.dtype(), reinterpret_cast<const std::byte*>(bytes.data() + i * size));
    }
  }

  void write_reference(size_t w) {
    const Buffer& b = got_[w];
    const fs::path path = reference_file(reference_dir_, w);
    write_file_atomically(path, {std::span(static_cast<const std::byte*>(b.data()), b.bytes())});
  }

  // How a candidate runs: launched in this process on the op's buffers, or,
  // sandboxed, as a plan of one op in a helper of its own, over copies of
  // those buffers in its shared memory (its times then include one round
  // trip to the helper, the same for every candidate).
  struct CandidateRun {
    std::vector<Buffer> buffers;                         // the op's buffers as the candidate sees them
    std::function<std::chrono::nanoseconds()> run_once;  // runs it once and returns its time
    std::optional<ExecutionPlan> plan;                   // sandboxed: the plan of its one op
    std::unique_ptr<SandboxedPlan> sandbox;              // and the helper it runs in
  };

  std::unique_ptr<CandidateRun> prepare(const std::shared_ptr<const Program>& program) {
    auto run = std::make_unique<CandidateRun>();
    if (!sandbox_) {
      run->buffers = args_.buffers;
      run->run_once = [this, program] { return program->time_launch(args_.view()); };
      return run;
    }
    ExecutionPlanBuilder builder;
    KernelOp op;
    op.program = program;
    for (const Buffer& b : args_.buffers)
      op.buffers.push_back(builder.add_buffer(b.device().allocate(b.dtype(), b.count())));
    for (int64_t value : args_.scalars) op.scalars.push_back(Expr::constant(value));
    builder.add_op(std::move(op));
    run->plan.emplace(builder.build());
    run->sandbox = std::make_unique<SandboxedPlan>(*run->plan, sandbox_options());
    for (size_t i = 0; i < args_.buffers.size(); ++i) run->buffers.push_back(run->plan->buffer(i));
    run->run_once = [this, sandbox = run->sandbox.get()] {
      run_started_ = std::chrono::steady_clock::now();
      sandbox->execute();
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - run_started_);
    };
    return run;
  }

  // A sandboxed run is bounded by the sandbox's wall-clock limit: the helper
  // is ended and the worker goes on with the next candidate. In this process,
  // the interval timer ends the worker.
  void arm() const {
    if (!sandbox_) arm_timer(tune_.timeout);
  }

  SandboxOptions sandbox_options() const { return {.wall_limit = tune_.timeout}; }

  // The candidates compiled confined, several at a time. Where confined
  // compiles cannot be had (Error(Unsupported)) the job fails: nothing is
  // compiled unconfined.
  std::vector<CompileResult> compile_candidates_confined(const std::vector<ProgramSpec>& specs) {
    std::vector<CompileResult> compiled(specs.size());
    parallel_for(specs.size(), [&](size_t k) {
      try {
        compiled[k] = load_confined(*device_, specs[k]);
      } catch (const Error& e) {
        compiled[k] = e;
      }
    });
    for (const CompileResult& c : compiled) {
      if (const Error* e = std::get_if<Error>(&c); e != nullptr && e->kind() == ErrorKind::Unsupported) throw *e;
    }
    return compiled;
  }

  Json evaluate(const std::shared_ptr<const Program>& program, const TunePoint& point, bool is_reference) {
    args_.scalars = scalars(point);
    const std::unique_ptr<CandidateRun> run = prepare(program);
    arm();
    restore(run->buffers);
    run->run_once();
    for (size_t w = 0; w < written_.size(); ++w) {
      const Buffer& b = run->buffers[written_[w]];
      b.device().copy(got_[w], b);
    }
    disarm_timer();
    for (size_t w = 0; w < written_.size(); ++w) {
      if (is_reference) {
        write_reference(w);
        continue;
      }
      const Buffer& got = got_[w];
      const OutputCheck check = check_output(outputs_[w], got.dtype(),
                                             {static_cast<const std::byte*>(got.data()), got.bytes()});
      if (check.passed()) continue;
      const Mismatch& m = check.first.front();
      return {{"status", "wrong"},
              {"message", fmt::format("{}: {} of {} values differ from the start candidate's (max abs error {:.3g}); "
                                      "first at [{}]: got {:.9g}, expected {:.9g}",
                                      check.name, check.mismatches, check.compared, check.max_abs_error, m.index,
                                      m.got, m.expected)}};
    }

    BenchmarkConfig config = tune_.benchmark;
    // The check run already warmed code and caches: it stands for one warm-up
    // run, which matters for slow candidates, where each run is expensive.
    config.warmup_runs = std::max(0, config.warmup_runs - 1);
    // The budget stays well inside the timer, which is for runs that never end.
    config.timeout = tune_.timeout / 3;
    // Rounded up, so that a candidate stopped early is slower than the best
    // itself, not only than its whole nanoseconds.
    if (best_ns_) config.best_known = std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(*best_ns_)));
    arm();
    restore(run->buffers);
    const BenchmarkResult r = benchmark_operation(run->run_once, program->device(), config);
    disarm_timer();
    // The pick rule's best (tuner.h): the lowest median of all. One stopped
    // early is above the best already, so it never changes it.
    if (!best_ns_ || r.stats.median < *best_ns_) best_ns_ = r.stats.median;
    return {{"status", "ok"},          {"median_ns", r.stats.median},      {"min_ns", r.stats.min},
            {"runs", r.runs},          {"stopped_early", r.stopped_early}, {"timed_out", r.timed_out}};
  }

  std::FILE* out_;
  TuneFile tune_;
  fs::path reference_dir_;
  std::string cpu_compiler_;  // the CPU devices' compiler (TuneOptions::cpu_compiler)
  bool write_reference_ = false;
  bool sandbox_ = false;  // every kernel compiled confined and run in svod's sandbox
  std::optional<double> best_ns_;
  std::vector<TunePoint> points_;
  std::optional<LoadedPlan> loaded_;
  std::unique_ptr<SandboxedPlan> prefix_sandbox_;  // sandboxed: where the ops before the tuned one ran
  std::shared_ptr<Device> device_;
  KernelArgs args_;
  std::chrono::steady_clock::time_point run_started_;  // of the candidate's sandboxed run in flight
  std::vector<Buffer> saved_;         // the op's buffers as the op finds them
  std::vector<size_t> written_;       // indices of the buffers the op writes
  std::vector<LoadedOutput> outputs_;  // per written buffer: the reference
  std::vector<Buffer> got_;            // per written buffer: host copy of a candidate's result
};

}  // namespace

int run_tune_worker(std::string_view job_json, std::FILE* events) {
  std::signal(SIGALRM, SIG_DFL);
  try {
    check_json_depth(job_json, ErrorKind::Validation, "worker job");  // deeper values overflow the stack
    const Json job = Json::parse(job_json.begin(), job_json.end());
    Worker(job, events).run();
    return 0;
  } catch (const Error& e) {
    emit(events, {{"event", "error"}, {"kind", to_string(e.kind())}, {"message", e.what()}});
    return 2;
  } catch (const Json::exception& e) {
    emit(events, {{"event", "error"}, {"kind", "validation"}, {"message", fmt::format("bad worker job: {}", e.what())}});
    return 2;
  }
}

}  // namespace svod
