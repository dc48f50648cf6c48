#include "svod/comm/communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <memory>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/comm/mpi_plugin.h"
#include "svod/device/device.h"
#include "svod/device/queue.h"

namespace svod {

CommOptions default_comm_options() {
  CommOptions options;
  if (const auto seconds = env_seconds(EnvVar::CommTimeout))  // a millisecond at least
    options.timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(*seconds * 1000)));
  options.part_bytes = static_cast<size_t>(env_int(EnvVar::CommPartBytes, static_cast<int64_t>(options.part_bytes)));
  return options;
}

std::string_view to_string(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::Barrier: return "barrier";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Send: return "send/recv";
  }
  return "?";
}

namespace detail {

namespace {

std::string call_text(CallDesc desc) {
  const std::string_view dtype = to_string(desc.dtype);
  if (desc.whole != 0) desc.count = desc.whole;
  switch (desc.kind) {
    case CollectiveKind::Barrier:
      return "barrier()";
    case CollectiveKind::AllReduce:
      return fmt::format("all_reduce({} x {}, {})", dtype, desc.count, to_string(desc.op));
    case CollectiveKind::AllGather:
      return fmt::format("all_gather({} x {} per rank)", dtype, desc.count);
    case CollectiveKind::ReduceScatter:
      return fmt::format("reduce_scatter({} x {} per rank, {})", dtype, desc.count, to_string(desc.op));
    case CollectiveKind::Broadcast:
      return fmt::format("broadcast({} x {}, root {})", dtype, desc.count, desc.peer);
    case CollectiveKind::Send:
      return fmt::format("send/recv({} x {}, tag {})", dtype, desc.count, desc.peer);
  }
  return "?";
}

}  // namespace

std::string describe(const CallDesc& desc) {
  std::string text = call_text(desc);
  if (desc.whole != 0) text += fmt::format(", the part of elements {} to {}", desc.offset, desc.offset + desc.count - 1);
  return desc.native ? text + " on device memory" : text;
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return fmt::format("{}", fmt::join(ranks, ", "));
}

std::optional<std::string> find_mismatch(std::span<const CallDesc> descs) {
  for (size_t k = 0; k < descs.size(); ++k) {
    if (descs[k].invalid)
      return fmt::format("rank {} rejected its own arguments to call #{} ({})", k, descs[k].seq, describe(descs[k]));
  }
  for (size_t k = 1; k < descs.size(); ++k) {
    if (descs[k] != descs[0])
      return fmt::format("ranks disagree on call #{}: rank 0 called {} but rank {} called {} (call #{})", descs[0].seq,
                         describe(descs[0]), k, describe(descs[k]), descs[k].seq);
  }
  return std::nullopt;
}

}  // namespace detail

using detail::CallDesc;

Communicator::Communicator(int rank, int size, CommOptions options)
    : options_(options), rank_(rank), size_(size) {}

Communicator::~Communicator() = default;

namespace {

// A device operand's host copy: filled from the device and/or written back to
// it by copies on the device's queue, one per part of the call, so that parts
// move while others are copied.
class StagedOperand {
 public:
  StagedOperand() = default;
  StagedOperand(const StagedOperand&) = delete;
  StagedOperand& operator=(const StagedOperand&) = delete;
  // Waits for the copies still in flight: the host memory must outlive them,
  // also when the call failed.
  ~StagedOperand() {
    for (const auto* events : {&in_, &out_}) {
      for (const EventPtr& event : *events) {
        try {
          if (event) event->wait();
        } catch (...) {  // the call has failed already, or fails in finish()
        }
      }
    }
  }

  void* data() const noexcept { return host_.data(); }

  // Takes host memory for `buffer` and, unless the call only writes it,
  // queues its copy from the device, part by part.
  void open(const Buffer& buffer, bool read, const detail::CallParts& parts) {
    buffer_ = buffer;
    host_ = buffer.device().allocate_host_cached(buffer.dtype(), buffer.count());
    if (!read) return;
    Queue& queue = buffer.device().queue();
    for (size_t k = 0; k < parts.size(); ++k) in_.push_back(queue.copy(view(host_, parts[k]), view(buffer_, parts[k])));
    queue.flush();
  }
  // Before the transport of part k reads the host copy.
  void wait_in(size_t k) const {
    if (k < in_.size() && in_[k]) in_[k]->wait();
  }
  // After the transport of `part` wrote the host copy.
  void write_back(const CallDesc& part) {
    Queue& queue = buffer_.device().queue();
    out_.push_back(queue.copy(view(buffer_, part), view(host_, part)));
    queue.flush();
  }
  // Once every part is done: the device buffer holds what was written back.
  void finish() const {
    for (const EventPtr& event : out_)
      if (event) event->wait();
  }

 private:
  // The elements of a part (the whole buffer when the call is not split).
  static Buffer view(const Buffer& buffer, const CallDesc& part) {
    return part.whole == 0 ? buffer : buffer.view(part.offset, part.count);
  }

  Buffer buffer_;
  Buffer host_;
  std::vector<EventPtr> in_, out_;
};

// `base` advanced to a part's first element (null stays null: a rank whose
// arguments were rejected passes no memory).
void* part_address(void* base, const CallDesc& part) {
  return base ? static_cast<char*>(base) + part.offset * size_of(part.dtype) : nullptr;
}

}  // namespace

template <typename Body>
void Communicator::call(CallDesc desc, std::string local_error, std::initializer_list<Operand> operands, Body&& body) {
  std::lock_guard lock(mutex_);
  if (!broken_.empty())
    throw make_error(ErrorKind::Execution, "{} communicator rank {} of {}: unusable after an earlier failure: {}",
                     transport(), rank_, size_, broken_);
  // Point-to-point calls take no number: ranks make different numbers of
  // them, and the numbers must stay in step for the collectives.
  if (desc.kind != CollectiveKind::Send) desc.seq = seq_++;
  desc.invalid = !local_error.empty();
  std::array<void*, 2> data{};  // no call has more operands
  // Made for device operands only, off the stack: a call on host memory
  // then sets up two null pointers, not two staging states.
  std::array<std::unique_ptr<StagedOperand>, 2> staged;
  detail::CallParts parts(desc);
  std::exception_ptr staging_error;
  if (!desc.invalid) {
    try {
      // A transport that takes every operand natively gets its own addresses;
      // otherwise device operands are staged through host memory.
      desc.native = operands.size() > 0 && std::all_of(operands.begin(), operands.end(), [&](const Operand& operand) {
                      return native_address(*operand.buffer) != nullptr;
                    });
      parts = detail::split_call(desc, options_.part_bytes);
      size_t i = 0;
      for (const Operand& operand : operands) {
        const Buffer& buffer = *operand.buffer;
        if (desc.native) {
          data[i] = native_address(buffer);
        } else if (buffer.is_host()) {
          data[i] = buffer.data();
        } else {
          staged[i] = std::make_unique<StagedOperand>();
          staged[i]->open(buffer, operand.staging != Staging::Out, parts);
          data[i] = staged[i]->data();
        }
        ++i;
      }
      // A first part that could not be copied makes this rank one whose
      // arguments were rejected (below), not a broken one.
      for (const auto& operand : staged)
        if (operand) operand->wait_in(0);
    } catch (...) {
      // Still take part, as a rank whose arguments were rejected, so that
      // the others fail now instead of timing out.
      staging_error = std::current_exception();
      desc.invalid = true;
      desc.native = false;
      data = {};
    }
  }
  if (desc.invalid) parts = detail::CallParts(desc);
  try {
    for (size_t k = 0; k < parts.size(); ++k) {
      const CallDesc part = parts[k];
      for (const auto& operand : staged)
        if (operand) operand->wait_in(k);
      body(part, std::array<void*, 2>{part_address(data[0], part), part_address(data[1], part)});
      // Every rank compared its descriptor in the first part: an invalid
      // one stops here, on every rank, before any data moved.
      if (desc.invalid) throw Error(ErrorKind::Validation, local_error);
      size_t i = 0;
      for (const Operand& operand : operands) {
        if (staged[i] && operand.staging != Staging::In) staged[i]->write_back(part);
        ++i;
      }
    }
    for (const auto& operand : staged)
      if (operand) operand->finish();
  } catch (const Error& error) {
    // Transports raise Validation only when every rank saw the same mismatch
    // before any data moved, so the ranks stay in step and the communicator
    // usable. Anything else may have left them out of step.
    if (error.kind() != ErrorKind::Validation) broken_ = error.what();
    if (staging_error) std::rethrow_exception(staging_error);
    if (desc.invalid) throw Error(ErrorKind::Validation, local_error);
    throw;
  } catch (const std::exception& error) {
    broken_ = error.what();
    throw;
  }
}

namespace {

std::string check_buffer(const Buffer& buffer, std::string_view what) {
  if (!buffer.valid()) return fmt::format("{}: the buffer is empty", what);
  return {};
}

}  // namespace

void Communicator::barrier() {
  call({.kind = CollectiveKind::Barrier}, {}, {}, [&](const CallDesc& desc, auto) { run_barrier(desc); });
}

void Communicator::all_reduce(const Buffer& buffer, ReduceOp op) {
  CallDesc desc{.count = buffer.valid() ? buffer.count() : 0, .kind = CollectiveKind::AllReduce,
                .dtype = buffer.dtype(), .op = op};
  call(desc, check_buffer(buffer, "all_reduce"), {{&buffer, Staging::InOut}},
       [&](const CallDesc& d, auto data) { run_all_reduce(d, data[0]); });
}

namespace {

// The checks all_gather and reduce_scatter share: `part` is one rank's share
// of `whole`.
std::string check_parts(std::string_view what, const Buffer& part, const Buffer& whole, int ranks) {
  if (!part.valid() || !whole.valid()) return fmt::format("{}: a buffer is empty", what);
  if (part.dtype() != whole.dtype())
    return fmt::format("{}: the buffers' dtypes differ ({} and {})", what, to_string(part.dtype()),
                       to_string(whole.dtype()));
  const size_t shape[] = {static_cast<size_t>(ranks), part.count()};
  const std::optional<size_t> need = element_count(shape);
  if (!need) return fmt::format("{}: {} ranks x {} elements is more than 64 bits hold", what, ranks, part.count());
  if (whole.count() != *need)
    return fmt::format("{}: the whole buffer must hold {} ranks x {} elements = {}, not {}", what, ranks, part.count(),
                       *need, whole.count());
  if (part.overlaps(whole)) return fmt::format("{}: the source and destination overlap", what);
  return {};
}

}  // namespace

void Communicator::all_gather(const Buffer& src, const Buffer& dst) {
  CallDesc desc{.count = src.valid() ? src.count() : 0, .kind = CollectiveKind::AllGather, .dtype = src.dtype()};
  call(desc, check_parts("all_gather", src, dst, size_), {{&src, Staging::In}, {&dst, Staging::Out}},
       [&](const CallDesc& d, auto data) { run_all_gather(d, data[0], data[1]); });
}

void Communicator::reduce_scatter(const Buffer& src, const Buffer& dst, ReduceOp op) {
  CallDesc desc{.count = dst.valid() ? dst.count() : 0, .kind = CollectiveKind::ReduceScatter, .dtype = dst.dtype(),
                .op = op};
  call(desc, check_parts("reduce_scatter", dst, src, size_), {{&src, Staging::In}, {&dst, Staging::Out}},
       [&](const CallDesc& d, auto data) { run_reduce_scatter(d, data[0], data[1]); });
}

void Communicator::broadcast(const Buffer& buffer, int root) {
  CallDesc desc{.count = buffer.valid() ? buffer.count() : 0, .peer = root, .kind = CollectiveKind::Broadcast,
                .dtype = buffer.dtype()};
  std::string error = check_buffer(buffer, "broadcast");
  if (error.empty() && (root < 0 || root >= size_))
    error = fmt::format("broadcast: root {} is out of range (the job has ranks 0 to {})", root, size_ - 1);
  // The root's buffer is only read; the others' only written.
  call(desc, error, {{&buffer, rank_ == root ? Staging::In : Staging::Out}},
       [&](const CallDesc& d, auto data) { run_broadcast(d, data[0]); });
}

namespace {

// Tags fit every MPI implementation (MPI_TAG_UB is at least 32767).
constexpr int kMaxTag = 32767;

std::string check_point_to_point(std::string_view what, const Buffer& buffer, int peer, int tag, int rank, int size) {
  if (!buffer.valid()) return fmt::format("{}: the buffer is empty", what);
  if (peer < 0 || peer >= size || peer == rank)
    return fmt::format("{}: peer {} is not another rank (this is rank {} of ranks 0 to {})", what, peer, rank, size - 1);
  if (tag < 0 || tag > kMaxTag) return fmt::format("{}: tag {} is outside 0 to {}", what, tag, kMaxTag);
  return {};
}

}  // namespace

void Communicator::send(const Buffer& buffer, int dest, int tag) {
  std::string error = check_point_to_point("send", buffer, dest, tag, rank_, size_);
  // A point-to-point argument error involves one peer, which may not even be
  // a rank: fail here alone.
  if (!error.empty()) throw Error(ErrorKind::Validation, error);
  CallDesc desc{.count = buffer.count(), .peer = tag, .kind = CollectiveKind::Send, .dtype = buffer.dtype()};
  call(desc, {}, {{&buffer, Staging::In}}, [&](const CallDesc& d, auto data) { run_send(d, data[0], dest); });
}

void Communicator::recv(const Buffer& buffer, int source, int tag) {
  std::string error = check_point_to_point("recv", buffer, source, tag, rank_, size_);
  if (!error.empty()) throw Error(ErrorKind::Validation, error);
  CallDesc desc{.count = buffer.count(), .peer = tag, .kind = CollectiveKind::Send, .dtype = buffer.dtype()};
  call(desc, {}, {{&buffer, Staging::Out}}, [&](const CallDesc& d, auto data) { run_recv(d, data[0], source); });
}

void Communicator::abort(std::string_view reason) {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  broken_ = fmt::format("this rank aborted: {}", reason);
  run_abort(std::string(reason));
}

bool launched_by_mpi() {
  return foreign_env("OMPI_COMM_WORLD_SIZE") || foreign_env("PMI_SIZE") || foreign_env("PMIX_RANK");
}

Communicator& world_communicator(std::string_view transport, CommOptions options) {
  if (transport != "auto" && transport != "mpi" && transport != "local")
    throw make_error(ErrorKind::Validation, "unknown communicator transport \"{}\" (expected auto, mpi or local)",
                     transport);
  const bool use_mpi = transport == "mpi" || (transport == "auto" && launched_by_mpi());
  static std::mutex mutex;
  static std::unique_ptr<Communicator> world;
  std::lock_guard lock(mutex);
  if (!world) {
    world = use_mpi ? open_mpi_communicator(options) : std::move(create_local_communicators(1, options).front());
  } else if (transport != "auto" && world->transport() != transport) {
    throw make_error(ErrorKind::Validation, "the world communicator of this process is already \"{}\", not \"{}\"",
                     world->transport(), transport);
  }
  return *world;
}

}  // namespace svod
