// `svod bench PLAN.json`: times every op of a plan on its own and prints a
// table of times, rates and shares.
//
// The plan is executed once first, so that every op sees the inputs a real
// run gives it. Then each op, in dependency order, is timed alone through
// ExecutionPlan::time_op (device events for kernels on devices that have
// them, the host clock otherwise) with the measurement of benchmark_kernel:
// warm-up, run counts, minimum total, optional cache flushes. Views do no
// work and are listed only. Rates use the median: GFLOP/s and GB/s from the
// program's flops and bytes expressions. --profile writes a Chrome trace with
// every call of every op (one "run" per call). --plot draws a roofline of
// this CPU (roofline.h) with every op that has flops and bytes, and lists the
// others with the reason.
//
// --sandbox times the plan's executions in svod's sandbox instead: its helper
// runs the plan in one piece, so the table has one row, the whole plan.
//
// Ranks (run_on_ranks, common.h, as svod run): under an MPI launcher the
// process benchmarks the plan as its rank of the job; with --ranks N, N
// threads each load and time it as one rank of a local group. Every rank
// times every op. Kernels, copies and custom functions are timed by each rank
// on its own, as often as its own measurement asks; a collective needs every
// rank in every call, so the ranks first meet (a barrier, so that no rank's
// samples include the others' earlier work) and then make exactly --warmup
// plus --runs calls each, with no time budget (the communicator's timeout
// ends a call that never completes). Once every rank is done, rank 0 prints
// its table (--all-ranks: every rank's) and writes --json, --profile and
// --plot.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "svod/base/file_write.h"
#include "svod/comm/communicator.h"
#include "svod/planfile/plan_file.h"
#include "svod/profile/profile.h"
#include "svod/registry/registry.h"
#include "svod/sandbox/sandbox.h"
#include "svod/tune/benchmark.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"
#include "tools/svod/roofline.h"
#include "tools/svod/svg.h"

namespace svod::cli {
namespace {

struct OpTiming {
  const OpDescription* op = nullptr;
  std::optional<BenchmarkResult> result;
  std::string note;  // why the op was not timed
};

// The device whose memory a cache flush for op `index` should write: the
// device that runs it, else that of its first buffer in device memory (one
// it writes first), else that of its first buffer; null for an op without
// buffers.
Device* flush_device(const ExecutionPlan& plan, size_t index) {
  if (Device* device = plan.op_device(index)) return device;
  const auto accesses = plan.op_accesses(index);
  for (const bool writes : {true, false})
    for (const auto& [slot, access] : accesses)
      if ((access != Access::Read) == writes && !plan.buffer(slot).is_host()) return &plan.buffer(slot).device();
  return accesses.empty() ? nullptr : &plan.buffer(accesses.front().first).device();
}

// A collective's measurement: the same number of calls on every rank, so
// nothing depends on how fast a rank is (a time budget or target would stop
// ranks after different counts, and the ranks' calls would no longer match).
BenchmarkConfig collective_config(BenchmarkConfig config) {
  config.max_runs = config.min_runs;
  config.min_total = std::chrono::nanoseconds::zero();
  config.timeout = std::chrono::hours(24 * 365);  // the communicator's timeout applies instead
  return config;
}

// `profiler`, when given, records every call (warm-up included) as a run of
// the plan in which only this op ran. `comm` is the plan's communicator (null:
// one rank), which collectives meet on first.
OpTiming time_op(ExecutionPlan& plan, size_t index, const OpDescription& description, const BenchmarkConfig& config,
                 Profiler* profiler, Communicator* comm) {
  OpTiming t{&description, std::nullopt, {}};
  if (description.kind == OpKind::View) {
    t.note = "view, no work";
    return t;
  }
  Device* device = flush_device(plan, index);
  if (!device) {
    t.note = "no buffers, not timed";
    return t;
  }
  const bool collective = description.kind == OpKind::Collective;
  if (collective && comm) comm->barrier();
  t.result = benchmark_operation(
      [&] {
        if (!profiler) return plan.time_op(index);
        profiler->begin_run();
        profiler->op_started(index);
        const auto took = plan.time_op(index);
        profiler->op_finished(index);
        profiler->end_run();
        return took;
      },
      *device, collective ? collective_config(config) : config);
  return t;
}

std::string rate_text(std::optional<double> amount, double ns) {
  if (!amount || ns <= 0) return "-";
  return fmt::format("{:.2f}", *amount / ns);  // per ns = giga per second
}

void print_table(RankOutput& output, const std::vector<OpTiming>& rows) {
  double total = 0;
  for (const auto& r : rows)
    if (r.result) total += r.result->stats.median;
  size_t width = 2;
  for (const auto& r : rows) width = std::max(width, r.op->title.size());
  output.print("{:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>9}  {:>8}  {:>6}\n", "op", width, "runs", "median us",
               "min us", "max us", "GFLOP/s", "GB/s", "share");
  for (const auto& r : rows) {
    if (!r.result) {
      output.print("{:<{}}  {}\n", r.op->title, width, r.note);
      continue;
    }
    const BenchmarkStats& s = r.result->stats;
    const double max = *std::max_element(r.result->samples.begin(), r.result->samples.end());
    output.print("{:<{}}  {:>5}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>9}  {:>8}  {:>5.1f}%{}\n", r.op->title, width,
                 r.result->runs, s.median / 1e3, s.min / 1e3, max / 1e3, rate_text(r.op->flops, s.median),
                 rate_text(r.op->bytes, s.median), total > 0 ? 100 * s.median / total : 0.0,
                 r.result->timed_out ? "  (time budget reached)" : "");
  }
  output.print("{:<{}}  {:>5}  {:>12.3f}\n", "total (sum of medians)", width, "", total / 1e3);
}

// A measurement's samples and statistics, as --json writes them.
void add_result_json(nlohmann::json& o, const BenchmarkResult& result) {
  const BenchmarkStats& s = result.stats;
  o["runs"] = result.runs;
  o["samples_ns"] = result.samples;
  o["median_ns"] = s.median;
  o["min_ns"] = s.min;
  o["mean_ns"] = s.mean;
  o["stddev_ns"] = s.stddev;
  o["timed_out"] = result.timed_out;
}

// `ranks`: how many ranks the plan ran on (these are rank 0's samples).
void write_json(const std::string& path, const std::vector<OpTiming>& rows, int ranks) {
  nlohmann::json ops = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpTiming& r = rows[i];
    nlohmann::json o = {{"title", r.op->title}, {"kind", to_string(r.op->kind)}, {"device", r.op->device}, {"name", r.op->name}};
    if (r.result) {
      const BenchmarkStats& s = r.result->stats;
      add_result_json(o, *r.result);
      if (r.op->flops && s.median > 0) o["gflops"] = *r.op->flops / s.median;
      if (r.op->bytes && s.median > 0) o["gbps"] = *r.op->bytes / s.median;
    } else {
      o["note"] = r.note;
    }
    ops.push_back(std::move(o));
  }
  write_file_atomically(path, nlohmann::json{{"ranks", ranks}, {"ops", ops}}.dump(2) + '\n');
}

// --plot: every timed op with flops and bytes on this machine's roofline,
// the others listed in the picture. An op above a roof is not hidden: the
// picture marks it and stderr says so.
void write_roofline(RankOutput& output, const std::string& path, const std::vector<OpTiming>& rows,
                    const std::string& source_name) {
  std::vector<RooflinePoint> points;
  std::vector<UnplottedOp> unplotted;
  for (const OpTiming& r : rows) {
    if (!r.result) unplotted.push_back({r.op->title, r.note});
    else if (!r.op->flops || !r.op->bytes || *r.op->flops <= 0 || *r.op->bytes <= 0)
      unplotted.push_back({r.op->title, "no flop/byte counts"});
    else if (r.result->stats.median <= 0) unplotted.push_back({r.op->title, "no measurable time"});
    else points.push_back({r.op->title, *r.op->flops / *r.op->bytes, *r.op->flops / r.result->stats.median});
  }
  MachinePeaks peaks = machine_peaks();
  // Cached peaks measured while the machine was busy read low, and an op
  // above them shows it: measure once more, keeping the better figures.
  const bool beaten = std::any_of(points.begin(), points.end(),
                                  [&](const RooflinePoint& p) { return roof_excess(peaks, p).fraction > 0; });
  if (beaten) peaks = machine_peaks(/*measure_again=*/true);
  write_svg(roofline_svg(peaks, points, unplotted, fmt::format("svod bench {}: roofline of this CPU", source_name)),
            path);
  for (const RooflinePoint& p : points) {
    const RoofExcess excess = roof_excess(peaks, p);
    if (excess.fraction > 0)
      fmt::format_to(std::back_inserter(output.err),
                     "svod bench: note: {} reaches {:.2f} GFLOP/s at {:.3g} flop/byte, {} (timing noise, peaks "
                     "measured while the machine was busy, or flop/byte counts higher than what the op does)\n",
                     p.title, p.gflops, p.intensity, roof_excess_text(excess));
  }
  output.print("wrote {} (peak {:.1f} GFLOP/s, L1 cache {:.1f} GB/s, {} {:.1f} GB/s; {} op{} plotted, {} listed as "
               "not plotted)\n",
               path, peaks.gflops, peaks.cache_gbps, peaks.memory_roof, peaks.dram_gbps, points.size(),
               points.size() == 1 ? "" : "s",
               unplotted.size());
}

// --sandbox: the plan's kernels run in the sandbox's helper, which runs the
// plan as a whole (svod/sandbox/sandbox.h), so the whole plan is timed, one
// round trip to the helper per run, as `svod run --sandbox` runs it. Its
// buffers move into the memory shared with the helper once, before the runs.
int bench_sandboxed(const BenchOptions& options, const BenchmarkConfig& config, const PlanFile& file,
                    LoadedPlan& loaded, RankOutput& output) {
  std::optional<SandboxedPlan> sandboxed;
  std::optional<BenchmarkResult> result;
  try {
    sandboxed.emplace(loaded.plan);
  } catch (const Error& e) {
    return rank_failed("bench", make_error(e.kind(), "{}: --sandbox: {}", file.source_name, e.what()), nullptr, false,
                       output);
  }
  output.print("sandbox: {}; {} bytes of buffers copied into shared memory\n", sandboxed->layers().describe(),
               sandboxed->copied_bytes());
  try {
    const std::shared_ptr<Device> cpu = open_device("CPU");  // whose memory --flush writes
    sandboxed->execute();  // as the plain bench runs the plan once before timing
    result = benchmark_operation(
        [&] {
          const auto start = std::chrono::steady_clock::now();
          sandboxed->execute();
          return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
        },
        *cpu, config);
  } catch (const Error& e) {
    return rank_failed("bench", make_error(e.kind(), "{}: {}", file.source_name, e.what()), nullptr, false, output);
  }
  output.print("per op: not timed: the sandbox's helper runs the plan as a whole\n");
  const OpDescription whole{.name = "plan", .title = "the plan, in the sandbox", .kind = OpKind::Kernel,
                            .device = "CPU", .buffers = {}, .flops = std::nullopt, .bytes = std::nullopt};
  std::vector<OpTiming> rows{{&whole, std::move(result), {}}};
  print_table(output, rows);
  if (options.json.empty()) return 0;
  try {
    nlohmann::json plan = nlohmann::json::object();
    add_result_json(plan, *rows.front().result);
    write_file_atomically(options.json,
                          nlohmann::json{{"ranks", 1},
                                         {"sandbox", {{"layers", sandboxed->layers().describe()},
                                                      {"copied_bytes", sandboxed->copied_bytes()}}},
                                         {"plan", plan}}
                                  .dump(2) +
                              '\n');
  } catch (const Error& e) {
    return rank_failed("bench", e, nullptr, false, output);
  }
  return 0;
}

// One rank's benchmark: `comm` is null for a plain run. A failure while the
// ranks still depend on each other (loading, running, timing) aborts the
// communicator so that the others stop waiting for this one; writing rank
// 0's files concerns rank 0 alone.
int bench_rank(const BenchOptions& options, const BenchmarkConfig& config, const std::string& cpu_compiler,
               const std::shared_ptr<Communicator>& comm, RankOutput& output) {
  const bool rank0 = !comm || comm->rank() == 0;
  bool timed = false;
  auto failed = [&](const Error& e) { return rank_failed("bench", e, comm, !timed, output); };
  PlanFile file;
  std::optional<LoadedPlan> loaded;
  try {
    // Before the work: rank 0's outputs can be written when it is done.
    if (rank0) check_outputs({{"--json", options.json}, {"--plot", options.plot}, {"--profile", options.profile}});
    file = parse_plan_file(options.plan);
    loaded.emplace(load_plan(
        file, LoadOptions{.vars = parse_vars(options.vars), .communicator = comm, .cpu_compiler = cpu_compiler}));
  } catch (const Error& e) {
    return failed(e);
  }
  if (comm && comm->size() > 1)
    output.print("ranks: {} ({}), this is rank {}\n", comm->size(), comm->transport(), comm->rank());
  if (options.sandbox) return bench_sandboxed(options, config, file, *loaded, output);
  ExecutionPlan& plan = loaded->plan;
  const std::vector<OpDescription> ops = describe_ops(plan);

  std::optional<Profiler> profiler;
  // The trace shows every call: the runs are bounded by --max-runs per op.
  if (rank0 && !options.profile.empty()) profiler.emplace(ops, std::numeric_limits<size_t>::max() / 2);
  std::vector<OpTiming> rows;
  try {
    loaded->execute();
    for (size_t i : plan.topological_order()) {
      try {
        rows.push_back(time_op(plan, i, ops[i], config, profiler ? &*profiler : nullptr, comm.get()));
      } catch (const Error& e) {
        throw make_error(e.kind(), "{}: {}", ops[i].title, e.what());
      }
    }
    // Every rank is done before rank 0 measures the machine's peaks for --plot
    // (ranks still timing would make them read low).
    if (comm) comm->barrier();
  } catch (const Error& e) {
    return failed(make_error(e.kind(), "{}: {}", file.source_name, e.what()));
  }
  timed = true;
  print_table(output, rows);
  if (!rank0) return 0;
  try {
    if (!options.json.empty()) write_json(options.json, rows, comm ? comm->size() : 1);
    if (!options.plot.empty()) write_roofline(output, options.plot, rows, file.source_name);
    if (profiler) write_chrome_trace(profiler->profile(), options.profile);
  } catch (const Error& e) {
    return failed(e);
  }
  return 0;
}

}  // namespace

int bench(const BenchOptions& options) {
  BenchmarkConfig config;
  config.warmup_runs = options.warmup;
  config.min_runs = options.runs;
  config.max_runs = std::max(options.runs, options.max_runs);
  config.min_total = std::chrono::milliseconds(options.min_time_ms);
  config.cache_flush_bytes = options.flush ? size_t{16} << 20 : 0;
  std::string cpu_compiler;
  try {
    cpu_compiler = cpu_compiler_option(options.cpu_compiler);
    if (options.sandbox && options.ranks > 0)
      throw make_error(ErrorKind::Validation, "--sandbox times one plan alone; drop --ranks");
    if (options.sandbox && (!options.plot.empty() || !options.profile.empty()))
      throw make_error(ErrorKind::Validation, "--{} shows each op's time, and --sandbox times the plan as a whole "
                       "(the sandbox's helper runs it in one piece)",
                       options.plot.empty() ? "profile" : "plot");
  } catch (const Error& e) {
    return fail("bench", e);
  }
  // Once for the process, before any rank starts: local ranks share the pool,
  // and warm-ups running at once would each wait for threads the others hold.
  warmup_thread_pool();
  return run_on_ranks(
      "bench", options.plan, RanksOptions{options.ranks, options.all_ranks},
      [&](const std::shared_ptr<Communicator>& comm, RankOutput& output) {
        return bench_rank(options, config, cpu_compiler, comm, output);
      });
}

}  // namespace svod::cli
