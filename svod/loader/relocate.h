// Per-machine relocation knowledge for the JIT loader: what each relocation type
// patches (width, whether it goes through the GOT or may be routed through a
// far-call stub) and the arithmetic that patches it. The machine-independent
// linker (elf_link.cpp) owns layout, symbols, GOT and stub slots; the files
// relocate_<machine>.cpp own only the encodings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "svod/loader/elf_format.h"

namespace svod::detail {

enum class RelocationClass : std::uint8_t {
  Unsupported,  // the loader rejects it
  None,         // R_*_NONE: nothing to patch
  Plain,        // computed from S, A and P alone
  Branch,       // a call or jump that may be routed through a stub when out of range
  Got,          // refers to a GOT slot holding the symbol's absolute address
};

struct RelocationInfo {
  RelocationClass kind = RelocationClass::Unsupported;
  std::uint8_t width = 0;  // bytes patched at the relocation offset
};

enum class PatchStatus : std::uint8_t {
  Ok,
  OutOfRange,  // the value does not fit the field
  Misaligned,  // the value is not a multiple of what the field scales by
};

// Size and alignment of one far-call stub (x86-64: jmp *[rip+0]; .quad target,
// AArch64: ldr x16, #8; br x16; .quad target). Both fit in 16 bytes.
inline constexpr std::uint64_t kStubSize = 16;
inline constexpr std::uint64_t kGotSlotSize = 8;

RelocationInfo relocation_info(Machine machine, std::uint32_t type) noexcept;
RelocationInfo relocation_info_x86_64(std::uint32_t type) noexcept;
RelocationInfo relocation_info_aarch64(std::uint32_t type) noexcept;

// "R_X86_64_PLT32", "R_AARCH64_CALL26", ... or "" when the type has no name we know.
std::string_view relocation_name(Machine machine, std::uint32_t type) noexcept;
std::string_view relocation_name_x86_64(std::uint32_t type) noexcept;
std::string_view relocation_name_aarch64(std::uint32_t type) noexcept;

// "R_X86_64_PLT32 (type 4)" or "type 200" for messages.
std::string describe_relocation(Machine machine, std::uint32_t type);

// Patches the field at `location` (run-time address `place`) for S = `symbol`,
// A = `addend`. For Got-class types `symbol` is the address of the GOT slot and
// for Branch-class types routed through a stub it is the stub's address; the
// caller arranges both. Nothing is written unless the result is Ok.
PatchStatus patch_x86_64(std::uint32_t type, std::byte* location, std::uint64_t place,
                         std::uint64_t symbol, std::int64_t addend) noexcept;
PatchStatus patch_aarch64(std::uint32_t type, std::byte* location, std::uint64_t place,
                          std::uint64_t symbol, std::int64_t addend) noexcept;

// Writes a far-call stub at `location` that jumps to `target`.
void write_stub_x86_64(std::byte* location, std::uint64_t target) noexcept;
void write_stub_aarch64(std::byte* location, std::uint64_t target) noexcept;

}  // namespace svod::detail
