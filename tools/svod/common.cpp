#include "tools/svod/common.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "svod/compile/cpu_backend.h"

namespace svod::cli {

std::string failure_text(std::string_view command, const Error& e) {
  const std::string message = e.what();
  const size_t newline = message.find('\n');
  std::string text = fmt::format("svod {}: error ({}): {}\n", command, to_string(e.kind()), message.substr(0, newline));
  if (newline != std::string::npos) {
    std::string rest = message.substr(newline + 1);
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t end = rest.find('\n', pos);
      if (end == std::string::npos) end = rest.size();
      text += fmt::format("  | {}\n", rest.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  return text;
}

int fail(std::string_view command, const Error& e) {
  std::fputs(failure_text(command, e).c_str(), stderr);
  return 2;
}

std::map<std::string, int64_t> parse_vars(const std::vector<std::string>& vars) {
  std::map<std::string, int64_t> out;
  for (const auto& text : vars) {
    const size_t eq = text.find('=');
    int64_t value = 0;
    const char* begin = eq == std::string::npos ? nullptr : text.data() + eq + 1;
    const char* end = text.data() + text.size();
    if (eq == 0 || begin == nullptr || begin == end || std::from_chars(begin, end, value).ptr != end) {
      throw make_error(ErrorKind::Validation, "--var {}: expected NAME=VALUE with an integer VALUE", text);
    }
    out[text.substr(0, eq)] = value;
  }
  return out;
}

void select_cpu_backend(const std::string& backend) {
  if (backend.empty()) return;
  try {
    parse_cpu_backend(backend);
  } catch (const Error&) {
    throw make_error(ErrorKind::Validation, "--backend {}: expected clang, llvm or dlopen", backend);
  }
  // Plans open their CPU device through the registry, which creates the
  // device of the default backend; the variable decides that default.
  ::setenv("SVOD_CPU_BACKEND", backend.c_str(), 1);
}

}  // namespace svod::cli
