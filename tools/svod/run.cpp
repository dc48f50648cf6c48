// `svod run PLAN.json` (or MODEL.svodpkg): load a plan file or package, execute it, print and check its
// outputs, time its ops and optionally write a Chrome trace.
//
// Timing: the time to load the plan (read, compile, load) is printed on its
// own, and so is the first execution's: it is cold (code and data touched for
// the first time) and can be many times a warm one. A Profiler (svod/profile)
// observes the first execution and another the later (warm) ones, stamping
// each op's start and end on the thread that runs it; each execution is timed
// as a whole by the same profiler. The tables report the warm executions
// (the cold one when there is no other): minimums over every execution and
// medians over the most recent ones the profiler keeps (so --repeat 1000000
// runs in bounded memory); in parallel mode ops overlap, so their times do
// not add up to the execution time. SVOD_PROFILE=1 adds the per-kernel table (sorted by
// total time, with shares). Outputs are captured after the first execution,
// so plans that update state in place report what one run does.
//
// Ranks: under an MPI launcher the process runs the plan as its rank of the
// job; with --ranks N, N threads each load and run it as one rank of a local
// group (run_on_ranks, common.h, which bench and pack share). Every rank's
// lines are collected and printed when it is done (rank 0's, or all of them
// prefixed with --all-ranks; errors always), and only rank 0 writes files.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "svod/comm/communicator.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/isolation.h"
#include "svod/guard/kernel_stop.h"
#include "svod/guard/running_op.h"
#include "svod/guard/watchdog.h"
#include "svod/package/package.h"
#include "svod/plan/op_watch.h"
#include "svod/plan/plan_writes.h"
#include "svod/planfile/plan_file.h"
#include "svod/profile/profile.h"
#include "svod/sandbox/confined_compile.h"
#include "svod/sandbox/sandbox.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"

namespace svod::cli {
namespace {

constexpr size_t kShownValues = 8;

std::string value_text(DType dtype, const std::byte* p) {
  if (dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  if (dtype == DType::U64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  const double v = load_as_double(dtype, p);
  return is_float(dtype) ? fmt::format("{:.6g}", v) : fmt::format("{}", static_cast<int64_t>(v));
}

std::string shape_text(const std::vector<size_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Why `dir` could not be made or written into, judged by its nearest
// existing ancestor; nullopt when it looks fine.
std::optional<std::string> out_dir_problem(const std::filesystem::path& dir) {
  std::filesystem::path existing = std::filesystem::absolute(dir);
  std::error_code ec;
  while (!std::filesystem::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  if (!std::filesystem::is_directory(existing, ec)) return fmt::format("{} is not a folder", existing.string());
  if (::access(existing.c_str(), W_OK) != 0)
    return fmt::format("cannot write into {}: {}", existing.string(), std::strerror(errno));
  return std::nullopt;
}

// --input and --output: NAME=FILE (FILE may start with '@', as iree-run-module
// writes it), by name, FILE made absolute against the working folder.
std::map<std::string, std::filesystem::path> named_files(const std::vector<std::string>& args, std::string_view flag) {
  std::map<std::string, std::filesystem::path> files;
  for (const auto& text : args) {
    const size_t eq = text.find('=');
    std::string_view file = eq == std::string::npos ? std::string_view() : std::string_view(text).substr(eq + 1);
    if (file.starts_with('@')) file.remove_prefix(1);
    if (eq == 0 || eq == std::string::npos || file.empty())
      throw make_error(ErrorKind::Validation, "{} {}: expected NAME=@FILE.npy", flag, text);
    if (!files.emplace(text.substr(0, eq), std::filesystem::absolute(file)).second)
      throw make_error(ErrorKind::Validation, "{} {}: buffer \"{}\" is named twice", flag, text, text.substr(0, eq));
  }
  return files;
}

// One rank's plan, with the file it came from (its name, folder and outputs).
struct RankPlan {
  PlanFile file;
  LoadedPlan loaded;
};

// Loads the plan file or package `options.plan` as this rank of `comm` (null
// for a plain run).
RankPlan load_rank_plan(const RunOptions& options, const std::shared_ptr<Communicator>& comm) {
  const bool package = is_package_file(options.plan);
  const CpuMismatch on_cpu_mismatch = parse_cpu_mismatch(options.on_cpu_mismatch);  // checked for a plan file too
  // A package's CPU programs are compiled already, so unless a compiler is
  // asked for, the clang compiler serves the rare recompile (a foreign CPU):
  // choosing it costs nothing, while the default llvm compiler opens its LLVM
  // plugin (several milliseconds, a large part of a package's start-up).
  std::string compiler = cpu_compiler_option(options.cpu_compiler);
  if (package && compiler.empty() && !requested_cpu_compiler()) compiler = "clang";
  // --sandbox: whatever is compiled from source is compiled confined, never in this process.
  const auto confined = [](Device& device, const ProgramSpec& spec) { return load_confined(device, spec); };
  if (package) {
    LoadedPackage loaded_package = load_package(
        options.plan, PackageLoadOptions{parse_vars(options.vars), comm, named_files(options.inputs, "--input"),
                                         compiler, on_cpu_mismatch, options.sandbox ? confined : CompileSource{}});
    return {std::move(loaded_package.file), std::move(loaded_package.loaded)};
  }
  PlanFile file = parse_plan_file(options.plan);
  LoadOptions load_options{.vars = parse_vars(options.vars),
                           .communicator = comm,
                           .cpu_compiler = compiler,
                           .inputs = named_files(options.inputs, "--input")};
  if (options.sandbox)
    load_options.build_program = [&](const PlanFileProgram& program, Device& device) {
      return confined(device, program.spec);
    };
  LoadedPlan loaded = load_plan(file, load_options);
  return {std::move(file), std::move(loaded)};
}

// The OpWatch of each execution in progress, by rank (0 for a plain run),
// for the --timeout deadline's and the stuck-rank report; guarded by
// watch_mutex.
std::mutex watch_mutex;
std::map<int, const OpWatch*> watched;

// The ops running now, "rank K: "-prefixed when several ranks run; empty
// when none. Called with watch_mutex held.
std::string running_ops() {
  std::vector<std::string> parts;
  for (const auto& [rank, watch] : watched) {
    const std::string ops = watch->running();
    if (!ops.empty()) parts.push_back(watched.size() > 1 ? fmt::format("rank {}: {}", rank, ops) : ops);
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Whether the run watches each op start and end: for the per-op table, the
// trace (--profile, SVOD_PROFILE), --timeout's and a stuck rank's report of
// what is running, --isolate's record. Watching costs nothing where every op
// runs on the host, but a watched device op is waited for as it is submitted
// (ExecuteOptions::observer), and a plan of one device's kernels then cannot
// go to it as one graph: such plans are watched only when something asks.
bool watch_ops(const RunOptions& options, const ExecutionPlan& plan, bool ranks) {
  if (options.sandbox) return false;  // the ops run in the sandbox's helper, timed as a whole
  return options.timeout_s > 0 || isolated() || ranks || !options.profile.empty() || profile_requested() ||
         !plan.uses_devices();
}

// Executes the plan --repeat times, the first (cold) execution under `cold`
// and the others (warm) under `warm` (each op watched when `watch_each`,
// else only the runs); returns the bytes of each buffer of `captured` (plan buffer
// indices) as they were after the first execution.
std::vector<std::vector<std::byte>> execute_repeatedly(const RunOptions& options, LoadedPlan& loaded,
                                                       SandboxedPlan* sandboxed, const std::vector<size_t>& captured,
                                                       Profiler& cold, Profiler& warm, int rank, bool watch_each) {
  std::vector<std::vector<std::byte>> snapshots;
  OpWatch watch(cold, cold.profile().ops);
  struct Published {
    Published(const OpWatch& w, int rank) : rank(rank) {
      std::lock_guard lock(watch_mutex);
      watched[rank] = &w;
    }
    ~Published() {
      std::lock_guard lock(watch_mutex);
      watched.erase(rank);
    }
    int rank;
  } published(watch, rank);
  for (int r = 0; r < options.repeat; ++r) {
    Profiler& profiler = r == 0 ? cold : warm;
    watch.pass_to(profiler);
    profiler.begin_run();
    if (sandboxed != nullptr)
      sandboxed->execute();
    else
      loaded.execute(ExecuteOptions{.sequential = options.sequential, .observer = watch_each ? &watch : nullptr});
    profiler.end_run();
    if (r == 0) {
      for (const size_t slot : captured) {
        const Buffer& b = loaded.plan.buffer(slot);
        const auto* p = static_cast<const std::byte*>(b.data());
        snapshots.emplace_back(p, p + b.bytes());
      }
    }
  }
  return snapshots;
}

// After a failed run, a line on the plan's inputs (base buffers with an
// init other than zeros, or --input): those no op writes are intact, the
// others may be half-written.
std::string inputs_after_failure(const PlanFile& file, const ExecutionPlan& plan) {
  const std::set<uint64_t> written = written_storages(plan);
  std::vector<std::string> intact, touched;
  for (const PlanFileBuffer& b : file.buffers) {
    if (b.view_of || b.init.kind == BufferInit::Kind::Zeros) continue;
    const std::optional<size_t> slot = plan.find_buffer(b.name);
    if (slot) (written.contains(plan.buffer(*slot).storage_id()) ? touched : intact).push_back(b.name);
  }
  auto names = [](const std::vector<std::string>& list) {
    constexpr size_t kShown = 8;
    std::string text = fmt::format("{}", fmt::join(list.begin(), list.begin() + std::min(list.size(), kShown), ", "));
    if (list.size() > kShown) text += fmt::format(" and {} more", list.size() - kShown);
    return text;
  };
  std::vector<std::string> parts;
  if (!intact.empty()) parts.push_back(names(intact) + " intact (no op writes them)");
  if (!touched.empty()) parts.push_back(names(touched) + " may be half-written (ops write them)");
  return parts.empty() ? std::string() : fmt::format("\ninputs: {}", fmt::join(parts, "; "));
}

// An output's line: dtype, shape, its first values, their sum and checksum.
void print_values(RankOutput& output, const LoadedOutput& out, DType dtype, const std::vector<std::byte>& data) {
  const size_t size = size_of(dtype);
  // A shape with variable dimensions covers the buffer's first elements.
  size_t elements = 1;
  for (const size_t d : out.shape) elements *= d;
  const size_t count = std::min(data.size() / size, elements);
  std::vector<std::string> shown;
  double sum = 0;
  for (size_t k = 0; k < count; ++k) {
    if (k < kShownValues) shown.push_back(value_text(dtype, data.data() + k * size));
    sum += load_as_double(dtype, data.data() + k * size);
  }
  output.print("{}: {} {} [{}{}]  sum {:.9g}  xxh3 {}\n", out.name, to_string(dtype), shape_text(out.shape),
               fmt::join(shown, ", "), count > kShownValues ? ", …" : "", sum,
               hash_bytes(std::span(data).first(count * size)).to_hex().substr(0, 16));
}

// A buffer's shape at the plan's variable values.
std::vector<size_t> shape_now(const PlanFileBuffer& desc, const ExecutionPlan& plan) {
  std::vector<size_t> shape = desc.shape;
  for (size_t d = 0; d < desc.dim_variables.size(); ++d)
    if (!desc.dim_variables[d].empty()) shape[d] = static_cast<size_t>(*plan.variable(desc.dim_variables[d]));
  return shape;
}

// Where an output's .npy is written: under --out when given (by the file's
// npy name, else the output's), else where the file's npy names it; nullopt
// when neither asks for one.
std::optional<std::filesystem::path> npy_path(const RunOptions& options, const PlanFile& file,
                                              const LoadedOutput& out, const PlanFileOutput& spec) {
  if (options.out_dir.empty()) {
    if (!spec.npy) return std::nullopt;
    return file.folder / *spec.npy;
  }
  return std::filesystem::path(options.out_dir) /
         (spec.npy ? std::filesystem::path(*spec.npy).filename() : std::filesystem::path(out.name + ".npy"));
}

// Prints how an output compares with its expectation, when it has one; false
// when the values do not match.
bool expectation_met(RankOutput& output, const LoadedOutput& out, DType dtype, const std::vector<std::byte>& data) {
  if (!out.expect) return true;
  const OutputCheck check = check_output(out, dtype, data);
  if (check.passed()) {
    output.print("  expect: ok ({} values, max abs error {:.3g})\n", check.compared, check.max_abs_error);
    return true;
  }
  std::vector<std::string> where;
  for (const auto& m : check.first) where.push_back(fmt::format("[{}] got {:.9g} expected {:.9g}", m.index, m.got, m.expected));
  output.print("  expect: FAILED: {} of {} values differ (max abs error {:.3g}); first: {}\n", check.mismatches,
               check.compared, check.max_abs_error, fmt::join(where, ", "));
  return false;
}

// The load time, the first (cold) execution's time and the warm ones'
// median, then the per-op table (and the per-kernel one under SVOD_PROFILE)
// of the warm executions, or of the cold one when there are none, when the
// ops were watched.
void print_times(RankOutput& output, const RunOptions& options, const PlanProfile& cold, const PlanProfile& warm,
                 const ExecutionPlan& plan, double load_ms, bool watched) {
  output.print("\nload: {:.1f} ms (read, compile or find in the cache, load)\n", load_ms);
  const char* mode = options.sequential ? "sequential" : "parallel";
  const double cold_us = run_times(cold).min_us;
  const RunTimes times = run_times(warm);
  if (times.runs == 0) {
    output.print("execute ({}): one run, {:.1f} us, the first: cold (--repeat N adds warm runs and times them)\n",
                 mode, cold_us);
  } else {
    output.print("execute ({}): first run {:.1f} us (cold), then {} warm run{}: median {:.1f} us{}, min {:.1f} us\n",
                 mode, cold_us, times.runs, times.runs == 1 ? "" : "s", times.median_us,
                 warm.earlier_runs > 0 ? fmt::format(" (of the last {})", warm.runs.size()) : std::string(),
                 times.min_us);
  }
  const PlanProfile& profile = times.runs == 0 ? cold : warm;
  if (plan.op_count() > 0 && options.sandbox) {
    output.print("per op: not timed: the sandbox's helper runs the plan as a whole\n");
  } else if (plan.op_count() > 0 && !watched) {
    output.print("per op: not timed: the device ops went to their devices without a wait for each "
                 "(--profile FILE or SVOD_PROFILE=1 times each op)\n");
  } else if (plan.op_count() > 0) {
    output.print("per op {} (each op's own start to end, from the plan's observer hook):\n{}",
                 times.runs == 0 ? "in the cold run" : "over the warm runs", render_table(aggregate_ops(profile), "op"));
    if (profile_requested())
      output.print("per kernel (SVOD_PROFILE), by total time:\n{}", render_table(aggregate(profile)));
  }
}

// One rank's run: `comm` is null for a plain run. A failure while the ranks
// still depend on each other (loading, running) aborts the communicator so
// that the others stop waiting for this one; later ones (writing outputs)
// concern this rank alone.
int run_rank(const RunOptions& options, const std::shared_ptr<Communicator>& comm, RankOutput& output) {
  const bool rank0 = !comm || comm->rank() == 0;
  bool ran = false;
  auto failed = [&](const Error& e) { return rank_failed("run", e, comm, !ran, output); };
  // Before anything runs: a run whose results could not be written is not
  // started (the folder itself is made only once the run succeeded).
  if (rank0 && !options.out_dir.empty()) {
    if (auto problem = out_dir_problem(options.out_dir))
      return failed(make_error(ErrorKind::Io, "--out {}: {}", options.out_dir, *problem));
  }
  std::map<std::string, std::filesystem::path> output_files;
  try {
    if (rank0) {
      check_outputs({{"--profile", options.profile}});
      output_files = named_files(options.outputs, "--output");
      for (const auto& [name, path] : output_files) check_outputs({{"--output", path.string()}});
    }
  } catch (const Error& e) {
    return failed(e);
  }
  std::optional<RankPlan> rank_plan;
  const auto load_start = std::chrono::steady_clock::now();
  try {
    rank_plan.emplace(load_rank_plan(options, comm));
  } catch (const Error& e) {
    return failed(e);
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const PlanFile& file = rank_plan->file;
  LoadedPlan& loaded = rank_plan->loaded;
  if (comm && comm->size() > 1)
    output.print("ranks: {} ({}), this is rank {}\n", comm->size(), comm->transport(), comm->rank());

  // The outputs, then the buffers --output asks for (rank 0 writes them).
  std::vector<size_t> captured;
  for (const auto& out : loaded.outputs) captured.push_back(out.slot);
  std::vector<std::pair<LoadedOutput, std::filesystem::path>> written;
  try {
    if (rank0) {
      for (const auto& [name, path] : output_files) {
        const PlanFileBuffer* desc = file.find_buffer(name);
        const std::optional<size_t> slot = loaded.plan.find_buffer(name);
        if (desc == nullptr || !slot)
          throw make_error(ErrorKind::Validation, "--output {}: the plan has no buffer named \"{}\"", name, name);
        if (!loaded.plan.buffer(*slot).is_host())
          throw make_error(ErrorKind::Validation, "--output {}: the buffer is on {}; only CPU buffers can be written",
                           name, loaded.plan.buffer(*slot).device().name());
        written.push_back({LoadedOutput{.name = name, .slot = *slot, .shape = shape_now(*desc, loaded.plan)}, path});
        captured.push_back(*slot);
      }
    }
  } catch (const Error& e) {
    return failed(e);
  }

  // --sandbox: the plan's buffers move into the helper's shared memory and
  // its kernels run there; nothing runs when the sandbox cannot be had.
  std::optional<SandboxedPlan> sandboxed;
  if (options.sandbox) {
    try {
      SandboxOptions limits;
      if (options.timeout_s > 0)
        limits.wall_limit = std::chrono::duration_cast<std::chrono::milliseconds>(nanoseconds_of(options.timeout_s));
      sandboxed.emplace(loaded.plan, limits);
    } catch (const Error& e) {
      return failed(make_error(e.kind(), "{}: --sandbox: {}", file.source_name, e.what()));
    }
    output.print("sandbox: {}; {} bytes of buffers copied into shared memory\n", sandboxed->layers().describe(),
                 sandboxed->copied_bytes());
  }

  Profiler cold(loaded.plan), warm(loaded.plan);
  const bool watched = watch_ops(options, loaded.plan, comm && comm->size() > 1);
  std::vector<std::vector<std::byte>> snapshots;
  try {
    snapshots = execute_repeatedly(options, loaded, sandboxed ? &*sandboxed : nullptr, captured, cold, warm,
                                   comm ? comm->rank() : 0, watched);
  } catch (const Error& e) {
    return failed(
        make_error(e.kind(), "{}: {}{}", file.source_name, e.what(), inputs_after_failure(file, loaded.plan)));
  }
  ran = true;

  // Outputs: values, checksums, files and expectations.
  size_t mismatched = 0;
  try {
    if (rank0 && !options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);
  } catch (const std::filesystem::filesystem_error& e) {
    return failed(make_error(ErrorKind::Io, "--out {}: {}", options.out_dir, e.what()));
  }
  for (size_t i = 0; i < loaded.outputs.size(); ++i) {
    const LoadedOutput& out = loaded.outputs[i];
    const DType dtype = loaded.plan.buffer(out.slot).dtype();
    const auto& data = snapshots[i];
    print_values(output, out, dtype, data);
    if (const auto path = rank0 ? npy_path(options, file, out, file.outputs[i]) : std::nullopt) {
      try {
        write_output_npy(*path, out, dtype, data);
      } catch (const Error& e) {
        return failed(make_error(e.kind(), "{}: outputs.{}.npy: {}", file.source_name, out.name, e.what()));
      }
      output.print("  wrote {}\n", path->string());
    }
    if (out.expect && !options.inputs.empty() && !options.expect) {
      output.print("  expect: not judged: --input gave other inputs than the expectation's (--expect judges it)\n");
      continue;
    }
    if (!expectation_met(output, out, dtype, data)) ++mismatched;
  }
  for (size_t i = 0; i < written.size(); ++i) {
    const auto& [out, path] = written[i];
    try {
      write_output_npy(path, out, loaded.plan.buffer(out.slot).dtype(), snapshots[loaded.outputs.size() + i]);
    } catch (const Error& e) {
      return failed(make_error(e.kind(), "--output {}: {}", out.name, e.what()));
    }
    output.print("{}: wrote {}\n", out.name, path.string());
  }

  print_times(output, options, cold.profile(), warm.profile(), loaded.plan, load_ms, watched);
  if (rank0 && !options.profile.empty()) {
    // The warm executions when there are any (each clock is its profiler's own).
    const bool warm_runs = warm.profile().run_count() > 0;
    try {
      write_chrome_trace(warm_runs ? warm.profile() : cold.profile(), options.profile);
    } catch (const Error& e) {
      return failed(make_error(e.kind(), "--profile {}: {}", options.profile, e.what()));
    }
    output.print("wrote trace {} ({})\n", options.profile, warm_runs ? "the warm runs" : "the cold run");
  }

  if (mismatched > 0) {
    fmt::format_to(std::back_inserter(output.err), "svod run: {} output{} did not match the expectation\n", mismatched,
                   mismatched == 1 ? "" : "s");
    return kExitMismatch;
  }
  return 0;
}

std::string signal_text(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? fmt::format("SIG{} ({})", name, strsignal(signal)) : fmt::format("signal {}", signal);
}

// --isolate: runs the plan in a child process (forked before anything is
// loaded, as the tuner's workers run candidates) and reports how it ended:
// its own status when it finished, else what ended it and in which op — a
// signal, an exit() or exit_group() from a kernel (never a silent 0), a
// timeout.
int run_plan_isolated(RunOptions options) {
  if (launched_by_mpi())
    return fail("run", make_error(ErrorKind::Validation,
                                  "--isolate: this process was started by an MPI launcher, whose ranks must be the "
                                  "processes it started; drop --isolate under mpirun"));
  options.isolate = false;
  IsolatedEnd end;
  try {
    end = run_isolated([&] { return run(options); });
  } catch (const Error& e) {
    return fail("run", make_error(e.kind(), "--isolate: {}", e.what()));
  }
  const std::string where =
      end.running.empty() ? "outside the plan's ops (loading, compiling or between ops)" : "in " + end.running;
  if (end.exited && end.finished) return end.status;
  if (end.exited) {
    fmt::print(stderr, "svod run: {}: the isolated run ended with status {} before the plan finished, {}{}\n",
               options.plan, end.status, where,
               end.status == 0 ? " (a kernel called exit_group or _exit?); reported as status 70" : "");
    return end.status == 0 ? kExitKernelExit : end.status;
  }
  fmt::print(stderr, "svod run: {}: the isolated run was ended by {} {}\n", options.plan, signal_text(end.signal),
             where);
  return kExitSignalBase + end.signal;
}

}  // namespace

int run(const RunOptions& options) {
  if (options.isolate) return run_plan_isolated(options);
  StopScope scope;  // every rank's kernels run in it, for --timeout
  const EnterStopScope in_scope(scope);
  // --sandbox: --timeout is the sandbox's wall-clock limit, which the
  // helper's own process enforces; the watchdog's deadline is not needed.
  if (options.sandbox && options.ranks > 0)
    return fail("run", make_error(ErrorKind::Validation, "--sandbox runs one plan alone; drop --ranks"));
  // --timeout: past its seconds the run's kernels are asked to stop (the run
  // then fails with kExitTimeout, 124, as under SVOD_OP_TIMEOUT); what
  // is still running a second later cannot be stopped, and the process ends
  // with 124 after naming it.
  const std::string timed_out = fmt::format("the run timed out after {:g} s (--timeout)", options.timeout_s);
  std::optional<Deadline> deadline;
  if (options.timeout_s > 0 && !options.sandbox)
    deadline.emplace(nanoseconds_of(options.timeout_s),
                     DeadlineAction{.stop = &scope,
                                    .kind = ErrorKind::Timeout,
                                    .reason = timed_out,
                                    .report = [&options](std::chrono::nanoseconds) {
                                      std::lock_guard watch(watch_mutex);  // held until the process ends
                                      const std::string ops = running_ops();
                                      return fmt::format(
                                          "svod run: {}: timed out after {:g} s (--timeout) {}\n", options.plan,
                                          options.timeout_s,
                                          ops.empty() ? "while loading, compiling or between ops"
                                                      : "running " + ops + ", which could not be stopped");
                                    },
                                    .grace = std::chrono::seconds(1),
                                    .status = kExitTimeout});
  try {
    if (!options.check.empty()) set_check_mode(parse_check_mode(options.check, "--check"));
  } catch (const Error& e) {
    return fail("run", e);
  }
  // A rank stuck in a kernel after another failed is named with its running ops.
  auto stuck_activity = [] {
    std::lock_guard lock(watch_mutex);
    const std::string ops = running_ops();
    return ops.empty() ? std::string("not in an op: loading, compiling or between ops") : "running " + ops;
  };
  return run_on_ranks(
      "run", options.plan, RanksOptions{options.ranks, options.all_ranks},
      [&](const std::shared_ptr<Communicator>& comm, RankOutput& output) { return run_rank(options, comm, output); },
      stuck_activity);
}

}  // namespace svod::cli
