// libFuzzer target for the package reader (svod/package/package_format.h):
// arbitrary bytes go through the container checks and, when they pass, the
// manifest parser; the manifest parser also reads them directly, and a
// package written around them must read back unchanged. Bytes that start
// like a package are read a second time with every digest made to match
// (each section's where its recorded offset and size lie in the input, then
// the table's and the header's), so the checks behind the digests and the
// manifest inside a package are reached too. Inputs that start with the
// repeat marker are expanded first (fuzz_common.h), so manifests nested far
// deeper than 64 KiB allows are reached. Any outcome but success or
// svod::Error is a bug. Built and run by scripts/fuzz.sh package.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "svod/package/package_format.h"

namespace {

constexpr size_t kHeaderSize = 64;  // docs/PACKAGE_FORMAT.md, "Container"
constexpr size_t kEntrySize = 128;
constexpr size_t kNameField = 96;

template <typename T>
T get(const std::string& bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

void put_digest(std::string& bytes, size_t at, std::string_view data) {
  const svod::Hash128 h = svod::hash_bytes(std::as_bytes(std::span(data.data(), data.size())));
  std::memcpy(bytes.data() + at, &h.low, 8);
  std::memcpy(bytes.data() + at + 8, &h.high, 8);
}

// The bytes with every digest recomputed, as a writer that agreed with the
// header and table would have stored them. (Each digest is taken before it is
// written, so a section that overlaps the table is hashed as it was.)
std::string with_matching_digests(std::string bytes) {
  const std::string_view all(bytes);
  if (bytes.size() >= kHeaderSize) {
    const uint64_t count = get<uint32_t>(bytes, 12);
    if (count <= (bytes.size() - kHeaderSize) / kEntrySize) {
      for (uint64_t i = 0; i < count; ++i) {
        const size_t entry = kHeaderSize + i * kEntrySize;
        const auto offset = get<uint64_t>(bytes, entry + kNameField);
        const auto size = get<uint64_t>(bytes, entry + kNameField + 8);
        if (offset <= bytes.size() && size <= bytes.size() - offset)
          put_digest(bytes, entry + kNameField + 16, all.substr(offset, size));
      }
      put_digest(bytes, 24, all.substr(kHeaderSize, count * kEntrySize));
    }
    put_digest(bytes, 48, all.substr(0, 48));
  }
  return bytes;
}

void read_package(const std::string& bytes) {
  try {
    const svod::PackageReader reader(std::as_bytes(std::span(bytes.data(), bytes.size())), "fuzz");
    for (const auto& section : reader.sections()) (void)reader.find(section.name);
    if (reader.find(svod::kManifestSection) != nullptr) {
      const svod::PackageManifest manifest = svod::read_manifest(reader.text(svod::kManifestSection), "fuzz");
      (void)svod::write_manifest(manifest);
    }
  } catch (const svod::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input = svod::fuzz::expand_repeats(data, size);
  read_package(input);
  if (input.size() >= kHeaderSize && std::memcmp(input.data(), svod::kPackageMagic, sizeof svod::kPackageMagic) == 0)
    read_package(with_matching_digests(input));
  // Mutated packages rarely get past the digests, so the manifest parser also
  // gets the raw bytes, and a package built around them must read back whole.
  try {
    (void)svod::read_manifest(input, "fuzz");
  } catch (const svod::Error&) {
  }
  svod::PackageWriter writer;
  writer.add(std::string(svod::kManifestSection), input);
  const std::vector<std::byte> package = writer.finish();
  const svod::PackageReader reader(package, "rebuilt");  // must not throw
  if (reader.text(svod::kManifestSection) != input) __builtin_trap();
  return 0;
}
