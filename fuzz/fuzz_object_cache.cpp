// libFuzzer target for on-disk object-cache entries: the input becomes the
// entry file of a fixed key, and ObjectCache::get must either return exactly
// what a valid entry holds or report a miss (removing a damaged file); never
// crash or allocate without bound. When the first byte is odd the target
// first fixes the header's key, size and digest, so the fuzzer also reaches
// entries that pass the checks. Built and run by scripts/fuzz.sh object_cache.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "svod/cache/object_cache.h"

namespace {

constexpr svod::Hash128 kKey{0x0123456789abcdefull, 0xfedcba9876543210ull};
constexpr size_t kHeaderBytes = 56;  // the entry header: magic, schema, kind, key, size, digest

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static svod::ObjectCache cache({svod::fuzz::scratch() / "cache", 1u << 20});
  static const bool ready = [] {
    std::filesystem::create_directories(svod::fuzz::scratch() / "cache");
    return true;
  }();
  (void)ready;
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) != 0 && bytes.size() >= kHeaderBytes) {
    const uint64_t payload = bytes.size() - kHeaderBytes;
    const svod::Hash128 digest =
        svod::hash_bytes(std::as_bytes(std::span(bytes.data() + kHeaderBytes, payload)));
    std::memcpy(bytes.data() + 16, &kKey.low, 8);
    std::memcpy(bytes.data() + 24, &kKey.high, 8);
    std::memcpy(bytes.data() + 32, &payload, 8);
    std::memcpy(bytes.data() + 40, &digest.low, 8);
    std::memcpy(bytes.data() + 48, &digest.high, 8);
  }
  const auto path = svod::fuzz::scratch() / "cache" / (kKey.to_hex() + ".svo");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::optional<svod::Artifact> got = cache.get(kKey);
  if (got) {
    // A hit must be exactly the payload that was stored.
    if (bytes.size() < kHeaderBytes || got->bytes.size() != bytes.size() - kHeaderBytes) std::abort();
    if (!got->bytes.empty() && std::memcmp(got->bytes.data(), bytes.data() + kHeaderBytes, got->bytes.size()) != 0) {
      std::abort();
    }
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  return 0;
}
