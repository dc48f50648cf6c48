// The statuses the svod command exits with, in one list. docs/PLAN_FORMAT.md
// ("Exit status") gives the same list to users, and
// tests/planfile/exit_status_docs_test.cpp holds the two together.
#pragma once

#include "svod/guard/running_op.h"

namespace svod::cli {

enum ExitStatus : int {
  kExitOk = 0,
  // svod run: an output did not match its expectation.
  kExitMismatch = 1,
  // The command could not do its work: a bad command line, plan or input, an
  // error while loading or running.
  kExitFailed = 2,
  // A CPU kernel faulted or called exit() and was stopped there (the run
  // failed, svod itself is whole).
  kExitKernelFault = 3,
  // A kernel ended the process where svod could not stop it (a shared
  // library's exit(), or under --isolate an exit svod never saw).
  kExitKernelExit = kKernelExitStatus,
  // A time limit passed (--timeout, SVOD_OP_TIMEOUT, SVOD_COMM_TIMEOUT), as
  // timeout(1) says it.
  kExitTimeout = kOpTimeoutStatus,
};

// Signal N ended the run after svod's report: kExitSignalBase + N, as a
// shell reports it.
inline constexpr int kExitSignalBase = 128;

}  // namespace svod::cli
