#include "svod/guard/staging.h"

#include <cstring>

#include "svod/guard/guarded_memory.h"

namespace svod {
namespace {

constexpr unsigned char kCanary = 0xCB;
// A block: the snapshot of what was copied in, then the copy, ending at the
// guard page.
constexpr size_t kBlockBytes = 2 * StagedArguments::kMaxBytes;

// This thread's blocks, each ending at a guard page.
struct StagingPool {
  void* blocks[StagedArguments::kMaxArguments] = {};
  size_t count = 0;
  ~StagingPool() {
    for (size_t i = 0; i < count; ++i) free_guarded(blocks[i], kBlockBytes, Guards::After);
  }
  // The n-th block, mapped on first use; nullptr when it cannot be.
  void* block(size_t n) noexcept {
    while (count <= n) {
      void* b = try_allocate_fenced(kBlockBytes);
      if (b == nullptr) return nullptr;
      blocks[count++] = b;
    }
    return blocks[n];
  }
};
thread_local StagingPool pool;

// The bytes a copy of `bytes` takes before the guard: its size rounded up to
// the largest power of two up to 64 that divides it, at least 16.
size_t span_of(size_t bytes) {
  size_t align = 64;
  while (align > 16 && bytes % align != 0) align /= 2;
  return (bytes + align - 1) / align * align;
}

bool overlap(uint64_t a, size_t an, uint64_t b, size_t bn) { return a < b + bn && b < a + an; }

}  // namespace

StagedArguments::StagedArguments(uint64_t* data, const size_t* bytes, const bool* stage, size_t count) noexcept
    : data_(data), bytes_(bytes), count_(count) {
  size_t blocks = 0;
  for (size_t i = 0; i < count; ++i) {
    original_[i] = data[i];
    kind_[i] = Unstaged;
    if (!stage[i] || bytes[i] == 0 || bytes[i] > kMaxBytes) continue;
    // One copy for an argument passed twice; none for one that partly
    // overlaps another argument, or that an unstaged one repeats.
    size_t same = count;
    bool alone = true;
    for (size_t j = 0; j < count && alone; ++j) {
      const uint64_t at = j < i ? original_[j] : data[j];  // (those before are replaced already)
      if (j == i || !overlap(at, bytes[j], data[i], bytes[i])) continue;
      if (at != data[i] || bytes[j] != bytes[i] || !stage[j]) alone = false;
      else if (j < i && same == count) same = j;
    }
    if (!alone) continue;
    if (same < count) {
      if (kind_[same] == Unstaged) continue;  // (it had no block)
      kind_[i] = Shared;
      data[i] = data[same];
      continue;
    }
    auto* block = static_cast<unsigned char*>(pool.block(blocks));
    if (block == nullptr) continue;
    ++blocks;
    const size_t span = span_of(bytes[i]);
    unsigned char* copy = block + kBlockBytes - span;
    std::memcpy(copy, reinterpret_cast<const void*>(data[i]), bytes[i]);
    std::memcpy(block, copy, bytes[i]);
    snapshot_[i] = block;
    // (Only when there is slack: a memset of nothing at the guard page is a
    // masked vector store there, which costs the processor an assist of
    // over a hundred nanoseconds.)
    if (span != bytes[i]) std::memset(copy + bytes[i], kCanary, span - bytes[i]);
    data[i] = reinterpret_cast<uint64_t>(copy);
    kind_[i] = Own;
  }
  staged_ = blocks;
}

void StagedArguments::copy_back(const bool* written) noexcept {
  if (staged_ == 0) return;
  // A copy goes back when any argument over it may be written, and only the
  // bytes the kernel changed: another thread's kernel may have written other
  // parts of the same array meanwhile, from a copy of its own.
  bool write_back[kMaxArguments] = {};
  size_t own = 0;
  for (size_t i = 0; i < count_; ++i) {
    if (kind_[i] == Own) own = i;
    if (kind_[i] == Shared)
      for (size_t j = 0; j < i; ++j)
        if (kind_[j] == Own && data_[j] == data_[i]) own = j;
    if (kind_[i] != Unstaged && written[i]) write_back[own] = true;
  }
  for (size_t i = 0; i < count_; ++i) {
    if (kind_[i] != Own || !write_back[i]) continue;
    const auto* copy = reinterpret_cast<const unsigned char*>(data_[i]);
    const auto* before = snapshot_[i];
    auto* target = reinterpret_cast<unsigned char*>(original_[i]);
    size_t b = 0;
    for (; b + 8 <= bytes_[i]; b += 8) {
      uint64_t now, then;
      std::memcpy(&now, copy + b, 8);
      std::memcpy(&then, before + b, 8);
      if (now == then) continue;
      for (size_t c = b; c < b + 8; ++c)
        if (copy[c] != before[c]) target[c] = copy[c];
    }
    for (; b < bytes_[i]; ++b)
      if (copy[b] != before[b]) target[b] = copy[b];
  }
}

std::optional<StagedArguments::SlackWrite> StagedArguments::slack_written() const noexcept {
  if (staged_ == 0) return std::nullopt;
  for (size_t i = 0; i < count_; ++i) {
    if (kind_[i] != Own) continue;
    const auto* copy = reinterpret_cast<const unsigned char*>(data_[i]);
    for (size_t b = bytes_[i]; b < span_of(bytes_[i]); ++b)
      if (copy[b] != kCanary) return SlackWrite{i, b};
  }
  return std::nullopt;
}

bool staging_on() { return fence_host_memory(); }

}  // namespace svod
