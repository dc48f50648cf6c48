// x86-64 relocation encodings (System V psABI, "Relocation Types").
#include <array>
#include <cstring>
#include <limits>

#include "svod/loader/relocate.h"

namespace svod::detail {
namespace {

constexpr std::uint8_t kInt3 = 0xCC;

template <typename T>
void store(std::byte* location, T value) noexcept {
  std::memcpy(location, &value, sizeof(T));
}

bool fits_signed(std::int64_t value, int bits) noexcept {
  const std::int64_t limit = std::int64_t{1} << (bits - 1);
  return value >= -limit && value < limit;
}

// R_X86_64_32 zero-extends, so the value must fit unsigned 32 bits.
bool fits_unsigned(std::uint64_t value, int bits) noexcept {
  return (value >> bits) == 0;
}

// Zero-extended or sign-extended: either reading of the field is acceptable.
bool fits_either(std::uint64_t value, int bits) noexcept {
  return fits_unsigned(value, bits) || fits_signed(static_cast<std::int64_t>(value), bits);
}

constexpr std::array<std::string_view, 43> kNames = {
    "R_X86_64_NONE",          "R_X86_64_64",        "R_X86_64_PC32",
    "R_X86_64_GOT32",         "R_X86_64_PLT32",     "R_X86_64_COPY",
    "R_X86_64_GLOB_DAT",      "R_X86_64_JUMP_SLOT", "R_X86_64_RELATIVE",
    "R_X86_64_GOTPCREL",      "R_X86_64_32",        "R_X86_64_32S",
    "R_X86_64_16",            "R_X86_64_PC16",      "R_X86_64_8",
    "R_X86_64_PC8",           "R_X86_64_DTPMOD64",  "R_X86_64_DTPOFF64",
    "R_X86_64_TPOFF64",       "R_X86_64_TLSGD",     "R_X86_64_TLSLD",
    "R_X86_64_DTPOFF32",      "R_X86_64_GOTTPOFF",  "R_X86_64_TPOFF32",
    "R_X86_64_PC64",          "R_X86_64_GOTOFF64",  "R_X86_64_GOTPC32",
    "R_X86_64_GOT64",         "R_X86_64_GOTPCREL64", "R_X86_64_GOTPC64",
    "R_X86_64_GOTPLT64",      "R_X86_64_PLTOFF64",  "R_X86_64_SIZE32",
    "R_X86_64_SIZE64",        "R_X86_64_GOTPC32_TLSDESC", "R_X86_64_TLSDESC_CALL",
    "R_X86_64_TLSDESC",       "R_X86_64_IRELATIVE", "R_X86_64_RELATIVE64",
    "",                       "",                   "R_X86_64_GOTPCRELX",
    "R_X86_64_REX_GOTPCRELX",
};

RelocationInfo relocation_info(std::uint32_t type) noexcept {
  switch (type) {
    case R_X86_64_NONE: return {RelocationClass::None, 0};
    case R_X86_64_64:
    case R_X86_64_PC64: return {RelocationClass::Plain, 8};
    case R_X86_64_PC32: return {RelocationClass::Plain, 4};
    case R_X86_64_32:
    case R_X86_64_32S: return {RelocationClass::Plain, 4, /*low_address=*/true};
    case R_X86_64_16:
    case R_X86_64_PC16: return {RelocationClass::Plain, 2};
    case R_X86_64_8:
    case R_X86_64_PC8: return {RelocationClass::Plain, 1};
    case R_X86_64_PLT32: return {RelocationClass::Branch, 4};
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX: return {RelocationClass::Got, 4};
    default: return {};
  }
}

std::string_view relocation_name(std::uint32_t type) noexcept {
  return type < kNames.size() ? kNames[type] : std::string_view{};
}

PatchStatus patch(std::uint32_t type, std::byte* location, std::uint64_t place,
                  std::uint64_t symbol, std::int64_t addend) noexcept {
  // Unsigned arithmetic wraps instead of overflowing on hostile addends.
  const std::uint64_t absolute = symbol + static_cast<std::uint64_t>(addend);
  const std::uint64_t relative = absolute - place;
  const auto signed_relative = static_cast<std::int64_t>(relative);
  switch (type) {
    case R_X86_64_NONE: return PatchStatus::Ok;
    case R_X86_64_64: store<std::uint64_t>(location, absolute); return PatchStatus::Ok;
    case R_X86_64_PC64: store<std::uint64_t>(location, relative); return PatchStatus::Ok;
    case R_X86_64_PC32:
    case R_X86_64_PLT32:
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX:
      if (!fits_signed(signed_relative, 32)) return PatchStatus::OutOfRange;
      store<std::uint32_t>(location, static_cast<std::uint32_t>(relative));
      return PatchStatus::Ok;
    case R_X86_64_32:
      if (!fits_unsigned(absolute, 32)) return PatchStatus::OutOfRange;
      store<std::uint32_t>(location, static_cast<std::uint32_t>(absolute));
      return PatchStatus::Ok;
    case R_X86_64_32S:
      if (!fits_signed(static_cast<std::int64_t>(absolute), 32)) return PatchStatus::OutOfRange;
      store<std::uint32_t>(location, static_cast<std::uint32_t>(absolute));
      return PatchStatus::Ok;
    case R_X86_64_16:
      if (!fits_either(absolute, 16)) return PatchStatus::OutOfRange;
      store<std::uint16_t>(location, static_cast<std::uint16_t>(absolute));
      return PatchStatus::Ok;
    case R_X86_64_PC16:
      if (!fits_signed(signed_relative, 16)) return PatchStatus::OutOfRange;
      store<std::uint16_t>(location, static_cast<std::uint16_t>(relative));
      return PatchStatus::Ok;
    case R_X86_64_8:
      if (!fits_either(absolute, 8)) return PatchStatus::OutOfRange;
      store<std::uint8_t>(location, static_cast<std::uint8_t>(absolute));
      return PatchStatus::Ok;
    case R_X86_64_PC8:
      if (!fits_signed(signed_relative, 8)) return PatchStatus::OutOfRange;
      store<std::uint8_t>(location, static_cast<std::uint8_t>(relative));
      return PatchStatus::Ok;
    default: return PatchStatus::OutOfRange;
  }
}

void write_stub(std::byte* location, std::uint64_t target) noexcept {
  // jmp *[rip+0] reads the absolute target stored right after it; no register
  // is clobbered, so the stub is transparent to any calling convention.
  const std::uint8_t jump[6] = {0xFF, 0x25, 0x00, 0x00, 0x00, 0x00};
  std::memcpy(location, jump, sizeof(jump));
  std::memcpy(location + sizeof(jump), &target, sizeof(target));
  // Pad with int3 so a stray jump into the padding traps.
  std::memset(location + sizeof(jump) + sizeof(target), kInt3, kStubSize - sizeof(jump) - sizeof(target));
}

}  // namespace

const ArchTraits kX86_64Traits = {
    .machine = Machine::X86_64,
    .info = relocation_info,
    .name = relocation_name,
    .patch = patch,
    .write_stub = write_stub,
    .stub_fill = kInt3,
    .got_slot_holds_addend = false,
    .branch_bias = 4,
};

}  // namespace svod::detail
