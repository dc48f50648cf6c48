// The machine-independent half of the JIT loader: parses a relocatable ELF
// object (every read bounds-checked), lays its sections out in three
// permission classes (text, read-only, writable) with far-call stubs and a GOT,
// and applies its relocations into caller-provided memory as if that memory
// sat at a chosen address. LoadedImage uses it on mmap'ed pages of the host;
// tests and the fuzzer use link_object() to link for any supported machine
// into an ordinary buffer, which is how AArch64 relocations are checked on an
// x86-64 host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/loader/elf_format.h"
#include "svod/loader/relocate.h"

namespace svod::detail {

// Permission classes, in the order they are laid out. Each starts on its own
// page so W^X can be enforced with one mprotect per class.
enum class RegionKind : std::uint8_t {
  Text,      // read + execute: .text*, then far-call stubs
  ReadOnly,  // read only: .rodata*, then the GOT
  Data,      // read + write: .data*, .bss, COMMON symbols
};

struct ImageRegion {
  RegionKind kind;
  std::uint64_t offset;  // from the image base, page-aligned
  std::uint64_t size;    // bytes used (the mapping rounds up to pages)
};

struct ImageSymbol {
  std::string name;
  std::uint64_t offset;  // from the image base
  bool global;           // STB_GLOBAL or STB_WEAK
};

// Address of an external symbol, or nullopt when it cannot be found (a weak
// reference then resolves to 0, a strong one fails with UndefinedSymbol).
using SymbolResolver = std::function<std::optional<std::uint64_t>(std::string_view name)>;

struct LinkOptions {
  // Route every call to an external symbol through a stub, even when a direct
  // rel32/imm26 would reach; tests use it to exercise the far-call path.
  bool force_stubs = false;
  // Granule at which permission classes are separated.
  std::uint64_t page_size = 4096;
  // Largest image (sections, bss, stubs, GOT, alignment) a load may create;
  // keeps hostile section sizes from reserving absurd amounts of memory.
  std::uint64_t max_image_bytes = std::uint64_t{1} << 30;
};

struct LinkResult {
  std::size_t stubs_used = 0;  // far-call stubs actually branched through
};

// One parsed object, ready to be linked (possibly many times, at any address).
class ObjectLinker {
 public:
  // Parses and validates `object` for `machine`; throws Error(Load) on anything
  // malformed or unsupported. `object` must outlive the linker.
  ObjectLinker(std::span<const std::byte> object, Machine machine, const LinkOptions& options);

  std::uint64_t image_size() const noexcept { return image_size_; }            // page multiple
  std::uint64_t image_alignment() const noexcept { return image_alignment_; }  // >= page size
  std::span<const ImageRegion> regions() const noexcept { return regions_; }   // non-empty only
  std::size_t stub_slots() const noexcept { return stub_count_; }
  std::size_t got_slots() const noexcept { return got_count_; }
  std::uint64_t stubs_offset() const noexcept { return stubs_offset_; }
  std::uint64_t got_offset() const noexcept { return got_offset_; }
  // True when code refers to its own image through 32-bit absolute addresses
  // (RelocationInfo::low_address, e.g. x86-64 R_X86_64_32/32S), so the image must be
  // placed in the low 2 GiB of the address space.
  bool needs_low_address() const noexcept { return needs_low_address_; }

  std::size_t section_count() const noexcept { return sections_.size(); }
  // Offset of section `index` in the image, nullopt when it is not loaded.
  std::optional<std::uint64_t> section_offset(std::size_t index) const noexcept;

  // Named symbols defined in loaded sections (and COMMON ones), globals first
  // for each name; offsets from the image base.
  std::vector<ImageSymbol> symbols() const;

  // Copies the sections into `memory` (image_size() bytes, zero-filled by the
  // caller) and applies every relocation for an image based at `base_address`.
  // Throws Error(UndefinedSymbol) for unresolvable strong references and
  // Error(Load) for values that do not fit their fields.
  LinkResult link(std::byte* memory, std::uint64_t base_address,
                  const SymbolResolver& resolver) const;

 private:
  struct Section {
    std::uint64_t file_offset = 0;
    std::uint64_t size = 0;
    std::uint64_t alignment = 1;
    std::uint64_t image_offset = 0;
    std::uint32_t type = 0;
    std::uint32_t name = 0;
    bool loaded = false;
    bool nobits = false;
    RegionKind region = RegionKind::Text;
  };
  enum class SymbolState : std::uint8_t { Null, Undefined, Absolute, InImage, NotLoaded, Common };
  struct Symbol {
    std::uint64_t value = 0;   // st_value
    std::uint64_t size = 0;    // st_size
    std::uint64_t offset = 0;  // from the image base, for InImage symbols
    std::uint32_t name = 0;
    std::uint16_t section = 0;
    std::uint8_t binding = 0;
    std::uint8_t type = 0;
    SymbolState state = SymbolState::Null;
  };
  struct Relocation {
    std::uint64_t offset;  // inside the target section
    std::int64_t addend;
    std::uint32_t section;  // target section index
    std::uint32_t symbol;
    std::uint32_t type;
    std::uint32_t slot;  // GOT or stub slot, kNoSlot when none
  };
  static constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
  // The GOT and stub slots handed out so far (elf_parse.cpp).
  struct SlotMaps;

  // The constructor's steps, in order: elf_parse.cpp reads and checks the
  // object, elf_link.cpp lays it out.
  void parse_header();
  void parse_sections();
  void parse_symbols();
  void parse_relocations();
  void lay_out();
  // The section that relocation section `index` patches, once the relocation
  // section's header is checked; nullopt when `index` is not a relocation
  // section or its target is not loaded.
  std::optional<std::uint32_t> relocation_target(std::uint32_t index) const;
  // Reads, checks and records the entries of relocation section `index`,
  // which patches section `target`.
  void read_relocations(std::uint32_t index, std::uint32_t target, SlotMaps& slots);
  // Checks that a relocation names a symbol of the table, not one in a section
  // the loader leaves out, and patches bytes inside its section.
  void check_relocation(const Relocation& relocation, const RelocationInfo& info) const;
  // Gives a GOT relocation, or a branch to a symbol outside the image, its
  // slot: the one already given to the same symbol and key, else a new one.
  void assign_slot(Relocation& relocation, const RelocationInfo& info, SlotMaps& slots) const;
  Elf64_Shdr header(std::size_t index) const noexcept;
  std::string_view string_at(std::uint64_t table_offset, std::uint64_t table_size,
                             std::uint64_t name) const noexcept;
  // True when `name` starts a NUL-terminated string inside the table.
  bool string_valid(std::uint64_t table_offset, std::uint64_t table_size,
                    std::uint64_t name) const noexcept;
  std::string_view section_name(std::size_t index) const noexcept;
  std::string_view symbol_name(std::uint32_t index) const noexcept;
  std::string describe_site(const Relocation& relocation) const;
  std::string describe_symbol(std::uint32_t index) const;

  std::span<const std::byte> object_;
  Machine machine_;
  const ArchTraits& arch_;
  LinkOptions options_;
  std::vector<Section> sections_;
  std::vector<Symbol> symbols_;
  std::vector<Relocation> relocations_;
  std::vector<ImageRegion> regions_;
  std::uint64_t shstrtab_offset_ = 0;
  std::uint64_t shstrtab_size_ = 0;
  std::uint64_t strtab_offset_ = 0;
  std::uint64_t strtab_size_ = 0;
  std::uint32_t symtab_index_ = 0;
  std::uint64_t shoff_ = 0;
  std::uint32_t shnum_ = 0;
  std::uint32_t shstrndx_ = 0;
  std::size_t stub_count_ = 0;
  std::size_t got_count_ = 0;
  std::uint64_t stubs_offset_ = 0;
  std::uint64_t got_offset_ = 0;
  std::uint64_t image_size_ = 0;
  std::uint64_t image_alignment_ = 0;
  bool needs_low_address_ = false;
};

// An object linked into an ordinary buffer: what tests inspect.
struct LinkedImage {
  std::uint64_t base_address = 0;
  std::vector<std::byte> bytes;  // the whole image, regions at their offsets
  std::vector<ImageRegion> regions;
  std::vector<ImageSymbol> symbols;
  std::vector<std::optional<std::uint64_t>> section_addresses;  // by section index
  std::uint64_t stubs_address = 0;
  std::size_t stub_slots = 0;
  std::uint64_t got_address = 0;
  std::size_t got_slots = 0;
  std::size_t stubs_used = 0;

  // Run-time address of a named symbol, nullopt when absent.
  std::optional<std::uint64_t> address_of(std::string_view name) const;
};

LinkedImage link_object(std::span<const std::byte> object, Machine machine,
                        std::uint64_t base_address, const SymbolResolver& resolver,
                        const LinkOptions& options = {});

}  // namespace svod::detail
