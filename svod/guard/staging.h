// Small arguments in memory svod does not own (a numpy array from Python)
// staged through guarded memory for one launch, so that an overrun faults at
// a guard page instead of corrupting malloc's heap, where such an array
// lives and where the damage would show only later (glibc's abort in an
// unrelated free). Each is copied into a block of this thread's pool, its
// data ending as near the guard page after it as its alignment allows (the
// largest power of two up to 64 that divides its size, at least 16: up to
// 15 bytes of slack, which hold a canary checked after the launch); the
// kernel gets the copy, and the bytes it changed in what it may write are
// copied back after the launch, whether it succeeded or not (what a kernel
// wrote before a fault stays written, as in memory svod owns); only the bytes
// it changed, so that kernels on other threads writing other parts of the
// same array at once do not undo each other's writes. Kernels that talk
// through one small array while they run (atomics) each see their own copy:
// such memory must be svod's (dev.allocate). Arrays at the same address and of
// the same size share one copy (an array passed twice); an array that partly
// overlaps another argument (two views of one array) runs on its own memory,
// unstaged, since separate copies would not see each other's writes.
//
// The pool holds a page per argument (a snapshot of what was copied in,
// then the copy) before a guard page, mapped at a thread's first
// staged launch and unmapped when the thread ends: a call maps nothing.
// Larger arrays are not staged (copying them in and comparing them back
// would cost more than the call itself, measured: 230 ns for a call on two
// 1 KiB arrays against 110 unstaged, 540 on two of 4 KiB; malloc gives
// arrays mappings of their own from 128 KiB up). Staging follows the guard pages' switch (SVOD_GUARD_PAGES).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace svod {

class StagedArguments {
 public:
  // The largest argument staged, in bytes (docs/BENCHMARKS.md: what staging
  // costs a call by size).
  static constexpr size_t kMaxBytes = 1024;
  static constexpr size_t kMaxArguments = 64;

  // Stages the arguments whose `stage[i]` is set (at most kMaxArguments
  // arguments in all; `data` holds every argument's address, which is
  // replaced by its copy's for those staged, `bytes` their sizes). Staging
  // is skipped, and the argument runs on its own memory, where the pool has
  // no block for it or it partly overlaps another argument.
  StagedArguments(uint64_t* data, const size_t* bytes, const bool* stage, size_t count) noexcept;
  // Copies back the bytes the kernel changed in those that `written[i]` says
  // it may write, from the copies to the memory the caller gave. Call once,
  // after the launch.
  void copy_back(const bool* written) noexcept;
  ~StagedArguments() = default;
  StagedArguments(const StagedArguments&) = delete;
  StagedArguments& operator=(const StagedArguments&) = delete;

  // The first argument whose slack after its data changed, and the offset of
  // the first changed byte from its start; nullopt when none did.
  struct SlackWrite {
    size_t argument;
    size_t offset;
  };
  std::optional<SlackWrite> slack_written() const noexcept;

  size_t staged() const noexcept { return staged_; }

 private:
  enum Kind : uint8_t { Unstaged, Own, Shared };  // Shared: uses an earlier argument's copy
  uint64_t* data_;
  const size_t* bytes_;
  size_t count_;
  size_t staged_ = 0;
  uint64_t original_[kMaxArguments];  // the caller's addresses
  Kind kind_[kMaxArguments];
  const unsigned char* snapshot_[kMaxArguments];  // Own: what was copied in
};

// Whether small foreign arguments are staged: fence_host_memory().
bool staging_on();

}  // namespace svod
