// How deep JSON text nests, checked before it is parsed; what its parser
// says of text it refuses, in svod's words.
//
// nlohmann's parser builds arbitrarily deep values, but copying, comparing or
// dumping one recurses once per level: JSON nested 100,000 deep overflows the
// stack. Every JSON text svod reads from outside its process (plan files, tune
// files, a package's manifest and plan, the C API's vars_json, the tuner's
// worker jobs and events, cached files) goes through check_json_depth (or
// json_too_deep_at) first, so no parsed value nests deeper than
// kMaxJsonDepth. The scan is one pass over the bytes and needs no JSON
// library.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "svod/base/error.h"

namespace svod {

// The deepest nesting of arrays and objects svod accepts: `[]` and `{}` are
// depth 1, `[[1]]` depth 2. Real plan, tune and package files nest fewer
// than ten levels; 256 is far above any of them and far below what
// overflows a thread's stack.
inline constexpr size_t kMaxJsonDepth = 256;

// The byte offset of the first `[` or `{` in `text` that opens a level
// deeper than `limit`, or nullopt when `text` nests no deeper than that.
// Brackets inside strings (escapes included) do not count. For text that is
// valid JSON up to a point the count is exact up to that point, so a parser,
// which stops at the first error, never gets deeper than this scan says.
std::optional<size_t> json_too_deep_at(std::string_view text, size_t limit = kMaxJsonDepth) noexcept;

// Throws Error(`kind`) when `text` nests deeper than `limit`:
// "WHERE: JSON nesting exceeds the limit of LIMIT levels (line L, column C)",
// where `where` names the file, section or argument and the position is the
// bracket that goes too deep (1-based; columns count bytes); or when it holds
// a NUL byte, which nlohmann's parser takes for the end of the text (so that
// anything after it would be ignored): "WHERE: not valid JSON: a NUL byte at
// line L, column C".
void check_json_depth(std::string_view text, ErrorKind kind, std::string_view where, size_t limit = kMaxJsonDepth);

// The JSON parser's complaint `what` (nlohmann's exception text) in svod's
// words: "[json.exception.parse_error.101] parse error at line 3, column 13:
// syntax error while parsing value - unexpected ','; expected '[', '{', or a
// literal" becomes "line 3, column 13: unexpected ','; expected '[', '{', or
// a literal (while reading value)". Text it does not recognise is kept.
std::string json_error_words(std::string_view what);

}  // namespace svod
