// libFuzzer target for the package reader (svod/package/package_format.h):
// arbitrary bytes go through the container checks and, when they pass, the
// manifest parser. Any outcome but success or svod::Error is a bug. Built and
// run by scripts/fuzz-package.sh.
#include <cstddef>
#include <cstdint>
#include <span>

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
  return 0;
}
