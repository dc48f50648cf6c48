// Reading a relocatable ELF object into an ObjectLinker (see elf_link.h): the
// header, the sections, the symbol table and the relocations, with the GOT
// and stub slots the relocations need. elf_link.cpp lays the result out and
// links it.
//
// The object is untrusted input: every offset, size, index and name is checked
// against the buffer before it is read, sizes are added without overflow, and
// anything the loader cannot honour faithfully is rejected with Error(Load)
// naming the section, symbol, relocation or offset involved.
#include "svod/loader/elf_link.h"

#include <cstring>
#include <map>
#include <utility>

#include "svod/base/error.h"
#include "svod/loader/relocate.h"

namespace svod::detail {
namespace {

std::string_view elf_type_name(std::uint16_t type) {
  switch (type) {
    case ET_NONE: return "an object of no type (ET_NONE)";
    case ET_EXEC: return "an executable (ET_EXEC)";
    case ET_DYN: return "a shared object or PIE executable (ET_DYN)";
    case ET_CORE: return "a core dump (ET_CORE)";
    default: return "an object of unknown type";
  }
}

// A slot per (symbol, key), numbered in the order they are first asked for.
using SlotMap = std::map<std::pair<std::uint32_t, std::int64_t>, std::uint32_t>;

std::uint32_t slot_for(SlotMap& slots, const SlotMap::key_type& key) {
  const auto [it, inserted] = slots.try_emplace(key, static_cast<std::uint32_t>(slots.size()));
  return it->second;
}

}  // namespace

// Slots are shared by every relocation with the same (symbol, key): GOT
// slots hold S or S+A (ArchTraits::got_slot_holds_addend), stubs jump to
// S+A+bias.
struct ObjectLinker::SlotMaps {
  SlotMap got;
  SlotMap stubs;
};

ObjectLinker::ObjectLinker(std::span<const std::byte> object, Machine machine,
                           const LinkOptions& options)
    : object_(object), machine_(machine), arch_(arch_traits(machine)), options_(options) {
  if (!is_power_of_two(options_.page_size)) {
    throw make_error(ErrorKind::Validation, "page size {} is not a power of two",
                     options_.page_size);
  }
  parse_header();
  parse_sections();
  parse_symbols();
  parse_relocations();
  lay_out();
}

Elf64_Shdr ObjectLinker::header(std::size_t index) const noexcept {
  return read_at<Elf64_Shdr>(object_, shoff_ + index * sizeof(Elf64_Shdr));
}

std::string_view ObjectLinker::string_at(std::uint64_t table_offset, std::uint64_t table_size,
                                         std::uint64_t name) const noexcept {
  if (name >= table_size) return {};
  const auto* begin = reinterpret_cast<const char*>(object_.data() + table_offset + name);
  const void* end = std::memchr(begin, 0, table_size - name);
  if (end == nullptr) return {};
  return {begin, static_cast<std::size_t>(static_cast<const char*>(end) - begin)};
}

bool ObjectLinker::string_valid(std::uint64_t table_offset, std::uint64_t table_size,
                                std::uint64_t name) const noexcept {
  return name < table_size &&
         std::memchr(object_.data() + table_offset + name, 0, table_size - name) != nullptr;
}

std::string_view ObjectLinker::section_name(std::size_t index) const noexcept {
  return string_at(shstrtab_offset_, shstrtab_size_, sections_[index].name);
}

std::string_view ObjectLinker::symbol_name(std::uint32_t index) const noexcept {
  return string_at(strtab_offset_, strtab_size_, symbols_[index].name);
}

void ObjectLinker::parse_header() {
  const std::uint64_t size = object_.size();
  if (size >= SELFMAG && std::memcmp(object_.data(), ELFMAG, SELFMAG) != 0) {
    throw make_error(ErrorKind::Load, "not an ELF object: the first bytes are not \\x7fELF");
  }
  if (size < sizeof(Elf64_Ehdr)) {
    throw make_error(ErrorKind::Load,
                     "truncated ELF object: {} bytes, but an ELF64 header alone needs {}", size,
                     sizeof(Elf64_Ehdr));
  }
  const auto ehdr = read_at<Elf64_Ehdr>(object_, 0);
  if (ehdr.e_ident[EI_CLASS] != ELFCLASS64) {
    throw make_error(ErrorKind::Load, "unsupported ELF class {} ({}): only 64-bit objects load",
                     ehdr.e_ident[EI_CLASS],
                     ehdr.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "invalid");
  }
  if (ehdr.e_ident[EI_DATA] != ELFDATA2LSB) {
    throw make_error(ErrorKind::Load,
                     "unsupported ELF data encoding {}: only little-endian objects load",
                     ehdr.e_ident[EI_DATA]);
  }
  if (ehdr.e_type != ET_REL) {
    throw make_error(ErrorKind::Load,
                     "the ELF file is {} (e_type {}), not a relocatable object (ET_REL); "
                     "compile with -c",
                     elf_type_name(ehdr.e_type), ehdr.e_type);
  }
  if (ehdr.e_machine != static_cast<std::uint16_t>(machine_)) {
    throw make_error(ErrorKind::Load,
                     "the object is for {} (e_machine {}), but it is being loaded for {}",
                     machine_name(ehdr.e_machine), ehdr.e_machine,
                     machine_name(static_cast<std::uint16_t>(machine_)));
  }
  if (ehdr.e_shoff == 0) {
    throw make_error(ErrorKind::Load, "the object has no section header table (e_shoff is 0)");
  }
  if (ehdr.e_shentsize != sizeof(Elf64_Shdr)) {
    throw make_error(ErrorKind::Load, "section header entry size is {}, expected {}",
                     ehdr.e_shentsize, sizeof(Elf64_Shdr));
  }
  shoff_ = ehdr.e_shoff;
  if (!range_fits(shoff_, sizeof(Elf64_Shdr), size)) {
    throw make_error(ErrorKind::Load,
                     "section header table at offset {} lies past the end of the {}-byte object",
                     shoff_, size);
  }
  // Extended numbering: with more than 0xff00 sections the real counts live in
  // section 0's header.
  const auto first = header(0);
  std::uint64_t count = ehdr.e_shnum != 0 ? ehdr.e_shnum : first.sh_size;
  std::uint64_t strndx = ehdr.e_shstrndx != SHN_XINDEX ? ehdr.e_shstrndx : first.sh_link;
  if (count == 0 || count > (size - shoff_) / sizeof(Elf64_Shdr)) {
    throw make_error(ErrorKind::Load,
                     "section header table ({} entries at offset {}) does not fit in the {}-byte "
                     "object; the file is truncated or corrupt",
                     count, shoff_, size);
  }
  shnum_ = static_cast<std::uint32_t>(count);
  if (strndx == SHN_UNDEF || strndx >= shnum_) {
    throw make_error(ErrorKind::Load, "section name table index {} is out of range ({} sections)",
                     strndx, shnum_);
  }
  shstrndx_ = static_cast<std::uint32_t>(strndx);
}

void ObjectLinker::parse_sections() {
  const auto names = header(shstrndx_);
  if (names.sh_type != SHT_STRTAB || !range_fits(names.sh_offset, names.sh_size, object_.size())) {
    throw make_error(ErrorKind::Load,
                     "section name table (section {}) is not a string table inside the file",
                     shstrndx_);
  }
  shstrtab_offset_ = names.sh_offset;
  shstrtab_size_ = names.sh_size;

  sections_.resize(shnum_);
  for (std::uint32_t i = 1; i < shnum_; ++i) {
    const auto h = header(i);
    Section& section = sections_[i];
    section.name = h.sh_name;
    section.type = h.sh_type;
    section.size = h.sh_size;
    section.file_offset = h.sh_offset;
    if (!string_valid(shstrtab_offset_, shstrtab_size_, h.sh_name)) {
      throw make_error(ErrorKind::Load,
                       "section {} has name offset {} outside the {}-byte section name table", i,
                       h.sh_name, shstrtab_size_);
    }
    if ((h.sh_flags & SHF_ALLOC) == 0) continue;  // .comment, debug info, .llvm_addrsig, ...
    const std::string_view name = section_name(i);
    if (name == ".eh_frame" || h.sh_type == SHT_NOTE) continue;  // unwind tables, notes
    if (h.sh_type == SHT_INIT_ARRAY || h.sh_type == SHT_FINI_ARRAY ||
        h.sh_type == SHT_PREINIT_ARRAY) {
      throw make_error(ErrorKind::Load,
                       "section '{}' holds constructors or destructors, which the loader does not "
                       "run; kernels must not need static initialisation",
                       name);
    }
    if (h.sh_type != SHT_PROGBITS && h.sh_type != SHT_NOBITS) {
      throw make_error(ErrorKind::Load, "unsupported allocatable section '{}' of type {:#x}", name,
                       h.sh_type);
    }
    if ((h.sh_flags & SHF_TLS) != 0) {
      throw make_error(ErrorKind::Load, "thread-local section '{}' is not supported", name);
    }
    if ((h.sh_flags & SHF_WRITE) != 0 && (h.sh_flags & SHF_EXECINSTR) != 0) {
      throw make_error(ErrorKind::Load,
                       "section '{}' is both writable and executable, which W^X forbids", name);
    }
    const std::uint64_t alignment = h.sh_addralign == 0 ? 1 : h.sh_addralign;
    if (!is_power_of_two(alignment) || alignment > options_.max_image_bytes) {
      throw make_error(ErrorKind::Load, "section '{}' has invalid alignment {}", name,
                       h.sh_addralign);
    }
    if (h.sh_size > options_.max_image_bytes) {
      throw make_error(ErrorKind::Load, "section '{}' is {} bytes, more than the {}-byte limit",
                       name, h.sh_size, options_.max_image_bytes);
    }
    section.nobits = h.sh_type == SHT_NOBITS;
    if (!section.nobits && !range_fits(h.sh_offset, h.sh_size, object_.size())) {
      throw make_error(ErrorKind::Load,
                       "section '{}' ({} bytes at offset {}) extends past the end of the "
                       "{}-byte object",
                       name, h.sh_size, h.sh_offset, object_.size());
    }
    section.alignment = alignment;
    section.loaded = true;
    section.region = (h.sh_flags & SHF_EXECINSTR) != 0 ? RegionKind::Text
                     : (h.sh_flags & SHF_WRITE) != 0   ? RegionKind::Data
                                                       : RegionKind::ReadOnly;
  }
}

void ObjectLinker::parse_symbols() {
  std::uint32_t symtab = 0;
  for (std::uint32_t i = 1; i < shnum_; ++i) {
    if (sections_[i].type != SHT_SYMTAB) continue;
    if (symtab != 0) {
      throw make_error(ErrorKind::Load, "the object has two symbol tables (sections {} and {})",
                       symtab, i);
    }
    symtab = i;
  }
  if (symtab == 0) return;  // nothing named, nothing to relocate
  symtab_index_ = symtab;

  const auto h = header(symtab);
  if (h.sh_entsize != sizeof(Elf64_Sym) || h.sh_size % sizeof(Elf64_Sym) != 0 ||
      !range_fits(h.sh_offset, h.sh_size, object_.size())) {
    throw make_error(ErrorKind::Load,
                     "symbol table ({} bytes at offset {}, entry size {}) is malformed or extends "
                     "past the end of the {}-byte object",
                     h.sh_size, h.sh_offset, h.sh_entsize, object_.size());
  }
  if (h.sh_link == 0 || h.sh_link >= shnum_) {
    throw make_error(ErrorKind::Load, "symbol table links to string table {} of {} sections",
                     h.sh_link, shnum_);
  }
  const auto strings = header(h.sh_link);
  if (strings.sh_type != SHT_STRTAB ||
      !range_fits(strings.sh_offset, strings.sh_size, object_.size())) {
    throw make_error(ErrorKind::Load,
                     "symbol string table (section {}) is not a string table inside the file",
                     h.sh_link);
  }
  strtab_offset_ = strings.sh_offset;
  strtab_size_ = strings.sh_size;

  const std::size_t count = h.sh_size / sizeof(Elf64_Sym);
  symbols_.resize(count);
  for (std::size_t j = 1; j < count; ++j) {
    const auto raw = read_at<Elf64_Sym>(object_, h.sh_offset + j * sizeof(Elf64_Sym));
    Symbol& symbol = symbols_[j];
    symbol.name = raw.st_name;
    symbol.value = raw.st_value;
    symbol.size = raw.st_size;
    symbol.section = raw.st_shndx;
    symbol.binding = ELF64_ST_BIND(raw.st_info);
    symbol.type = ELF64_ST_TYPE(raw.st_info);
    const auto index = static_cast<std::uint32_t>(j);
    if (!string_valid(strtab_offset_, strtab_size_, raw.st_name)) {
      throw make_error(ErrorKind::Load,
                       "symbol {} has name offset {} outside the {}-byte string table", j,
                       raw.st_name, strtab_size_);
    }
    const std::uint16_t shndx = raw.st_shndx;
    if (shndx == SHN_UNDEF) {
      symbol.state = SymbolState::Undefined;
    } else if (shndx == SHN_ABS) {
      symbol.state = SymbolState::Absolute;
    } else if (shndx == SHN_COMMON) {
      const std::uint64_t alignment = raw.st_value == 0 ? 1 : raw.st_value;
      if (!is_power_of_two(alignment) || alignment > options_.max_image_bytes ||
          raw.st_size > options_.max_image_bytes) {
        throw make_error(ErrorKind::Load,
                         "COMMON symbol '{}' has invalid alignment {} or size {}",
                         symbol_name(index), raw.st_value, raw.st_size);
      }
      symbol.value = alignment;
      symbol.state = SymbolState::Common;
    } else if (shndx == SHN_XINDEX) {
      throw make_error(ErrorKind::Load,
                       "symbol '{}' uses an extended section index (SHN_XINDEX), which is not "
                       "supported",
                       symbol_name(index));
    } else if (shndx >= SHN_LORESERVE || shndx >= shnum_) {
      throw make_error(ErrorKind::Load,
                       "symbol '{}' has section index {:#x}, beyond the {} sections of the object",
                       symbol_name(index), shndx, shnum_);
    } else if (!sections_[shndx].loaded) {
      symbol.state = SymbolState::NotLoaded;
    } else {
      if (raw.st_value > sections_[shndx].size) {
        throw make_error(ErrorKind::Load,
                         "symbol '{}' at offset {:#x} lies outside section '{}' ({} bytes)",
                         symbol_name(index), raw.st_value, section_name(shndx),
                         sections_[shndx].size);
      }
      if (symbol.type == STT_GNU_IFUNC || symbol.type == STT_TLS) {
        throw make_error(ErrorKind::Load, "symbol '{}' is an {} symbol, which is not supported",
                         symbol_name(index), symbol.type == STT_TLS ? "thread-local" : "ifunc");
      }
      symbol.state = SymbolState::InImage;
    }
  }
}

void ObjectLinker::parse_relocations() {
  SlotMaps slots;
  for (std::uint32_t i = 1; i < shnum_; ++i) {
    if (const std::optional<std::uint32_t> target = relocation_target(i)) {
      read_relocations(i, *target, slots);
    }
  }
  got_count_ = slots.got.size();
  stub_count_ = slots.stubs.size();
}

std::optional<std::uint32_t> ObjectLinker::relocation_target(std::uint32_t index) const {
  const std::uint32_t type = sections_[index].type;
  if (type != SHT_RELA && type != SHT_REL) return std::nullopt;
  const auto h = header(index);
  const std::string_view name = section_name(index);
  if (h.sh_info >= shnum_) {
    throw make_error(ErrorKind::Load,
                     "relocation section '{}' applies to section {}, beyond the {} sections",
                     name, h.sh_info, shnum_);
  }
  const std::uint32_t target = h.sh_info;
  // Relocations of debug info, .eh_frame and other unloaded sections are
  // irrelevant to running the code.
  if (!sections_[target].loaded) return std::nullopt;
  const std::string_view target_name = section_name(target);
  if (type == SHT_REL) {
    throw make_error(ErrorKind::Load,
                     "relocation section '{}' for '{}' is SHT_REL (implicit addends); only "
                     "SHT_RELA is supported, as clang emits",
                     name, target_name);
  }
  if (symtab_index_ == 0 || h.sh_link != symtab_index_) {
    throw make_error(ErrorKind::Load,
                     "relocation section '{}' links to section {}, which is not the symbol table",
                     name, h.sh_link);
  }
  if (h.sh_entsize != sizeof(Elf64_Rela) || h.sh_size % sizeof(Elf64_Rela) != 0 ||
      !range_fits(h.sh_offset, h.sh_size, object_.size())) {
    throw make_error(ErrorKind::Load,
                     "relocation section '{}' ({} bytes at offset {}, entry size {}) is "
                     "malformed or extends past the end of the {}-byte object",
                     name, h.sh_size, h.sh_offset, h.sh_entsize, object_.size());
  }
  if (sections_[target].nobits) {
    throw make_error(ErrorKind::Load,
                     "relocation section '{}' patches '{}', which has no file contents", name,
                     target_name);
  }
  return target;
}

void ObjectLinker::read_relocations(std::uint32_t index, std::uint32_t target, SlotMaps& slots) {
  const auto h = header(index);
  const std::size_t count = h.sh_size / sizeof(Elf64_Rela);
  relocations_.reserve(relocations_.size() + count);
  for (std::size_t k = 0; k < count; ++k) {
    const auto raw = read_at<Elf64_Rela>(object_, h.sh_offset + k * sizeof(Elf64_Rela));
    Relocation relocation{};
    relocation.offset = raw.r_offset;
    relocation.addend = raw.r_addend;
    relocation.section = target;
    relocation.symbol = static_cast<std::uint32_t>(ELF64_R_SYM(raw.r_info));
    relocation.type = static_cast<std::uint32_t>(ELF64_R_TYPE(raw.r_info));
    relocation.slot = kNoSlot;
    const RelocationInfo info = arch_.info(relocation.type);
    if (info.kind == RelocationClass::Unsupported) {
      throw make_error(ErrorKind::Load,
                       "unsupported {} relocation {} at {}+{:#x} (entry {} of '{}')",
                       machine_name(static_cast<std::uint16_t>(machine_)),
                       describe_relocation(machine_, relocation.type), section_name(target),
                       relocation.offset, k, section_name(index));
    }
    if (info.kind == RelocationClass::None) continue;
    check_relocation(relocation, info);
    const SymbolState state = symbols_[relocation.symbol].state;
    if (info.low_address && (state == SymbolState::InImage || state == SymbolState::Common)) {
      needs_low_address_ = true;
    }
    assign_slot(relocation, info, slots);
    relocations_.push_back(relocation);
  }
}

void ObjectLinker::check_relocation(const Relocation& relocation,
                                    const RelocationInfo& info) const {
  const std::string_view target_name = section_name(relocation.section);
  if (relocation.symbol >= symbols_.size()) {
    throw make_error(ErrorKind::Load,
                     "relocation {} at {}+{:#x} refers to symbol {}, but the symbol table has "
                     "{} entries",
                     describe_relocation(machine_, relocation.type), target_name,
                     relocation.offset, relocation.symbol, symbols_.size());
  }
  if (!range_fits(relocation.offset, info.width, sections_[relocation.section].size)) {
    throw make_error(ErrorKind::Load,
                     "relocation {} at offset {:#x} patches {} bytes outside section '{}' "
                     "({} bytes)",
                     describe_relocation(machine_, relocation.type), relocation.offset,
                     info.width, target_name, sections_[relocation.section].size);
  }
  const Symbol& symbol = symbols_[relocation.symbol];
  if (symbol.state == SymbolState::NotLoaded) {
    throw make_error(ErrorKind::Load,
                     "{} refers to '{}' in section '{}', which the loader does not load",
                     describe_site(relocation), describe_symbol(relocation.symbol),
                     section_name(symbol.section));
  }
}

void ObjectLinker::assign_slot(Relocation& relocation, const RelocationInfo& info,
                               SlotMaps& slots) const {
  const SymbolState state = symbols_[relocation.symbol].state;
  if (info.kind == RelocationClass::Got) {
    const std::int64_t key = arch_.got_slot_holds_addend ? relocation.addend : 0;
    relocation.slot = slot_for(slots.got, {relocation.symbol, key});
  } else if (info.kind == RelocationClass::Branch &&
             (state == SymbolState::Undefined || state == SymbolState::Absolute)) {
    // Only targets outside the image can be out of branch range; the image
    // itself is far smaller than +-128 MiB / +-2 GiB.
    relocation.slot = slot_for(slots.stubs, {relocation.symbol, relocation.addend});
  }
}

std::string ObjectLinker::describe_symbol(std::uint32_t index) const {
  const Symbol& symbol = symbols_[index];
  if (index == 0) return "no symbol";
  if (symbol.type == STT_SECTION && symbol.section < sections_.size()) {
    return fmt::format("section {}", section_name(symbol.section));
  }
  const std::string_view name = symbol_name(index);
  return name.empty() ? fmt::format("symbol #{}", index) : std::string(name);
}

std::string ObjectLinker::describe_site(const Relocation& relocation) const {
  return fmt::format("relocation {} at {}+{:#x}", describe_relocation(machine_, relocation.type),
                     section_name(relocation.section), relocation.offset);
}

}  // namespace svod::detail
