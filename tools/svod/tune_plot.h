// The picture `svod tune --plot FILE.svg` draws (tune_plot.cpp).
#pragma once

#include <filesystem>
#include <string>

#include "svod/tune/tuner.h"

namespace svod::cli {

// An SVG of every candidate's median time by round (log scale), failed
// candidates as crosses, and the best-so-far path through the rounds.
std::string tune_svg(const TuneFile& file, const TuneReport& report);
// Writes tune_svg() to `path`; Error(Io) when it cannot.
void write_tune_svg(const TuneFile& file, const TuneReport& report, const std::filesystem::path& path);

}  // namespace svod::cli
