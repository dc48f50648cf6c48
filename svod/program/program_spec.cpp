#include "svod/program/program_spec.h"

#include <limits>
#include <set>

#include "svod/base/error.h"

namespace svod {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

template <typename Enum, size_t N>
Enum parse_enum(std::string_view what, std::string_view text,
                const std::array<std::pair<std::string_view, Enum>, N>& names) {
  std::string valid;
  for (const auto& [name, value] : names) {
    if (name == text) return value;
    valid += valid.empty() ? "" : ", ";
    valid += name;
  }
  throw make_error(ErrorKind::Validation, "unknown {} \"{}\" (valid: {})", what, text, valid);
}

constexpr std::array<std::pair<std::string_view, Access>, 3> kAccesses{
    {{"read", Access::Read}, {"write", Access::Write}, {"readwrite", Access::ReadWrite}}};
constexpr std::array<std::pair<std::string_view, ScalarType>, 2> kScalarTypes{
    {{"i32", ScalarType::I32}, {"i64", ScalarType::I64}}};

template <typename Enum, size_t N>
std::string_view enum_name(Enum value, const std::array<std::pair<std::string_view, Enum>, N>& names) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

}  // namespace

std::string_view to_string(Access access) noexcept { return enum_name(access, kAccesses); }
Access parse_access(std::string_view text) { return parse_enum("access", text, kAccesses); }
std::string_view to_string(ScalarType type) noexcept { return enum_name(type, kScalarTypes); }
ScalarType parse_scalar_type(std::string_view text) { return parse_enum("scalar type", text, kScalarTypes); }

void Variable::check(int64_t value) const {
  if (value < min || value > max)
    throw make_error(ErrorKind::Validation, "{} = {} is outside its bounds [{}, {}]", name, value, min, max);
}

Variable ScalarParam::bounds() const {
  const bool i32 = type == ScalarType::I32;
  int64_t lo = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  int64_t hi = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  return Variable{name, std::max(lo, min.value_or(lo)), std::min(hi, max.value_or(hi))};
}

std::optional<size_t> ProgramSpec::core_id_index() const {
  for (size_t i = 0; i < scalars.size(); ++i)
    if (scalars[i].name == kCoreIdName) return i;
  return std::nullopt;
}

void ProgramSpec::validate() const {
  const std::string& who = display_name();
  if (!is_identifier(entry))
    throw make_error(ErrorKind::Validation, "program \"{}\": entry \"{}\" is not a C identifier", who, entry);
  if (source.empty()) throw make_error(ErrorKind::Validation, "program \"{}\": empty source", who);
  std::set<std::string_view> seen;
  auto check_name = [&](std::string_view kind, size_t i, const std::string& n) {
    if (!is_identifier(n))
      throw make_error(ErrorKind::Validation, "program \"{}\": {}[{}] name \"{}\" is not an identifier", who, kind, i, n);
    if (!seen.insert(n).second)
      throw make_error(ErrorKind::Validation, "program \"{}\": parameter name \"{}\" is used twice", who, n);
  };
  for (size_t i = 0; i < buffers.size(); ++i) check_name("buffers", i, buffers[i].name);
  for (size_t i = 0; i < scalars.size(); ++i) {
    check_name("scalars", i, scalars[i].name);
    Variable b = scalars[i].bounds();
    if (b.min > b.max)
      throw make_error(ErrorKind::Validation, "program \"{}\": scalars[{}] \"{}\" has empty bounds [{}, {}]", who, i,
                       scalars[i].name, b.min, b.max);
  }
  for (const auto& [name, value] : defines) {
    if (!is_identifier(name))
      throw make_error(ErrorKind::Validation, "program \"{}\": define \"{}\" is not an identifier", who, name);
    if (value.find_first_of("\r\n") != std::string::npos)
      throw make_error(ErrorKind::Validation, "program \"{}\": define {} has a line break in its value", who, name);
  }
  if (!recipe.empty() && !is_identifier(recipe))
    throw make_error(ErrorKind::Validation, "program \"{}\": recipe \"{}\" is not a name", who, recipe);
  if (language == Language::LlvmIr && !defines.empty())
    throw make_error(ErrorKind::Validation, "program \"{}\": defines do not apply to LLVM IR sources", who);
  for (size_t d = 0; d < 3; ++d) {
    if (global_size[d].is_constant() && global_size[d].constant_value() < 1)
      throw make_error(ErrorKind::Validation, "program \"{}\": global_size[{}] = {} must be at least 1", who, d,
                       global_size[d].constant_value());
    if (local_size[d].is_constant() && local_size[d].constant_value() < 1)
      throw make_error(ErrorKind::Validation, "program \"{}\": local_size[{}] = {} must be at least 1", who, d,
                       local_size[d].constant_value());
  }
}

}  // namespace svod
