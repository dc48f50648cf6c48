// ELF64 vocabulary for the JIT loader: the on-disk structures and constants come
// from the system <elf.h>; this header adds the names the loader prints in its
// errors (machines, relocation types) and the one safe way to read a structure
// out of an untrusted byte buffer.
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace svod::detail {

// The machines whose relocations the loader can apply (e_machine values).
enum class Machine : std::uint16_t {
  X86_64 = EM_X86_64,
  AArch64 = EM_AARCH64,
};

// The machine this process runs on, i.e. the one LoadedImage::load accepts.
constexpr Machine host_machine() noexcept {
#if defined(__x86_64__)
  return Machine::X86_64;
#elif defined(__aarch64__)
  return Machine::AArch64;
#else
#error "svod's JIT loader supports x86-64 and AArch64 hosts"
#endif
}

// "x86-64", "AArch64", "RISC-V", ... or "machine 1234" for ones we do not name.
std::string machine_name(std::uint16_t e_machine);

// Copies a T out of `bytes` at `offset`. The caller has already checked that
// offset + sizeof(T) lies inside `bytes`; memcpy keeps unaligned input legal.
template <typename T>
T read_at(std::span<const std::byte> bytes, std::uint64_t offset) noexcept {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// True when [offset, offset + size) lies inside a buffer of `limit` bytes,
// without overflowing on hostile values.
constexpr bool range_fits(std::uint64_t offset, std::uint64_t size, std::uint64_t limit) noexcept {
  return offset <= limit && size <= limit - offset;
}

constexpr bool is_power_of_two(std::uint64_t value) noexcept {
  return value != 0 && (value & (value - 1)) == 0;
}

}  // namespace svod::detail
