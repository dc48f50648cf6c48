// What the svod command's SVG pictures share (tune_plot.cpp, roofline.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace svod::cli {

// `text` made safe for SVG character data and attribute values: markup
// characters as references, control characters XML cannot hold as U+FFFD.
std::string svg_escape(std::string_view text);

// Writes an SVG document to `path`; Error(Io) when it cannot.
void write_svg(const std::string& svg, const std::filesystem::path& path);

}  // namespace svod::cli
