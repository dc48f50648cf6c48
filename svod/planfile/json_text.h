// Shared by svod's JSON file readers (plan files, svod/planfile; tune files,
// svod/tune), so that both name values and check names alike.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace svod::detail {

// What a JSON value is, for messages: "an object", "an integer", "null", …
std::string_view json_type_name(const nlohmann::ordered_json& j);

// Whether `s` can name a variable in launch expressions (see expr.h):
// [A-Za-z_][A-Za-z0-9_]*, and not the function names min or max.
bool is_variable_name(std::string_view s);

}  // namespace svod::detail
