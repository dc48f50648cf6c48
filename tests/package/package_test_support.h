// What the package tests share: packages with an edited manifest, compiling
// forbidden for a scope, and a CPU feature this machine lacks (to make objects
// "for another CPU").
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "svod/base/cpu_features.h"
#include "svod/compile/compile_policy.h"
#include "svod/package/package_format.h"

namespace svod::test {

// Forbids compiling while it lives (the process-wide C++ option).
class NoCompiling {
 public:
  NoCompiling() { set_compile_allowed(false); }
  ~NoCompiling() { set_compile_allowed(true); }
  NoCompiling(const NoCompiling&) = delete;
  NoCompiling& operator=(const NoCompiling&) = delete;
};

// `bytes` (a package or program binary) rebuilt with the manifest changed by
// `edit`, every other section kept.
inline std::vector<std::byte> with_manifest(std::span<const std::byte> bytes,
                                            const std::function<void(nlohmann::json&)>& edit) {
  const PackageReader reader(bytes, "original");
  PackageWriter writer;
  for (const auto& s : reader.sections()) {
    if (s.name == kManifestSection) {
      auto manifest = nlohmann::json::parse(reader.text(kManifestSection));
      edit(manifest);
      writer.add(s.name, manifest.dump());
    } else {
      writer.add(s.name, std::vector<std::byte>(s.bytes.begin(), s.bytes.end()));
    }
  }
  return writer.finish();
}

// A CPU feature the known-features check knows and this CPU lacks; empty when
// it has them all (the caller skips).
inline std::string feature_this_cpu_lacks() {
  std::string lacking;
  for (const auto& f : known_cpu_features())
    if (!f.present) lacking = f.name;
  return lacking;
}

}  // namespace svod::test
