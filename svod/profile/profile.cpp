#include "svod/profile/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "svod/base/env.h"
#include "svod/base/file_write.h"
#include "svod/base/error.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace svod {
namespace {

using Json = nlohmann::json;

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The time-stamp counter is used when the kernel trusts it as its clocksource
// (invariant and synchronized across cores); x86-64 only.
bool tsc_trusted() {
#if defined(__x86_64__)
  static const bool trusted = [] {
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    return static_cast<bool>(source >> name) && name == "tsc";
  }();
  return trusted;
#else
  return false;
#endif
}

#if defined(__x86_64__)
// How many steady-clock nanoseconds one tick is, measured from the first
// profiler of the process to now rather than by spinning up front (a spin of
// 2 ms was most of a packaged plan's start). Until a second has passed each
// call measures again over the longer span, waiting until at least 200 us have
// passed (0.02% from two clock reads); after that the rate is fixed.
struct TscOrigin {
  int64_t ns = now_ns();
  uint64_t ticks = __rdtsc();
};

double tsc_ns_per_tick() {
  static const TscOrigin origin;
  static std::atomic<double> settled{0.0};
  if (const double rate = settled.load(std::memory_order_relaxed); rate > 0.0) return rate;
  int64_t ns = now_ns();
  uint64_t ticks = __rdtsc();
  while (ns - origin.ns < 200'000 || ticks <= origin.ticks) {
    ns = now_ns();
    ticks = __rdtsc();
  }
  const double rate = static_cast<double>(ns - origin.ns) / static_cast<double>(ticks - origin.ticks);
  if (ns - origin.ns >= 1'000'000'000) settled.store(rate, std::memory_order_relaxed);
  return rate;
}
#endif

// Numbered on first use so traces get short, stable track ids; a
// thread_local read is all the hot path pays after that.
uint32_t thread_number() noexcept {
  static std::atomic<uint32_t> next{1};
  thread_local const uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

void merge(DurationSummary& into, const DurationSummary& from) {
  if (from.count == 0) return;
  into.min_ns = into.count == 0 ? from.min_ns : std::min(into.min_ns, from.min_ns);
  into.max_ns = into.count == 0 ? from.max_ns : std::max(into.max_ns, from.max_ns);
  into.count += from.count;
  into.total_ns += from.total_ns;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Builds rows from groups of op indices, each group one row.
std::vector<KernelProfile> rows_for(const PlanProfile& profile, const std::vector<std::vector<size_t>>& groups,
                                    bool by_title) {
  std::vector<KernelProfile> rows;
  double grand_total = 0;
  for (const auto& group : groups) {
    const OpDescription& first = profile.ops[group.front()];
    KernelProfile row;
    row.name = by_title ? first.title : first.name;
    row.kind = first.kind;
    row.device = first.device;
    std::vector<double> times;
    double flops = 0, bytes = 0;
    bool have_flops = true, have_bytes = true;
    DurationSummary all;  // the folded runs and the kept ones
    for (size_t op : group) {
      const OpDescription& d = profile.ops[op];
      have_flops = have_flops && d.flops.has_value();
      have_bytes = have_bytes && d.bytes.has_value();
      if (op < profile.earlier_ops.size()) {
        const DurationSummary& earlier = profile.earlier_ops[op];
        merge(all, earlier);
        if (d.flops) flops += *d.flops * static_cast<double>(earlier.count);
        if (d.bytes) bytes += *d.bytes * static_cast<double>(earlier.count);
      }
      for (const auto& run : profile.runs) {
        const OpSpan& span = run.ops[op];
        if (!span.ran()) continue;
        all.add(span.end_ns - span.start_ns);
        times.push_back(static_cast<double>(span.end_ns - span.start_ns) / 1e3);
        if (d.flops) flops += *d.flops;
        if (d.bytes) bytes += *d.bytes;
      }
    }
    row.calls = all.count;
    row.total_us = static_cast<double>(all.total_ns) / 1e3;
    if (all.count > 0) {
      row.min_us = static_cast<double>(all.min_ns) / 1e3;
      row.max_us = static_cast<double>(all.max_ns) / 1e3;
      row.median_us = median_of(times);
    }
    if (row.total_us > 0 && row.calls > 0) {
      if (have_flops) row.gflops = flops / (row.total_us * 1e3);
      if (have_bytes) row.gbps = bytes / (row.total_us * 1e3);
    }
    grand_total += row.total_us;
    rows.push_back(std::move(row));
  }
  for (auto& row : rows) row.share = grand_total > 0 ? row.total_us / grand_total : 0;
  return rows;
}

Json row_json(const KernelProfile& row) {
  Json j = {{"name", row.name},        {"kind", to_string(row.kind)}, {"device", row.device},
            {"calls", row.calls},      {"total_us", row.total_us}, {"min_us", row.min_us},
            {"median_us", row.median_us}, {"max_us", row.max_us}, {"share", row.share}};
  j["gflops"] = row.gflops ? Json(*row.gflops) : Json(nullptr);
  j["gbps"] = row.gbps ? Json(*row.gbps) : Json(nullptr);
  return j;
}

}  // namespace

void DurationSummary::add(int64_t ns) noexcept {
  min_ns = count == 0 ? ns : std::min(min_ns, ns);
  max_ns = count == 0 ? ns : std::max(max_ns, ns);
  ++count;
  total_ns += ns;
}

RunTimes run_times(const PlanProfile& profile) {
  DurationSummary all = profile.earlier_run_times;
  std::vector<double> kept;
  kept.reserve(profile.runs.size());
  for (const auto& run : profile.runs) {
    all.add(run.end_ns - run.start_ns);
    kept.push_back(static_cast<double>(run.end_ns - run.start_ns) / 1e3);
  }
  return RunTimes{all.count, static_cast<double>(all.min_ns) / 1e3, median_of(std::move(kept)),
                  static_cast<double>(all.max_ns) / 1e3};
}

Profiler::Profiler(const ExecutionPlan& plan, size_t keep_runs) : Profiler(describe_ops(plan), keep_runs) {}

Profiler::Profiler(std::vector<OpDescription> ops, size_t keep_runs) : keep_runs_(std::max<size_t>(keep_runs, 1)) {
  use_tsc_ = tsc_trusted();
#if defined(__x86_64__)
  if (use_tsc_) tsc_ns_per_tick();  // starts the measurement of the rate
#endif
  origin_ticks_ = ticks();
  current_.ops.resize(ops.size());
  profile_.ops = std::move(ops);
}

int64_t Profiler::ticks() const noexcept {
#if defined(__x86_64__)
  if (use_tsc_) return static_cast<int64_t>(__rdtsc());
#endif
  return now_ns();
}

void Profiler::begin_run() {
  std::fill(current_.ops.begin(), current_.ops.end(), OpSpan{});
  current_.start_ns = ticks();
}

void Profiler::end_run() {
  current_.end_ns = ticks();
  double ns_per_tick = 1.0;
#if defined(__x86_64__)
  if (use_tsc_) ns_per_tick = tsc_ns_per_tick();
#endif
  auto to_ns = [&](int64_t t) { return std::llround(static_cast<double>(t - origin_ticks_) * ns_per_tick); };
  RunProfile run;
  run.start_ns = to_ns(current_.start_ns);
  run.end_ns = to_ns(current_.end_ns);
  run.ops.reserve(current_.ops.size());
  for (const OpSpan& span : current_.ops) run.ops.push_back(OpSpan{to_ns(span.start_ns), to_ns(span.end_ns), span.thread});
  profile_.runs.push_back(std::move(run));
  if (profile_.runs.size() >= 2 * keep_runs_) fold_oldest_runs();
}

// Folds keep_runs_ runs at a time, so the cost per run stays constant and the
// vector's capacity is reused.
void Profiler::fold_oldest_runs() {
  PlanProfile& p = profile_;
  p.earlier_ops.resize(p.ops.size());
  for (size_t r = 0; r < keep_runs_; ++r) {
    const RunProfile& run = p.runs[r];
    p.earlier_run_times.add(run.end_ns - run.start_ns);
    for (size_t op = 0; op < run.ops.size(); ++op) {
      if (run.ops[op].ran()) p.earlier_ops[op].add(run.ops[op].end_ns - run.ops[op].start_ns);
    }
  }
  p.runs.erase(p.runs.begin(), p.runs.begin() + static_cast<std::ptrdiff_t>(keep_runs_));
  p.earlier_runs += keep_runs_;
}

void Profiler::execute(ExecutionPlan& plan, ExecuteOptions options) {
  options.observer = this;
  begin_run();
  plan.execute(options);
  end_run();
}

void Profiler::execute_with_vars(ExecutionPlan& plan, const std::map<std::string, int64_t>& vars,
                                 ExecuteOptions options) {
  options.observer = this;
  begin_run();
  plan.execute_with_vars(vars, options);
  end_run();
}

void Profiler::op_started(size_t op) noexcept {
  OpSpan& span = current_.ops[op];
  span.thread = thread_number();
  span.start_ns = ticks();
}

void Profiler::op_finished(size_t op) noexcept { current_.ops[op].end_ns = ticks(); }

std::vector<KernelProfile> aggregate(const PlanProfile& profile) {
  std::map<std::tuple<std::string, OpKind, std::string>, size_t> index;
  std::vector<std::vector<size_t>> groups;
  for (size_t op = 0; op < profile.ops.size(); ++op) {
    const OpDescription& d = profile.ops[op];
    auto [it, inserted] = index.try_emplace({d.name, d.kind, d.device}, groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(op);
  }
  auto rows = rows_for(profile, groups, false);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelProfile& a, const KernelProfile& b) { return a.total_us > b.total_us; });
  return rows;
}

std::vector<KernelProfile> aggregate_ops(const PlanProfile& profile) {
  std::vector<std::vector<size_t>> groups;
  for (size_t op = 0; op < profile.ops.size(); ++op) groups.push_back({op});
  return rows_for(profile, groups, true);
}

std::string render_table(const std::vector<KernelProfile>& rows, std::string_view title) {
  size_t width = title.size();
  size_t kind_width = 7;
  for (const auto& row : rows) {
    width = std::max(width, row.name.size());
    kind_width = std::max(kind_width, to_string(row.kind).size());
  }
  auto rate = [](const std::optional<double>& r) { return r ? fmt::format("{:.3g}", *r) : std::string("-"); };
  std::string out = fmt::format("  {:<{}}  {:>{}}  {:>6}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}  {:>9}  {:>9}\n",
                                title, width, "kind", kind_width, "device", "calls", "total ms", "min us", "median us",
                                "max us", "share", "GFLOP/s", "GB/s");
  for (const auto& row : rows) {
    out += fmt::format("  {:<{}}  {:>{}}  {:>6}  {:>6}  {:>10.3f}  {:>10.1f}  {:>10.1f}  {:>10.1f}  {:>5.1f}%  {:>9}  {:>9}\n",
                       row.name, width, to_string(row.kind), kind_width, row.device, row.calls, row.total_us / 1e3,
                       row.min_us, row.median_us, row.max_us, row.share * 100, rate(row.gflops), rate(row.gbps));
  }
  return out;
}

std::string chrome_trace(const PlanProfile& profile) {
  // pid 1 holds the runs; each device is a process of its own (pid 2, 3, ...)
  // and each thread that ran its ops a track in it. Perfetto reads pid 0 as
  // the kernel's idle process, so it is not used.
  std::map<std::string, int> pids;
  for (const auto& d : profile.ops) pids.emplace(d.device, 0);
  int next_pid = 2;
  for (auto& [device, pid] : pids) pid = next_pid++;
  std::set<std::pair<int, uint32_t>> tracks;

  auto us = [](int64_t ns) { return static_cast<double>(ns) / 1e3; };
  Json events = Json::array();
  for (size_t kept = 0; kept < profile.runs.size(); ++kept) {
    const RunProfile& run = profile.runs[kept];
    const uint64_t r = profile.earlier_runs + kept;
    events.push_back({{"name", fmt::format("execute #{}", r)}, {"cat", "plan"}, {"ph", "X"}, {"pid", 1}, {"tid", 0},
                      {"ts", us(run.start_ns)}, {"dur", us(run.end_ns - run.start_ns)}, {"args", {{"run", r}}}});
    for (size_t op = 0; op < run.ops.size(); ++op) {
      const OpSpan& span = run.ops[op];
      if (!span.ran()) continue;
      const OpDescription& d = profile.ops[op];
      const int pid = pids.at(d.device);
      tracks.emplace(pid, span.thread);
      Json args = {{"run", r},          {"op", op},         {"id", d.id},        {"title", d.title},
                   {"kind", to_string(d.kind)}, {"device", d.device}, {"buffers", d.buffers}};
      args["flops"] = d.flops ? Json(*d.flops) : Json(nullptr);
      args["bytes"] = d.bytes ? Json(*d.bytes) : Json(nullptr);
      events.push_back({{"name", d.name},
                        {"cat", to_string(d.kind)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", span.thread},
                        {"ts", us(span.start_ns)},
                        {"dur", us(span.end_ns - span.start_ns)},
                        {"args", std::move(args)}});
    }
  }
  auto metadata = [&](std::string_view what, int pid, uint32_t tid, const std::string& name) {
    events.push_back({{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  };
  metadata("process_name", 1, 0, "plan");
  metadata("thread_name", 1, 0, "runs");
  for (const auto& [device, pid] : pids) metadata("process_name", pid, 0, device);
  for (const auto& [pid, thread] : tracks) metadata("thread_name", pid, thread, fmt::format("thread {}", thread));
  return Json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump(1);
}

void write_chrome_trace(const PlanProfile& profile, const std::filesystem::path& path) {
  write_file_atomically(path, chrome_trace(profile));
}

std::string profile_json(const PlanProfile& profile) {
  const RunTimes times = run_times(profile);
  Json j;
  j["runs"] = times.runs;
  j["run_us"] = {{"min", times.min_us}, {"median", times.median_us}, {"max", times.max_us}};
  Json kernels = Json::array();
  for (const auto& row : aggregate(profile)) kernels.push_back(row_json(row));
  j["kernels"] = std::move(kernels);
  Json ops = Json::array();
  const auto rows = aggregate_ops(profile);
  for (size_t op = 0; op < rows.size(); ++op) {
    Json o = row_json(rows[op]);
    o["op"] = op;
    o["id"] = profile.ops[op].id;
    o["kernel"] = profile.ops[op].name;
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
  return j.dump(1);
}

bool profile_requested() {
  static const bool requested = env_switch(EnvVar::Profile).value_or(false);
  return requested;
}

}  // namespace svod
