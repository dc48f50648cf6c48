#include "svod/planfile/buffer_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "svod/base/error.h"

namespace svod {
namespace {

using Place = BufferPlace;

// The bytes of each space that an op has written so far, as disjoint
// [begin, end) ranges keyed by their start.
class WrittenBytes {
 public:
  // The parts of [begin, end) of `space` no op has written yet.
  std::vector<std::pair<uint64_t, uint64_t>> unwritten(const Place& p) const {
    std::vector<std::pair<uint64_t, uint64_t>> gaps;
    uint64_t at = p.begin;
    const auto it = ranges_.find(p.space);
    if (it != ranges_.end()) {
      const auto& ranges = it->second;
      auto r = ranges.upper_bound(p.begin);
      if (r != ranges.begin()) --r;
      for (; r != ranges.end() && r->first < p.end; ++r) {
        if (r->second <= at) continue;
        if (r->first > at) gaps.emplace_back(at, r->first);
        at = std::max(at, r->second);
      }
    }
    if (at < p.end) gaps.emplace_back(at, p.end);
    return gaps;
  }

  void add(const Place& p) {
    auto& ranges = ranges_[p.space];
    uint64_t begin = p.begin, end = p.end;
    auto r = ranges.upper_bound(begin);
    if (r != ranges.begin() && std::prev(r)->second >= begin) --r;
    while (r != ranges.end() && r->first <= end) {
      begin = std::min(begin, r->first);
      end = std::max(end, r->second);
      r = ranges.erase(r);
    }
    ranges.emplace(begin, end);
  }

 private:
  std::map<uint64_t, std::map<uint64_t, uint64_t>> ranges_;
};

}  // namespace

BufferPlace place_of(const Buffer& b) {
  if (b.is_host()) return {UINT64_MAX, b.first_byte(), b.first_byte() + b.bytes()};
  return {b.storage_id(), b.byte_offset(), b.byte_offset() + b.bytes()};
}

size_t base_slot(const ExecutionPlan& plan, size_t slot) {
  // Views of views end at a base: the plan refused cycles when it was built.
  while (const auto v = plan.view(slot)) slot = v->base;
  return slot;
}

std::vector<std::optional<BufferRole>> derive_buffer_roles(const ExecutionPlan& plan, const RoleRequest& request) {
  const size_t n = plan.buffer_count();
  auto check_base = [&](size_t slot, std::string_view what) {
    if (slot >= n) throw make_error(ErrorKind::Validation, "{}: buffer {} is out of range ({} buffers)", what, slot, n);
    if (plan.view(slot)) {
      const std::string& name = plan.buffer_name(slot);
      throw make_error(ErrorKind::Validation,
                       "{}: buffer {}{} is a view of buffer {}; a role belongs to the buffer it is part of", what,
                       slot, name.empty() ? "" : fmt::format(" (\"{}\")", name), base_slot(plan, slot));
    }
  };
  for (const size_t slot : request.inputs) check_base(slot, "inputs");
  for (const auto& [slot, role] : request.overrides) check_base(slot, "roles");
  for (const size_t slot : request.outputs)
    if (slot >= n) throw make_error(ErrorKind::Validation, "outputs: buffer {} is out of range ({} buffers)", slot, n);

  // Each base slot's bytes, and what the ops did to them.
  std::vector<size_t> bases;
  std::vector<Place> places(n);
  for (size_t s = 0; s < n; ++s) {
    if (plan.view(s)) continue;
    bases.push_back(s);
    places[s] = place_of(plan.buffer(s));
  }
  std::vector<bool> written(n, false), read_first(n, false);
  auto mark = [&](const Place& p, std::vector<bool>& flags) {
    for (const size_t b : bases) {
      const Place& q = places[b];
      if (q.space == p.space && q.begin < p.end && p.begin < q.end) flags[b] = true;
    }
  };
  WrittenBytes done;
  for (const size_t op : plan.topological_order()) {
    const auto accesses = plan.op_accesses(op);
    // An op reads what it reads before it writes what it writes: a
    // read-modify-write of bytes nothing wrote before reads them first.
    for (const auto& [slot, access] : accesses) {
      if (!reads(access)) continue;
      const Place p = place_of(plan.buffer(slot));
      for (const auto& [begin, end] : done.unwritten(p)) mark(Place{p.space, begin, end}, read_first);
    }
    for (const auto& [slot, access] : accesses) {
      if (!writes(access)) continue;
      const Place p = place_of(plan.buffer(slot));
      done.add(p);
      mark(p, written);
    }
  }

  std::vector<bool> read_by_caller(n, false);
  for (const size_t slot : request.outputs) read_by_caller[base_slot(plan, slot)] = true;
  std::vector<std::optional<BufferRole>> roles(n);
  for (const size_t b : bases) {
    BufferRole role = !written[b]    ? BufferRole::Constant
                      : read_first[b] ? BufferRole::State
                      : read_by_caller[b] ? BufferRole::Output
                                          : BufferRole::Scratch;
    if (std::find(request.inputs.begin(), request.inputs.end(), b) != request.inputs.end()) role = BufferRole::Input;
    if (const auto it = request.overrides.find(b); it != request.overrides.end()) role = it->second;
    roles[b] = role;
  }
  return roles;
}

}  // namespace svod
