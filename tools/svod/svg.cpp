#include "tools/svod/svg.h"

#include "svod/base/file_write.h"

namespace svod::cli {

std::string svg_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      // XML has no way to write the other C0 controls, not even as
      // references: each becomes U+FFFD, the replacement character.
      case '\t': case '\n': case '\r': out += c; break;
      default: out += static_cast<unsigned char>(c) < 0x20 ? std::string_view("\xEF\xBF\xBD") : std::string_view(&c, 1);
    }
  }
  return out;
}

void write_svg(const std::string& svg, const std::filesystem::path& path) {
  write_file_atomically(path, svg);
}

}  // namespace svod::cli
