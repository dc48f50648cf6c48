// 128-bit content hashes (XXH3-128) for cache keys and identities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace svod {

struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;
  std::string to_hex() const;  // 32 lowercase hex digits, high word first
  // The hash to_hex() wrote (either letter case); nullopt for anything else.
  static std::optional<Hash128> from_hex(std::string_view hex);
  friend bool operator==(const Hash128&, const Hash128&) = default;
};

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const noexcept { return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull)); }
};

// Streaming hasher. Strings are length-prefixed so that ("ab","c") and
// ("a","bc") hash differently.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& bytes(std::span<const std::byte> data);
  Hasher& str(std::string_view text);
  Hasher& u64(uint64_t value);
  Hash128 finish() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

Hash128 hash_bytes(std::span<const std::byte> data);

}  // namespace svod
