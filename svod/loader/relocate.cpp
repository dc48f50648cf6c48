// Dispatch from a Machine to its relocation tables, and the names in messages.
#include <fmt/format.h>

#include "svod/loader/relocate.h"

namespace svod::detail {

std::string machine_name(std::uint16_t e_machine) {
  switch (e_machine) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "i386";
    case EM_ARM: return "ARM";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "PowerPC64";
    case EM_LOONGARCH: return "LoongArch";
    case EM_S390: return "s390";
    case EM_MIPS: return "MIPS";
    case EM_AMDGPU: return "AMDGPU";
    case EM_CUDA: return "CUDA";
    case EM_BPF: return "BPF";
    default: return fmt::format("machine {}", e_machine);
  }
}

RelocationInfo relocation_info(Machine machine, std::uint32_t type) noexcept {
  return machine == Machine::X86_64 ? relocation_info_x86_64(type) : relocation_info_aarch64(type);
}

std::string_view relocation_name(Machine machine, std::uint32_t type) noexcept {
  return machine == Machine::X86_64 ? relocation_name_x86_64(type) : relocation_name_aarch64(type);
}

std::string describe_relocation(Machine machine, std::uint32_t type) {
  const std::string_view name = relocation_name(machine, type);
  if (name.empty()) return fmt::format("type {}", type);
  return fmt::format("{} (type {})", name, type);
}

}  // namespace svod::detail
