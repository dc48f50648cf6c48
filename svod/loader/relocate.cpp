// The table from a Machine to its traits, and the names in messages.
#include <array>

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

namespace {

// One line per machine the loader links for.
constexpr std::array<const ArchTraits*, 2> kArchitectures = {&kX86_64Traits, &kAArch64Traits};

}  // namespace

const ArchTraits& arch_traits(Machine machine) noexcept {
  for (const ArchTraits* traits : kArchitectures) {
    if (traits->machine == machine) return *traits;
  }
  // Unreachable: Machine has exactly the enumerators listed above.
  __builtin_trap();
}

std::string describe_relocation(Machine machine, std::uint32_t type) {
  const std::string_view name = arch_traits(machine).name(type);
  if (name.empty()) return fmt::format("type {}", type);
  return fmt::format("{} (type {})", name, type);
}

}  // namespace svod::detail
