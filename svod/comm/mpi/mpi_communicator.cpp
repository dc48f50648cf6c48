// The "mpi" transport (libsvod_comm_mpi.so, the only file that includes mpi.h).
//
// Every call is an exchange among the ranks over MPI point-to-point messages:
// each rank sends every other a header (its call descriptor, and small
// payloads inline), then, once all headers are in and agree, the larger
// payloads. A mismatch or a failed rank is thus found on every rank before
// any data lands in a user buffer, and no payload is left in flight. Requests are polled with MPI_Testsome against a deadline,
// so a missing rank becomes Error(Timeout) naming it instead of a hang.
// svod combines the data itself, in rank order: MPI only moves bytes.
#include <mpi.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/comm/mpi_plugin.h"
#include "svod/comm/reduce.h"

namespace svod {
namespace {

using detail::CallDesc;
using Clock = std::chrono::steady_clock;

// Payloads up to this size travel inside the header message.
constexpr size_t kInlineBytes = 256;

struct Header {
  CallDesc desc;
  uint64_t payload_bytes = 0;  // inline when <= kInlineBytes, else a second message
  int32_t failed = 0;          // 1: the sender aborted; the inline bytes say why
  uint32_t reason_bytes = 0;
};

struct Wire {
  Header header;
  unsigned char inline_data[kInlineBytes];
};

// Up to this many bytes an all_reduce sends every rank the whole buffer and
// each rank combines all of it (one exchange); above it each rank combines
// only its own chunk and the chunks are then gathered (two exchanges, but
// 2(N-1)/N of the buffer moved per rank instead of N-1 buffers).
constexpr size_t kWholeReduceBytes = 4096;

constexpr int kHeaderTag = 1;
constexpr int kPayloadTag = 2;

// Set when a rank gave up on requests that MPI may still complete (into
// memory the caller owns again), or on a peer that never came (stuck, say,
// in a kernel that never returns, which MPI_Finalize would wait for): MPI
// cannot be finalised cleanly then, so the process aborts the job at exit
// instead, which ends the stuck ranks too.
bool abandoned_requests = false;
bool initialised_here = false;
// OpenMPI's launcher says whether it placed more ranks than cores.
bool oversubscribed = false;

void finalise_at_exit() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  if (abandoned_requests) MPI_Abort(MPI_COMM_WORLD, 2);
  if (initialised_here) MPI_Finalize();
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw make_error(ErrorKind::Execution, "mpi: {} failed: {}", what, std::string_view(text, length));
}

// What this rank sends to and receives from one peer in one exchange.
struct PeerIo {
  int peer = 0;
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm world, int rank, int size, CommOptions options)
      : Communicator(rank, size, options) {
    // The ranks of this machine (those that can share memory with this
    // one), numbered in rank order: found by MPI itself, so under any
    // launcher, without reading its environment variables.
    MPI_Comm machine = MPI_COMM_NULL;
    check(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &machine), "MPI_Comm_split_type");
    MPI_Comm_rank(machine, &local_rank_);
    MPI_Comm_size(machine, &local_size_);
    MPI_Comm_free(&machine);
    check(MPI_Comm_dup(world, &collectives_), "MPI_Comm_dup");
    check(MPI_Comm_dup(world, &messages_), "MPI_Comm_dup");
    check(MPI_Comm_dup(world, &message_data_), "MPI_Comm_dup");
    for (MPI_Comm comm : {collectives_, messages_, message_data_}) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }

  ~MpiCommunicator() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised) return;
    for (MPI_Comm* comm : {&collectives_, &messages_, &message_data_}) MPI_Comm_free(comm);
  }

  std::string_view transport() const noexcept override { return "mpi"; }
  int local_rank() const noexcept override { return local_rank_; }
  int local_size() const noexcept override { return local_size_; }

 protected:
  void run_barrier(const CallDesc& desc) override { exchange(desc, all_peers()); }

  void run_all_reduce(const CallDesc& desc, void* data) override {
    const size_t element = size_of(desc.dtype);
    auto* mine = static_cast<unsigned char*>(data);
    std::vector<PeerIo> io = all_peers();
    std::vector<const void*> inputs(size());
    if (desc.invalid || desc.count * element <= kWholeReduceBytes) {
      // Everyone sends everyone the whole buffer and combines all of it.
      const size_t bytes = desc.invalid ? 0 : desc.count * element;
      unsigned char* scratch = reserve(bytes * size());
      for (PeerIo& p : io) p = {p.peer, mine, bytes, scratch + p.peer * bytes, bytes};
      if (!exchange(desc, io)) return;
      for (int k = 0; k < size(); ++k) inputs[k] = k == rank() ? mine : scratch + k * bytes;
      void* const outputs[] = {mine};
      detail::reduce_in_rank_order(desc.dtype, desc.op, inputs, outputs, desc.count);
      return;
    }
    // Rank r owns chunk r: it receives that chunk from every rank, combines
    // them in rank order, and then sends the result to every rank.
    const detail::ChunkRange own = detail::chunk_range(desc.count, size(), rank());
    const size_t own_bytes = own.count * element;
    unsigned char* scratch = reserve(own_bytes * size());
    for (PeerIo& p : io) {
      const detail::ChunkRange theirs = detail::chunk_range(desc.count, size(), p.peer);
      p = {p.peer, mine + theirs.offset * element, theirs.count * element, scratch + p.peer * own_bytes, own_bytes};
    }
    exchange(desc, io);
    for (int k = 0; k < size(); ++k) inputs[k] = k == rank() ? mine + own.offset * element : scratch + k * own_bytes;
    void* const outputs[] = {mine + own.offset * element};
    detail::reduce_in_rank_order(desc.dtype, desc.op, inputs, outputs, own.count);
    for (PeerIo& p : io) {
      const detail::ChunkRange theirs = detail::chunk_range(desc.count, size(), p.peer);
      p = {p.peer, mine + own.offset * element, own_bytes, mine + theirs.offset * element, theirs.count * element};
    }
    exchange(desc, io);
  }

  void run_all_gather(const CallDesc& desc, const void* src, void* dst) override {
    const size_t bytes = desc.invalid ? 0 : desc.count * size_of(desc.dtype);
    auto* out = static_cast<unsigned char*>(dst);
    std::vector<PeerIo> io = all_peers();
    for (PeerIo& p : io) p = {p.peer, src, bytes, out + p.peer * bytes, bytes};
    if (exchange(desc, io) && bytes > 0) std::memcpy(out + rank() * bytes, src, bytes);
  }

  void run_reduce_scatter(const CallDesc& desc, const void* src, void* dst) override {
    const size_t bytes = desc.invalid ? 0 : desc.count * size_of(desc.dtype);
    const auto* in = static_cast<const unsigned char*>(src);
    unsigned char* scratch = reserve(bytes * size());
    std::vector<PeerIo> io = all_peers();
    for (PeerIo& p : io) p = {p.peer, in + p.peer * bytes, bytes, scratch + p.peer * bytes, bytes};
    if (!exchange(desc, io)) return;
    std::vector<const void*> inputs(size());
    for (int k = 0; k < size(); ++k) inputs[k] = k == rank() ? in + rank() * bytes : scratch + k * bytes;
    void* const outputs[] = {dst};
    detail::reduce_in_rank_order(desc.dtype, desc.op, inputs, outputs, desc.count);
  }

  void run_broadcast(const CallDesc& desc, void* data) override {
    const size_t bytes = desc.invalid ? 0 : desc.count * size_of(desc.dtype);
    const int root = desc.peer;
    std::vector<PeerIo> io = all_peers();
    // Every rank sends the others a header (so all compare descriptors);
    // only the root's carry the data.
    for (PeerIo& p : io) {
      if (rank() == root) p.send = data, p.send_bytes = bytes;
      if (p.peer == root) p.recv = data, p.recv_bytes = bytes;
    }
    exchange(desc, io);
  }

  void run_send(const CallDesc& desc, const void* data, int dest) override {
    const size_t bytes = desc.invalid ? 0 : desc.count * size_of(desc.dtype);
    Wire wire{};
    wire.header = {desc, bytes, 0, 0};
    const bool inline_payload = bytes <= kInlineBytes;
    if (inline_payload && bytes > 0) std::memcpy(wire.inline_data, data, bytes);
    std::vector<MPI_Request> requests(inline_payload ? 1 : 2, MPI_REQUEST_NULL);
    check(MPI_Isend(&wire, static_cast<int>(sizeof(Header) + (inline_payload ? bytes : 0)), MPI_BYTE, dest, desc.peer,
                    messages_, &requests[0]),
          "MPI_Isend");
    if (!inline_payload) isend_bytes(data, bytes, dest, desc.peer, message_data_, &requests[1]);
    wait(requests, desc, [&](size_t) { return dest; }, "to receive");
  }

  void run_recv(const CallDesc& desc, void* data, int source) override {
    const size_t bytes = desc.count * size_of(desc.dtype);
    Wire wire{};
    std::vector<MPI_Request> requests{MPI_REQUEST_NULL};
    check(MPI_Irecv(&wire, sizeof(Wire), MPI_BYTE, source, desc.peer, messages_, &requests[0]), "MPI_Irecv");
    wait(requests, desc, [&](size_t) { return source; }, "to send");
    const Header& header = wire.header;
    const bool match = header.desc == desc && header.payload_bytes == bytes;
    void* target = data;
    std::vector<unsigned char> drain;
    if (!match) {
      drain.resize(header.payload_bytes);
      target = drain.data();
    }
    if (header.payload_bytes <= kInlineBytes) {
      if (header.payload_bytes > 0) std::memcpy(target, wire.inline_data, header.payload_bytes);
    } else {
      irecv_bytes(target, header.payload_bytes, source, desc.peer, message_data_, &requests[0]);
      wait(requests, desc, [&](size_t) { return source; }, "to send");
    }
    if (!match)
      throw make_error(ErrorKind::Validation, "mpi rank {}: rank {} sent {} but this rank expected {}", rank(), source,
                       detail::describe(header.desc), detail::describe(desc));
  }

  void run_abort(const std::string& reason) override {
    std::vector<Wire> wires(size());
    std::vector<MPI_Request> requests;
    for (const PeerIo& p : all_peers()) {
      Wire& wire = wires[p.peer];
      wire.header.failed = 1;
      wire.header.reason_bytes = static_cast<uint32_t>(std::min(reason.size(), kInlineBytes));
      std::memcpy(wire.inline_data, reason.data(), wire.header.reason_bytes);
      requests.push_back(MPI_REQUEST_NULL);
      MPI_Isend(&wire, static_cast<int>(sizeof(Header) + wire.header.reason_bytes), MPI_BYTE, p.peer, kHeaderTag,
                collectives_, &requests.back());
    }
    // Small messages leave at once; a peer that is itself gone must not hold
    // this rank up for long.
    const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(options().timeout, std::chrono::seconds(5));
    if (!poll(requests, deadline)) abandon(requests);
  }

 private:
  std::vector<PeerIo> all_peers() const {
    std::vector<PeerIo> io;
    for (int k = 0; k < size(); ++k)
      if (k != rank()) io.push_back(PeerIo{k});
    return io;
  }

  // Scratch memory kept across calls (fresh pages cost more to touch than
  // the copy into them).
  unsigned char* reserve(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  // MPI counts are int: one message carries at most 2 GiB - 1 bytes.
  int message_count(size_t bytes) const {
    if (bytes > static_cast<size_t>(std::numeric_limits<int>::max()))
      throw make_error(ErrorKind::Unsupported, "mpi rank {}: a message of {} bytes is past MPI's 2 GiB limit per message",
                       rank(), bytes);
    return static_cast<int>(bytes);
  }
  void isend_bytes(const void* data, size_t bytes, int peer, int tag, MPI_Comm comm, MPI_Request* request) {
    check(MPI_Isend(data, message_count(bytes), MPI_BYTE, peer, tag, comm, request), "MPI_Isend");
  }
  void irecv_bytes(void* data, size_t bytes, int peer, int tag, MPI_Comm comm, MPI_Request* request) {
    check(MPI_Irecv(data, message_count(bytes), MPI_BYTE, peer, tag, comm, request), "MPI_Irecv");
  }

  // Polls until every request completes (true) or the deadline passes
  // (false; the unfinished requests are left non-null).
  bool poll(std::vector<MPI_Request>& requests, Clock::time_point deadline) {
    std::vector<int>& done = done_;
    done.resize(requests.size());
    // Busy polling, as MPI's own blocking calls do: a yield on a loaded
    // machine costs far more than a small message's latency. Only when the
    // launcher placed more ranks than cores, waiting ranks yield after a
    // while so that the rank they wait for can run.
    const auto spin_end = Clock::now() + std::chrono::microseconds(200);
    for (;;) {
      int count = 0;
      check(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(), MPI_STATUSES_IGNORE),
            "MPI_Testsome");
      if (count == MPI_UNDEFINED) return true;
      const auto now = Clock::now();
      if (now > deadline) return false;
      if (oversubscribed && now > spin_end) std::this_thread::yield();
    }
  }

  // Gives up on unfinished requests. A receive nothing matched yet cancels
  // cleanly; anything else may still complete into memory the caller owns
  // again, and the job must then be aborted at exit.
  static void abandon(std::vector<MPI_Request>& requests) {
    for (MPI_Request& request : requests) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      const auto deadline = Clock::now() + std::chrono::milliseconds(100);
      int done = 0;
      while (!done && Clock::now() < deadline) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) continue;
      MPI_Request_free(&request);
      abandoned_requests = true;
    }
  }

  // Waits for `requests`; on timeout throws naming the peers (peer_of(i))
  // whose requests did not finish.
  template <typename PeerOf>
  void wait(std::vector<MPI_Request>& requests, const CallDesc& desc, PeerOf peer_of, const char* doing) {
    if (poll(requests, Clock::now() + options().timeout)) return;
    std::vector<int> missing;  // a peer's receive and send may both be unfinished: rank_list names it once
    for (size_t i = 0; i < requests.size(); ++i)
      if (requests[i] != MPI_REQUEST_NULL) missing.push_back(peer_of(i));
    abandon(requests);
    abandoned_requests = true;  // the missing peers may be stuck for good
    throw make_error(ErrorKind::Timeout, "mpi rank {}: {} timed out after {} ms waiting for rank(s) {} {}", rank(),
                     detail::describe(desc), options().timeout.count(), detail::rank_list(std::move(missing)), doing);
  }

  // One exchange with `io`'s peers. Returns false when every rank's
  // arguments were invalid alike (nothing moved); throws Validation on a
  // mismatch, Execution when a peer aborted, Timeout when one is missing.
  bool exchange(const CallDesc& desc, const std::vector<PeerIo>& io) {
    const size_t n = io.size();
    // Kept across calls: small collectives should not pay for allocations.
    std::vector<Wire>& out = out_;
    std::vector<Wire>& in = in_;
    out.resize(n);
    in.resize(n);
    std::vector<MPI_Request>& headers = headers_;
    std::vector<MPI_Request>& payloads = payloads_;
    headers.assign(2 * n, MPI_REQUEST_NULL);
    payloads.assign(2 * n, MPI_REQUEST_NULL);
    for (size_t i = 0; i < n; ++i)
      check(MPI_Irecv(&in[i], sizeof(Wire), MPI_BYTE, io[i].peer, kHeaderTag, collectives_, &headers[i]), "MPI_Irecv");
    for (size_t i = 0; i < n; ++i) {
      const PeerIo& p = io[i];
      out[i].header = {desc, p.send_bytes, 0, 0};
      const bool inline_payload = p.send_bytes <= kInlineBytes;
      if (inline_payload && p.send_bytes > 0) std::memcpy(out[i].inline_data, p.send, p.send_bytes);
      check(MPI_Isend(&out[i], static_cast<int>(sizeof(Header) + (inline_payload ? p.send_bytes : 0)), MPI_BYTE, p.peer,
                      kHeaderTag, collectives_, &headers[n + i]),
            "MPI_Isend");
    }
    auto peer_of = [&](size_t i) { return io[i % n].peer; };
    wait(headers, desc, peer_of, "to arrive");

    // Every header is here. Every rank has every rank's descriptor (this
    // exchange is all-to-all), so all reach the same verdict: either all
    // send their payloads or none does, and nothing is left in flight to a
    // failed rank.
    std::vector<CallDesc>& descs = descs_;
    descs.assign(size(), desc);
    std::string failure;
    for (size_t i = 0; i < n; ++i) {
      const Header& h = in[i].header;
      if (h.failed && failure.empty())
        failure = fmt::format("rank {} failed: {}", io[i].peer,
                              std::string_view(reinterpret_cast<const char*>(in[i].inline_data), h.reason_bytes));
      descs[io[i].peer] = h.desc;
    }
    if (!failure.empty())
      throw make_error(ErrorKind::Execution, "mpi rank {}: {} failed because {}", rank(), detail::describe(desc), failure);
    if (auto mismatch = detail::find_mismatch(descs); mismatch && !(desc.invalid && descs == std::vector(size(), desc)))
      throw make_error(ErrorKind::Validation, "mpi rank {}: {}", rank(), *mismatch);
    for (size_t i = 0; i < n; ++i) {
      const Header& h = in[i].header;
      if (h.payload_bytes != io[i].recv_bytes)
        throw make_error(ErrorKind::Internal, "mpi rank {}: rank {} sent {} bytes for {}, expected {}", rank(),
                         io[i].peer, h.payload_bytes, detail::describe(desc), io[i].recv_bytes);
      if (h.payload_bytes <= kInlineBytes) {
        if (h.payload_bytes > 0) std::memcpy(io[i].recv, in[i].inline_data, h.payload_bytes);
      } else {
        irecv_bytes(io[i].recv, h.payload_bytes, io[i].peer, kPayloadTag, collectives_, &payloads[i]);
      }
      if (io[i].send_bytes > kInlineBytes)
        isend_bytes(io[i].send, io[i].send_bytes, io[i].peer, kPayloadTag, collectives_, &payloads[n + i]);
    }
    wait(payloads, desc, peer_of, "to finish sending");
    return !desc.invalid;
  }

  int local_rank_ = 0;
  int local_size_ = 1;
  MPI_Comm collectives_ = MPI_COMM_NULL;    // exchanges of the collectives
  MPI_Comm messages_ = MPI_COMM_NULL;       // send/recv headers, by the caller's tag
  MPI_Comm message_data_ = MPI_COMM_NULL;   // send/recv payloads
  std::vector<unsigned char> scratch_;
  // exchange()'s working storage.
  std::vector<Wire> out_, in_;
  std::vector<MPI_Request> headers_, payloads_;
  std::vector<CallDesc> descs_;
  std::vector<int> done_;
};

Communicator* create(const CommOptions& options) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = 0;
  if (!initialised) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw make_error(ErrorKind::DeviceUnavailable, "MPI_Init_thread failed (error {})", rc);
    initialised_here = true;
    std::atexit(finalise_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  // Plans call the communicator from whichever pool thread runs the op, one
  // call at a time.
  if (provided < MPI_THREAD_SERIALIZED)
    throw make_error(ErrorKind::Unsupported,
                     "the MPI library provides thread level {}, below MPI_THREAD_SERIALIZED which svod needs", provided);
  const char* placement = std::getenv("OMPI_MCA_mpi_oversubscribe");
  oversubscribed = placement != nullptr && std::string_view(placement) == "1";
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return new MpiCommunicator(MPI_COMM_WORLD, rank, size, options);
}

}  // namespace
}  // namespace svod

extern "C" __attribute__((visibility("default"))) svod::Communicator* svod_comm_mpi_create(int abi,
                                                                                           const svod::CommOptions* options,
                                                                                           std::string* error) {
  if (abi != svod::detail::kMpiPluginAbi) {
    *error = fmt::format("plugin ABI {} does not match the runtime's {}", svod::detail::kMpiPluginAbi, abi);
    return nullptr;
  }
  try {
    return svod::create(*options);
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
