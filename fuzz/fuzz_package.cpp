// libFuzzer target for the package reader (svod/package/package_format.h):
// arbitrary bytes go through the container checks and, when they pass, the
// manifest parser; the manifest parser also reads them directly, and a
// package written around them must read back unchanged. Any outcome but
// success or svod::Error is a bug. Built and run by scripts/fuzz.sh package.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "svod/base/error.h"
#include "svod/package/package_format.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const svod::PackageReader reader(bytes, "fuzz");
    for (const auto& section : reader.sections()) (void)reader.find(section.name);
    if (reader.find(svod::kManifestSection) != nullptr) {
      const svod::PackageManifest manifest = svod::read_manifest(reader.text(svod::kManifestSection), "fuzz");
      (void)svod::write_manifest(manifest);
    }
  } catch (const svod::Error&) {
  }
  // Mutated packages rarely get past the digests, so the manifest parser also
  // gets the raw bytes, and a package built around them must read back whole.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)svod::read_manifest(text, "fuzz");
  } catch (const svod::Error&) {
  }
  svod::PackageWriter writer;
  writer.add(std::string(svod::kManifestSection), text);
  const std::vector<std::byte> package = writer.finish();
  const svod::PackageReader reader(package, "rebuilt");  // must not throw
  if (reader.text(svod::kManifestSection) != text) __builtin_trap();
  return 0;
}
