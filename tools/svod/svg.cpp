#include "tools/svod/svg.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "svod/base/error.h"

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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << svg;
  out.close();
  if (!out) throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(errno));
}

}  // namespace svod::cli
