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
      default: out += c;
    }
  }
  return out;
}

void write_svg(const std::string& svg, const std::filesystem::path& path) {
  write_file_atomically(path, svg);
}

}  // namespace svod::cli
