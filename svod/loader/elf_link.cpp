// Layout and relocation of a parsed relocatable ELF object (see elf_link.h;
// elf_parse.cpp reads and checks it).
//
// Layout adds sizes without overflow and within LinkOptions::max_image_bytes,
// and a relocated value that does not fit its field, or a strong reference
// nothing resolves, is an error naming the relocation.
#include "svod/loader/elf_link.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "svod/base/error.h"
#include "svod/loader/relocate.h"

namespace svod::detail {
namespace {

constexpr std::array<RegionKind, 3> kRegionOrder = {RegionKind::Text, RegionKind::ReadOnly,
                                                    RegionKind::Data};

// Rounds `cursor` up to `alignment` and reserves `size` bytes after it, failing
// (instead of wrapping) when the image would grow past `limit`.
bool reserve(std::uint64_t& cursor, std::uint64_t alignment, std::uint64_t size,
             std::uint64_t limit, std::uint64_t& start) noexcept {
  if (cursor > limit || alignment - 1 > limit - cursor) return false;
  start = (cursor + alignment - 1) & ~(alignment - 1);
  if (size > limit - start) return false;
  cursor = start + size;
  return true;
}

}  // namespace

void ObjectLinker::lay_out() {
  const std::uint64_t page = options_.page_size;
  const std::uint64_t limit = options_.max_image_bytes;
  std::uint64_t cursor = 0;
  image_alignment_ = page;
  auto fail = [&] {
    return make_error(ErrorKind::Load, "the object needs more than {} bytes of memory", limit);
  };

  for (const RegionKind kind : kRegionOrder) {
    std::uint64_t alignment = page;
    for (const Section& section : sections_) {
      if (section.loaded && section.region == kind) alignment = std::max(alignment, section.alignment);
    }
    if (kind == RegionKind::Data) {
      for (const Symbol& symbol : symbols_) {
        if (symbol.state == SymbolState::Common) alignment = std::max(alignment, symbol.value);
      }
    }
    std::uint64_t start = 0;
    if (!reserve(cursor, alignment, 0, limit, start)) throw fail();
    image_alignment_ = std::max(image_alignment_, alignment);

    for (Section& section : sections_) {
      if (!section.loaded || section.region != kind) continue;
      if (!reserve(cursor, section.alignment, section.size, limit, section.image_offset)) {
        throw fail();
      }
    }
    if (kind == RegionKind::Text && stub_count_ != 0) {
      if (stub_count_ > limit / kStubSize ||
          !reserve(cursor, kStubSize, stub_count_ * kStubSize, limit, stubs_offset_)) {
        throw fail();
      }
    }
    if (kind == RegionKind::ReadOnly && got_count_ != 0) {
      if (got_count_ > limit / kGotSlotSize ||
          !reserve(cursor, kGotSlotSize, got_count_ * kGotSlotSize, limit, got_offset_)) {
        throw fail();
      }
    }
    if (kind == RegionKind::Data) {
      for (Symbol& symbol : symbols_) {
        if (symbol.state != SymbolState::Common) continue;
        if (!reserve(cursor, symbol.value, symbol.size, limit, symbol.offset)) throw fail();
        symbol.state = SymbolState::InImage;
      }
    }
    if (cursor > start) regions_.push_back({kind, start, cursor - start});
  }
  if (regions_.empty()) {
    throw make_error(ErrorKind::Load,
                     "the object has nothing to load: no non-empty .text, .rodata, .data or .bss "
                     "section");
  }
  std::uint64_t end = 0;
  if (!reserve(cursor, page, 0, limit, end)) throw fail();
  image_size_ = end;

  for (Symbol& symbol : symbols_) {
    if (symbol.state == SymbolState::InImage && symbol.section != SHN_COMMON) {
      symbol.offset = sections_[symbol.section].image_offset + symbol.value;
    }
  }
}

std::optional<std::uint64_t> ObjectLinker::section_offset(std::size_t index) const noexcept {
  if (index >= sections_.size() || !sections_[index].loaded) return std::nullopt;
  return sections_[index].image_offset;
}

std::vector<ImageSymbol> ObjectLinker::symbols() const {
  std::vector<ImageSymbol> result;
  for (std::uint32_t j = 1; j < symbols_.size(); ++j) {
    const Symbol& symbol = symbols_[j];
    if (symbol.state != SymbolState::InImage || symbol.type == STT_SECTION ||
        symbol.type == STT_FILE) {
      continue;
    }
    const std::string_view name = symbol_name(j);
    if (name.empty()) continue;
    const bool global = symbol.binding == STB_GLOBAL || symbol.binding == STB_WEAK;
    result.push_back({std::string(name), symbol.offset, global});
  }
  // Sorted by name, a global before any local of the same name, which unique() then drops.
  std::sort(result.begin(), result.end(), [](const ImageSymbol& a, const ImageSymbol& b) {
    return a.name != b.name ? a.name < b.name : a.global > b.global;
  });
  result.erase(std::unique(result.begin(), result.end(),
                           [](const ImageSymbol& a, const ImageSymbol& b) { return a.name == b.name; }),
               result.end());
  return result;
}

LinkResult ObjectLinker::link(std::byte* memory, std::uint64_t base_address,
                              const SymbolResolver& resolver) const {
  for (const Section& section : sections_) {
    if (section.loaded && !section.nobits && section.size != 0) {
      std::memcpy(memory + section.image_offset, object_.data() + section.file_offset,
                  section.size);
    }
  }
  if (stub_count_ != 0) {
    std::memset(memory + stubs_offset_, arch_.stub_fill, stub_count_ * kStubSize);
  }

  // External symbols are resolved on first use and remembered for the rest of
  // the relocations.
  std::vector<std::uint64_t> external(symbols_.size(), 0);
  std::vector<std::uint8_t> resolved(symbols_.size(), 0);
  std::vector<std::uint8_t> stub_written(stub_count_, 0);
  LinkResult result;

  auto symbol_address = [&](const Relocation& relocation) -> std::uint64_t {
    const Symbol& symbol = symbols_[relocation.symbol];
    switch (symbol.state) {
      case SymbolState::InImage: return base_address + symbol.offset;
      case SymbolState::Absolute: return symbol.value;
      case SymbolState::Undefined: break;
      default: return 0;  // the null symbol
    }
    if (resolved[relocation.symbol] != 0) return external[relocation.symbol];
    const std::string_view name = symbol_name(relocation.symbol);
    std::optional<std::uint64_t> address;
    if (!name.empty()) address = resolver(name);
    if (!address) {
      if (symbol.binding != STB_WEAK) {
        throw make_error(ErrorKind::UndefinedSymbol,
                         "undefined symbol '{}' (needed by {}): the object does not define it "
                         "and neither the process nor libm.so.6 or libgcc_s.so.1 provides it",
                         describe_symbol(relocation.symbol), describe_site(relocation));
      }
      address = 0;  // an absent weak reference is a null address, as in a static link
    }
    external[relocation.symbol] = *address;
    resolved[relocation.symbol] = 1;
    return *address;
  };

  for (const Relocation& relocation : relocations_) {
    const Section& section = sections_[relocation.section];
    const std::uint64_t offset = section.image_offset + relocation.offset;
    std::byte* location = memory + offset;
    const std::uint64_t place = base_address + offset;
    const RelocationInfo info = arch_.info(relocation.type);
    const std::uint64_t symbol = symbol_address(relocation);
    auto patch = [&](std::uint64_t s, std::int64_t a) {
      return arch_.patch(relocation.type, location, place, s, a);
    };

    PatchStatus status = PatchStatus::Ok;
    if (info.kind == RelocationClass::Got) {
      const std::uint64_t slot_offset = got_offset_ + relocation.slot * kGotSlotSize;
      const bool with_addend = arch_.got_slot_holds_addend;
      const std::uint64_t value =
          with_addend ? symbol + static_cast<std::uint64_t>(relocation.addend) : symbol;
      std::memcpy(memory + slot_offset, &value, sizeof(value));
      status = patch(base_address + slot_offset, with_addend ? 0 : relocation.addend);
    } else if (info.kind == RelocationClass::Branch && relocation.slot != kNoSlot) {
      if (!options_.force_stubs) status = patch(symbol, relocation.addend);
      if (options_.force_stubs || status != PatchStatus::Ok) {
        const std::uint64_t stub_offset = stubs_offset_ + relocation.slot * kStubSize;
        // The branch bias is part of A (see ArchTraits::branch_bias): the stub
        // jumps to the real target and the branch reaches the stub with A = -bias.
        const std::uint64_t target = symbol + static_cast<std::uint64_t>(relocation.addend) +
                                     static_cast<std::uint64_t>(arch_.branch_bias);
        if (stub_written[relocation.slot] == 0) {
          arch_.write_stub(memory + stub_offset, target);
          stub_written[relocation.slot] = 1;
          ++result.stubs_used;
        }
        status = patch(base_address + stub_offset, -arch_.branch_bias);
      }
    } else {
      status = patch(symbol, relocation.addend);
    }
    if (status != PatchStatus::Ok) {
      const bool external_data = symbols_[relocation.symbol].state == SymbolState::Undefined;
      throw make_error(
          ErrorKind::Load, "{} against '{}' (address {:#x}, addend {}) {}{}",
          describe_site(relocation), describe_symbol(relocation.symbol), symbol,
          relocation.addend,
          status == PatchStatus::Misaligned ? "is misaligned for the instruction's field"
                                            : "does not fit the relocated field",
          external_data ? "; compile with -fPIC so external data is reached through the GOT" : "");
    }
  }
  return result;
}

std::optional<std::uint64_t> LinkedImage::address_of(std::string_view name) const {
  for (const ImageSymbol& symbol : symbols) {
    if (symbol.name == name) return base_address + symbol.offset;
  }
  return std::nullopt;
}

LinkedImage link_object(std::span<const std::byte> object, Machine machine,
                        std::uint64_t base_address, const SymbolResolver& resolver,
                        const LinkOptions& options) {
  const ObjectLinker linker(object, machine, options);
  if (base_address % linker.image_alignment() != 0) {
    throw make_error(ErrorKind::Validation,
                     "base address {:#x} is not aligned to the image's {}-byte alignment",
                     base_address, linker.image_alignment());
  }
  LinkedImage image;
  image.base_address = base_address;
  image.bytes.assign(linker.image_size(), std::byte{0});
  image.stubs_used = linker.link(image.bytes.data(), base_address, resolver).stubs_used;
  image.regions.assign(linker.regions().begin(), linker.regions().end());
  image.symbols = linker.symbols();
  image.section_addresses.resize(linker.section_count());
  for (std::size_t i = 0; i < linker.section_count(); ++i) {
    if (const auto offset = linker.section_offset(i)) image.section_addresses[i] = base_address + *offset;
  }
  image.stubs_address = base_address + linker.stubs_offset();
  image.stub_slots = linker.stub_slots();
  image.got_address = base_address + linker.got_offset();
  image.got_slots = linker.got_slots();
  return image;
}

}  // namespace svod::detail
