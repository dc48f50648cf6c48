// `svod run PLAN.json`: load a plan file, execute it, print and check its
// outputs, time its ops and optionally write a Chrome trace.
//
// Timing: the plan's observer hook stamps each op's start and end (steady
// clock, on the thread that runs it) in every execution, and each execution
// is timed as a whole around execute(). The table reports the median and
// minimum over the executions; in parallel mode ops overlap, so their times
// do not add up to the execution time. Outputs are captured after the first
// execution, so plans that update state in place report what one run does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "svod/device/cpu/cpu_backend.h"
#include "svod/planfile/plan_file.h"
#include "tools/svod/commands.h"

namespace svod::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kShownValues = 8;

// Records, for one execution at a time, when each op started and finished
// and on which thread. Each op runs once per execution, so every slot has one
// writer; execute() returning orders those writes before our reads.
class OpTimer final : public PlanObserver {
 public:
  struct Span {
    Clock::time_point start;
    Clock::time_point end;
    std::thread::id thread;
  };

  explicit OpTimer(size_t ops) : current_(ops) {}
  void op_started(size_t op) noexcept override {
    current_[op].thread = std::this_thread::get_id();
    current_[op].start = Clock::now();
  }
  void op_finished(size_t op) noexcept override { current_[op].end = Clock::now(); }
  const std::vector<Span>& spans() const { return current_; }

 private:
  std::vector<Span> current_;
};

// One line on stderr saying what failed and where; anything after the first
// line of the message (compiler diagnostics) follows, indented.
int fail(const Error& e) {
  const std::string message = e.what();
  const size_t newline = message.find('\n');
  fmt::print(stderr, "svod run: error ({}): {}\n", to_string(e.kind()), message.substr(0, newline));
  if (newline != std::string::npos) {
    std::string rest = message.substr(newline + 1);
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t end = rest.find('\n', pos);
      if (end == std::string::npos) end = rest.size();
      fmt::print(stderr, "  | {}\n", rest.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  return 2;
}

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

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::map<std::string, int64_t> parse_vars(const std::vector<std::string>& vars) {
  std::map<std::string, int64_t> out;
  for (const auto& text : vars) {
    const size_t eq = text.find('=');
    int64_t value = 0;
    const char* begin = eq == std::string::npos ? nullptr : text.data() + eq + 1;
    const char* end = text.data() + text.size();
    if (eq == 0 || begin == nullptr || begin == end || std::from_chars(begin, end, value).ptr != end) {
      throw make_error(ErrorKind::Validation, "--var {}: expected NAME=VALUE with an integer VALUE", text);
    }
    out[text.substr(0, eq)] = value;
  }
  return out;
}

std::string_view op_kind(const PreparedOp& op) {
  if (std::holds_alternative<PreparedKernel>(op)) return "kernel";
  if (std::holds_alternative<PreparedCopy>(op)) return "copy";
  if (std::holds_alternative<PreparedCustomFunction>(op)) return "custom";
  return "view";
}

void write_trace(const std::string& path, const LoadedPlan& loaded, Clock::time_point origin,
                 const std::vector<std::pair<Clock::time_point, Clock::time_point>>& executions,
                 const std::vector<std::vector<OpTimer::Span>>& runs) {
  using Json = nlohmann::json;
  Json events = Json::array();
  std::map<std::thread::id, int> tids;
  auto tid = [&](std::thread::id id) { return tids.emplace(id, static_cast<int>(tids.size()) + 1).first->second; };
  for (size_t r = 0; r < runs.size(); ++r) {
    events.push_back({{"name", fmt::format("execute #{}", r)}, {"cat", "plan"}, {"ph", "X"}, {"pid", 1}, {"tid", 0},
                      {"ts", us(executions[r].first - origin)}, {"dur", us(executions[r].second - executions[r].first)}});
    for (size_t op = 0; op < runs[r].size(); ++op) {
      const auto& span = runs[r][op];
      events.push_back({{"name", loaded.op_labels[op]},
                        {"cat", op_kind(loaded.plan.op(op))},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", tid(span.thread)},
                        {"ts", us(span.start - origin)},
                        {"dur", us(span.end - span.start)},
                        {"args", {{"op", op}, {"execution", r}}}});
    }
  }
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "plan"}}}});
  for (const auto& [id, n] : tids) {
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", n}, {"args", {{"name", fmt::format("thread {}", n)}}}});
  }
  const std::string text = Json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw make_error(ErrorKind::Io, "--profile {}: cannot write the trace: {}", path, std::strerror(errno));
}

}  // namespace

int run(const RunOptions& options) {
  if (!options.backend.empty()) {
    try {
      parse_cpu_backend(options.backend);
    } catch (const Error&) {
      fmt::print(stderr, "svod run: error (validation): --backend {}: expected clang, llvm or dlopen\n",
                 options.backend);
      return 2;
    }
    // The plan opens its CPU device through the registry, which creates the
    // device of the default backend; --backend decides that default here.
    ::setenv("SVOD_CPU_BACKEND", options.backend.c_str(), 1);
  }

  std::optional<LoadedPlan> loaded;
  PlanFile file;
  try {
    file = parse_plan_file(options.plan);
    loaded.emplace(load_plan(file, LoadOptions{parse_vars(options.vars)}));
  } catch (const Error& e) {
    return fail(e);
  }
  ExecutionPlan& plan = loaded->plan;

  OpTimer timer(plan.op_count());
  std::vector<std::vector<OpTimer::Span>> runs;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> executions;
  std::vector<std::vector<std::byte>> snapshots;
  const Clock::time_point origin = Clock::now();
  try {
    for (int r = 0; r < options.repeat; ++r) {
      const auto start = Clock::now();
      loaded->execute(ExecuteOptions{.sequential = options.sequential, .observer = &timer});
      executions.emplace_back(start, Clock::now());
      runs.push_back(timer.spans());
      if (r == 0) {
        for (const auto& out : loaded->outputs) {
          const Buffer& b = plan.buffer(out.slot);
          const auto* p = static_cast<const std::byte*>(b.data());
          snapshots.emplace_back(p, p + b.bytes());
        }
      }
    }
  } catch (const Error& e) {
    return fail(make_error(e.kind(), "{}: {}", file.source_name, e.what()));
  }

  // Outputs: values, checksums, files and expectations.
  size_t failed = 0;
  try {
    if (!options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);
  } catch (const std::filesystem::filesystem_error& e) {
    return fail(make_error(ErrorKind::Io, "--out {}: {}", options.out_dir, e.what()));
  }
  for (size_t i = 0; i < loaded->outputs.size(); ++i) {
    const LoadedOutput& out = loaded->outputs[i];
    const PlanFileOutput& spec = file.outputs[i];
    const DType dtype = plan.buffer(out.slot).dtype();
    const auto& data = snapshots[i];
    const size_t size = size_of(dtype);
    const size_t count = data.size() / size;
    std::vector<std::string> shown;
    double sum = 0;
    for (size_t k = 0; k < count; ++k) {
      if (k < kShownValues) shown.push_back(value_text(dtype, data.data() + k * size));
      sum += load_as_double(dtype, data.data() + k * size);
    }
    fmt::print("{}: {} {} [{}{}]  sum {:.9g}  xxh3 {}\n", out.name, to_string(dtype), shape_text(out.shape),
               fmt::join(shown, ", "), count > kShownValues ? ", …" : "", sum,
               hash_bytes(data).to_hex().substr(0, 16));

    if (!options.out_dir.empty() || spec.npy) {
      std::filesystem::path path;
      if (options.out_dir.empty()) path = file.folder / *spec.npy;
      else path = std::filesystem::path(options.out_dir) / (spec.npy ? std::filesystem::path(*spec.npy).filename()
                                                                         : std::filesystem::path(out.name + ".npy"));
      try {
        write_output_npy(path, out, dtype, data);
      } catch (const Error& e) {
        return fail(make_error(e.kind(), "{}: outputs.{}.npy: {}", file.source_name, out.name, e.what()));
      }
      fmt::print("  wrote {}\n", path.string());
    }
    if (!out.expect) continue;
    const OutputCheck check = check_output(out, dtype, data);
    if (check.passed()) {
      fmt::print("  expect: ok ({} values, max abs error {:.3g})\n", check.compared, check.max_abs_error);
      continue;
    }
    ++failed;
    std::vector<std::string> where;
    for (const auto& m : check.first) where.push_back(fmt::format("[{}] got {:.9g} expected {:.9g}", m.index, m.got, m.expected));
    fmt::print("  expect: FAILED: {} of {} values differ (max abs error {:.3g}); first: {}\n", check.mismatches,
               check.compared, check.max_abs_error, fmt::join(where, ", "));
  }

  // Times.
  std::vector<double> totals;
  for (const auto& [start, end] : executions) totals.push_back(us(end - start));
  fmt::print("\nexecute ({}, {} run{}): median {:.1f} us, min {:.1f} us\n",
             options.sequential ? "sequential" : "parallel", executions.size(), executions.size() == 1 ? "" : "s",
             median(totals), *std::min_element(totals.begin(), totals.end()));
  if (plan.op_count() > 0) {
    fmt::print("per op (each op's own start to end, from the plan's observer hook):\n");
    size_t width = 2;
    for (const auto& label : loaded->op_labels) width = std::max(width, label.size());
    fmt::print("  {:<{}}  {:>7}  {:>11}  {:>11}  {:>9}  {:>9}\n", "op", width, "kind", "median us", "min us",
               "GFLOP/s", "GB/s");
    for (size_t op = 0; op < plan.op_count(); ++op) {
      std::vector<double> times;
      for (const auto& run : runs) times.push_back(us(run[op].end - run[op].start));
      const double med = median(times);
      const OpCost cost = op_cost(*loaded, op);
      auto rate = [&](const std::optional<double>& amount) {
        return amount && med > 0 ? fmt::format("{:.2f}", *amount / (med * 1e3)) : std::string("-");
      };
      fmt::print("  {:<{}}  {:>7}  {:>11.1f}  {:>11.1f}  {:>9}  {:>9}\n", loaded->op_labels[op], width,
                 op_kind(plan.op(op)), med, *std::min_element(times.begin(), times.end()), rate(cost.flops),
                 rate(cost.bytes));
    }
  }

  if (!options.profile.empty()) {
    try {
      write_trace(options.profile, *loaded, origin, executions, runs);
    } catch (const Error& e) {
      return fail(e);
    }
    fmt::print("wrote trace {}\n", options.profile);
  }

  if (failed > 0) {
    fmt::print(stderr, "svod run: {} output{} did not match the expectation\n", failed, failed == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

}  // namespace svod::cli
