// A C kernel's parameters from its source text (c_signature.h says what is
// understood and why the compiler is not asked).
#include "svod/program/c_signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>

namespace svod {

namespace {

struct Token {
  enum Kind { Identifier, Number, Literal, Punct } kind = Punct;
  std::string_view text;
};

bool identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool identifier_char(char c) { return identifier_start(c) || (c >= '0' && c <= '9'); }

// Tokens of C source, without comments, literals' contents and preprocessor
// lines.
class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  bool next(Token& t) {
    for (;;) {
      if (i_ >= s_.size()) return false;
      const char c = s_[i_];
      if (c == '\n') {
        line_start_ = true;
        ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++i_;
      } else if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;  // a line continuation outside a directive
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') i_ += (s_[i_] == '\\' && i_ + 1 < s_.size()) ? 2 : 1;
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '*') {
        const size_t end = s_.find("*/", i_ + 2);
        i_ = end == std::string_view::npos ? s_.size() : end + 2;
      } else if (c == '#' && line_start_) {
        // A directive, to its end (continued lines included; a comment in it
        // may hide the newline).
        while (i_ < s_.size() && s_[i_] != '\n') {
          if (s_[i_] == '\\' && i_ + 1 < s_.size()) i_ += 2;
          else if (s_.compare(i_, 2, "/*") == 0) {
            const size_t end = s_.find("*/", i_ + 2);
            i_ = end == std::string_view::npos ? s_.size() : end + 2;
          } else ++i_;
        }
      } else {
        break;
      }
    }
    line_start_ = false;
    const size_t start = i_;
    const char c = s_[i_];
    if (identifier_start(c)) {
      while (i_ < s_.size() && identifier_char(s_[i_])) ++i_;
      t = {Token::Identifier, s_.substr(start, i_ - start)};
    } else if (c >= '0' && c <= '9') {
      while (i_ < s_.size() && (identifier_char(s_[i_]) || s_[i_] == '.')) ++i_;
      t = {Token::Number, s_.substr(start, i_ - start)};
    } else if (c == '"' || c == '\'') {
      ++i_;
      while (i_ < s_.size() && s_[i_] != c && s_[i_] != '\n') i_ += s_[i_] == '\\' ? 2 : 1;
      i_ = std::min(i_ + 1, s_.size());
      t = {Token::Literal, s_.substr(start, i_ - start)};
    } else if (s_.compare(i_, 3, "...") == 0) {
      i_ += 3;
      t = {Token::Punct, s_.substr(start, 3)};
    } else {
      ++i_;
      t = {Token::Punct, s_.substr(start, 1)};
    }
    return true;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  bool line_start_ = true;
};

bool is(const Token& t, std::string_view text) { return t.text == text; }

// Tokens from a '(' to its matching ')' (both excluded) into `out`; false when
// the source ends first. `lexer` is past the '('.
bool balanced(Lexer& lexer, std::vector<Token>& out) {
  int depth = 1;
  Token t;
  while (lexer.next(t)) {
    if (is(t, "(")) ++depth;
    if (is(t, ")") && --depth == 0) return true;
    out.push_back(t);
  }
  return false;
}

constexpr std::array<std::string_view, 9> kQualifiers = {"const",    "volatile", "restrict", "__restrict",
                                                         "__restrict__", "register", "__const", "__volatile__",
                                                         "_Nonnull"};
constexpr std::array<std::string_view, 14> kTypeWords = {"void",  "char",    "short",    "int",   "long",
                                                         "float", "double",  "signed",   "unsigned", "_Bool",
                                                         "bool",  "_Float16", "__fp16", "__bf16"};

struct NamedType {
  std::string_view name;
  DType dtype;
};
constexpr std::array<NamedType, 16> kTypedefs = {{{"int8_t", DType::I8},
                                                  {"uint8_t", DType::U8},
                                                  {"int16_t", DType::I16},
                                                  {"uint16_t", DType::U16},
                                                  {"int32_t", DType::I32},
                                                  {"uint32_t", DType::U32},
                                                  {"int64_t", DType::I64},
                                                  {"uint64_t", DType::U64},
                                                  {"size_t", DType::U64},
                                                  {"ssize_t", DType::I64},
                                                  {"ptrdiff_t", DType::I64},
                                                  {"intptr_t", DType::I64},
                                                  {"uintptr_t", DType::U64},
                                                  {"int_fast32_t", DType::I64},
                                                  {"int_least32_t", DType::I32},
                                                  {"uint_least32_t", DType::U32}}};

template <size_t N>
bool one_of(std::string_view word, const std::array<std::string_view, N>& words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

const NamedType* typedef_of(std::string_view word) {
  for (const auto& t : kTypedefs)
    if (t.name == word) return &t;
  return nullptr;
}

// The element type of C's type words (`words`: void, char, ... as written);
// nullopt with `problem` set when svod has none, `is_void` for void.
std::optional<DType> arithmetic_type(const std::vector<std::string_view>& words, bool& is_void, std::string& problem) {
  int longs = 0, shorts = 0, chars = 0, ints = 0, signs = 0, unsigneds = 0, others = 0;
  std::string_view other;
  for (auto w : words) {
    if (w == "long") ++longs;
    else if (w == "short") ++shorts;
    else if (w == "char") ++chars;
    else if (w == "int") ++ints;
    else if (w == "signed") ++signs;
    else if (w == "unsigned") ++unsigneds;
    else {
      ++others;
      other = w;
    }
  }
  if (others > 1 || (others == 1 && (longs + shorts + chars + ints + signs + unsigneds) > 0 &&
                     !(other == "double" && longs > 0))) {
    problem = "an unusual combination of type words";
    return std::nullopt;
  }
  if (others == 1) {
    if (other == "void") {
      is_void = true;
      return std::nullopt;
    }
    if (other == "double" && longs > 0) {
      problem = "svod has no long double element type";
      return std::nullopt;
    }
    if (other == "float") return DType::F32;
    if (other == "double") return DType::F64;
    if (other == "_Float16" || other == "__fp16") return DType::F16;
    if (other == "__bf16") return DType::BF16;
    if (other == "_Bool" || other == "bool") return DType::Bool;
    if (const NamedType* t = typedef_of(other)) return t->dtype;
  }
  const bool is_unsigned = unsigneds > 0;
  if (chars > 0) {
    if (signs > 0) return DType::I8;
    if (is_unsigned) return DType::U8;
#ifdef __CHAR_UNSIGNED__
    return DType::U8;
#else
    return DType::I8;
#endif
  }
  if (shorts > 0) return is_unsigned ? DType::U16 : DType::I16;
  if (longs > 0) {
    static_assert(sizeof(long) == 8, "LP64 targets only");
    return is_unsigned ? DType::U64 : DType::I64;
  }
  return is_unsigned ? DType::U32 : DType::I32;
}

// One parameter's tokens (defines already substituted) as a CParameter.
CParameter parameter(const std::vector<Token>& tokens, size_t index, bool& kind_known) {
  CParameter p;
  kind_known = true;
  std::vector<std::string_view> type_words;
  std::vector<std::string_view> unknown;
  int stars = 0, arrays = 0;
  bool const_before_star = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (is(t, "__attribute__") || is(t, "__attribute") || is(t, "__declspec") || is(t, "_Alignas") ||
        is(t, "alignas")) {
      // Skip its parenthesised arguments.
      int depth = 0;
      for (++i; i < tokens.size(); ++i) {
        if (is(tokens[i], "(")) ++depth;
        else if (is(tokens[i], ")") && --depth == 0) break;
      }
      continue;
    }
    if (is(t, "[")) {
      // `x[]`, `x[N]`, `x[restrict N]`, `x[static N]`: a pointer; what is inside is skipped.
      ++arrays;
      int depth = 0;
      for (; i < tokens.size(); ++i) {
        if (is(tokens[i], "[")) ++depth;
        else if (is(tokens[i], "]") && --depth == 0) break;
      }
      continue;
    }
    if (is(t, "*")) {
      ++stars;
      continue;
    }
    if (is(t, "(") || is(t, ")")) {
      p.problem = "a function pointer or parenthesised declarator";
      kind_known = false;
      return p;
    }
    if (t.kind != Token::Identifier) {
      p.problem = fmt::format("unexpected \"{}\"", t.text);
      kind_known = false;
      return p;
    }
    if (one_of(t.text, kQualifiers)) {
      if ((is(t, "const") || is(t, "__const")) && stars == 0 && arrays == 0) const_before_star = true;
      continue;
    }
    if (is(t, "struct") || is(t, "union") || is(t, "enum")) {
      p.problem = fmt::format("a {} type", t.text);
      kind_known = false;
      return p;
    }
    if (stars > 0 || arrays > 0 || one_of(t.text, kTypeWords) || typedef_of(t.text) != nullptr) {
      if (stars == 0 && arrays == 0) type_words.push_back(t.text);
      else p.name = std::string(t.text);  // after the stars: the name
      continue;
    }
    unknown.push_back(t.text);
  }
  // The last unknown word after the type is the parameter's name; any other is
  // a type svod does not know (a typedef or macro).
  if (p.name.empty() && !unknown.empty() && (!type_words.empty() || unknown.size() > 1)) {
    p.name = std::string(unknown.back());
    unknown.pop_back();
  }
  if (p.name.empty()) p.name = fmt::format("arg{}", index);
  p.pointer = stars + arrays > 0;
  p.read_only = p.pointer && const_before_star;
  std::string type;
  if (const_before_star) type += "const ";
  for (auto w : unknown) type += std::string(w) + " ";
  for (auto w : type_words) type += std::string(w) + " ";
  if (!type.empty()) type.pop_back();
  type += std::string(static_cast<size_t>(stars + arrays), '*');
  p.type = type;
  if (stars + arrays > 1) {
    p.problem = "a pointer to a pointer (svod passes each buffer as one pointer)";
    return p;
  }
  if (!unknown.empty() || type_words.empty()) {
    p.problem = unknown.empty() ? "no type" : fmt::format("type \"{}\", which svod does not know", unknown.front());
    // A pointer is still a pointer; an unknown word may be a macro for anything.
    if (!p.pointer) kind_known = false;
    return p;
  }
  bool is_void = false;
  const auto dtype = arithmetic_type(type_words, is_void, p.problem);
  if (p.pointer) {
    p.dtype = dtype;  // void*: a buffer of no declared dtype
    return p;
  }
  if (is_void) {
    p.problem = "void";
    return p;
  }
  if (!dtype) return p;
  p.dtype = dtype;
  if (is_integer(*dtype) && size_of(*dtype) == 4) p.scalar = ScalarType::I32;
  else if (is_integer(*dtype) && size_of(*dtype) == 8) p.scalar = ScalarType::I64;
  else
    p.problem = fmt::format("svod's scalars are integers of 32 or 64 bits, not {}", to_string(*dtype));
  return p;
}

// The parameters between a definition's parentheses.
CSignature parameters(const std::vector<Token>& tokens,
                      const std::vector<std::pair<std::string, std::string>>& defines) {
  CSignature sig;
  sig.found = true;
  sig.understood = true;
  // Defines stand for their values (one level).
  std::vector<Token> expanded;
  for (const Token& t : tokens) {
    auto d = t.kind == Token::Identifier
                 ? std::find_if(defines.begin(), defines.end(), [&](const auto& kv) { return kv.first == t.text; })
                 : defines.end();
    if (d == defines.end()) {
      expanded.push_back(t);
      continue;
    }
    Lexer value(d->second);  // tokens point into the caller's defines
    Token v;
    while (value.next(v)) expanded.push_back(v);
  }
  if (expanded.empty() || (expanded.size() == 1 && is(expanded[0], "void"))) return sig;
  std::vector<Token> current;
  int depth = 0;
  auto finish = [&] {
    if (current.size() == 1 && is(current[0], "...")) {
      sig.understood = false;
      sig.problem = "a variadic function";
    } else {
      bool kind_known = true;
      sig.parameters.push_back(parameter(current, sig.parameters.size(), kind_known));
      if (!kind_known && sig.understood) {
        sig.understood = false;
        sig.problem = fmt::format("parameter {} (\"{}\"): {}", sig.parameters.size() - 1, sig.parameters.back().name,
                                  sig.parameters.back().problem);
      }
    }
    current.clear();
  };
  for (const Token& t : expanded) {
    if (is(t, "(") || is(t, "[")) ++depth;
    if (is(t, ")") || is(t, "]")) --depth;
    if (depth == 0 && is(t, ",")) {
      finish();
      continue;
    }
    current.push_back(t);
  }
  finish();
  return sig;
}

}  // namespace

std::string CSignature::text(std::string_view entry) const {
  std::string out = fmt::format("{}(", entry);
  for (size_t i = 0; i < parameters.size(); ++i) {
    const CParameter& p = parameters[i];
    out += fmt::format("{}{} {}", i ? ", " : "", p.type, p.name);
  }
  return out + ")";
}

CSignature parse_c_signature(std::string_view source, std::string_view entry,
                             const std::vector<std::pair<std::string, std::string>>& defines) {
  Lexer lexer(source);
  Token t;
  int braces = 0;
  std::optional<CSignature> found;
  while (lexer.next(t)) {
    if (is(t, "{")) {
      ++braces;
      continue;
    }
    if (is(t, "}")) {
      braces = std::max(0, braces - 1);
      continue;
    }
    if (braces != 0 || t.kind != Token::Identifier || t.text != entry) continue;
    Lexer after = lexer;
    Token open;
    if (!after.next(open) || !is(open, "(")) continue;
    std::vector<Token> inside;
    if (!balanced(after, inside)) break;
    // Attributes and asm labels may sit between the ')' and the body.
    Token next;
    bool have = after.next(next);
    while (have && (is(next, "__attribute__") || is(next, "__asm__") || is(next, "asm") || is(next, "__asm"))) {
      Token paren;
      std::vector<Token> ignored;
      if (!after.next(paren) || !is(paren, "(") || !balanced(after, ignored)) {
        have = false;
        break;
      }
      have = after.next(next);
    }
    if (!have || !is(next, "{")) continue;  // a declaration or a call
    lexer = after;
    ++braces;
    CSignature sig = parameters(inside, defines);
    if (found && found->text(entry) != sig.text(entry)) {
      CSignature differ;
      differ.found = true;
      differ.problem = fmt::format("the source defines {} twice, differently (under #if?): {} and {}", entry,
                                   found->text(entry), sig.text(entry));
      return differ;
    }
    found = std::move(sig);
  }
  if (found) return std::move(*found);
  CSignature none;
  none.problem = fmt::format("no definition \"{}(...) {{\" found in the source (outside comments and other "
                             "functions' bodies)",
                             entry);
  return none;
}

std::optional<CParameters> c_parameters(const CSignature& sig, std::string& problem) {
  if (!sig.understood) {
    problem = sig.problem;
    return std::nullopt;
  }
  CParameters out;
  for (size_t i = 0; i < sig.parameters.size(); ++i) {
    const CParameter& p = sig.parameters[i];
    if (!p.problem.empty()) {
      problem = fmt::format("parameter {} (\"{}\"): {}", i, p.name, p.problem);
      return std::nullopt;
    }
    if (p.pointer) {
      if (!out.scalars.empty()) {
        problem = fmt::format("pointer parameter {} (\"{}\") follows an integer one; svod passes every buffer "
                              "before every scalar",
                              i, p.name);
        return std::nullopt;
      }
      out.buffers.push_back(BufferParam{.name = p.name, .access = p.read_only ? Access::Read : Access::ReadWrite,
                                        .dtype = p.dtype, .min_count = std::nullopt});
    } else {
      out.scalars.push_back(ScalarParam{.name = p.name, .type = *p.scalar, .min = std::nullopt, .max = std::nullopt});
    }
  }
  return out;
}

}  // namespace svod
