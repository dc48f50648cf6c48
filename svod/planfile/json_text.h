// Shared by svod's JSON file readers (plan files, svod/planfile; tune files,
// svod/tune), so that both name values and check names alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace svod::detail {

// What a JSON value is, for messages: "an object", "an integer", "null", …
std::string_view json_type_name(const nlohmann::ordered_json& j);

// Whether `s` can name a variable in launch expressions (see expr.h):
// [A-Za-z_][A-Za-z0-9_]*, and not the function names min or max.
bool is_variable_name(std::string_view s);

// The contents of a file the format names (`what`: "plan file", "tune file",
// "source file"). Error(Io) with `path` in the message when it cannot be
// opened or read, or is not a regular file (a FIFO or /dev/zero would never
// end: see svod/base/file_read.h); Error(Validation) when it is larger than
// `max_bytes`.
std::string read_format_file(const std::filesystem::path& path, std::string_view what,
                             uintmax_t max_bytes = uintmax_t{64} << 20);

}  // namespace svod::detail
