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

}  // namespace svod
