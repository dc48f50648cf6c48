// The "local" transport: the ranks are threads of one process. Each call
// publishes its descriptor and buffer addresses in a slot of the group, meets
// the others at a rendezvous, and then every rank reads its peers' buffers
// directly — no copies through a transport.
#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/comm/reduce.h"
#include "svod/guard/kernel_stop.h"

namespace svod {
namespace {

using detail::CallDesc;
using Clock = std::chrono::steady_clock;

struct Slot {
  CallDesc desc;
  const void* src = nullptr;
  void* dst = nullptr;
};

// A message handed from one rank to another: the sender waits until the
// receiver has copied it (or rejected it).
struct Mailbox {
  enum class State { Empty, Posted, Taken, Rejected } state = State::Empty;
  CallDesc desc;
  const void* data = nullptr;
  std::string rejection;
};

class LocalGroup {
 public:
  LocalGroup(int size, CommOptions options)
      : size_(size),
        options_(options),
        present_(size, false),
        departed_(size, false),
        slots_{std::vector<Slot>(size), std::vector<Slot>(size)} {}

  int size() const noexcept { return size_; }
  std::chrono::milliseconds timeout() const noexcept { return options_.timeout; }

  // The slot of `rank` for the call numbered `seq`. Calls alternate between
  // two sets, so a rank that has moved on to the next call never overwrites
  // a slot a slower rank still reads. The parts of a split call
  // (detail::split_call) share its number, and so a set: only all_reduce and
  // broadcast parts use slots, and each ends with a rendezvous after which no
  // rank reads one; a part that fails ends the call.
  Slot& slot(uint64_t seq, int rank) { return slots_[seq & 1][rank]; }

  // Returns once every rank has arrived; `desc` names the call in errors.
  void rendezvous(int rank, const CallDesc& desc) {
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    {
      std::unique_lock lock(mutex_);
      throw_if_failed(rank, desc);
      present_[rank] = true;
      if (++arrived_ == size_) {
        arrived_ = 0;
        present_.assign(size_, false);
        generation_.store(generation + 1, std::memory_order_release);
        changed_.notify_all();
        return;
      }
      throw_if_departed(rank, desc);
    }
    // A short spin first: a collective's ranks usually arrive within
    // microseconds of each other, far less than a sleep and wake-up costs.
    const auto spin_end = Clock::now() + std::chrono::microseconds(20);
    while (Clock::now() < spin_end) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      std::this_thread::yield();
    }
    std::unique_lock lock(mutex_);
    const auto deadline = Clock::now() + options_.timeout;
    const bool met = changed_.wait_until(lock, deadline, [&] {
      return generation_.load(std::memory_order_acquire) != generation || failed_.has_value() || missing_departed();
    });
    if (generation_.load(std::memory_order_acquire) != generation) return;
    if (met) throw_if_failed(rank, desc);
    if (met) throw_if_departed(rank, desc);
    std::vector<int> missing;
    for (int k = 0; k < size_; ++k)
      if (!present_[k]) missing.push_back(k);
    const std::string message = fmt::format("local rank {}: {} timed out after {} ms waiting for rank(s) {}", rank,
                                            detail::describe(desc), options_.timeout.count(),
                                            detail::rank_list(std::move(missing)));
    record_failure(Failure{-1, message});
    throw Error(ErrorKind::Timeout, message);
  }

  // Whether rank `rank`'s work is done: calls still waiting for it cannot finish.
  void set_departed(int rank, bool departed) noexcept {
    std::lock_guard lock(mutex_);
    departed_[rank] = departed;
    changed_.notify_all();
  }

  void fail(int rank, const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (!failed_) record_failure(Failure{rank, reason});
  }

  // The ranks' stop scopes while run_local_ranks runs them (null entries
  // otherwise): a failure of the group stops every kernel they run, since
  // no rank can finish its work any more.
  void set_stop_scopes(std::vector<StopScope*> scopes) {
    std::lock_guard lock(mutex_);
    stop_scopes_ = std::move(scopes);
  }

  void send(int from, int to, const CallDesc& desc, const void* data) {
    std::unique_lock lock(mutex_);
    Mailbox& box = mailboxes_[{from, to}];
    wait(lock, from, desc, to, [&] { return box.state == Mailbox::State::Empty; });
    box.state = Mailbox::State::Posted;
    box.desc = desc;
    box.data = data;
    changed_.notify_all();
    wait(lock, from, desc, to, [&] { return box.state == Mailbox::State::Taken || box.state == Mailbox::State::Rejected; });
    const bool rejected = box.state == Mailbox::State::Rejected;
    std::string rejection = std::move(box.rejection);
    box.state = Mailbox::State::Empty;
    changed_.notify_all();
    if (rejected) throw Error(ErrorKind::Validation, rejection);
  }

  void recv(int to, int from, const CallDesc& desc, void* data) {
    std::unique_lock lock(mutex_);
    Mailbox& box = mailboxes_[{from, to}];
    wait(lock, to, desc, from, [&] { return box.state == Mailbox::State::Posted; });
    if (box.desc != desc) {
      box.rejection = fmt::format("local rank {} sent {} to rank {}, which expected {}", from,
                                  detail::describe(box.desc), to, detail::describe(desc));
      box.state = Mailbox::State::Rejected;
      changed_.notify_all();
      throw Error(ErrorKind::Validation, box.rejection);
    }
    if (desc.count > 0) std::memcpy(data, box.data, desc.count * size_of(desc.dtype));
    box.state = Mailbox::State::Taken;
    changed_.notify_all();
  }

 private:
  struct Failure {
    int rank;  // -1: a timeout (or a rank that finished), already described
    std::string reason;
    ErrorKind kind = ErrorKind::Timeout;  // when rank is -1
  };

  void throw_if_failed(int rank, const CallDesc& desc) const {
    if (!failed_) return;
    if (failed_->rank < 0) throw Error(failed_->kind, failed_->reason);
    throw make_error(ErrorKind::Execution, "local rank {}: {} failed because rank {} failed: {}", rank,
                     detail::describe(desc), failed_->rank, failed_->reason);
  }

  bool missing_departed() const {
    for (int k = 0; k < size_; ++k)
      if (departed_[k] && !present_[k]) return true;
    return false;
  }

  // A rendezvous that a rank whose work is done never joined: fails the
  // group at once, naming it (as a timeout would, without the wait).
  void throw_if_departed(int rank, const CallDesc& desc) {
    std::vector<int> gone;
    for (int k = 0; k < size_; ++k)
      if (departed_[k] && !present_[k]) gone.push_back(k);
    if (gone.empty()) return;
    fail_finished(rank, desc, detail::rank_list(std::move(gone)));
  }

  [[noreturn]] void fail_finished(int rank, const CallDesc& desc, const std::string& ranks) {
    const std::string message = fmt::format("local rank {}: {} cannot finish: rank(s) {} finished their work without "
                                            "joining it",
                                            rank, detail::describe(desc), ranks);
    record_failure(Failure{-1, message, ErrorKind::Execution});
    throw Error(ErrorKind::Execution, message);
  }

  // Waits on the group for `ready`, failing on another rank's failure, when
  // `peer` finished its work, or after the timeout (which names `peer`).
  template <typename Ready>
  void wait(std::unique_lock<std::mutex>& lock, int rank, const CallDesc& desc, int peer, Ready ready) {
    const auto deadline = Clock::now() + options_.timeout;
    const bool met =
        changed_.wait_until(lock, deadline, [&] { return ready() || failed_.has_value() || departed_[peer]; });
    throw_if_failed(rank, desc);
    if (ready()) return;
    if (met) fail_finished(rank, desc, std::to_string(peer));
    const std::string message = fmt::format("local rank {}: {} timed out after {} ms waiting for rank {}", rank,
                                            detail::describe(desc), options_.timeout.count(), peer);
    record_failure(Failure{-1, message});
    throw Error(ErrorKind::Timeout, message);
  }

  // The group's failure, with mutex_ held: the ranks waiting are woken and
  // the kernels the ranks run are stopped.
  void record_failure(Failure failure) {
    const std::string reason = failure.rank < 0
                                   ? "its local group failed: " + failure.reason
                                   : fmt::format("its local group failed: rank {} failed: {}", failure.rank,
                                                 failure.reason);
    failed_ = std::move(failure);
    changed_.notify_all();
    for (StopScope* scope : stop_scopes_)
      if (scope != nullptr) scope->request(ErrorKind::Execution, reason);
  }

  const int size_;
  const CommOptions options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<uint64_t> generation_{0};
  int arrived_ = 0;
  std::vector<bool> present_;  // which ranks reached the current rendezvous
  std::vector<bool> departed_;  // which ranks' run_local_ranks body returned
  std::optional<Failure> failed_;
  std::vector<StopScope*> stop_scopes_;  // by rank
  std::vector<Slot> slots_[2];
  std::map<std::pair<int, int>, Mailbox> mailboxes_;  // (from, to)
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank, CommOptions options)
      : Communicator(rank, group->size(), options), group_(std::move(group)) {}

  std::string_view transport() const noexcept override { return "local"; }

 protected:
  void run_barrier(const CallDesc& desc) override { agree(desc, nullptr, nullptr); }

  // Rank r owns chunk r: it combines that chunk of every rank's buffer and
  // writes the result into every rank's buffer. No other rank touches chunk r
  // meanwhile, so one rendezvous before and one after suffice.
  void run_all_reduce(const CallDesc& desc, void* data) override {
    if (!agree(desc, data, data) || size() == 1) return;
    const size_t element = size_of(desc.dtype);
    const detail::ChunkRange own = detail::chunk_range(desc.count, size(), rank());
    std::vector<const void*> inputs(size());
    std::vector<void*> outputs(size());
    for (int k = 0; k < size(); ++k) {
      outputs[k] = static_cast<unsigned char*>(peer(desc, k).dst) + own.offset * element;
      inputs[k] = outputs[k];
    }
    detail::reduce_in_rank_order(desc.dtype, desc.op, inputs, outputs, own.count);
    group_->rendezvous(rank(), desc);  // every chunk is in every buffer
  }

  void run_all_gather(const CallDesc& desc, const void* src, void* dst) override {
    if (!agree(desc, src, dst)) return;
    const size_t bytes = desc.count * size_of(desc.dtype);
    for (int k = 0; k < size(); ++k)
      if (bytes > 0) std::memcpy(static_cast<unsigned char*>(dst) + k * bytes, peer(desc, k).src, bytes);
    group_->rendezvous(rank(), desc);
  }

  void run_reduce_scatter(const CallDesc& desc, const void* src, void* dst) override {
    if (!agree(desc, src, dst)) return;
    const size_t bytes = desc.count * size_of(desc.dtype);
    std::vector<const void*> inputs(size());
    for (int k = 0; k < size(); ++k) inputs[k] = static_cast<const unsigned char*>(peer(desc, k).src) + rank() * bytes;
    void* const outputs[] = {dst};
    detail::reduce_in_rank_order(desc.dtype, desc.op, inputs, outputs, desc.count);
    group_->rendezvous(rank(), desc);
  }

  void run_broadcast(const CallDesc& desc, void* data) override {
    if (!agree(desc, data, data)) return;
    const size_t bytes = desc.count * size_of(desc.dtype);
    if (rank() != desc.peer && bytes > 0) std::memcpy(data, peer(desc, desc.peer).dst, bytes);
    group_->rendezvous(rank(), desc);
  }

  void run_send(const CallDesc& desc, const void* data, int dest) override { group_->send(rank(), dest, desc, data); }
  void run_recv(const CallDesc& desc, void* data, int source) override { group_->recv(rank(), source, desc, data); }
  void run_abort(const std::string& reason) override { group_->fail(rank(), reason); }
  void run_set_finished(bool finished) noexcept override { group_->set_departed(rank(), finished); }

 public:
  LocalGroup& group() const noexcept { return *group_; }

 private:
  const Slot& peer(const CallDesc& desc, int k) const { return group_->slot(desc.seq, k); }

  // Publishes this rank's call, meets the others and compares descriptors.
  // False when every rank's arguments were invalid alike (nothing to move).
  bool agree(const CallDesc& desc, const void* src, void* dst) {
    group_->slot(desc.seq, rank()) = Slot{desc, src, dst};
    group_->rendezvous(rank(), desc);
    std::vector<CallDesc> descs(size());
    for (int k = 0; k < size(); ++k) descs[k] = peer(desc, k).desc;
    if (auto mismatch = detail::find_mismatch(descs); mismatch && !(desc.invalid && descs == std::vector(size(), desc)))
      throw make_error(ErrorKind::Validation, "local rank {}: {}", rank(), *mismatch);
    return !desc.invalid;
  }

  std::shared_ptr<LocalGroup> group_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> create_local_communicators(int ranks, CommOptions options) {
  if (ranks < 1) throw make_error(ErrorKind::Validation, "a local group needs at least one rank, not {}", ranks);
  if (ranks > kMaxLocalRanks)
    throw make_error(ErrorKind::Validation, "{} local ranks: a local group has at most {} (each rank is a thread)",
                     ranks, kMaxLocalRanks);
  auto group = std::make_shared<LocalGroup>(ranks, options);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<LocalCommunicator>(group, r, options));
  return comms;
}

void run_local_ranks(int ranks, const std::function<void(Communicator&)>& body, CommOptions options) {
  const auto comms = create_local_communicators(ranks, options);
  std::vector<Communicator*> group;
  for (const auto& comm : comms) group.push_back(comm.get());
  run_local_ranks(group, body);
}

void run_local_ranks(std::span<Communicator* const> comms, const std::function<void(Communicator&)>& body) {
  if (comms.empty()) throw Error(ErrorKind::Validation, "run_local_ranks: no communicators to run on");
  const int ranks = static_cast<int>(comms.size());
  for (Communicator* comm : comms) comm->set_finished(false);  // a kept group's last run is over
  // Each rank runs in a stop scope of its own (inside the caller's) that the
  // group's failure asks to stop: a rank in a kernel that never returns is
  // stopped instead of keeping this call from returning.
  const StopScope* caller = launch_stop_scope();
  const std::unique_ptr<StopScope[]> scopes(new StopScope[comms.size()]);
  std::map<LocalGroup*, std::vector<StopScope*>> by_group;  // each group's scopes by rank
  for (size_t i = 0; i < comms.size(); ++i)
    if (auto* local = dynamic_cast<LocalCommunicator*>(comms[i])) {
      std::vector<StopScope*>& by_rank = by_group[&local->group()];
      by_rank.resize(static_cast<size_t>(local->size()), nullptr);
      by_rank[static_cast<size_t>(local->rank())] = &scopes[i];
    }
  struct Stopping {
    std::vector<LocalGroup*> groups;
    ~Stopping() {
      for (LocalGroup* g : groups) g->set_stop_scopes({});
    }
  } stopping;
  for (auto& [group, by_rank] : by_group) {
    group->set_stop_scopes(std::move(by_rank));
    stopping.groups.push_back(group);
  }
  std::mutex mutex;
  std::exception_ptr first;
  auto run = [&](size_t r) {
    Communicator& comm = *comms[r];
    const EnterStopScope in_scope(scopes[r], caller);
    try {
      body(comm);
      comm.set_finished(true);
    } catch (const std::exception& error) {
      {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
      comm.abort(error.what());
    }
  };
  // Joined however this returns: rank 0's body may end by unwinding (a
  // thread that Python ends at interpreter exit), and a joinable thread
  // destroyed would end the process.
  struct Joined {
    std::vector<std::thread> threads;
    ~Joined() {
      for (std::thread& thread : threads)
        if (thread.joinable()) thread.join();
    }
  } joined;
  std::vector<std::thread>& threads = joined.threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int r = 1; r < ranks; ++r) {
    try {
      threads.emplace_back(run, static_cast<size_t>(r));
    } catch (const std::system_error& e) {
      // Rank r never starts: the started ranks fail naming it instead of
      // waiting for it until they time out.
      const std::string reason =
          fmt::format("the system refused a thread for local rank {} of {}: {}", r, ranks, e.what());
      comms[r]->abort(reason);
      throw Error(ErrorKind::Execution, reason);  // `joined` waits for the started ranks
    }
  }
  run(0);
  for (std::thread& thread : threads) thread.join();  // before `first` is read
  if (first) std::rethrow_exception(first);
}

}  // namespace svod
