// What the sandboxed plan (sandbox.h) and its helper process
// (tools/sandbox_helper/) say to each other: the layout of the three
// shared-memory files the helper is started with, one header for both sides.
//
// The parent writes the program table (the kernels' ELF objects and entry
// names, the guard pages of the arena) into the objects file before the
// helper starts, and each run's ops into the control file; the helper maps
// the objects, loads them with svod's ELF loader, locks itself down and then
// runs whatever requests come. The arena file holds the plan's buffers, at
// the same offsets on both sides. The helper trusts the parent; the parent
// trusts nothing the helper writes and copies the reply out before reading it.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "svod/program/cpu_abi.h"

namespace svod::sandbox {

inline constexpr uint32_t kProtocolVersion = 2;

// The helper's descriptors, and nothing else (0, 1 and 2 are /dev/null).
inline constexpr int kControlFd = 3;
inline constexpr int kObjectsFd = 4;
inline constexpr int kArenaFd = 5;

// The helper's exit statuses of its own choosing (a kernel's exit() may make
// any other).
inline constexpr int kExitSetupFailed = 91;  // Control::failure says why
inline constexpr int kExitViolation = 92;    // Reply says which system call
inline constexpr int kExitFault = 93;        // Reply says which signal and where

// The layers of confinement, as bits of Control::layers.
enum Layer : uint32_t {
  kNoNewPrivs = 1u << 0,
  kSeccomp = 1u << 1,
  kResourceLimits = 1u << 2,
  kUserNamespace = 1u << 3,
  kNetworkNamespace = 1u << 4,
  kLandlock = 1u << 5,
  kMountNamespace = 1u << 6,  // a mount namespace whose root is empty and read-only
  kIpcNamespace = 1u << 7,
};

enum class HelperState : uint32_t { Starting = 0, Ready = 1, Failed = 2 };

enum class Outcome : uint32_t {
  None = 0,
  Done = 1,       // every op ran
  Violation = 2,  // a system call outside the allow-list (the helper then exits)
  Fault = 3,      // a signal in a kernel: SIGSEGV, SIGBUS, SIGFPE, SIGILL (the helper then exits)
  BadRequest = 4, // the request did not make sense to the helper
};

enum class OpKind : uint32_t { Kernel = 1, Copy = 2 };

// One op of a request. A kernel: `program` indexes the program table;
// words [0, buffers) are byte offsets into the arena, which the helper turns
// into its own addresses, the others are ABI scalars; `core_slot`, when below
// `words`, takes the values 0 .. slices-1. A copy: words[0] and words[1] are
// the destination's and the source's arena offsets, words[2] the bytes.
struct RequestOp {
  OpKind kind;
  uint32_t program;
  uint32_t words;
  uint32_t buffers;
  uint32_t core_slot;
  uint32_t index;  // the plan op's index, for the reply to name it
  int64_t slices;
  uint64_t word[kMaxKernelArgs];
};

// How a request ended, written by the helper (or its signal handlers).
struct Reply {
  Outcome outcome;
  int32_t op;       // the position in the request of the op that was running; -1: none
  int32_t syscall;  // Violation: the system call's number
  int32_t signal;   // Fault: the signal
  uint64_t address;           // Fault: the address, as an offset into the arena when it lies there
  uint32_t address_in_arena;  // whether `address` is an arena offset
  uint32_t reserved;
  uint64_t args[6];        // Violation: the system call's arguments
  char syscall_name[32];   // Violation: its name as libseccomp knows it (NUL-terminated)
};

// The control file: the helper's state and settings, the two sequence
// numbers the sides wait on (futexes) and whether each side sleeps (see
// wait_while below), and the request and its reply. What one side writes
// during a run lies on cache lines of its own, away from the word the other
// side spins on, so that a run moves as few lines between processors as it
// can.
struct Control {
  static constexpr uint32_t kMaxOps = 16384;
  static constexpr uint32_t kMaxThreads = 4096;  // as SVOD_THREADS

  uint32_t version;
  uint32_t threads;               // threads the helper runs a kernel's core_id slices on, 1 .. kMaxThreads
  std::atomic<uint32_t> state;    // HelperState; a futex the parent waits on at start
  std::atomic<uint32_t> layers;   // Layer bits the helper has in place
  uint64_t memory_limit;          // bytes of address space the helper may add after loading
  uint32_t op_count;              // ops in this request
  // The parent's.
  alignas(64) std::atomic<uint32_t> request;  // bumped by the parent for each run; the helper waits on it
  std::atomic<uint32_t> parent_asleep;        // the parent sleeps on `reply`, or is about to
  // The helper's.
  alignas(64) std::atomic<uint32_t> reply;    // set to `request` by the helper when the run ended
  std::atomic<uint32_t> helper_asleep;        // the helper sleeps on `request`, or is about to
  alignas(64) std::atomic<int32_t> running;   // the request position being run, -1 between ops
  Reply result;
  char failure[512];                          // HelperState::Failed: why (NUL-terminated)
  RequestOp ops[kMaxOps];
};

// The objects file: this header, the program table, the arena's guard
// ranges, then the objects' and entry names' bytes.
struct ObjectsHeader {
  uint32_t version;
  uint32_t programs;
  uint32_t guards;
  uint32_t reserved;
  uint64_t arena_bytes;
};

struct ProgramEntry {
  uint64_t object_offset;  // into the objects file
  uint64_t object_bytes;
  uint64_t entry_offset;  // the entry symbol's name
  uint64_t entry_bytes;
};

// A page range of the arena no buffer owns, made inaccessible in the helper
// so that a kernel running past its buffer faults there.
struct GuardRange {
  uint64_t offset;
  uint64_t bytes;
};

// Waiting for the other side (and, in the helper, for its other threads).
// A waiter spins on the word for a while, since a run follows a run and a
// reply follows a request within microseconds when each side has a
// processor; then it counts itself in the word's `asleep` counter and sleeps
// on the word with a futex. The side that changes the word makes the futex
// call only when that counter says someone sleeps, so a round trip between
// two spinning sides makes no system call. The counter's update and the
// word's load in wait_while, and the word's store and the counter's load in
// publish, are sequentially consistent: either the sleeper sees the new word
// or the publisher sees the sleeper.

// One pause of a spin-wait loop.
inline void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while `word` holds `expected`, at most `timeout`.
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec t{static_cast<time_t>(s.count()), static_cast<long>((timeout - s).count())};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &t, nullptr, 0);
}

// How long one waiter spins, learnt from its last waits. Spinning pays only
// while the other side runs on another processor: on a loaded machine, or
// with both sides on one processor, a spinning waiter only keeps the other
// from running, and a runnable waiter is not favoured as a woken sleeper is.
// So each wait that ends while spinning doubles the spin (up to `most`), and
// each that does not halves it (down to a microsecond).
class Spin {
 public:
  explicit Spin(std::chrono::nanoseconds most) : most_(most), now_(most) {}
  std::chrono::nanoseconds budget() const { return now_; }
  void learn(bool worked) {
    constexpr std::chrono::nanoseconds least = std::chrono::microseconds(1);
    now_ = worked ? std::min(most_, now_ * 2) : std::max(least, now_ / 2);
  }

 private:
  std::chrono::nanoseconds most_, now_;
};

// Stores `value` into `word` and wakes whoever sleeps on it.
inline void publish(std::atomic<uint32_t>& word, uint32_t value, const std::atomic<uint32_t>& asleep) {
  word.store(value, std::memory_order_seq_cst);
  if (asleep.load(std::memory_order_seq_cst) != 0) futex_wake(word);
}

// Returns once `word` no longer holds `value` (its new value), or when it
// still does after spinning for `spin`'s budget (none without one) and then
// sleeping for `sleep` (a spurious wake-up may end the sleep sooner), so that
// the caller can look at the clock and the other side.
inline uint32_t wait_while(std::atomic<uint32_t>& word, uint32_t value, std::atomic<uint32_t>& asleep, Spin* spin,
                           std::chrono::nanoseconds sleep) {
  uint32_t now = word.load(std::memory_order_acquire);
  if (now != value) return now;
  if (spin != nullptr) {
    // The clock is read every 64 pauses (one to two microseconds).
    const auto until = std::chrono::steady_clock::now() + spin->budget();
    do {
      for (int i = 0; i < 64; ++i) {
        relax();
        if ((now = word.load(std::memory_order_acquire)) != value) {
          spin->learn(true);
          return now;
        }
      }
    } while (std::chrono::steady_clock::now() < until);
    spin->learn(false);
  }
  asleep.fetch_add(1, std::memory_order_seq_cst);
  if ((now = word.load(std::memory_order_seq_cst)) == value) {
    futex_wait(word, value, sleep);
    now = word.load(std::memory_order_acquire);
  }
  asleep.fetch_sub(1, std::memory_order_relaxed);
  return now;
}

}  // namespace svod::sandbox
