#include "svod/tune/tuner.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>

#include "svod/base/file_write.h"
#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/base/subprocess.h"
#include "svod/tune/time_scale.h"

namespace svod {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A private folder for the reference outputs, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "svod-tune-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw make_error(ErrorKind::Io, "cannot create a temporary folder {}: {}", pattern, std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::optional<ErrorKind> parse_error_kind(std::string_view text) {
  for (int k = 0; k <= static_cast<int>(kLastErrorKind); ++k) {
    if (to_string(static_cast<ErrorKind>(k)) == text) return static_cast<ErrorKind>(k);
  }
  return std::nullopt;
}

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

// Sends each round's candidates to worker processes, restarting a worker
// after a candidate kills one, and records every candidate in the report.
class WorkerEvaluator final : public TuneEvaluator {
 public:
  WorkerEvaluator(const TuneFile& file, const TuneOptions& options, const fs::path& reference_dir, TuneReport& report)
      : file_(file), options_(options), reference_dir_(reference_dir), report_(report) {}

  std::vector<std::optional<double>> evaluate(std::span<const TunePoint> points) override {
    const size_t round = rounds_++;
    std::vector<std::optional<TuneCandidate>> results(points.size());
    std::vector<bool> started(points.size(), false);  // the worker began to run it: it compiled
    std::vector<size_t> pending(points.size());
    for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
    TuneProgress progress;
    progress.round = round;
    progress.total = points.size();

    // Records point i's result, keeps the best by the pick rule and tells
    // the progress callback.
    auto record = [&](size_t i, TuneCandidate c) {
      c.point = points[i];
      c.round = round;
      ++progress.done;
      if (started[i]) ++progress.compiled;
      ++(c.status == TuneStatus::Ok ? progress.timed : progress.failed);
      if (beats(c, best_ ? &*best_ : nullptr)) best_ = c;
      results[i] = std::move(c);
      if (!options_.on_progress) return;
      progress.evaluated = report_.candidates.size() + progress.done;
      if (best_) {
        progress.best_median_ns = best_->median_ns;
        progress.best_point = best_->point;
      }
      options_.on_progress(progress);
    };

    while (!pending.empty()) {
      Json job;
      job["tune_file"] = file_.path.string();
      job["reference_dir"] = reference_dir_.string();
      job["cpu_compiler"] = options_.cpu_compiler;
      job["sandbox"] = options_.sandbox;
      job["write_reference"] = round == 0;  // the start candidate, alone in round 0
      // The worker stops timing a candidate only once it lost to this.
      job["best_known_ns"] = best_ ? Json(best_->median_ns) : Json(nullptr);
      job["candidates"] = Json::array();
      for (size_t i : pending) job["candidates"].push_back(points[i]);

      std::optional<size_t> in_flight;  // index into pending
      std::optional<Error> setup_error;
      std::string partial;
      auto on_line = [&](std::string_view line) {
        // Deeper nesting than any event has would overflow the stack: not ours either.
        if (json_too_deep_at(line)) return;
        const Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!event.is_object() || !event.contains("event")) return;  // not ours (a kernel printing?)
        const std::string kind = event.value("event", "");
        if (kind == "error") {
          const auto k = parse_error_kind(event.value("kind", ""));
          setup_error = Error(k.value_or(ErrorKind::Internal), event.value("message", ""));
          return;
        }
        if (kind != "start" && kind != "result") return;
        const size_t k = event.value("candidate", pending.size());
        if (k >= pending.size() || results[pending[k]]) return;
        if (kind == "start") {
          in_flight = k;
          started[pending[k]] = true;
          return;
        }
        in_flight.reset();
        record(pending[k], from_event(event));
      };
      // Called while the worker runs; must not throw (see run_process).
      auto on_stdout = [&](std::string_view chunk) noexcept {
        try {
          partial.append(chunk);
          size_t start = 0;
          for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
            on_line(std::string_view(partial).substr(start, nl - start));
          }
          partial.erase(0, start);
        } catch (const std::exception&) {
          // Out of memory while reading events: the candidates without a
          // result are then treated like a dying worker's below.
        }
      };

      const auto limit = std::chrono::milliseconds(std::chrono::seconds(120)) +
                         static_cast<int64_t>(pending.size()) * (2 * file_.timeout + std::chrono::seconds(5));
      const ProcessResult process = run_process(options_.worker_command, job.dump(), limit, on_stdout);
      if (setup_error) throw *setup_error;

      std::vector<size_t> left;
      std::optional<size_t> culprit;
      for (size_t k = 0; k < pending.size(); ++k) {
        if (results[pending[k]]) continue;
        if (in_flight == k) culprit = pending[k];
        else left.push_back(pending[k]);
      }
      if (left.empty() && !culprit) break;
      auto [status, why] = death(process);
      if (culprit) {
        record(*culprit, failed(status, why));
      } else {
        // Nothing was in flight (the worker died compiling or loading), so
        // another worker would fail alike: give up on the rest of the round.
        for (size_t i : left) record(i, failed(TuneStatus::Error, "worker " + why));
        left.clear();
      }
      pending = std::move(left);
    }

    // The search ranks by the pick rule's own numbers: the median of an ok
    // candidate, none for a failed one.
    std::vector<std::optional<double>> costs;
    for (size_t i = 0; i < points.size(); ++i) {
      TuneCandidate& c = *results[i];
      costs.push_back(c.status == TuneStatus::Ok ? std::optional(c.median_ns) : std::nullopt);
      report_.candidates.push_back(std::move(c));
    }
    return costs;
  }

 private:
  static TuneCandidate failed(TuneStatus status, std::string message) {
    TuneCandidate c;
    c.status = status;
    c.message = std::move(message);
    return c;
  }

  static TuneCandidate from_event(const Json& event) {
    TuneCandidate c;
    const std::string status = event.value("status", "");
    c.message = event.value("message", "");
    if (status == "ok") {
      c.status = TuneStatus::Ok;
      c.median_ns = event.value("median_ns", 0.0);
      c.min_ns = event.value("min_ns", 0.0);
      c.runs = event.value("runs", 0);
      c.stopped_early = event.value("stopped_early", false);
    } else if (status == "wrong") {
      c.status = TuneStatus::Wrong;
    } else if (status == "compile_error") {
      c.status = TuneStatus::CompileError;
    } else if (status == "crashed") {
      c.status = TuneStatus::Crashed;
    } else if (status == "timeout") {
      c.status = TuneStatus::Timeout;
    } else {
      c.status = TuneStatus::Error;
    }
    return c;
  }

  // Why a worker ended before reporting every candidate.
  std::pair<TuneStatus, std::string> death(const ProcessResult& p) const {
    if (p.timed_out) {
      return {TuneStatus::Timeout, "passed the tuner's safety limit and was killed"};
    }
    if (p.term_signal == SIGALRM) {
      return {TuneStatus::Timeout, fmt::format("ran past the timeout of {} ms", file_.timeout.count())};
    }
    std::string how = p.term_signal != 0
                          ? fmt::format("killed by signal {} ({})", p.term_signal, ::strsignal(p.term_signal))
                          : fmt::format("exited with status {}", p.exit_code);
    if (const std::string last = last_line(p.err); !last.empty()) how += ": " + last.substr(0, 300);
    return {TuneStatus::Crashed, how};
  }

  const TuneFile& file_;
  const TuneOptions& options_;
  fs::path reference_dir_;
  TuneReport& report_;
  size_t rounds_ = 0;
  std::optional<TuneCandidate> best_;  // the best so far by beats()
};

}  // namespace

std::string_view to_string(TuneStatus status) noexcept {
  switch (status) {
    case TuneStatus::Ok: return "ok";
    case TuneStatus::Wrong: return "wrong";
    case TuneStatus::CompileError: return "compile_error";
    case TuneStatus::Crashed: return "crashed";
    case TuneStatus::Timeout: return "timeout";
    case TuneStatus::Error: return "error";
  }
  return "error";
}

bool beats(const TuneCandidate& candidate, const TuneCandidate* best) noexcept {
  return candidate.status == TuneStatus::Ok && (best == nullptr || candidate.median_ns < best->median_ns);
}

double TuneReport::speedup(size_t index) const {
  const TuneCandidate& c = candidates.at(index);
  if (c.status != TuneStatus::Ok || candidates.front().status != TuneStatus::Ok || c.median_ns <= 0) return 0;
  return candidates.front().median_ns / c.median_ns;
}

TuneReport tune(const TuneFile& file, const TuneOptions& options) {
  if (options.worker_command.empty()) throw make_error(ErrorKind::Validation, "tune: no worker command given");
  const auto started = std::chrono::steady_clock::now();
  TempDir reference_dir;
  TuneReport report;
  WorkerEvaluator evaluator(file, options, reference_dir.path(), report);
  std::vector<size_t> counts;
  for (const auto& p : file.parameters) counts.push_back(p.values.size());
  const BeamSearchResult search = beam_search(counts, evaluator, file.search);
  if (!search.found) {
    const TuneCandidate& start = report.candidates.front();
    const ErrorKind kind = start.status == TuneStatus::CompileError ? ErrorKind::Compile
                           : start.status == TuneStatus::Timeout    ? ErrorKind::Timeout
                                                                    : ErrorKind::Execution;
    throw make_error(kind, "{}: the start candidate ({}) failed ({}), so there is no reference to check others against: {}",
                     file.source_name, file.describe(start.point), to_string(start.status), start.message);
  }
  // The pick rule over every candidate in evaluation order: what the search
  // found too, as it ranks by the same medians with the same tie-break.
  for (size_t i = 0; i < report.candidates.size(); ++i) {
    if (beats(report.candidates[i], &report.candidates[report.best])) report.best = i;
  }
  report.rounds = search.rounds;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

std::string render_tune_table(const TuneFile& file, const TuneReport& report) {
  std::vector<size_t> order(report.candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Working candidates fastest first, then the failed ones in evaluation order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& ca = report.candidates[a];
    const auto& cb = report.candidates[b];
    const bool oa = ca.status == TuneStatus::Ok;
    const bool ob = cb.status == TuneStatus::Ok;
    if (oa != ob) return oa;
    return oa && ca.median_ns < cb.median_ns;
  });

  std::vector<std::string> header = {"", "round"};
  for (const auto& p : file.parameters) header.push_back(p.name);
  for (const char* h : {"median", "min", "speed-up", "status"}) header.push_back(h);
  std::vector<std::vector<std::string>> rows;
  for (size_t i : order) {
    const TuneCandidate& c = report.candidates[i];
    std::vector<std::string> row = {i == report.best ? "*" : "", std::to_string(c.round)};
    for (size_t p = 0; p < file.parameters.size(); ++p) row.push_back(file.parameters[p].values[c.point[p]].text);
    const bool ok = c.status == TuneStatus::Ok;
    row.push_back(ok ? format_time(c.median_ns) : "-");
    row.push_back(ok ? format_time(c.min_ns) : "-");
    row.push_back(ok ? fmt::format("{:.2f}x", report.speedup(i)) : "-");
    std::string status(to_string(c.status));
    if (c.stopped_early) status += " (stopped early: slower than the best)";
    if (!c.message.empty()) {
      std::string first = c.message.substr(0, c.message.find('\n'));
      if (first.size() > 100) first = first.substr(0, 97) + "...";
      status += ": " + first;
    }
    row.push_back(std::move(status));
    rows.push_back(std::move(row));
  }

  std::vector<size_t> width(header.size());
  for (size_t k = 0; k < header.size(); ++k) width[k] = header[k].size();
  for (const auto& row : rows) {
    for (size_t k = 0; k + 1 < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t k = 0; k < cells.size(); ++k) {
      out += k + 1 < cells.size() ? fmt::format("{:<{}}  ", cells[k], width[k]) : cells[k];
    }
    out += '\n';
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

void write_tune_json(const TuneFile& file, const TuneReport& report, const fs::path& path) {
  Json root;
  root["tune_file"] = file.source_name;
  root["plan"] = file.plan.source_name;
  root["op"] = file.op;
  root["program"] = file.program().name;
  root["parameters"] = Json::array();
  for (const auto& p : file.parameters) root["parameters"].push_back(p.name);
  root["beam"] = file.search.beam_width;
  root["rounds"] = report.rounds;
  root["seconds"] = report.seconds;
  root["best"] = report.best;
  root["candidates"] = Json::array();
  for (size_t i = 0; i < report.candidates.size(); ++i) {
    const TuneCandidate& c = report.candidates[i];
    Json params = Json::object();
    for (size_t p = 0; p < file.parameters.size(); ++p) {
      const TuneValue& v = file.parameters[p].values[c.point[p]];
      params[file.parameters[p].name] = v.integer ? Json(*v.integer) : Json(v.text);
    }
    Json entry = {{"index", i}, {"round", c.round}, {"params", std::move(params)}, {"status", to_string(c.status)}};
    if (c.status == TuneStatus::Ok) {
      entry["median_ns"] = c.median_ns;
      entry["min_ns"] = c.min_ns;
      entry["runs"] = c.runs;
      entry["stopped_early"] = c.stopped_early;
      entry["speedup"] = report.speedup(i);
    } else {
      entry["message"] = c.message;
    }
    root["candidates"].push_back(std::move(entry));
  }
  write_file_atomically(path, root.dump(2) + '\n');
}

}  // namespace svod
