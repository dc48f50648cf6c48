#include "svod/base/json_depth.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace svod {

std::optional<size_t> json_too_deep_at(std::string_view text, size_t limit) noexcept {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character, a quote or a backslash included
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > limit) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;  // unbalanced: the parser reports it
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

namespace {

// "line L, column C" of byte `at` (1-based; columns count bytes).
std::string position(std::string_view text, size_t at) {
  const std::string_view before = text.substr(0, at);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = at + 1 - (line_start == std::string_view::npos ? 0 : line_start + 1);
  return fmt::format("line {}, column {}", line, column);
}

}  // namespace

void check_json_depth(std::string_view text, ErrorKind kind, std::string_view where, size_t limit) {
  if (const std::optional<size_t> at = json_too_deep_at(text, limit))
    throw make_error(kind, "{}: JSON nesting exceeds the limit of {} levels ({})", where, limit, position(text, *at));
  // JSON has no NUL byte (in a string it must be escaped), but the parser
  // takes one for the end of the text and would accept whatever follows.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw make_error(kind, "{}: not valid JSON: a NUL byte at {}", where, position(text, nul));
}

std::string json_error_words(std::string_view what) {
  std::string text(what);
  // "[json.exception.parse_error.101] ": the library's name for the error.
  if (text.starts_with("[json.exception.")) {
    if (const size_t end = text.find("] "); end != std::string::npos) text.erase(0, end + 2);
  }
  if (text.starts_with("parse error at ")) text.erase(0, std::string_view("parse error at ").size());
  // "syntax error while parsing object key - unexpected ','; ...": what went
  // wrong first, then what was being read.
  constexpr std::string_view kWhile = "syntax error while parsing ";
  if (const size_t at = text.find(kWhile); at != std::string::npos) {
    const size_t dash = text.find(" - ", at);
    if (dash != std::string::npos) {
      const std::string reading = text.substr(at + kWhile.size(), dash - at - kWhile.size());
      text = text.substr(0, at) + text.substr(dash + 3) + " (while reading " + reading + ")";
    }
  }
  return text;
}

}  // namespace svod
