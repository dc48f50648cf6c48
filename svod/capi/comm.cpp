// The C API's communicators (svod.h, "Communicators"): handles over
// svod::Communicator, each collective made by every rank even when this
// rank's own arguments are wrong, and plans loaded on a rank.
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "svod/capi/capi_internal.h"

namespace svod::capi {
namespace {

// Loads a plan as `comm`'s rank: load(communicator) makes it. A load that
// fails on one rank of several aborts the communicator, so that the other
// ranks, waiting for this one to compare plans, fail at once naming it.
template <typename Load>
void load_on_rank(svod_comm* comm, svod_plan** out, Load&& load) {
  require(comm, "comm");
  try {
    require(out, "out");
    hand_out(load(comm->comm), out);
  } catch (const std::exception& e) {
    if (comm->comm->size() > 1) comm->comm->abort(e.what());
    throw;
  }
}

std::unique_ptr<svod_comm> comm_handle(std::shared_ptr<Communicator> comm) {
  auto handle = std::make_unique<svod_comm>();
  handle->transport = comm->transport();
  handle->comm = std::move(comm);
  return handle;
}

// The number a caller passed as an svod_reduce_op, read as bytes: C code may
// pass any int there, which C++ must not load as the enum.
int op_number(const svod_reduce_op& op) {
  int number;
  static_assert(sizeof number == sizeof op);
  std::memcpy(&number, &op, sizeof number);
  return number;
}

std::optional<ReduceOp> reduce_op(int op) {
  switch (op) {
    case SVOD_REDUCE_SUM: return ReduceOp::Sum;
    case SVOD_REDUCE_PROD: return ReduceOp::Prod;
    case SVOD_REDUCE_MIN: return ReduceOp::Min;
    case SVOD_REDUCE_MAX: return ReduceOp::Max;
  }
  return std::nullopt;
}

// What a rank whose own arguments are wrong takes part in a collective with.
const svod_buffer rejected_buffer{};

// Makes one collective call: call(buffers, op) with this rank's buffer
// handles (named `names` in messages) and its op, when the call has one.
// Arguments only the C API can get wrong (a NULL buffer handle, an op that
// is no svod_reduce_op) do not keep this rank away: it takes part with empty
// buffers, which the communicator rejects on every rank, so that the other
// ranks fail at once naming this one instead of waiting for it until they
// time out. This rank then reports what was wrong.
template <size_t N, typename Call>
void collective(std::array<const svod_buffer*, N> buffers, const std::array<const char*, N>& names,
                std::optional<int> op, Call&& call) {
  std::string problem;
  for (size_t i = 0; i < N && problem.empty(); ++i)
    if (buffers[i] == nullptr) problem = fmt::format("{} is NULL", names[i]);
  const std::optional<ReduceOp> reduce = op ? reduce_op(*op) : ReduceOp::Sum;
  if (problem.empty() && !reduce)
    problem = fmt::format("op {} is not an svod_reduce_op (SVOD_REDUCE_SUM to SVOD_REDUCE_MAX)", *op);
  if (problem.empty()) {
    call(buffers, *reduce);
    return;
  }
  buffers.fill(&rejected_buffer);
  try {
    call(buffers, ReduceOp::Sum);
  } catch (const Error&) {
    // The communicator's rejection of the empty buffers: `problem` says why.
  }
  throw Error(ErrorKind::Validation, problem);
}

}  // namespace
}  // namespace svod::capi

using svod::capi::guarded;
using svod::capi::require;

extern "C" {

svod_status* svod_comm_world(const char* transport, svod_comm** out) {
  return guarded(__func__, [&] {
    require(transport, "transport");
    require(out, "out");
    svod::capi::hand_out(svod::capi::comm_handle(svod::borrowed(svod::world_communicator(transport))), out);
  });
}

svod_status* svod_comm_create_local(int ranks, svod_comm** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    std::vector<std::unique_ptr<svod_comm>> handles;
    for (auto& comm : svod::create_local_communicators(ranks)) handles.push_back(svod::capi::comm_handle(std::move(comm)));
    svod::capi::hand_out(std::move(handles), out);
  });
}

int svod_comm_rank(const svod_comm* comm) { return comm ? comm->comm->rank() : -1; }

int svod_comm_size(const svod_comm* comm) { return comm ? comm->comm->size() : 0; }

const char* svod_comm_transport(const svod_comm* comm) { return comm ? comm->transport.c_str() : nullptr; }
const char* svod_comm_backend(const svod_comm* comm) { return svod_comm_transport(comm); }

int svod_comm_local_rank(const svod_comm* comm) { return comm ? comm->comm->local_rank() : -1; }

int svod_comm_local_size(const svod_comm* comm) { return comm ? comm->comm->local_size() : 0; }

svod_status* svod_comm_barrier(svod_comm* comm) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    comm->comm->barrier();
  });
}

svod_status* svod_comm_all_reduce(svod_comm* comm, svod_buffer* buffer, svod_reduce_op op) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    svod::capi::collective<1>({buffer}, {"buffer"}, svod::capi::op_number(op),
                        [&](const auto& b, svod::ReduceOp reduce) { comm->comm->all_reduce(b[0]->buffer, reduce); });
  });
}

svod_status* svod_comm_all_gather(svod_comm* comm, const svod_buffer* src, svod_buffer* dst) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    svod::capi::collective<2>({src, dst}, {"src", "dst"}, std::nullopt,
                        [&](const auto& b, svod::ReduceOp) { comm->comm->all_gather(b[0]->buffer, b[1]->buffer); });
  });
}

svod_status* svod_comm_reduce_scatter(svod_comm* comm, const svod_buffer* src, svod_buffer* dst, svod_reduce_op op) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    svod::capi::collective<2>({src, dst}, {"src", "dst"}, svod::capi::op_number(op), [&](const auto& b, svod::ReduceOp reduce) {
      comm->comm->reduce_scatter(b[0]->buffer, b[1]->buffer, reduce);
    });
  });
}

svod_status* svod_comm_broadcast(svod_comm* comm, svod_buffer* buffer, int root) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    svod::capi::collective<1>({buffer}, {"buffer"}, std::nullopt,
                        [&](const auto& b, svod::ReduceOp) { comm->comm->broadcast(b[0]->buffer, root); });
  });
}

svod_status* svod_comm_send(svod_comm* comm, const svod_buffer* buffer, int dest, int tag) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    require(buffer, "buffer");
    comm->comm->send(buffer->buffer, dest, tag);
  });
}

svod_status* svod_comm_recv(svod_comm* comm, svod_buffer* buffer, int source, int tag) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    require(buffer, "buffer");
    comm->comm->recv(buffer->buffer, source, tag);
  });
}

svod_status* svod_comm_abort(svod_comm* comm, const char* reason) {
  return guarded(__func__, [&] {
    require(comm, "comm");
    require(reason, "reason");
    comm->comm->abort(reason);
  });
}

svod_status* svod_comm_release(svod_comm* comm) { return svod::capi::release(__func__, comm, "comm"); }

svod_status* svod_plan_load_with_comm(const char* path, const char* vars_json, svod_comm* comm, svod_plan** out) {
  return guarded(__func__, [&] {
    svod::capi::load_on_rank(comm, out, [&](const auto& communicator) {
      require(path, "path");
      return svod::capi::plan_from_file(path, vars_json, communicator);
    });
  });
}

svod_status* svod_plan_load_package_with_comm(const void* data, size_t size, const char* vars_json, svod_comm* comm,
                                              svod_plan** out) {
  return guarded(__func__, [&] {
    svod::capi::load_on_rank(comm, out, [&](const auto& communicator) {
      require(data, "data");
      return svod::capi::plan_from_package(std::span(static_cast<const std::byte*>(data), size), vars_json, communicator);
    });
  });
}

svod_status* svod_plan_load_package_file_with_comm(const char* path, const char* vars_json, svod_comm* comm,
                                                   svod_plan** out) {
  return guarded(__func__, [&] {
    svod::capi::load_on_rank(comm, out, [&](const auto& communicator) {
      require(path, "path");
      return svod::capi::plan_from_package(std::filesystem::path(path), vars_json, communicator);
    });
  });
}

}  // extern "C"
