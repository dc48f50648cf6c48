// Shared by svod's JSON file readers (plan files, svod/planfile; tune files,
// svod/tune), so that both name values and check names alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace svod::detail {

// What a JSON value is, for messages: "an object", "an integer", "null", …
std::string_view json_type_name(const nlohmann::ordered_json& j);

// Whether `s` can name a variable in launch expressions (see expr.h):
// [A-Za-z_][A-Za-z0-9_]*, and not the function names min or max.
bool is_variable_name(std::string_view s);

// Parses JSON text (nlohmann's parse, whose errors it lets through) and
// refuses what that parser accepts silently: an object with a key twice (it
// keeps the last, so half of what the file says would be ignored) and a key
// with a NUL byte ("\u0000", which would cut a name short wherever it is
// read as C text). A refusal calls `fail` with the path of the key, written
// as the file readers write paths ("ops[2].buffers"), and the problem;
// `fail` throws.
nlohmann::ordered_json parse_json_checking_keys(
    std::string_view text, const std::function<void(const std::string& path, std::string_view problem)>& fail);

// The contents of a file the format names (`what`: "plan file", "tune file",
// "source file"). Error(Io) with `path` in the message when it cannot be
// opened or read, or is not a regular file (a FIFO or /dev/zero would never
// end: see svod/base/file_read.h); Error(Validation) when it is larger than
// `max_bytes`.
std::string read_format_file(const std::filesystem::path& path, std::string_view what,
                             uintmax_t max_bytes = uintmax_t{64} << 20);

}  // namespace svod::detail
