#include "tools/svod/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "svod/base/file_write.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/guard/running_op.h"
#include "svod/guard/watchdog.h"

namespace svod::cli {

std::string failure_text(std::string_view command, const Error& e) {
  const std::string message = e.what();
  const size_t newline = message.find('\n');
  std::string text = fmt::format("svod {}: error ({}): {}\n", command, to_string(e.kind()), message.substr(0, newline));
  if (newline != std::string::npos) {
    std::string rest = message.substr(newline + 1);
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t end = rest.find('\n', pos);
      if (end == std::string::npos) end = rest.size();
      text += fmt::format("  | {}\n", rest.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  return text;
}

int failure_status(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::KernelFault: return kExitKernelFault;
    case ErrorKind::Timeout: return kExitTimeout;
    default: return kExitFailed;
  }
}

int fail(std::string_view command, const Error& e) {
  std::fputs(failure_text(command, e).c_str(), stderr);
  return failure_status(e);
}

int rank_failed(std::string_view command, const Error& e, const std::shared_ptr<Communicator>& comm, bool others_wait,
                RankOutput& output) {
  if (comm && others_wait) comm->abort(e.what());
  output.err += failure_text(command, e);
  return failure_status(e);
}

void check_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs) {
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    try {
      check_writable(std::filesystem::path(path));
    } catch (const Error& e) {
      throw make_error(e.kind(), "{}: {}", flag, e.what());
    }
  }
}

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

std::string cpu_compiler_option(const CpuCompilerOption& option) {
  auto parse = [](const std::string& given, std::string_view flag) -> std::string {
    if (given.empty()) return {};
    try {
      return std::string(to_string(parse_cpu_compiler(given)));
    } catch (const Error&) {
      throw make_error(ErrorKind::Validation, "{} {}: expected clang, llvm or dlopen", flag, given);
    }
  };
  const std::string compiler = parse(option.value, "--cpu-compiler");
  const std::string old = parse(option.old_value, "--backend");
  if (!compiler.empty() && !old.empty() && compiler != old)
    throw make_error(ErrorKind::Validation,
                     "--cpu-compiler {} and --backend {} differ (--backend is the old name of --cpu-compiler): "
                     "give one",
                     option.value, option.old_value);
  return compiler.empty() ? old : compiler;
}

void emit(const RankOutput& output, int rank, bool shown, bool prefix_out, bool prefix_err) {
  auto lines = [&](FILE* stream, const std::string& text, bool prefix) {
    if (!prefix) {
      std::fputs(text.c_str(), stream);
      return;
    }
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      end = end == std::string::npos ? text.size() : end + 1;
      fmt::print(stream, "[rank {}] {}", rank, std::string_view(text).substr(pos, end - pos));
      pos = end;
    }
  };
  if (shown) lines(stdout, output.out, prefix_out);
  std::fflush(stdout);
  lines(stderr, output.err, prefix_err);
}

namespace {

// Local ranks: ends the process when a rank failed and others are still
// running `grace` later (see run_on_ranks), through a deadline armed at the
// first failure; `report` says why, with the stuck ranks still running.
class StuckRankWatch {
 public:
  using Report = std::function<std::string(const std::vector<int>& stuck)>;
  StuckRankWatch(int ranks, std::chrono::milliseconds grace, Report report)
      : done_(static_cast<size_t>(ranks)), grace_(grace), report_(std::move(report)) {}
  StuckRankWatch(const StuckRankWatch&) = delete;
  StuckRankWatch& operator=(const StuckRankWatch&) = delete;

  void finished(int rank, bool failed) {
    std::lock_guard lock(mutex_);
    done_[static_cast<size_t>(rank)].store(true);
    if (stuck().empty()) {
      deadline_.reset();
    } else if (failed && !deadline_) {
      deadline_.emplace(grace_, DeadlineAction{.report = [this](std::chrono::nanoseconds) { return report_(stuck()); }, .status = 2});
    }
  }

 private:
  // Without mutex_: the report runs under the watchdog's lock, which
  // finished() takes inside mutex_.
  std::vector<int> stuck() const {
    std::vector<int> ranks;
    for (size_t r = 0; r < done_.size(); ++r)
      if (!done_[r].load()) ranks.push_back(static_cast<int>(r));
    return ranks;
  }

  std::mutex mutex_;  // over deadline_
  std::vector<std::atomic<bool>> done_;
  const std::chrono::milliseconds grace_;
  const Report report_;
  std::optional<Deadline> deadline_;  // armed from the first failure until every rank is done
};

}  // namespace

int run_on_ranks(std::string_view command, const std::string& plan, const RanksOptions& options,
                 const RankBody& body, const std::function<std::string()>& stuck_activity) {
  const bool launched = launched_by_mpi();
  if (options.ranks > 0 && launched)
    return fail(command, make_error(ErrorKind::Validation,
                                    "--ranks {}: this process was started by an MPI launcher, which decides the "
                                    "ranks; drop --ranks (or run without mpirun)",
                                    options.ranks));
  if (launched) {
    std::shared_ptr<Communicator> comm;
    try {
      comm = borrowed(world_communicator("mpi"));
    } catch (const Error& e) {
      return fail(command, e);
    }
    RankOutput output;
    const int status = body(comm, output);
    const bool many = comm->size() > 1;
    emit(output, comm->rank(), options.all_ranks || comm->rank() == 0, options.all_ranks && many, many);
    return status;
  }
  if (options.ranks == 0) {
    RankOutput output;
    const int status = body(nullptr, output);
    emit(output, 0, true, false, false);
    return status;
  }
  // main.cpp keeps --ranks within 1 .. kMaxLocalRanks; run_local_ranks checks it again.
  const size_t ranks = static_cast<size_t>(options.ranks);
  std::vector<RankOutput> outputs(ranks);
  std::vector<int> statuses(ranks, 0);
  auto emit_rank = [&](size_t r) {
    emit(outputs[r], int(r), options.all_ranks || r == 0, options.all_ranks && ranks > 1, ranks > 1);
  };
  std::chrono::milliseconds grace;
  try {
    grace = default_comm_options().timeout;
  } catch (const Error& e) {
    return fail(command, e);
  }
  StuckRankWatch stuck_watch(options.ranks, grace, [&](const std::vector<int>& stuck) {
    // Called with every finished rank's lines complete and the stuck ones still running.
    for (size_t r = 0; r < ranks; ++r)
      if (std::find(stuck.begin(), stuck.end(), static_cast<int>(r)) == stuck.end()) emit_rank(r);
    const std::string activity = stuck_activity ? stuck_activity() : std::string();
    return fmt::format(
        "svod {}: {}: rank(s) {} still running {} ms after another rank failed{}, and could not be stopped "
        "(only a CPU kernel in its own code can be: not one in a system call, a library function or a "
        "device), so the run ends with status 2\n",
        command, plan, detail::rank_list(stuck), grace.count(), activity.empty() ? std::string() : " (" + activity + ")");
  });
  try {
    run_local_ranks(options.ranks, [&](Communicator& comm) {
      const auto r = static_cast<size_t>(comm.rank());
      statuses[r] = body(borrowed(comm), outputs[r]);
      stuck_watch.finished(comm.rank(), statuses[r] >= 2);
    });
  } catch (const Error& e) {
    // A rank that could not start (or threw past `body`): what the others
    // said first, then why.
    for (size_t r = 0; r < ranks; ++r) emit(outputs[r], int(r), false, false, ranks > 1);
    return fail(command, e);
  }
  for (size_t r = 0; r < ranks; ++r) emit_rank(r);
  // The worst status wins: 3 (a kernel faulted) over 2 (a rank could not run) over 1 (an
  // expectation failed).
  return *std::max_element(statuses.begin(), statuses.end());
}

}  // namespace svod::cli
