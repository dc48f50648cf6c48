// svod::Communicator — collective operations among the ranks of a job.
//
// A job is N ranks, numbered 0..N-1, each holding its own svod buffers. The
// Communicator moves and combines those buffers: barrier, all_reduce,
// all_gather, reduce_scatter, broadcast, and point-to-point send/recv. Two
// transports carry the data:
//   - "mpi": one rank per process, started by a launcher (mpirun, srun);
//     OpenMPI is loaded on demand from the libsvod_comm_mpi plugin, so
//     processes that never communicate do not load it.
//   - "local": N ranks as threads of one process, sharing memory.
//
// Reductions are deterministic: the element at index i is combined in rank
// order, x0 op x1 op ... op x(N-1), by one rank and copied to the others, so
// every rank ends with the same bits and every run gives the same bits,
// whatever the transport. f16 and bf16 are combined in f32 and rounded once;
// integers wrap on overflow; bool sum/max is "or" and prod/min is "and"; a
// NaN in a float min or max wins.
//
// Every call but send/recv is collective: all ranks make the same calls in
// the same order, with the same dtype, element count, op and root. The ranks compare these as
// part of the call, so a mismatch (or a bad argument on one rank) is an
// Error(Validation) on every rank instead of a hang. A rank that fails
// (abort(), or a local rank's thread throwing) makes the others fail with an
// Error naming it; a rank that never arrives makes the others fail with
// Error(Timeout) naming it after `timeout`. After such an error the
// communicator is broken: every later call throws.
//
// Buffers on a device (OpenCL, CUDA) are staged through host memory (from
// the device's block cache of host memory, pinned on CUDA) by copies on the
// device's queue, unless the transport moves that device's memory itself (nccl,
// svod/comm/nccl_communicator.h, for the CUDA device it was opened on). So
// that those copies overlap the transport, every rank splits an all_reduce,
// broadcast or send/recv of 32 MiB or more into parts of 16 MiB
// (CommOptions::part_bytes), whatever its memory, and passes them to the
// transport one by one: a part's copy to the device follows its transport while
// the next parts move; the copies from the device are all queued at once.
// The results are the same bits as one call's. After a failed call, the
// buffers it writes hold unspecified data.
// With mpi, what one rank sends one peer in one call of the other kinds is at
// most 2 GiB (MPI's int counts); more is Error(Unsupported). A communicator is
// used by one thread at a time; calls from several threads are serialised,
// but their order must still match across ranks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/device/buffer.h"

namespace svod {

enum class ReduceOp { Sum, Prod, Min, Max };

// What a collective call does. A plan's collective ops (CollectiveOp,
// svod/plan/execution_plan.h) are all_reduce, all_gather, reduce_scatter and
// broadcast; Send stands for both sides of a send/recv. The ranks compare
// the kinds of their calls (detail::CallDesc), so the values stay as they
// are.
enum class CollectiveKind : uint8_t { Barrier, AllReduce, AllGather, ReduceScatter, Broadcast, Send };

// "barrier", "all_reduce", "all_gather", "reduce_scatter", "broadcast",
// "send/recv".
std::string_view to_string(CollectiveKind kind) noexcept;

std::string_view to_string(ReduceOp op) noexcept;
// "sum", "prod", "min", "max"; anything else throws Error(Validation).
ReduceOp parse_reduce_op(std::string_view text);

struct CommOptions {
  // How long a rank waits for the others in one call before it fails.
  // SVOD_COMM_TIMEOUT (seconds) overrides the default.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // The size of the parts an all_reduce, broadcast or send/recv of at least
  // twice this many bytes is passed to the transport in (detail::split_call),
  // so that staging copies overlap the transport. Every rank must use the
  // same: a difference fails calls as a mismatch. SVOD_COMM_PART_BYTES
  // overrides the default.
  size_t part_bytes = size_t{16} << 20;
};

// The options with SVOD_COMM_TIMEOUT and SVOD_COMM_PART_BYTES applied;
// Error(Validation) when one is not a positive integer.
CommOptions default_comm_options();

namespace detail {

// What one rank asked for in one call; the ranks compare these. `count` is the
// element count of the buffer the kinds share across ranks: the all_reduce
// and broadcast buffer, the all_gather source, the reduce_scatter destination,
// the message of send/recv. `peer` is the root of a broadcast and the tag of a
// send. `invalid` marks a rank whose own arguments were rejected: it still
// takes part so that the others fail at once rather than time out. A call
// split into parts (Communicator::call) passes each part as a call of its
// own: `count` elements from element `offset` of a call of `whole` elements.
struct CallDesc {
  uint64_t seq = 0;  // the communicator's call number
  uint64_t count = 0;
  uint64_t whole = 0;  // 0 when the call is not split
  uint64_t offset = 0;
  int32_t peer = 0;
  CollectiveKind kind = CollectiveKind::Barrier;
  DType dtype = DType::U8;
  ReduceOp op = ReduceOp::Sum;
  bool invalid = false;
  // The operands are the transport's own device addresses, not host memory
  // (Communicator::native_address).
  bool native = false;

  bool operator==(const CallDesc&) const = default;
};

// "all_reduce(f32 x 16, sum)", for messages.
std::string describe(const CallDesc& desc);

// The parts a call is passed to the transport in: a call of one operand
// (all_reduce, broadcast, send/recv) of at least 2 x part_bytes on host
// memory or staged is split into parts of part_bytes (rounded down to whole
// elements; the last part longer); any other call is one part, the call
// itself. Depends on the descriptor and the options alone, so every rank
// splits a call the same way. Each part's descriptor has `whole` and
// `offset` set when there are several. Made per part on demand: a call of
// one part costs no allocation.
// (Inline: every collective call makes one.)
class CallParts {
 public:
  explicit CallParts(const CallDesc& desc) : desc_(desc) {}  // one part
  CallParts(const CallDesc& desc, size_t part_bytes) : desc_(desc) {
    const bool one_operand =
        desc.kind == CollectiveKind::AllReduce || desc.kind == CollectiveKind::Broadcast || desc.kind == CollectiveKind::Send;
    if (desc.invalid || desc.native || !one_operand || desc.count < 2) return;
    const size_t per_part = std::max<size_t>(part_bytes / size_of(desc.dtype), 1);
    if (desc.count / per_part < 2) return;
    per_part_ = per_part;
    parts_ = desc.count / per_part;
  }
  size_t size() const noexcept { return parts_; }
  CallDesc operator[](size_t k) const noexcept {
    if (parts_ == 1) return desc_;
    CallDesc part = desc_;
    part.whole = desc_.count;
    part.offset = k * per_part_;
    part.count = k + 1 < parts_ ? per_part_ : desc_.count - k * per_part_;
    return part;
  }

 private:
  CallDesc desc_;
  size_t per_part_ = 0;
  size_t parts_ = 1;
};
inline CallParts split_call(const CallDesc& desc, size_t part_bytes) { return CallParts(desc, part_bytes); }

// Given every rank's descriptor of one call (index = rank), the message that
// every rank raises, or nullopt when they agree. The same on every rank.
std::optional<std::string> find_mismatch(std::span<const CallDesc> descs);

// "1, 3": the ranks in increasing order, each once (a timeout lists the ranks
// it waited for; one peer may own several unfinished requests).
std::string rank_list(std::vector<int> ranks);

}  // namespace detail

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const CommOptions& options() const noexcept { return options_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  virtual std::string_view transport() const noexcept = 0;  // "mpi", "local", "nccl"
  // This rank's index among the ranks on its own machine, 0 ..
  // local_size()-1, and how many ranks that machine has. mpi: the ranks
  // that share memory with this one (MPI_Comm_split_type with
  // MPI_COMM_TYPE_SHARED when the communicator is made, whatever the
  // launcher), numbered in rank order; local: rank() and size() (every rank
  // is a thread of this process); nccl: those of the communicator it wraps.
  // A plan's "CUDA:local" or "CL:local" device is device local_rank() % count
  // (resolve_device_name, svod/registry/registry.h).
  virtual int local_rank() const noexcept { return rank_; }
  virtual int local_size() const noexcept { return size_; }

  // Returns when every rank has called it.
  void barrier();
  // In place: every rank's `buffer` becomes the elementwise combination of
  // all ranks' buffers.
  void all_reduce(const Buffer& buffer, ReduceOp op);
  // dst (size() × src elements, same dtype) holds rank k's src at element k × src.count().
  void all_gather(const Buffer& src, const Buffer& dst);
  // src holds size() × dst elements; rank k's dst becomes the combination of
  // every rank's k-th part of src.
  void reduce_scatter(const Buffer& src, const Buffer& dst, ReduceOp op);
  // Every rank's buffer becomes rank `root`'s.
  void broadcast(const Buffer& buffer, int root);
  // Point to point: `send` completes once the message is handed over, `recv`
  // once it has arrived; dtype, count and tag must match. With mpi a
  // mismatch fails the receiver only (the sender does not wait for a reply).
  void send(const Buffer& buffer, int dest, int tag = 0);
  void recv(const Buffer& buffer, int source, int tag = 0);

  // Declares this rank failed: the other ranks' current and next collective
  // calls throw an Error naming this rank and `reason` (with mpi, a recv
  // waiting for this rank times out instead). This communicator is broken
  // after.
  void abort(std::string_view reason);

  // Says whether this rank's work is done (run_local_ranks sets it when a
  // rank's body returns, and clears it for every rank before a run): a local
  // group's calls that wait for a finished rank fail at once instead of at
  // the timeout. A no-op for mpi, whose ranks are processes.
  void set_finished(bool finished) noexcept { run_set_finished(finished); }

 protected:
  Communicator(int rank, int size, CommOptions options);

  // The address at which this transport moves `buffer` itself, without
  // staging it through host memory, or null (the default: every transport
  // but nccl) to have a device buffer staged. A call whose operands all have one passes
  // these addresses to run_* with desc.native set; otherwise its device
  // operands are staged and run_* get host memory.
  virtual void* native_address(const Buffer& /*buffer*/) const noexcept { return nullptr; }

  // The transport, on host memory (on the transport's own device addresses
  // when desc.native). The descriptor tells what every rank should have
  // asked for; a transport compares it across ranks and throws
  // Error(Validation) on every rank when they differ, before touching data.
  // With desc.invalid the pointers are null: take part in the comparison
  // only. Counts are in elements of desc.dtype.
  virtual void run_barrier(const detail::CallDesc& desc) = 0;
  virtual void run_all_reduce(const detail::CallDesc& desc, void* data) = 0;
  virtual void run_all_gather(const detail::CallDesc& desc, const void* src, void* dst) = 0;
  virtual void run_reduce_scatter(const detail::CallDesc& desc, const void* src, void* dst) = 0;
  virtual void run_broadcast(const detail::CallDesc& desc, void* data) = 0;
  virtual void run_send(const detail::CallDesc& desc, const void* data, int dest) = 0;
  virtual void run_recv(const detail::CallDesc& desc, void* data, int source) = 0;
  virtual void run_abort(const std::string& reason) = 0;
  virtual void run_set_finished(bool /*finished*/) noexcept {}

 private:
  enum class Staging { In, Out, InOut };
  struct Operand {
    const Buffer* buffer;
    Staging staging;
  };
  // Checks, stages device buffers through the host (unless the transport takes
  // every operand natively), runs `body(desc, pointers)` on each part of the
  // call (detail::split_call) and marks the communicator broken when anything
  // throws. `local_error` (when not empty) is this rank's own argument error.
  template <typename Body>
  void call(detail::CallDesc desc, std::string local_error, std::initializer_list<Operand> operands, Body&& body);

  std::mutex mutex_;
  CommOptions options_;
  int rank_;
  int size_;
  uint64_t seq_ = 0;
  std::string broken_;  // why the communicator is broken; empty while usable
  bool aborted_ = false;
};

// True when this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK in the environment).
bool launched_by_mpi();

// The world communicator of this process: "mpi" when `transport` is "mpi", or
// "auto" and launched_by_mpi(); otherwise a one-rank "local" communicator.
// MPI is initialised on first use, once per process, and finalised at exit.
// Error(DeviceUnavailable) when the mpi plugin is missing or MPI fails to start;
// Error(Validation) for an unknown transport name.
Communicator& world_communicator(std::string_view transport = "auto", CommOptions options = default_comm_options());

// A shared_ptr that does not own `comm`, for handing a communicator owned
// elsewhere (world_communicator(), run_local_ranks) to what keeps one
// (ExecutionPlanBuilder::set_communicator, LoadOptions): `comm` must outlive
// what it is handed to.
inline std::shared_ptr<Communicator> borrowed(Communicator& comm) { return {std::shared_ptr<Communicator>{}, &comm}; }

// The most ranks a local group has: each is a thread of this process.
inline constexpr int kMaxLocalRanks = 1024;

// `ranks` communicators of one local group, rank i at index i, each to be
// used from its own thread. Error(Validation) unless 1 <= ranks <=
// kMaxLocalRanks.
std::vector<std::unique_ptr<Communicator>> create_local_communicators(int ranks,
                                                                      CommOptions options = default_comm_options());

// Runs body(comm) on `ranks` threads of one local group and waits for all. A
// rank whose body throws is aborted (the others' calls fail naming it); the
// first rank to fail has its exception rethrown here. When the system
// refuses a thread, the ranks not started are aborted, those started are
// joined and Error(Execution) says so.
void run_local_ranks(int ranks, const std::function<void(Communicator&)>& body,
                     CommOptions options = default_comm_options());
// The same on the communicators of a local group the caller made with
// create_local_communicators (rank i at index i) and keeps, so that what
// holds one (a plan) may outlive the call.
void run_local_ranks(std::span<Communicator* const> group, const std::function<void(Communicator&)>& body);

}  // namespace svod
