// Test helper: a minimal reader for well-formed ELF64 objects produced by clang,
// used to find the bytes to corrupt and the relocations to verify. It trusts
// its input (the loader under test is the one that must not).
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace svod::test {

class ElfInspector {
 public:
  explicit ElfInspector(const std::vector<std::byte>& object) : object_(object) {
    std::memcpy(&header_, object_.data(), sizeof(header_));
  }

  const Elf64_Ehdr& header() const { return header_; }
  std::size_t section_count() const { return header_.e_shnum; }

  Elf64_Shdr section(std::size_t index) const {
    Elf64_Shdr shdr;
    std::memcpy(&shdr, object_.data() + header_.e_shoff + index * sizeof(Elf64_Shdr), sizeof(shdr));
    return shdr;
  }
  // File offset of section header `index`, for patching its fields.
  std::size_t section_header_offset(std::size_t index) const {
    return header_.e_shoff + index * sizeof(Elf64_Shdr);
  }

  std::string section_name(std::size_t index) const {
    const Elf64_Shdr names = section(header_.e_shstrndx);
    return string_at(names.sh_offset + section(index).sh_name);
  }

  std::optional<std::size_t> find_section(std::string_view name) const {
    for (std::size_t i = 1; i < section_count(); ++i) {
      if (section_name(i) == name) return i;
    }
    return std::nullopt;
  }

  std::optional<std::size_t> find_section_of_type(std::uint32_t type) const {
    for (std::size_t i = 1; i < section_count(); ++i) {
      if (section(i).sh_type == type) return i;
    }
    return std::nullopt;
  }

  struct Symbol {
    Elf64_Sym raw;
    std::string name;
  };
  std::vector<Symbol> symbols() const {
    std::vector<Symbol> result;
    const auto symtab = find_section_of_type(SHT_SYMTAB);
    if (!symtab) return result;
    const Elf64_Shdr h = section(*symtab);
    const Elf64_Shdr strings = section(h.sh_link);
    for (std::size_t j = 0; j < h.sh_size / sizeof(Elf64_Sym); ++j) {
      Symbol symbol;
      std::memcpy(&symbol.raw, object_.data() + h.sh_offset + j * sizeof(Elf64_Sym),
                  sizeof(Elf64_Sym));
      symbol.name = string_at(strings.sh_offset + symbol.raw.st_name);
      result.push_back(symbol);
    }
    return result;
  }

  struct Relocation {
    Elf64_Rela raw;
    std::size_t file_offset;     // of the Elf64_Rela entry, for patching
    std::size_t target_section;  // section the relocation patches
    std::uint32_t type() const { return ELF64_R_TYPE(raw.r_info); }
    std::uint32_t symbol() const { return ELF64_R_SYM(raw.r_info); }
  };
  // Relocations of every SHF_ALLOC section except .eh_frame.
  std::vector<Relocation> relocations() const {
    std::vector<Relocation> result;
    for (std::size_t i = 1; i < section_count(); ++i) {
      const Elf64_Shdr h = section(i);
      if (h.sh_type != SHT_RELA) continue;
      const Elf64_Shdr target = section(h.sh_info);
      if ((target.sh_flags & SHF_ALLOC) == 0 || section_name(h.sh_info) == ".eh_frame") continue;
      for (std::size_t k = 0; k < h.sh_size / sizeof(Elf64_Rela); ++k) {
        Relocation relocation;
        relocation.file_offset = h.sh_offset + k * sizeof(Elf64_Rela);
        std::memcpy(&relocation.raw, object_.data() + relocation.file_offset, sizeof(Elf64_Rela));
        relocation.target_section = h.sh_info;
        result.push_back(relocation);
      }
    }
    return result;
  }

  bool references(std::string_view symbol_name) const {
    const auto all = symbols();
    for (const Relocation& relocation : relocations()) {
      if (all[relocation.symbol()].name == symbol_name) return true;
    }
    return false;
  }

  bool has_relocation_type(std::uint32_t type) const {
    for (const Relocation& relocation : relocations()) {
      if (relocation.type() == type) return true;
    }
    return false;
  }

 private:
  std::string string_at(std::size_t offset) const {
    return std::string(reinterpret_cast<const char*>(object_.data() + offset));
  }

  const std::vector<std::byte>& object_;
  Elf64_Ehdr header_;
};

// Overwrites sizeof(T) bytes of `object` at `offset` with `value`.
template <typename T>
void poke(std::vector<std::byte>& object, std::size_t offset, T value) {
  std::memcpy(object.data() + offset, &value, sizeof(T));
}

}  // namespace svod::test
