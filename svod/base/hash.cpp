#include "svod/base/hash.h"

#include <fmt/format.h>
// Compiled in, not linked: one library fewer for the dynamic linker at every
// start (and XXH3_state_t is a complete type, so it can live inline).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace svod {

struct Hasher::State {
  XXH3_state_t xxh;
};

Hasher::Hasher() : state_(std::make_unique<State>()) { XXH3_128bits_reset(&state_->xxh); }
Hasher::~Hasher() = default;

Hasher& Hasher::bytes(std::span<const std::byte> data) {
  XXH3_128bits_update(&state_->xxh, data.data(), data.size());
  return *this;
}

Hasher& Hasher::str(std::string_view text) {
  u64(text.size());
  XXH3_128bits_update(&state_->xxh, text.data(), text.size());
  return *this;
}

Hasher& Hasher::u64(uint64_t value) {
  XXH3_128bits_update(&state_->xxh, &value, sizeof value);
  return *this;
}

Hash128 Hasher::finish() const {
  XXH128_hash_t h = XXH3_128bits_digest(&state_->xxh);
  return {h.low64, h.high64};
}

std::string Hash128::to_hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<Hash128> Hash128::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  uint64_t words[2] = {};
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    words[i / 16] = (words[i / 16] << 4) | static_cast<uint64_t>(digit);
  }
  return Hash128{words[1], words[0]};
}

Hash128 hash_bytes(std::span<const std::byte> data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return {h.low64, h.high64};
}

}  // namespace svod
