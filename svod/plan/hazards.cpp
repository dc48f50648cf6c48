#include "svod/plan/hazards.h"

#include <algorithm>

namespace svod::detail {

template <typename Fn>
void HazardTracker::Ranges::each_overlapping(size_t begin, size_t end, Fn&& fn) const {
  for (auto it = by_begin.lower_bound(begin > longest ? begin - longest : 0); it != by_begin.end() && it->first < end;
       ++it)
    if (begin < it->second.end) fn(it->second);
}

void HazardTracker::Ranges::erase_covered(size_t begin, size_t end, size_t except_node) {
  for (auto it = by_begin.lower_bound(begin); it != by_begin.end() && it->first < end;) {
    if (it->second.end <= end && it->second.node != except_node)
      it = by_begin.erase(it);
    else
      ++it;
  }
}

void HazardTracker::Ranges::insert(size_t begin, size_t end, size_t node) {
  by_begin.emplace(begin, Entry{end, node});
  longest = std::max(longest, end - begin);
}

void HazardTracker::add(size_t node, std::span<const MemoryAccess> accesses, std::vector<size_t>& deps) {
  const size_t first = deps.size();
  auto depend = [&](const Entry& e) { deps.push_back(e.node); };
  for (const MemoryAccess& a : accesses) {
    if (a.range.empty() || !(a.read || a.write)) continue;
    auto it = logs_.find(a.range.storage);
    if (it == logs_.end()) continue;
    const StorageLog& log = it->second;
    // Reads and writes both wait for overlapping writers (RAW, WAW); only
    // writes wait for overlapping readers (WAR).
    log.writers.each_overlapping(a.range.begin, a.range.end, depend);
    if (a.write) log.readers.each_overlapping(a.range.begin, a.range.end, depend);
  }
  std::sort(deps.begin() + static_cast<std::ptrdiff_t>(first), deps.end());
  deps.erase(std::unique(deps.begin() + static_cast<std::ptrdiff_t>(first), deps.end()), deps.end());

  for (const MemoryAccess& a : accesses) {
    if (a.range.empty() || !(a.read || a.write)) continue;
    StorageLog& log = logs_[a.range.storage];
    if (a.write) {
      // A read-write access needs no reader entry: the writer entry already
      // orders every later access to these bytes.
      log.writers.erase_covered(a.range.begin, a.range.end, node);
      log.readers.erase_covered(a.range.begin, a.range.end, node);
      log.writers.insert(a.range.begin, a.range.end, node);
    } else {
      log.readers.insert(a.range.begin, a.range.end, node);
    }
  }
}

std::vector<std::vector<size_t>> hazard_predecessors(std::span<const size_t> order,
                                                     std::span<const std::vector<MemoryAccess>> accesses) {
  std::vector<std::vector<size_t>> preds(accesses.size());
  HazardTracker tracker;
  for (size_t node : order) tracker.add(node, accesses[node], preds[node]);
  return preds;
}

}  // namespace svod::detail
