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

Hash128 hash_bytes(std::span<const std::byte> data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return {h.low64, h.high64};
}

}  // namespace svod
