#include "svod/plan/hazards.h"

#include <algorithm>

namespace svod::detail {
namespace {

bool overlaps(size_t begin, size_t end, const auto& entry) { return begin < entry.end && entry.begin < end; }

}  // namespace

void HazardTracker::add(size_t node, std::span<const MemoryAccess> accesses, std::vector<size_t>& deps) {
  const size_t first = deps.size();
  for (const MemoryAccess& a : accesses) {
    if (a.range.empty() || !(a.read || a.write)) continue;
    auto it = logs_.find(a.range.storage);
    if (it == logs_.end()) continue;
    const StorageLog& log = it->second;
    // Reads and writes both wait for overlapping writers (RAW, WAW); only
    // writes wait for overlapping readers (WAR).
    for (const Entry& w : log.writers)
      if (overlaps(a.range.begin, a.range.end, w)) deps.push_back(w.node);
    if (a.write)
      for (const Entry& r : log.readers)
        if (overlaps(a.range.begin, a.range.end, r)) deps.push_back(r.node);
  }
  std::sort(deps.begin() + static_cast<std::ptrdiff_t>(first), deps.end());
  deps.erase(std::unique(deps.begin() + static_cast<std::ptrdiff_t>(first), deps.end()), deps.end());

  for (const MemoryAccess& a : accesses) {
    if (a.range.empty() || !(a.read || a.write)) continue;
    StorageLog& log = logs_[a.range.storage];
    const Entry entry{a.range.begin, a.range.end, node};
    if (a.write) {
      // A read-write access needs no reader entry: the writer entry already
      // orders every later access to these bytes.
      auto covered = [&](const Entry& e) { return e.node != node && a.range.begin <= e.begin && e.end <= a.range.end; };
      std::erase_if(log.writers, covered);
      std::erase_if(log.readers, covered);
      log.writers.push_back(entry);
    } else {
      log.readers.push_back(entry);
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
