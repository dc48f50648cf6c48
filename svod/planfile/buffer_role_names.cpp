// The roles' names, on their own: the plan-file parser needs them without
// what derives roles from a plan (the fuzz targets link the parser alone).
#include <array>
#include <utility>

#include "svod/base/error.h"
#include "svod/planfile/buffer_roles.h"

namespace svod {
namespace {

constexpr std::array<std::pair<BufferRole, std::string_view>, 5> kRoleNames = {{
    {BufferRole::Input, "input"},
    {BufferRole::Output, "output"},
    {BufferRole::Constant, "constant"},
    {BufferRole::State, "state"},
    {BufferRole::Scratch, "scratch"},
}};

}  // namespace

std::string_view to_string(BufferRole role) noexcept {
  for (const auto& [r, name] : kRoleNames)
    if (r == role) return name;
  return "unknown";
}

BufferRole parse_buffer_role(std::string_view text) {
  for (const auto& [role, name] : kRoleNames)
    if (name == text) return role;
  throw make_error(ErrorKind::Validation,
                   "unknown role \"{}\" (expected input, output, constant, state or scratch)", text);
}

}  // namespace svod
