// Links real clang-19 objects into plain buffers at chosen addresses with a
// test-supplied resolver (detail::link_object), then decodes every patched
// field and checks it points exactly at the intended symbol, stub or GOT slot.
// This is how AArch64 relocations are verified on an x86-64 host.
#include "svod/loader/elf_link.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "compile_c.h"
#include "elf_inspect.h"
#include "svod/base/error.h"

namespace svod {
namespace {

using detail::LinkedImage;
using detail::Machine;
using test::ElfInspector;

using SymbolTable = std::map<std::string, std::uint64_t, std::less<>>;

detail::SymbolResolver resolver_for(const SymbolTable& table) {
  return [&table](std::string_view name) -> std::optional<std::uint64_t> {
    const auto it = table.find(name);
    if (it == table.end()) return std::nullopt;
    return it->second;
  };
}

template <typename T>
T read(const LinkedImage& image, std::uint64_t address) {
  EXPECT_GE(address, image.base_address);
  EXPECT_LE(address + sizeof(T), image.base_address + image.bytes.size());
  T value;
  std::memcpy(&value, image.bytes.data() + (address - image.base_address), sizeof(T));
  return value;
}

std::int64_t sign_extend(std::uint64_t value, int bits) {
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  return static_cast<std::int64_t>((value ^ sign) - sign);
}

bool inside(std::uint64_t address, std::uint64_t begin, std::uint64_t size) {
  return address >= begin && address < begin + size;
}

// S for a relocation, computed from the object's own symbol table, the image's
// section placement and the resolver's table (not from the linker's state).
std::uint64_t symbol_value(const ElfInspector& elf, const LinkedImage& image,
                           const SymbolTable& externals, std::uint32_t index) {
  if (index == 0) return 0;
  const auto symbol = elf.symbols()[index];
  if (symbol.raw.st_shndx == SHN_UNDEF) {
    const auto it = externals.find(symbol.name);
    return it == externals.end() ? 0 : it->second;
  }
  if (symbol.raw.st_shndx == SHN_COMMON) return *image.address_of(symbol.name);
  EXPECT_TRUE(image.section_addresses[symbol.raw.st_shndx].has_value()) << symbol.name;
  return *image.section_addresses[symbol.raw.st_shndx] + symbol.raw.st_value;
}

// ---------------------------------------------------------------- AArch64

constexpr std::string_view kAArch64Kernel = R"(
  typedef float float4 __attribute__((ext_vector_type(4)));
  extern float ext_fn(float);
  extern float ext_tail(float);
  extern int ext_data;
  unsigned char g8 = 1;
  unsigned short g16 = 2;
  unsigned int g32 = 3;
  unsigned long g64 = 4;
  float4 g128 = {1, 2, 3, 4};
  static const float table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int counter;
  int* ptrs[2] = {(int*)&g32, &counter};
  __attribute__((noinline)) float helper(float x) { return x * table[(int)x & 7]; }
  unsigned long sum_all(void) { return g8 + g16 + g32 + g64 + (unsigned long)g128.y; }
  void bump_all(void) { g8++; g16++; g32++; g64++; g128 += 1.0f; }
  int use_data(int i) { return *ptrs[i & 1] + ext_data; }
  float kernel(float x) { return ext_fn(helper(x)); }
  float tail(float x) { return ext_tail(x + 1.0f); })";

constexpr std::uint64_t kBase = 0x40000000;

const std::vector<std::byte>& aarch64_object(bool pic) {
  return test::compile_c_aarch64(kAArch64Kernel, pic, {"-mno-global-merge"});
}

// Checks every relocation of `object` as linked into `image`; returns how
// many of each type it saw.
std::map<std::uint32_t, int> verify_aarch64(const std::vector<std::byte>& object,
                                            const LinkedImage& image, const SymbolTable& externals) {
  const ElfInspector elf(object);
  const auto symbols = elf.symbols();
  std::map<std::uint32_t, int> seen;
  std::map<std::uint32_t, std::uint64_t> got_page;  // by symbol, from the last ADRP :got:
  for (const auto& relocation : elf.relocations()) {
    const std::uint32_t type = relocation.type();
    const std::uint64_t s = symbol_value(elf, image, externals, relocation.symbol());
    const std::uint64_t target = s + static_cast<std::uint64_t>(relocation.raw.r_addend);
    const std::uint64_t place =
        *image.section_addresses[relocation.target_section] + relocation.raw.r_offset;
    const std::string what = "relocation type " + std::to_string(type) + " against " +
                             symbols[relocation.symbol()].name;
    const auto insn = read<std::uint32_t>(image, place);
    const std::uint64_t imm12 = (insn >> 10) & 0xFFF;
    const std::uint64_t adrp_page =
        (place & ~std::uint64_t{0xFFF}) +
        (sign_extend((((insn >> 5) & 0x7FFFF) << 2) | ((insn >> 29) & 3), 21) << 12);
    ++seen[type];
    switch (type) {
      case R_AARCH64_CALL26:
      case R_AARCH64_JUMP26: {
        EXPECT_EQ(insn >> 26, type == R_AARCH64_CALL26 ? 0x25u : 0x05u) << what;  // BL / B
        const std::uint64_t destination = place + sign_extend(insn & 0x3FFFFFF, 26) * 4;
        if (destination == target) break;
        // Otherwise it must be a veneer: ldr x16, #8; br x16; .quad target.
        EXPECT_TRUE(inside(destination, image.stubs_address, image.stub_slots * 16)) << what;
        EXPECT_EQ(read<std::uint32_t>(image, destination), 0x58000050u) << what;
        EXPECT_EQ(read<std::uint32_t>(image, destination + 4), 0xD61F0200u) << what;
        EXPECT_EQ(read<std::uint64_t>(image, destination + 8), target) << what;
        break;
      }
      case R_AARCH64_ADR_PREL_PG_HI21:
        EXPECT_EQ(insn & 0x9F000000u, 0x90000000u) << what;  // ADRP
        EXPECT_EQ(adrp_page, target & ~std::uint64_t{0xFFF}) << what;
        break;
      case R_AARCH64_ADD_ABS_LO12_NC:
        EXPECT_EQ(imm12, target & 0xFFF) << what;
        break;
      case R_AARCH64_LDST8_ABS_LO12_NC:
      case R_AARCH64_LDST16_ABS_LO12_NC:
      case R_AARCH64_LDST32_ABS_LO12_NC:
      case R_AARCH64_LDST64_ABS_LO12_NC:
      case R_AARCH64_LDST128_ABS_LO12_NC: {
        const unsigned scale = type == R_AARCH64_LDST8_ABS_LO12_NC    ? 0
                               : type == R_AARCH64_LDST16_ABS_LO12_NC ? 1
                               : type == R_AARCH64_LDST32_ABS_LO12_NC ? 2
                               : type == R_AARCH64_LDST64_ABS_LO12_NC ? 3
                                                                      : 4;
        // The instruction's own access size must agree with the relocation.
        const bool vector = ((insn >> 26) & 1) != 0;
        const unsigned size = insn >> 30;
        const unsigned access = vector && ((insn >> 23) & 1) ? 4 : size;
        EXPECT_EQ(access, scale) << what;
        EXPECT_EQ(imm12 << scale, target & 0xFFF) << what;
        break;
      }
      case R_AARCH64_ADR_GOT_PAGE:
        EXPECT_EQ(insn & 0x9F000000u, 0x90000000u) << what;
        got_page[relocation.symbol()] = adrp_page;
        break;
      case R_AARCH64_LD64_GOT_LO12_NC: {
        EXPECT_TRUE(got_page.count(relocation.symbol())) << what;
        const std::uint64_t slot = got_page[relocation.symbol()] + (imm12 << 3);
        EXPECT_TRUE(inside(slot, image.got_address, image.got_slots * 8)) << what;
        EXPECT_EQ(read<std::uint64_t>(image, slot), target) << what;
        break;
      }
      case R_AARCH64_ABS64:
        EXPECT_EQ(read<std::uint64_t>(image, place), target) << what;
        break;
      case R_AARCH64_PREL32:
        EXPECT_EQ(read<std::int32_t>(image, place), static_cast<std::int64_t>(target - place)) << what;
        break;
      default:
        ADD_FAILURE() << "unexpected " << what;
    }
  }
  return seen;
}

TEST(AArch64LinkTest, NonPicRelocationsWithVeneers) {
  const auto& object = aarch64_object(false);
  // Functions far beyond +-128 MiB force veneers; data within ADRP's +-4 GiB.
  const SymbolTable externals = {{"ext_fn", 0x7F0012345000},
                                 {"ext_tail", 0x7F0012346008},
                                 {"ext_data", kBase + 0x40001234}};
  const LinkedImage image =
      detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals));
  const auto seen = verify_aarch64(object, image, externals);
  for (std::uint32_t type :
       {R_AARCH64_CALL26, R_AARCH64_JUMP26, R_AARCH64_ADR_PREL_PG_HI21, R_AARCH64_ADD_ABS_LO12_NC,
        R_AARCH64_LDST8_ABS_LO12_NC, R_AARCH64_LDST16_ABS_LO12_NC, R_AARCH64_LDST32_ABS_LO12_NC,
        R_AARCH64_LDST64_ABS_LO12_NC, R_AARCH64_LDST128_ABS_LO12_NC, R_AARCH64_ABS64}) {
    EXPECT_GT(seen.count(type), 0u) << "the kernel should exercise relocation type " << type;
  }
  EXPECT_EQ(image.stubs_used, 2u);  // ext_fn and ext_tail
  EXPECT_EQ(image.got_slots, 0u);
}

TEST(AArch64LinkTest, PicGotRelocationsUseRealSlots) {
  const auto& object = aarch64_object(true);
  const SymbolTable externals = {{"ext_fn", 0x7F0012345000},
                                 {"ext_tail", 0x7F0012346008},
                                 {"ext_data", 0x7F00AAAA0004}};
  const LinkedImage image =
      detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals));
  const auto seen = verify_aarch64(object, image, externals);
  EXPECT_GT(seen.count(R_AARCH64_ADR_GOT_PAGE), 0u);
  EXPECT_GT(seen.count(R_AARCH64_LD64_GOT_LO12_NC), 0u);
  EXPECT_GT(image.got_slots, 0u);
  // The GOT is read-only after relocation: it sits in the ReadOnly region.
  bool got_read_only = false;
  for (const auto& region : image.regions) {
    if (region.kind == detail::RegionKind::ReadOnly &&
        inside(image.got_address, image.base_address + region.offset, region.size)) {
      got_read_only = true;
    }
  }
  EXPECT_TRUE(got_read_only);
}

TEST(AArch64LinkTest, NearCallsNeedNoVeneer) {
  const auto& object = aarch64_object(false);
  const SymbolTable externals = {{"ext_fn", kBase + 0x2000000},
                                 {"ext_tail", kBase + 0x3000000},
                                 {"ext_data", kBase + 0x40001234}};
  const LinkedImage image =
      detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals));
  verify_aarch64(object, image, externals);
  EXPECT_EQ(image.stubs_used, 0u);

  detail::LinkOptions forced;
  forced.force_stubs = true;
  const LinkedImage stubbed =
      detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals), forced);
  verify_aarch64(object, stubbed, externals);
  EXPECT_EQ(stubbed.stubs_used, 2u);
}

TEST(AArch64LinkTest, AdrpOutOfRangeIsAnError) {
  const auto& object = aarch64_object(false);
  const SymbolTable externals = {{"ext_fn", 0x7F0012345000},
                                 {"ext_tail", 0x7F0012346008},
                                 {"ext_data", 0x7F00AAAA0004}};  // > 4 GiB away, no GOT
  try {
    detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals));
    FAIL() << "expected an out-of-range error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Load);
    const std::string message = error.what();
    EXPECT_NE(message.find("R_AARCH64_ADR_PREL_PG_HI21"), std::string::npos) << message;
    EXPECT_NE(message.find("ext_data"), std::string::npos) << message;
  }
}

TEST(AArch64LinkTest, UndefinedSymbolIsNamed) {
  const auto& object = aarch64_object(true);
  const SymbolTable externals = {{"ext_fn", 0x7F0012345000}, {"ext_data", 0x7F00AAAA0004}};
  try {
    detail::link_object(object, Machine::AArch64, kBase, resolver_for(externals));
    FAIL() << "expected an undefined symbol";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::UndefinedSymbol);
    EXPECT_NE(std::string(error.what()).find("ext_tail"), std::string::npos) << error.what();
  }
}

TEST(AArch64LinkTest, MachineMismatchIsAnError) {
  const auto& arm = aarch64_object(true);
  const SymbolTable none;
  EXPECT_THROW(detail::link_object(arm, Machine::X86_64, kBase, resolver_for(none)), Error);
  const auto& x86 = test::compile_c("int f(int x) { return x; }");
  try {
    detail::link_object(x86, Machine::AArch64, kBase, resolver_for(none));
    FAIL() << "expected a machine mismatch";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Load);
    EXPECT_NE(std::string(error.what()).find("x86-64"), std::string::npos) << error.what();
  }
}

// ----------------------------------------------------------------- x86-64

constexpr std::string_view kX86Kernel = R"(
  float expf(float); float sinf(float);
  extern int ext_data;
  static const float table[4] = {1, 2, 3, 4};
  static float state[4];
  const float* const table_ptr = table;
  __attribute__((noinline)) float helper(float x) { return expf(x) * table[(int)x & 3]; }
  float kernel(float x, int i) { state[i & 3] += x + ext_data; return helper(x) + sinf(state[i & 3]); })";

void verify_x86_64(const std::vector<std::byte>& object, const LinkedImage& image,
                   const SymbolTable& externals) {
  const ElfInspector elf(object);
  const auto symbols = elf.symbols();
  for (const auto& relocation : elf.relocations()) {
    const std::uint32_t type = relocation.type();
    const std::int64_t addend = relocation.raw.r_addend;
    const std::uint64_t s = symbol_value(elf, image, externals, relocation.symbol());
    const std::uint64_t place =
        *image.section_addresses[relocation.target_section] + relocation.raw.r_offset;
    const std::string what = "relocation type " + std::to_string(type) + " against " +
                             symbols[relocation.symbol()].name;
    const auto field32 = static_cast<std::int64_t>(read<std::int32_t>(image, place));
    switch (type) {
      case R_X86_64_PLT32: {
        const std::uint64_t destination = place + field32 - addend;  // L = field - A + P
        if (destination == s) break;
        EXPECT_TRUE(inside(destination, image.stubs_address, image.stub_slots * 16)) << what;
        EXPECT_EQ(read<std::uint16_t>(image, destination), 0x25FF) << what;  // jmp *[rip+0]
        EXPECT_EQ(read<std::uint32_t>(image, destination + 2), 0u) << what;
        EXPECT_EQ(read<std::uint64_t>(image, destination + 6), s + addend + 4) << what;
        break;
      }
      case R_X86_64_PC32:
        EXPECT_EQ(field32, static_cast<std::int64_t>(s + addend - place)) << what;
        break;
      case R_X86_64_GOTPCREL:
      case R_X86_64_GOTPCRELX:
      case R_X86_64_REX_GOTPCRELX: {
        const std::uint64_t slot = place + field32 - addend;
        EXPECT_TRUE(inside(slot, image.got_address, image.got_slots * 8)) << what;
        EXPECT_EQ(read<std::uint64_t>(image, slot), s) << what;
        break;
      }
      case R_X86_64_64:
        EXPECT_EQ(read<std::uint64_t>(image, place), s + addend) << what;
        break;
      case R_X86_64_32:
      case R_X86_64_32S:
        EXPECT_EQ(field32, static_cast<std::int64_t>(static_cast<std::int32_t>(s + addend))) << what;
        break;
      default:
        ADD_FAILURE() << "unexpected " << what;
    }
  }
}

TEST(X86LinkTest, FarCallsThroughStubsAndGotSlots) {
  for (bool pic : {true, false}) {
    const auto& object = test::compile_c(kX86Kernel, {pic, "", {"-fno-builtin"}});
    // Non-PIC code addresses ext_data with a rel32, so keep data near the image.
    const SymbolTable externals = {{"expf", 0x7F0012345000},
                                   {"sinf", 0x7F0012346010},
                                   {"ext_data", kBase + 0x10000000}};
    const LinkedImage image =
        detail::link_object(object, Machine::X86_64, kBase, resolver_for(externals));
    verify_x86_64(object, image, externals);
    EXPECT_EQ(image.stubs_used, 2u) << (pic ? "pic" : "nopic");
    if (pic) {
      EXPECT_GT(image.got_slots, 0u);
    }
  }
}

TEST(X86LinkTest, Rel32ToFarDataSuggestsPic) {
  const auto& object = test::compile_c(kX86Kernel, {false, "", {"-fno-builtin"}});
  const SymbolTable externals = {
      {"expf", 0x7F0012345000}, {"sinf", 0x7F0012346010}, {"ext_data", 0x7F0099990000}};
  try {
    detail::link_object(object, Machine::X86_64, kBase, resolver_for(externals));
    FAIL() << "expected an out-of-range error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Load);
    const std::string message = error.what();
    EXPECT_NE(message.find("ext_data"), std::string::npos) << message;
    EXPECT_NE(message.find("-fPIC"), std::string::npos) << message;
  }
}

TEST(X86LinkTest, RegionsArePageSeparatedInPermissionOrder) {
  const auto& object = test::compile_c(kX86Kernel, {true, "", {"-fno-builtin"}});
  const SymbolTable externals = {
      {"expf", 0x7F0012345000}, {"sinf", 0x7F0012346010}, {"ext_data", 0x7F0099990000}};
  const LinkedImage image =
      detail::link_object(object, Machine::X86_64, kBase, resolver_for(externals));
  ASSERT_EQ(image.regions.size(), 3u);
  EXPECT_EQ(image.regions[0].kind, detail::RegionKind::Text);
  EXPECT_EQ(image.regions[1].kind, detail::RegionKind::ReadOnly);
  EXPECT_EQ(image.regions[2].kind, detail::RegionKind::Data);
  for (std::size_t i = 0; i < image.regions.size(); ++i) {
    EXPECT_EQ(image.regions[i].offset % 4096, 0u);
    if (i > 0) {
      EXPECT_GE(image.regions[i].offset,
                (image.regions[i - 1].offset + image.regions[i - 1].size + 4095) / 4096 * 4096);
    }
  }
  EXPECT_TRUE(image.address_of("kernel").has_value());
  EXPECT_TRUE(image.address_of("table_ptr").has_value());
  EXPECT_THROW(detail::link_object(object, Machine::X86_64, kBase + 8, resolver_for(externals)),
               Error);
}

}  // namespace
}  // namespace svod
