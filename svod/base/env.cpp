#include "svod/base/env.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace svod {
namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
constexpr int64_t kLongestSeconds = 1'000'000'000;  // about 31 years: a deadline in nanoseconds does not overflow

// What each variable does is in docs/ENVIRONMENT.md.
constexpr EnvVariable kVariables[] = {
    {EnvVar::Beam, "SVOD_BEAM", EnvType::Switch},
    {EnvVar::BeamSkipBelow, "SVOD_BEAM_SKIP_BELOW", EnvType::Seconds, 0, kLongestSeconds},
    {EnvVar::BlockCacheMb, "SVOD_BLOCK_CACHE_MB", EnvType::Integer, 0, int64_t{1} << 30},  // MiB: a PiB at most
    {EnvVar::Cache, "SVOD_CACHE", EnvType::Switch},
    {EnvVar::CacheDir, "SVOD_CACHE_DIR", EnvType::Text},
    {EnvVar::CacheMaxBytes, "SVOD_CACHE_MAX_BYTES", EnvType::Integer, 0, kNoLimit},
    {EnvVar::Check, "SVOD_CHECK", EnvType::Text},  // parse_check_mode's words
    {EnvVar::Clang, "SVOD_CLANG", EnvType::Text},
    {EnvVar::CommMpiPlugin, "SVOD_COMM_MPI_PLUGIN", EnvType::Text},
    {EnvVar::CommPartBytes, "SVOD_COMM_PART_BYTES", EnvType::Integer, 1, kNoLimit},
    {EnvVar::CommTimeout, "SVOD_COMM_TIMEOUT", EnvType::Seconds, 0, kLongestSeconds},
    {EnvVar::Compile, "SVOD_COMPILE", EnvType::Switch},
    {EnvVar::CpuCompiler, "SVOD_CPU_COMPILER", EnvType::Text, 0, 0, "SVOD_CPU_BACKEND"},  // parse_cpu_compiler's
    {EnvVar::CudaDriver, "SVOD_CUDA_DRIVER", EnvType::Text},
    {EnvVar::CudaPath, "SVOD_CUDA_PATH", EnvType::Text},
    {EnvVar::Debug, "SVOD_DEBUG", EnvType::Level, 0, 4},
    {EnvVar::GuardPages, "SVOD_GUARD_PAGES", EnvType::Switch},
    {EnvVar::KernelCacheMax, "SVOD_KERNEL_CACHE_MAX", EnvType::Integer, 0, kNoLimit},
    {EnvVar::LlcSize, "SVOD_LLC_SIZE", EnvType::Bytes},
    {EnvVar::LlvmPlugin, "SVOD_LLVM_PLUGIN", EnvType::Text},
    {EnvVar::NcclLibrary, "SVOD_NCCL_LIBRARY", EnvType::Text},
    {EnvVar::OpTimeout, "SVOD_OP_TIMEOUT", EnvType::Seconds, 0, kLongestSeconds},
    {EnvVar::Profile, "SVOD_PROFILE", EnvType::Switch},
    {EnvVar::Threads, "SVOD_THREADS", EnvType::Integer, 0, 4096},  // 0: the CPUs the process may run on
    {EnvVar::TrustedKeys, "SVOD_TRUSTED_KEYS", EnvType::Text},
    {EnvVar::Variants, "SVOD_VARIANTS", EnvType::Switch},
    {EnvVar::VariantsTolerance, "SVOD_VARIANTS_TOLERANCE", EnvType::Text},  // parse_variant_tolerance's ATOL,RTOL
};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kVariables); ++i)
    if (static_cast<size_t>(kVariables[i].var) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kVariables must list every EnvVar once, in the enum's order");

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

// The variable `name` (a literal of the table: NUL-terminated), trimmed;
// nullopt when unset or blank.
std::optional<EnvValue> read_variable(std::string_view name) {
  const char* value = std::getenv(name.data());
  if (value == nullptr) return std::nullopt;
  const std::string_view text = trimmed(value);
  if (text.empty()) return std::nullopt;
  return EnvValue{name, std::string(text)};
}

const EnvVariable& typed(EnvVar var, EnvType type) {
  const EnvVariable& variable = env_variable(var);
  if (variable.type != type)
    throw make_error(ErrorKind::Internal, "{} is read as a value of another type than its own", variable.name);
  return variable;
}

std::optional<int64_t> parse_integer(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::string integer_range(const EnvVariable& variable) {
  if (variable.max == kNoLimit) return fmt::format("an integer, at least {}", variable.min);
  return fmt::format("an integer from {} to {}", variable.min, variable.max);
}

}  // namespace

std::span<const EnvVariable> env_variables() noexcept { return kVariables; }

const EnvVariable& env_variable(EnvVar var) noexcept { return kVariables[static_cast<size_t>(var)]; }

std::optional<EnvValue> env_value(EnvVar var) {
  const EnvVariable& variable = env_variable(var);
  std::optional<EnvValue> value = read_variable(variable.name);
  if (variable.alias.empty()) return value;
  std::optional<EnvValue> old = read_variable(variable.alias);
  if (value && old && value->text != old->text)
    throw make_error(ErrorKind::Validation, "{} and {} differ ({} is the old name of {}): set one", to_string(*value),
                     to_string(*old), variable.alias, variable.name);
  return value ? value : old;
}

std::string to_string(const EnvValue& value) { return fmt::format("{}=\"{}\"", value.name, value.text); }

Error env_error(const EnvValue& value, std::string_view expected) {
  return make_error(ErrorKind::Validation, "{}: expected {}", to_string(value), expected);
}

std::optional<std::string> env_string(EnvVar var) {
  typed(var, EnvType::Text);
  auto value = env_value(var);
  if (!value) return std::nullopt;
  return std::move(value->text);
}

std::optional<bool> env_switch(EnvVar var) {
  typed(var, EnvType::Switch);
  const auto value = env_value(var);
  if (!value) return std::nullopt;
  if (const auto on = switch_word(value->text)) return on;
  throw env_error(*value, "1 or 0 (or true/false, yes/no, on/off)");
}

int64_t env_int(EnvVar var, int64_t fallback) {
  const EnvVariable& variable = typed(var, EnvType::Integer);
  const auto value = env_value(var);
  if (!value) return fallback;
  const auto number = parse_integer(value->text);
  if (!number || *number < variable.min || *number > variable.max) throw env_error(*value, integer_range(variable));
  return *number;
}

int env_level(EnvVar var) {
  const EnvVariable& variable = typed(var, EnvType::Level);
  const auto value = env_value(var);
  if (!value) return 0;
  if (const auto on = switch_word(value->text)) return *on ? 1 : 0;
  const auto number = parse_integer(value->text);
  if (!number || *number < variable.min || *number > variable.max)
    throw env_error(*value, fmt::format("a level from {} to {} (or a switch: on is 1, off is 0)", variable.min,
                                        variable.max));
  return static_cast<int>(*number);
}

std::optional<double> env_seconds(EnvVar var) {
  const EnvVariable& variable = typed(var, EnvType::Seconds);
  const auto value = env_value(var);
  if (!value) return std::nullopt;
  double seconds = 0;
  const char* end = value->text.data() + value->text.size();
  auto [ptr, ec] = std::from_chars(value->text.data(), end, seconds);
  // NaN fails both comparisons; infinity the second.
  if (ec != std::errc() || ptr != end || !(seconds > 0) || !(seconds <= static_cast<double>(variable.max)))
    throw env_error(*value, fmt::format("a positive number of seconds, at most {}", variable.max));
  return seconds;
}

std::optional<uint64_t> env_bytes(EnvVar var) {
  typed(var, EnvType::Bytes);
  const auto value = env_value(var);
  if (!value) return std::nullopt;
  const auto bytes = parse_byte_size(value->text);
  if (!bytes || *bytes == 0) throw env_error(*value, "a size such as 32M, 512K or 1G");
  return bytes;
}

std::optional<bool> switch_word(std::string_view text) noexcept {
  auto is = [&](std::string_view word) {
    if (text.size() != word.size()) return false;
    for (size_t i = 0; i < text.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(text[i])) != word[i]) return false;
    return true;
  };
  for (std::string_view on : {"1", "true", "yes", "on"})
    if (is(on)) return true;
  for (std::string_view off : {"0", "false", "no", "off"})
    if (is(off)) return false;
  return std::nullopt;
}

std::optional<uint64_t> parse_byte_size(std::string_view text) noexcept {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i < text.size()) {
    switch (text[i] | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: return std::nullopt;
    }
    ++i;
    if (i < text.size() && (text[i] | 0x20) == 'i') ++i;  // "MiB"
    if (i < text.size() && (text[i] | 0x20) == 'b') ++i;
  }
  if (i != text.size() || value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::optional<std::string> foreign_env(const char* name) {
  if (std::string_view(name).starts_with("SVOD_"))
    throw make_error(ErrorKind::Internal, "{} is svod's own variable: it is read by its EnvVar", name);
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace svod
