// Shared by the libFuzzer targets: a scratch folder per process, removed at
// exit, so that file-reading parsers see only what the target puts there.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace svod::fuzz {

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "svod-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch(), ignored);
    });
    return std::filesystem::path(pattern);
  }();
  return dir;
}

inline std::filesystem::path write_file(std::string_view name, std::string_view bytes) {
  const auto path = scratch() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace svod::fuzz
