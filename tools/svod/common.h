// Pieces the plan-driven subcommands (run, bench, pack, tune) share.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "tools/svod/commands.h"
#include "tools/svod/exit_status.h"

namespace svod::cli {

// The exit status of a command that failed with `e` (exit_status.h):
// kExitKernelFault when a kernel faulted and was stopped, kExitTimeout for a
// time limit that passed, kExitFailed for every other failure.
int failure_status(const Error& e);

// Prints failure_text() on stderr; returns failure_status(e).
int fail(std::string_view command, const Error& e);
// "svod COMMAND: error (KIND): first line", then any further lines of the
// message (compiler diagnostics) indented, each ending in a newline.
std::string failure_text(std::string_view command, const Error& e);

// Refuses, before any work, an output a command would fail to write when its
// work is done: throws Error(Io) "FLAG: cannot write PATH: why" for the first
// (flag, path) of `outputs` that svod::check_writable refuses. Empty paths
// (outputs not asked for) are skipped.
void check_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs);

// --var NAME=VALUE arguments as a map; Error(Validation) for a malformed one.
std::map<std::string, int64_t> parse_vars(const std::vector<std::string>& vars);

// --cpu-compiler (or --backend, its old name): the compiler of a plan's CPU
// devices (LoadOptions::cpu_compiler) in lower case; empty when neither was
// given (the default). Error(Validation) for another name, and for both
// options given with different compilers.
std::string cpu_compiler_option(const CpuCompilerOption& option);

// ---- ranks: svod run, bench and pack on several ranks -----------------------

// What one rank prints, kept until the rank is done so that the caller can
// choose which ranks' lines appear (and prefix them) without interleaving.
struct RankOutput {
  std::string out;
  std::string err;

  template <typename... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
  }
};

// Prints a rank's lines: its output when `shown` (prefixed with "[rank k] "
// when `prefix_out`), its errors always (prefixed when `prefix_err`).
void emit(const RankOutput& output, int rank, bool shown, bool prefix_out, bool prefix_err);

// A rank body's way out on an error (failure_status(e)): aborts `comm` while the
// other ranks still depend on this one (`others_wait`: loading, running
// collectives), so that they stop waiting for it, and keeps the message in
// `output`.
int rank_failed(std::string_view command, const Error& e, const std::shared_ptr<Communicator>& comm, bool others_wait,
                RankOutput& output);

struct RanksOptions {
  // Local ranks to run on as threads of this process (--ranks; 0: one plain
  // run). Under an MPI launcher the process is one rank of the job instead.
  int ranks = 0;
  bool all_ranks = false;  // print every rank's output, prefixed "[rank k] ", not only rank 0's
};

// One rank's work: `comm` is null for a plain run (no launcher, no --ranks).
// Returns the rank's exit status (2: it could not run) and leaves its lines
// in `output`. A rank that fails while the others depend on it (loading,
// running collectives) aborts `comm`, so that they stop waiting for it.
using RankBody = std::function<int(const std::shared_ptr<Communicator>& comm, RankOutput& output)>;

// Runs `body` once per rank of the job `svod COMMAND PLAN` belongs to: under
// an MPI launcher as this process's rank of the world communicator (--ranks
// is refused there: the launcher decides the ranks); with options.ranks > 0
// on that many local ranks, threads of this process; otherwise once, alone.
// Each rank's lines are printed when it is done: rank 0's output (every
// rank's, prefixed, with all_ranks), every rank's errors (prefixed when there
// are several ranks). Returns the worst rank's status.
//
// Local ranks: when a rank failed and others are still running one
// communicator timeout later, they are stuck (a kernel that never returns,
// which nothing can stop from inside the process): the finished ranks' lines
// are printed, the stuck ranks named with what `stuck_activity` says they do
// ("running ops[0] ..."; unset or empty: nothing), and the process exits with 2
// instead of waiting for them for ever.
int run_on_ranks(std::string_view command, const std::string& plan, const RanksOptions& options,
                 const RankBody& body, const std::function<std::string()>& stuck_activity = {});

}  // namespace svod::cli
