// Shared by the libFuzzer targets: a scratch folder per process, removed at
// exit, so that file-reading parsers see only what the target puts there, and
// the expansion of marker-encoded inputs into deep ones (expand_repeats).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
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

// Deep inputs from short ones. libFuzzer keeps inputs under -max_len (64 KiB
// for the JSON targets), so on its own it never makes JSON nested 100,000
// deep (which once overflowed the parsers' stacks) or any other input of
// megabytes. An input that starts with kRepeatMarker is therefore expanded
// before a target uses it: after the marker its bytes are copied as they are,
// except that kRepeatByte N0 N1 N2 L T0 … T(L-1) writes the L-byte token T
// N times (N = N0 + 256·N1 + 65536·N2, up to 16,777,215; a token cut short by
// the end of the input is what is left of it). The result stops growing at
// kMaxExpanded bytes. So
//   FE  FF A0 86 01 01 '['  '1'  FF A0 86 01 01 ']'
// is "[" × 100,000, "1", "]" × 100,000 in 14 bytes. Inputs without the
// marker are used as they are, so real files stay valid seeds. The
// marker-encoded seeds are fuzz/seeds/TARGET/*.rep (made by
// fuzz/make_deep_seeds.py); the marker is not valid UTF-8, so no real plan,
// tune file, manifest or expression starts with it.
inline constexpr unsigned char kRepeatMarker = 0xFE;
inline constexpr unsigned char kRepeatByte = 0xFF;
inline constexpr size_t kMaxExpanded = size_t{2} << 20;

inline std::string expand_repeats(std::string_view input) {
  if (input.empty() || static_cast<unsigned char>(input[0]) != kRepeatMarker) return std::string(input);
  std::string out;
  size_t i = 1;
  while (i < input.size() && out.size() < kMaxExpanded) {
    const auto byte = static_cast<unsigned char>(input[i]);
    if (byte != kRepeatByte || input.size() - i < 5) {
      out += input[i++];
      continue;
    }
    const auto at = [&](size_t k) { return static_cast<size_t>(static_cast<unsigned char>(input[i + k])); };
    const size_t count = at(1) | at(2) << 8 | at(3) << 16;
    const std::string_view token = input.substr(i + 5, at(4));
    i += 5 + token.size();
    for (size_t n = 0; n < count && !token.empty() && out.size() < kMaxExpanded; ++n) out += token;
  }
  if (out.size() > kMaxExpanded) out.resize(kMaxExpanded);
  return out;
}

inline std::string expand_repeats(const std::uint8_t* data, std::size_t size) {
  return expand_repeats(std::string_view(reinterpret_cast<const char*>(data), size));
}

}  // namespace svod::fuzz
