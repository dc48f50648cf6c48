#include "svod/guard/op_name.h"

namespace svod {

std::string_view to_string(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::Kernel: return "kernel";
    case OpKind::Copy: return "copy";
    case OpKind::Custom: return "custom";
    case OpKind::Collective: return "collective";
    case OpKind::View: return "view";
  }
  return "?";
}

size_t write_op_name(std::span<char> out, size_t index, std::string_view id_or_label) noexcept {
  size_t length = 0;
  const auto put = [&](std::string_view text) {
    for (char c : text) {
      if (length < out.size()) out[length] = c;
      ++length;
    }
  };
  put("op ");
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + index % 10);
    index /= 10;
  } while (index != 0);
  while (n > 0) put(std::string_view(&digits[--n], 1));
  if (!id_or_label.empty()) {
    put(" (");
    put(id_or_label);
    put(")");
  }
  return length;
}

std::string op_name(size_t index, std::string_view id_or_label) {
  std::string name(write_op_name({}, index, id_or_label), '\0');
  write_op_name(name, index, id_or_label);
  return name;
}

std::string op_title(std::string_view name, OpKind kind, std::string_view what) {
  std::string title(name);
  if (!title.empty()) title += ' ';
  title += to_string(kind);
  if (!what.empty()) {
    title += ' ';
    title += what;
  }
  return title;
}

}  // namespace svod
