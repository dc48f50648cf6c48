#include "svod/base/env.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "svod/base/error.h"

namespace svod {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t env_int(const char* name, int64_t fallback) {
  auto text = env_string(name);
  if (!text) return fallback;
  int64_t value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end)
    throw make_error(ErrorKind::Validation, "{}=\"{}\" is not an integer", name, *text);
  return value;
}

std::optional<bool> env_switch(const char* name) {
  auto text = env_string(name);
  if (!text) return std::nullopt;
  std::string lower = *text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* yes : {"1", "true", "yes", "on"})
    if (lower == yes) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (lower == no) return false;
  throw make_error(ErrorKind::Validation, "{}=\"{}\": expected 1 or 0 (or true/false, yes/no, on/off)", name, *text);
}

}  // namespace svod
