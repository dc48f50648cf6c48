// The JSON nesting limit every parser of outside JSON checks first
// (svod/base/json_depth.h): exact at the limit, blind to brackets inside
// strings, and a typed error naming where and how deep.
#include "svod/base/json_depth.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "svod/base/error.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;

TEST(JsonDepth, ExactAtTheLimit) {
  EXPECT_FALSE(json_too_deep_at(""));
  EXPECT_FALSE(json_too_deep_at("1"));
  EXPECT_FALSE(json_too_deep_at(test::nested_arrays(kMaxJsonDepth)));
  EXPECT_FALSE(json_too_deep_at(test::nested_objects(kMaxJsonDepth)));
  EXPECT_EQ(json_too_deep_at(test::nested_arrays(kMaxJsonDepth + 1)), kMaxJsonDepth);  // the innermost '['
  EXPECT_EQ(json_too_deep_at(test::nested_objects(kMaxJsonDepth + 1)), 5 * kMaxJsonDepth);
  // Other limits.
  EXPECT_FALSE(json_too_deep_at("[[1], {\"a\": 2}]", 2));
  EXPECT_EQ(json_too_deep_at("[[1], {\"a\": [2]}]", 2), 12u);
  EXPECT_EQ(json_too_deep_at("[]", 0), 0u);
}

TEST(JsonDepth, WidthIsNotDepth) {
  std::string wide = "[";
  for (int i = 0; i < 10000; ++i) wide += "[[{}]],";
  wide += "1]";
  EXPECT_FALSE(json_too_deep_at(wide, 4));
  EXPECT_EQ(json_too_deep_at(wide, 3), 3u);
  // Stray closers neither go below zero nor hide later depth.
  EXPECT_EQ(json_too_deep_at("]]]]}}[[[", 2), 8u);
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  const std::string in_string = "{\"k\": \"" + std::string(100000, '[') + "\"}";
  EXPECT_FALSE(json_too_deep_at(in_string));
  // An escaped quote does not end the string; an escaped backslash does not
  // escape the quote after it.
  EXPECT_FALSE(json_too_deep_at(R"(["\"[[[[", 1])", 1));
  EXPECT_EQ(json_too_deep_at(R"(["\\", [1]])", 1), 7u);
  EXPECT_EQ(json_too_deep_at(R"({"[[": "]]", "x": {}})", 1), 18u);
  // Keys are strings too.
  EXPECT_FALSE(json_too_deep_at("{\"" + std::string(1000, '{') + "\": 1}", 1));
}

TEST(JsonDepth, HundredThousandDeep) {
  EXPECT_EQ(json_too_deep_at(test::nested_arrays(100000)), kMaxJsonDepth);
  EXPECT_EQ(json_too_deep_at(test::nested_objects(100000)), 5 * kMaxJsonDepth);
  EXPECT_EQ(json_too_deep_at(std::string(100000, '[')), kMaxJsonDepth);  // unclosed: still refused
}

TEST(JsonDepth, CheckThrowsTheCallersKindNamingWhereAndHowDeep) {
  EXPECT_NO_THROW(check_json_depth(test::nested_arrays(kMaxJsonDepth), ErrorKind::Load, "x"));
  Error e = expect_error([] { check_json_depth(test::nested_arrays(100000), ErrorKind::Validation, "plan.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_STREQ(e.what(), "plan.json: JSON nesting exceeds the limit of 256 levels (line 1, column 257)");
  e = expect_error([] { check_json_depth("{\n  \"a\": [\n    [[1]]]}", ErrorKind::Load, "m: section \"x\"", 3); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_STREQ(e.what(), "m: section \"x\": JSON nesting exceeds the limit of 3 levels (line 3, column 6)");
  // A NUL byte would end the text for the parser, which would then accept anything after it.
  e = expect_error([] { check_json_depth(std::string("{\"a\": 1}\n\0garbage", 18), ErrorKind::Validation, "p.json"); });
  EXPECT_STREQ(e.what(), "p.json: not valid JSON: a NUL byte at line 2, column 1");
}

// What the parser says of bad text, on the parser's real messages: the
// position and the problem, without the library's error codes.
TEST(JsonErrorWords, TheParsersComplaintsInPlainWords) {
  auto words = [](std::string_view text) {
    try {
      (void)nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return json_error_words(e.what());
    }
    ADD_FAILURE() << text << " parsed";
    return std::string();
  };
  EXPECT_EQ(words("{\n \"a\": [1, 2,, 3]\n}"),
            "line 2, column 13: unexpected ','; expected '[', '{', or a literal (while reading value)");
  EXPECT_EQ(words("{\"version\": 1,\n"),
            "line 2, column 1: unexpected end of input; expected string literal (while reading object key)");
  EXPECT_EQ(words(""), "line 1, column 1: unexpected end of input; expected '[', '{', or a literal (while reading value)");
  EXPECT_EQ(words("[1e999]"), "number overflow parsing '1e999'");
  for (const char* bad : {"{", "[1 2]", "nul", "\"\\x\"", "{\"a\" 1}", "1e999"})
    EXPECT_EQ(words(bad).find("json.exception"), std::string::npos) << words(bad);
  EXPECT_EQ(json_error_words("something else"), "something else");
}

}  // namespace
}  // namespace svod
