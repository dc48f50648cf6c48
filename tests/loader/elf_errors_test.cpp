// Malformed, foreign and unsupported objects: every one must fail with a typed
// svod::Error that names what is wrong, and none may crash the loader.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compile_c.h"
#include "elf_inspect.h"
#include "svod/base/error.h"
#include "svod/loader/elf_loader.h"

namespace svod {
namespace {

using test::compile_c;
using test::ElfInspector;
using test::poke;

constexpr std::string_view kKernel = R"(
  float expf(float);
  static const float table[4] = {1, 2, 3, 4};
  static float state[4];
  __attribute__((noinline)) float helper(float x) { return expf(x) * table[(int)x & 3]; }
  void kernel(float* restrict out, const float* restrict in, int n) {
    for (int i = 0; i < n; ++i) { state[i & 3] += in[i]; out[i] = helper(in[i]) + state[i & 3]; }
  })";

std::vector<std::byte> kernel_object(bool pic = true) {
  return compile_c(kKernel, {pic, "", {"-fno-builtin"}});
}

// Loads `object` and returns the error it must raise.
Error load_error(const std::vector<std::byte>& object) {
  try {
    LoadedImage::load(object);
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "the object loaded, but an error was expected";
  return Error(ErrorKind::Internal, "no error");
}

void expect_load_error(const std::vector<std::byte>& object, std::string_view needle,
                       ErrorKind kind = ErrorKind::Load) {
  const Error error = load_error(object);
  EXPECT_EQ(error.kind(), kind) << error.what();
  EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
      << "message '" << error.what() << "' should mention '" << needle << "'";
}

std::size_t rela_text_entry(const ElfInspector& elf, std::uint32_t type = 0) {
  for (const auto& relocation : elf.relocations()) {
    if (elf.section_name(relocation.target_section) == ".text" &&
        (type == 0 || relocation.type() == type)) {
      return relocation.file_offset;
    }
  }
  ADD_FAILURE() << "no relocation of .text";
  return 0;
}

TEST(LoaderErrorTest, EveryTruncationFailsCleanly) {
  for (bool pic : {true, false}) {
    const auto object = kernel_object(pic);
    for (std::size_t length = 0; length < object.size(); ++length) {
      const std::vector<std::byte> prefix(object.begin(), object.begin() + length);
      try {
        LoadedImage::load(prefix);
        ADD_FAILURE() << "a " << length << "-byte prefix of " << object.size() << " loaded";
      } catch (const Error& error) {
        ASSERT_EQ(error.kind(), ErrorKind::Load) << length << ": " << error.what();
      }
    }
  }
}

TEST(LoaderErrorTest, RejectsCorruptHeaders) {
  const auto good = kernel_object();
  const ElfInspector elf(good);
  auto patched = [&](auto&& patch) {
    auto object = good;
    patch(object);
    return object;
  };
  expect_load_error(patched([](auto& o) { o[0] = std::byte{0x7E}; }), "not an ELF");
  expect_load_error(patched([](auto& o) { o[EI_CLASS] = std::byte{ELFCLASS32}; }), "32-bit");
  expect_load_error(patched([](auto& o) { o[EI_DATA] = std::byte{ELFDATA2MSB}; }), "little-endian");
  expect_load_error(patched([](auto& o) { poke<std::uint64_t>(o, offsetof(Elf64_Ehdr, e_shoff), 0); }),
                    "no section header");
  expect_load_error(
      patched([](auto& o) { poke<std::uint64_t>(o, offsetof(Elf64_Ehdr, e_shoff), ~0ull - 8); }),
      "section header table");
  expect_load_error(
      patched([](auto& o) { poke<std::uint16_t>(o, offsetof(Elf64_Ehdr, e_shnum), 0xFEFF); }),
      "section header table");
  expect_load_error(
      patched([](auto& o) { poke<std::uint16_t>(o, offsetof(Elf64_Ehdr, e_shentsize), 40); }),
      "entry size");
  expect_load_error(
      patched([&](auto& o) { poke<std::uint16_t>(o, offsetof(Elf64_Ehdr, e_shstrndx), 0x7FFF); }),
      "section name table");
  // A section whose contents lie past the end of the file.
  const std::size_t text = *elf.find_section(".text");
  expect_load_error(patched([&](auto& o) {
                      poke<std::uint64_t>(o, elf.section_header_offset(text) + offsetof(Elf64_Shdr, sh_offset),
                                          ~0ull - 16);
                    }),
                    "'.text'");
  expect_load_error(patched([&](auto& o) {
                      poke<std::uint64_t>(o, elf.section_header_offset(text) + offsetof(Elf64_Shdr, sh_addralign), 24);
                    }),
                    "alignment");
  expect_load_error(patched([&](auto& o) {
                      poke<std::uint32_t>(o, elf.section_header_offset(text) + offsetof(Elf64_Shdr, sh_name),
                                          0x7FFFFFFF);
                    }),
                    "name offset");
  // A symbol table whose extent overflows.
  const std::size_t symtab = *elf.find_section_of_type(SHT_SYMTAB);
  expect_load_error(patched([&](auto& o) {
                      poke<std::uint64_t>(o, elf.section_header_offset(symtab) + offsetof(Elf64_Shdr, sh_size),
                                          ~0ull - 23);
                    }),
                    "symbol table");
}

TEST(LoaderErrorTest, RejectsObjectsForAnotherMachine) {
  const auto& object = test::compile_c_aarch64("int f(int x) { return x + 1; }", true);
  expect_load_error(object, "AArch64");
  expect_load_error(object, "e_machine 183");
}

TEST(LoaderErrorTest, RejectsExecutablesAndSharedObjects) {
  auto object = kernel_object();
  poke<std::uint16_t>(object, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
  expect_load_error(object, "ET_EXEC");
  poke<std::uint16_t>(object, offsetof(Elf64_Ehdr, e_type), ET_DYN);
  expect_load_error(object, "ET_DYN");
}

TEST(LoaderErrorTest, NamesUnknownRelocationTypes) {
  auto object = kernel_object();
  const std::size_t entry = rela_text_entry(ElfInspector(object));
  Elf64_Rela rela;
  std::memcpy(&rela, object.data() + entry, sizeof(rela));
  poke<std::uint64_t>(object, entry + offsetof(Elf64_Rela, r_info), ELF64_R_INFO(ELF64_R_SYM(rela.r_info), 200));
  expect_load_error(object, "type 200");
  // A real x86-64 type the loader does not implement is named too.
  poke<std::uint64_t>(object, entry + offsetof(Elf64_Rela, r_info),
                      ELF64_R_INFO(ELF64_R_SYM(rela.r_info), R_X86_64_GOTPC32));
  expect_load_error(object, "R_X86_64_GOTPC32 (type 26)");
}

TEST(LoaderErrorTest, RejectsBadRelocationEntries) {
  const auto good = kernel_object();
  const std::size_t entry = rela_text_entry(ElfInspector(good));
  Elf64_Rela rela;
  std::memcpy(&rela, good.data() + entry, sizeof(rela));

  auto object = good;
  poke<std::uint64_t>(object, entry + offsetof(Elf64_Rela, r_offset), 0xFFFFFFFFFFFFFFF0ull);
  expect_load_error(object, "outside section '.text'");

  object = good;
  poke<std::uint64_t>(object, entry + offsetof(Elf64_Rela, r_info),
                      ELF64_R_INFO(99999, ELF64_R_TYPE(rela.r_info)));
  expect_load_error(object, "symbol 99999");

  // SHT_REL is refused outright rather than misread.
  object = good;
  const ElfInspector elf(object);
  const std::size_t rela_text = *elf.find_section(".rela.text");
  poke<std::uint32_t>(object, elf.section_header_offset(rela_text) + offsetof(Elf64_Shdr, sh_type), SHT_REL);
  expect_load_error(object, "SHT_REL");
}

TEST(LoaderErrorTest, NamesUndefinedSymbols) {
  const auto& object = compile_c(R"(
    extern float svod_missing_function(float);
    float f(float x) { return svod_missing_function(x) + 1.0f; })");
  expect_load_error(object, "svod_missing_function", ErrorKind::UndefinedSymbol);
  const auto& data = compile_c(R"(
    extern int svod_missing_data;
    int g(void) { return svod_missing_data; })");
  expect_load_error(data, "svod_missing_data", ErrorKind::UndefinedSymbol);
}

TEST(LoaderErrorTest, RejectsConstructorsAndThreadLocals) {
  expect_load_error(compile_c(R"(
    extern void svod_register(void);
    __attribute__((constructor)) void init(void) { svod_register(); }
    int answer(void) { return 42; })"),
                    ".init_array");
  const Error tls = load_error(compile_c(R"(
    _Thread_local int per_thread;
    int get(void) { return ++per_thread; })"));
  EXPECT_EQ(tls.kind(), ErrorKind::Load) << tls.what();
}

TEST(LoaderErrorTest, RandomCorruptionNeverCrashes) {
  const auto good = kernel_object();
  std::mt19937_64 random(12345);
  int loaded = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    auto object = good;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) {
      // Bias towards the headers at both ends, where structure lives.
      const std::size_t position =
          random() % 2 == 0 ? random() % 64 : object.size() - 1 - random() % std::min<std::size_t>(object.size(), 1024);
      object[position] = static_cast<std::byte>(random());
    }
    try {
      LoadedImage::load(object);  // may still be valid; it is never run
      ++loaded;
    } catch (const Error& error) {
      ASSERT_TRUE(error.kind() == ErrorKind::Load || error.kind() == ErrorKind::UndefinedSymbol)
          << error.what();
    }
  }
  RecordProperty("loaded", loaded);
}

}  // namespace
}  // namespace svod
