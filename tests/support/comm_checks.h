// Collective checks run both by svod_test_comm (local ranks, threads) and by
// svod_comm_check under mpirun (mpi ranks, processes): every rank calls the
// same function with its communicator. They throw std::runtime_error saying
// what differed, so they need no test framework.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"

namespace svod::test {

// all_reduce over every dtype and op, small and large buffers, against
// results computed here in double (the inputs are small integers, exact in
// every type); returns the number of buffers checked.
int check_all_reduce_exact(Communicator& comm);

// all_reduce of pseudo-random f32, f16 and bf16 data: every rank's result is
// bitwise the same (compared through all_gather) and equals a sequential
// rank-order sum computed here from every rank's inputs.
void check_all_reduce_bitwise(Communicator& comm, size_t count);

// all_gather, reduce_scatter, broadcast from every root, send/recv around a
// ring, and barrier.
void check_movement(Communicator& comm);

// Calls large enough to go to the transport in parts (detail::split_call,
// comm.options().part_bytes: a small size makes the check quick):
// all_reduce, broadcast from the last rank and send/recv between neighbours,
// plus an all_gather (never split), on buffers of `device` (host memory when
// null; ranks may pass different devices: a call is split the same way
// whatever memory each rank gives), checked element by element through host
// copies; then a count mismatch between split calls fails every rank before
// any data moved. Needs at least 2 ranks.
void check_split_calls(Communicator& comm, Device* device);

// Calls with arguments that differ across ranks (counts, dtypes, large
// payloads) or are bad on some ranks (root out of range, wrong destination
// size): each must fail with Error(Validation) on every rank, and the
// communicator must stay usable. Needs at least 2 ranks.
void check_mismatches(Communicator& comm);

// Options for tests whose ranks must fail each other well before the default
// timeout.
inline CommOptions quick_comm_options() { return CommOptions{.timeout = std::chrono::seconds(30)}; }

// Runs body on `ranks` local ranks (run_local_ranks) and returns the Error
// each rank threw, nullopt for a rank that returned.
std::vector<std::optional<Error>> local_rank_errors(int ranks, const std::function<void(Communicator&)>& body,
                                                   CommOptions options = quick_comm_options());

// Calls fn, which must throw svod::Error of `kind` whose message contains
// `text`; throws std::runtime_error otherwise.
template <typename Fn>
void expect_comm_error(Fn&& fn, ErrorKind kind, std::string_view text);

}  // namespace svod::test

template <typename Fn>
void svod::test::expect_comm_error(Fn&& fn, ErrorKind kind, std::string_view text) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.kind() != kind || message.find(text) == std::string::npos)
      throw std::runtime_error("expected a " + std::string(to_string(kind)) + " error mentioning \"" +
                               std::string(text) + "\", got " + std::string(to_string(e.kind())) + ": " + message);
    return;
  }
  throw std::runtime_error("expected a " + std::string(to_string(kind)) + " error mentioning \"" + std::string(text) +
                           "\", got none");
}
