// Read/write hazard analysis over byte ranges of storages.
//
// Operations are visited in the order they are meant to happen; each reports
// the byte ranges it reads and writes, and the tracker answers which earlier
// operations it must wait for: the last writers of what it reads (RAW), the
// readers of what it writes (WAR) and the writers of what it writes (WAW).
// Conflict means overlapping bytes of one storage (of host memory, by
// address) — never equal buffer ids — so views into one arena are ordered
// exactly when they share bytes. Plans and the executor both use this one implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

namespace svod::detail {

// Bytes [begin, end) of one storage.
struct ByteRange {
  uint64_t storage = 0;
  size_t begin = 0;
  size_t end = 0;

  bool empty() const noexcept { return begin >= end; }
  bool overlaps(const ByteRange& o) const noexcept {
    return storage == o.storage && begin < o.end && o.begin < end && !empty() && !o.empty();
  }
  bool covers(const ByteRange& o) const noexcept {
    return storage == o.storage && begin <= o.begin && o.end <= end;
  }
};

// Host memory is one address space: two storages over the same host bytes
// (two wraps of one numpy array) are the same memory. Such ranges use this
// key and absolute addresses.
inline constexpr uint64_t kHostAddressSpace = UINT64_MAX;

struct MemoryAccess {
  ByteRange range;
  bool read = false;
  bool write = false;
};

class HazardTracker {
 public:
  // Records the accesses of `node` (visited after every node added before)
  // and appends to `deps` the earlier nodes it conflicts with, sorted and
  // without repeats. Empty ranges never conflict.
  //
  // Entries fully covered by a later write are dropped: anything that would
  // conflict with them conflicts with that write, which already waits for
  // them, so the order is kept by transitivity and a chain of writes to one
  // buffer costs O(log n) per op instead of O(n). Entries are kept by their
  // first byte, so an access looks only at those that can reach it: the
  // buffers of host memory (every numpy array a plan binds) share one
  // address space, and scanning all of them made building a plan of 80,000
  // arrays take seconds.
  void add(size_t node, std::span<const MemoryAccess> accesses, std::vector<size_t>& deps);

 private:
  struct Entry {
    size_t end;
    size_t node;
  };
  // Ranges by first byte; `longest` bounds how far before an access an
  // entry that overlaps it can begin.
  struct Ranges {
    std::multimap<size_t, Entry> by_begin;
    size_t longest = 0;

    template <typename Fn>
    void each_overlapping(size_t begin, size_t end, Fn&& fn) const;
    void erase_covered(size_t begin, size_t end, size_t except_node);
    void insert(size_t begin, size_t end, size_t node);
  };
  struct StorageLog {
    Ranges readers;
    Ranges writers;
  };
  std::unordered_map<uint64_t, StorageLog> logs_;
};

// Hazard predecessors of every node visited in `order` (a permutation of
// node indices); accesses[n] are node n's. Result[n] is sorted.
std::vector<std::vector<size_t>> hazard_predecessors(std::span<const size_t> order,
                                                     std::span<const std::vector<MemoryAccess>> accesses);

}  // namespace svod::detail
