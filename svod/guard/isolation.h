// Isolation: running a job in a child process, so that whatever its kernels
// do — a fault, exit() or exit_group() from inside one, a hang past its
// timeout — ends only the child, and the process that waits for it can say
// how it ended and in which op (`svod run --isolate`).
//
// The child records its ops' titles and which of them are running in memory
// it shares with the waiting process (mapped before the fork), so the record
// is there however the child ends, kill -9 included.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace svod {

// How an isolated job ended.
struct IsolatedEnd {
  bool finished = false;  // job() returned, `status` being what it returned
  bool exited = false;    // the child exited (finished or not); else a signal ended it
  int status = 0;         // its exit status when it exited
  int signal = 0;         // the signal that ended it, when one did
  std::string running;    // the titles of the ops running as it ended, ", "-joined; empty: none
};

// Runs job() in a forked child that dies with this process and waits for it.
// In the child, job()'s result ends the process as its exit status (stdio
// flushed, as a return from main); what job() throws is printed and ends it
// with status 1. Error(Execution) when the shared record or the child cannot
// be had. Call it before threads start: only the calling thread goes on in
// the child.
IsolatedEnd run_isolated(const std::function<int()>& job);

// In run_isolated's child: whether this is one, the titles of the job's ops
// ("op 2 (layer3) kernel layer3"; the first call's, later ones are ignored,
// as are ops past the record's 16,384 and titles past its 256 KiB, whose ops
// are named by their index), and each op as it starts and finishes.
// Elsewhere they do nothing.
bool isolated() noexcept;
void isolation_title_ops(std::span<const std::string> titles);
void isolation_op_started(size_t op) noexcept;
void isolation_op_finished(size_t op) noexcept;

}  // namespace svod
