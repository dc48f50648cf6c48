// AArch64 relocation encodings (ELF for the Arm 64-bit Architecture, "Relocation
// operations"). Instruction fields are patched read-modify-write so the opcode
// and register bits clang emitted are kept.
#include <cstring>

#include "svod/loader/relocate.h"

namespace svod::detail {
namespace {

std::uint32_t load32(const std::byte* location) noexcept {
  std::uint32_t word;
  std::memcpy(&word, location, sizeof(word));
  return word;
}

void store32(std::byte* location, std::uint32_t word) noexcept {
  std::memcpy(location, &word, sizeof(word));
}

// Replaces the bits of `mask` in the instruction with `bits` (already shifted).
void patch_field(std::byte* location, std::uint32_t mask, std::uint32_t bits) noexcept {
  store32(location, (load32(location) & ~mask) | (bits & mask));
}

bool fits_signed(std::int64_t value, int bits) noexcept {
  const std::int64_t limit = std::int64_t{1} << (bits - 1);
  return value >= -limit && value < limit;
}

// ABS32/ABS16 and PREL32/PREL16 accept values that fit either as signed or as
// unsigned fields (the AArch64 ELF spec's range for these data relocations).
bool fits_data(std::int64_t value, int bits) noexcept {
  return value >= -(std::int64_t{1} << (bits - 1)) && value < (std::int64_t{1} << bits);
}

std::uint64_t page(std::uint64_t address) noexcept { return address & ~std::uint64_t{0xFFF}; }

// ADR/ADRP split their 21-bit immediate into immlo (bits 29-30) and immhi (5-23).
void patch_adr_immediate(std::byte* location, std::uint64_t imm21) noexcept {
  const auto imm = static_cast<std::uint32_t>(imm21);
  const std::uint32_t bits = ((imm & 0x3) << 29) | (((imm >> 2) & 0x7FFFF) << 5);
  patch_field(location, (0x3u << 29) | (0x7FFFFu << 5), bits);
}

// Scaled unsigned 12-bit offset of LDR/STR (bits 10-21).
PatchStatus patch_lo12(std::byte* location, std::uint64_t address, unsigned scale_log2) noexcept {
  const std::uint64_t lo12 = address & 0xFFF;
  if ((lo12 & ((std::uint64_t{1} << scale_log2) - 1)) != 0) return PatchStatus::Misaligned;
  patch_field(location, 0xFFFu << 10, static_cast<std::uint32_t>(lo12 >> scale_log2) << 10);
  return PatchStatus::Ok;
}

PatchStatus patch_branch(std::byte* location, std::int64_t delta, int bits, int shift) noexcept {
  if ((delta & 3) != 0) return PatchStatus::Misaligned;
  if (!fits_signed(delta, bits + 2)) return PatchStatus::OutOfRange;
  const std::uint32_t mask = ((std::uint32_t{1} << bits) - 1) << shift;
  patch_field(location, mask, static_cast<std::uint32_t>(delta >> 2) << shift);
  return PatchStatus::Ok;
}

RelocationInfo relocation_info(std::uint32_t type) noexcept {
  switch (type) {
    case R_AARCH64_NONE:
    case 256:  // R_AARCH64_NONE in the ELF64 numbering (withdrawn R_AARCH64_NULL)
      return {RelocationClass::None, 0};
    case R_AARCH64_ABS64:
    case R_AARCH64_PREL64: return {RelocationClass::Plain, 8};
    case R_AARCH64_ABS32:
    case R_AARCH64_PREL32: return {RelocationClass::Plain, 4};
    case R_AARCH64_ABS16:
    case R_AARCH64_PREL16: return {RelocationClass::Plain, 2};
    case R_AARCH64_ADR_PREL_LO21:
    case R_AARCH64_ADR_PREL_PG_HI21:
    case R_AARCH64_ADR_PREL_PG_HI21_NC:
    case R_AARCH64_ADD_ABS_LO12_NC:
    case R_AARCH64_LDST8_ABS_LO12_NC:
    case R_AARCH64_LDST16_ABS_LO12_NC:
    case R_AARCH64_LDST32_ABS_LO12_NC:
    case R_AARCH64_LDST64_ABS_LO12_NC:
    case R_AARCH64_LDST128_ABS_LO12_NC:
    case R_AARCH64_CONDBR19:
    case R_AARCH64_TSTBR14: return {RelocationClass::Plain, 4};
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26: return {RelocationClass::Branch, 4};
    case R_AARCH64_ADR_GOT_PAGE:
    case R_AARCH64_LD64_GOT_LO12_NC: return {RelocationClass::Got, 4};
    default: return {};
  }
}

std::string_view relocation_name(std::uint32_t type) noexcept {
  switch (type) {
    case R_AARCH64_NONE: return "R_AARCH64_NONE";
    case 256: return "R_AARCH64_NONE";
    case R_AARCH64_ABS64: return "R_AARCH64_ABS64";
    case R_AARCH64_ABS32: return "R_AARCH64_ABS32";
    case R_AARCH64_ABS16: return "R_AARCH64_ABS16";
    case R_AARCH64_PREL64: return "R_AARCH64_PREL64";
    case R_AARCH64_PREL32: return "R_AARCH64_PREL32";
    case R_AARCH64_PREL16: return "R_AARCH64_PREL16";
    case R_AARCH64_MOVW_UABS_G0: return "R_AARCH64_MOVW_UABS_G0";
    case R_AARCH64_MOVW_UABS_G0_NC: return "R_AARCH64_MOVW_UABS_G0_NC";
    case R_AARCH64_MOVW_UABS_G1: return "R_AARCH64_MOVW_UABS_G1";
    case R_AARCH64_MOVW_UABS_G1_NC: return "R_AARCH64_MOVW_UABS_G1_NC";
    case R_AARCH64_MOVW_UABS_G2: return "R_AARCH64_MOVW_UABS_G2";
    case R_AARCH64_MOVW_UABS_G2_NC: return "R_AARCH64_MOVW_UABS_G2_NC";
    case R_AARCH64_MOVW_UABS_G3: return "R_AARCH64_MOVW_UABS_G3";
    case R_AARCH64_ADR_PREL_LO21: return "R_AARCH64_ADR_PREL_LO21";
    case R_AARCH64_ADR_PREL_PG_HI21: return "R_AARCH64_ADR_PREL_PG_HI21";
    case R_AARCH64_ADR_PREL_PG_HI21_NC: return "R_AARCH64_ADR_PREL_PG_HI21_NC";
    case R_AARCH64_ADD_ABS_LO12_NC: return "R_AARCH64_ADD_ABS_LO12_NC";
    case R_AARCH64_LDST8_ABS_LO12_NC: return "R_AARCH64_LDST8_ABS_LO12_NC";
    case R_AARCH64_LDST16_ABS_LO12_NC: return "R_AARCH64_LDST16_ABS_LO12_NC";
    case R_AARCH64_LDST32_ABS_LO12_NC: return "R_AARCH64_LDST32_ABS_LO12_NC";
    case R_AARCH64_LDST64_ABS_LO12_NC: return "R_AARCH64_LDST64_ABS_LO12_NC";
    case R_AARCH64_LDST128_ABS_LO12_NC: return "R_AARCH64_LDST128_ABS_LO12_NC";
    case R_AARCH64_TSTBR14: return "R_AARCH64_TSTBR14";
    case R_AARCH64_CONDBR19: return "R_AARCH64_CONDBR19";
    case R_AARCH64_JUMP26: return "R_AARCH64_JUMP26";
    case R_AARCH64_CALL26: return "R_AARCH64_CALL26";
    case R_AARCH64_ADR_GOT_PAGE: return "R_AARCH64_ADR_GOT_PAGE";
    case R_AARCH64_LD64_GOT_LO12_NC: return "R_AARCH64_LD64_GOT_LO12_NC";
    case R_AARCH64_TLSDESC_ADR_PAGE21: return "R_AARCH64_TLSDESC_ADR_PAGE21";
    case R_AARCH64_COPY: return "R_AARCH64_COPY";
    case R_AARCH64_GLOB_DAT: return "R_AARCH64_GLOB_DAT";
    case R_AARCH64_JUMP_SLOT: return "R_AARCH64_JUMP_SLOT";
    case R_AARCH64_RELATIVE: return "R_AARCH64_RELATIVE";
    default: return {};
  }
}

PatchStatus patch(std::uint32_t type, std::byte* location, std::uint64_t place,
                  std::uint64_t symbol, std::int64_t addend) noexcept {
  const std::uint64_t absolute = symbol + static_cast<std::uint64_t>(addend);
  const auto relative = static_cast<std::int64_t>(absolute - place);
  switch (type) {
    case R_AARCH64_NONE:
    case 256: return PatchStatus::Ok;
    case R_AARCH64_ABS64: std::memcpy(location, &absolute, 8); return PatchStatus::Ok;
    case R_AARCH64_PREL64: std::memcpy(location, &relative, 8); return PatchStatus::Ok;
    case R_AARCH64_ABS32:
    case R_AARCH64_PREL32: {
      const auto value = type == R_AARCH64_ABS32 ? static_cast<std::int64_t>(absolute) : relative;
      if (!fits_data(value, 32)) return PatchStatus::OutOfRange;
      const auto field = static_cast<std::uint32_t>(value);
      std::memcpy(location, &field, 4);
      return PatchStatus::Ok;
    }
    case R_AARCH64_ABS16:
    case R_AARCH64_PREL16: {
      const auto value = type == R_AARCH64_ABS16 ? static_cast<std::int64_t>(absolute) : relative;
      if (!fits_data(value, 16)) return PatchStatus::OutOfRange;
      const auto field = static_cast<std::uint16_t>(value);
      std::memcpy(location, &field, 2);
      return PatchStatus::Ok;
    }
    case R_AARCH64_ADR_PREL_LO21:
      if (!fits_signed(relative, 21)) return PatchStatus::OutOfRange;
      patch_adr_immediate(location, static_cast<std::uint64_t>(relative));
      return PatchStatus::Ok;
    case R_AARCH64_ADR_PREL_PG_HI21:
    case R_AARCH64_ADR_PREL_PG_HI21_NC:
    case R_AARCH64_ADR_GOT_PAGE: {
      const auto delta = static_cast<std::int64_t>(page(absolute) - page(place));
      // ADRP reaches +-4 GiB; the _NC form skips the check by definition.
      if (type != R_AARCH64_ADR_PREL_PG_HI21_NC && !fits_signed(delta, 33)) {
        return PatchStatus::OutOfRange;
      }
      patch_adr_immediate(location, static_cast<std::uint64_t>(delta) >> 12);
      return PatchStatus::Ok;
    }
    case R_AARCH64_ADD_ABS_LO12_NC:
      patch_field(location, 0xFFFu << 10, static_cast<std::uint32_t>(absolute & 0xFFF) << 10);
      return PatchStatus::Ok;
    case R_AARCH64_LDST8_ABS_LO12_NC: return patch_lo12(location, absolute, 0);
    case R_AARCH64_LDST16_ABS_LO12_NC: return patch_lo12(location, absolute, 1);
    case R_AARCH64_LDST32_ABS_LO12_NC: return patch_lo12(location, absolute, 2);
    case R_AARCH64_LDST64_ABS_LO12_NC:
    case R_AARCH64_LD64_GOT_LO12_NC: return patch_lo12(location, absolute, 3);
    case R_AARCH64_LDST128_ABS_LO12_NC: return patch_lo12(location, absolute, 4);
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26: return patch_branch(location, relative, 26, 0);
    case R_AARCH64_CONDBR19: return patch_branch(location, relative, 19, 5);
    case R_AARCH64_TSTBR14: return patch_branch(location, relative, 14, 5);
    default: return PatchStatus::OutOfRange;
  }
}

void write_stub(std::byte* location, std::uint64_t target) noexcept {
  // x16 (IP0) is the intra-procedure-call scratch register the ABI reserves
  // for exactly this kind of veneer.
  store32(location, 0x58000050u);      // ldr x16, #8
  store32(location + 4, 0xD61F0200u);  // br x16
  std::memcpy(location + 8, &target, sizeof(target));
}

}  // namespace

const ArchTraits kAArch64Traits = {
    .machine = Machine::AArch64,
    .info = relocation_info,
    .name = relocation_name,
    .patch = patch,
    .write_stub = write_stub,
    .stub_fill = 0x00,  // udf #0: an unwritten slot traps
    .got_slot_holds_addend = true,
    .branch_bias = 0,
};

}  // namespace svod::detail
