// Per-machine relocation knowledge for the JIT loader: what each relocation type
// patches (width, whether it goes through the GOT or may be routed through a
// far-call stub), the arithmetic that patches it, and the few conventions in
// which machines differ (what a GOT slot holds, where a branch counts from,
// what a far-call stub looks like). The machine-independent linker
// (elf_link.h: elf_parse.cpp and elf_link.cpp) owns layout, symbols, GOT and
// stub slots and asks an ArchTraits for everything else; each
// relocate_<machine>.cpp defines one.
// A new machine is one such file, one Machine enumerator and one line in the
// table of relocate.cpp.
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
  // The field holds a 32-bit absolute address (x86-64 R_X86_64_32/32S of the
  // non-PIC small code model): an image referring to itself this way must be
  // placed in the low 2 GiB of the address space.
  bool low_address = false;
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

// Everything the generic linker needs to know about one machine.
struct ArchTraits {
  Machine machine;

  RelocationInfo (*info)(std::uint32_t type) noexcept;

  // "R_X86_64_PLT32", "R_AARCH64_CALL26", ... or "" when the type has no name we know.
  std::string_view (*name)(std::uint32_t type) noexcept;

  // Patches the field at `location` (run-time address `place`) for S = `symbol`,
  // A = `addend`. For Got-class types `symbol` is the address of the GOT slot
  // and for Branch-class types routed through a stub it is the stub's address;
  // the linker arranges both. Nothing is written unless the result is Ok.
  PatchStatus (*patch)(std::uint32_t type, std::byte* location, std::uint64_t place,
                       std::uint64_t symbol, std::int64_t addend) noexcept;

  // Writes a far-call stub (kStubSize bytes) at `location` that jumps to `target`.
  void (*write_stub)(std::byte* location, std::uint64_t target) noexcept;

  // Byte that fills stub slots before they are written, so a stray jump traps.
  std::uint8_t stub_fill;

  // True when a GOT slot holds S + A and the instruction refers to the slot
  // with no addend (AArch64); false when the slot holds S and the addend stays
  // on the instruction (x86-64 GOTPCREL, where A is the -4 of the PC bias).
  // Slots are shared by relocations with the same symbol and, in the first
  // case, the same addend.
  bool got_slot_holds_addend;

  // How far past the relocated field's own address a branch counts from,
  // expressed as the bias folded into the addend: x86-64 rel32 counts from the
  // end of the 4-byte field (a plain call has A = -4), so a stub reached with
  // A = -bias jumps to S + A + bias; 0 on machines whose branches count from
  // the instruction.
  std::int64_t branch_bias;
};

// The traits of `machine`; every Machine enumerator has an entry.
const ArchTraits& arch_traits(Machine machine) noexcept;

// Defined by relocate_<machine>.cpp.
extern const ArchTraits kX86_64Traits;
extern const ArchTraits kAArch64Traits;

// "R_X86_64_PLT32 (type 4)" or "type 200" for messages.
std::string describe_relocation(Machine machine, std::uint32_t type);

}  // namespace svod::detail
