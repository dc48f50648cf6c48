#include "svod/base/error.h"

namespace svod {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Validation: return "validation";
    case ErrorKind::Compile: return "compile";
    case ErrorKind::Load: return "load";
    case ErrorKind::UndefinedSymbol: return "undefined symbol";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::DeviceUnavailable: return "device unavailable";
    case ErrorKind::Execution: return "execution";
    case ErrorKind::PlanPoisoned: return "plan poisoned";
    case ErrorKind::Timeout: return "timeout";
    case ErrorKind::Io: return "io";
    case ErrorKind::Internal: return "internal";
    case ErrorKind::KernelFault: return "kernel fault";
    case ErrorKind::SandboxViolation: return "sandbox violation";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

}  // namespace svod
