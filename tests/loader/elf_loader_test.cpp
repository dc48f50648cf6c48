// Loads real clang-19 objects into this process and runs them.
#include "svod/loader/elf_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compile_c.h"
#include "elf_inspect.h"
#include "svod/base/error.h"
#include "svod/loader/elf_link.h"

extern "C" char** environ;

namespace svod {
namespace {

using test::compile_c;
using test::CompileOptions;
using test::ElfInspector;

std::shared_ptr<const LoadedImage> load_c(std::string_view source, bool pic = true,
                                          std::vector<std::string> flags = {}) {
  CompileOptions options;
  options.pic = pic;
  options.flags = std::move(flags);
  return LoadedImage::load(compile_c(source, options));
}

template <typename Fn>
Fn entry(const std::shared_ptr<const LoadedImage>& image, std::string_view name) {
  return reinterpret_cast<Fn>(image->symbol(name));
}

// Most kernels are tested both as position-independent and as non-PIC code:
// they produce different relocations (GOTPCRELX/PC32 vs 32S/64).
class PicTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Loader, PicTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "pic" : "nopic"; });

TEST(LoaderTest, NoOpKernelLoadsAndRuns) {
  const auto image = load_c("void noop(void) {}");
  entry<void (*)()>(image, "noop")();
  EXPECT_GT(image->mapped_bytes(), 0u);
  EXPECT_EQ(image->mapped_bytes() % static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), 0u);
}

TEST_P(PicTest, AddsFloats) {
  const auto image = load_c(R"(
    void add(float* restrict out, const float* restrict a, const float* restrict b, int n) {
      for (int i = 0; i < n; ++i) out[i] = a[i] + b[i];
    })",
                            GetParam());
  std::vector<float> a(1000), b(1000), out(1000, -1.0f);
  for (int i = 0; i < 1000; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 3.0f - static_cast<float>(i) * 0.25f;
  }
  entry<void (*)(float*, const float*, const float*, int)>(image, "add")(out.data(), a.data(),
                                                                         b.data(), 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << i;
}

TEST_P(PicTest, VectorTypesAndRestrictPointers) {
  // The constant vector lands in .rodata.cst16.
  const auto image = load_c(R"(
    typedef float float4 __attribute__((ext_vector_type(4)));
    void vmath(float4* restrict out, const float4* restrict a, const float4* restrict b, int n) {
      for (int i = 0; i < n; ++i) out[i] = a[i] * b[i] + (float4){1.0f, 2.0f, 3.0f, 4.0f};
    })",
                            GetParam());
  constexpr int kCount = 64;
  alignas(16) float a[kCount * 4], b[kCount * 4], out[kCount * 4];
  for (int i = 0; i < kCount * 4; ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = static_cast<float>(i % 7) - 2.0f;
  }
  entry<void (*)(float*, const float*, const float*, int)>(image, "vmath")(out, a, b, kCount);
  for (int i = 0; i < kCount * 4; ++i) {
    ASSERT_EQ(out[i], a[i] * b[i] + static_cast<float>(i % 4 + 1)) << i;
  }
}

constexpr std::string_view kLibmKernel = R"(
  float expf(float); float sinf(float); float sqrtf(float); float powf(float, float);
  void mathk(float* restrict out, const float* restrict in, int n) {
    for (int i = 0; i < n; ++i) {
      out[4 * i] = expf(in[i]);
      out[4 * i + 1] = sinf(in[i]);
      out[4 * i + 2] = sqrtf(in[i]);
      out[4 * i + 3] = powf(in[i], 1.5f);
    }
  })";

void check_libm_kernel(const std::shared_ptr<const LoadedImage>& image) {
  constexpr int kCount = 33;
  std::vector<float> in(kCount), out(kCount * 4);
  for (int i = 0; i < kCount; ++i) in[i] = 0.1f + static_cast<float>(i) * 0.37f;
  entry<void (*)(float*, const float*, int)>(image, "mathk")(out.data(), in.data(), kCount);
  for (int i = 0; i < kCount; ++i) {
    // The loaded code calls the very same libm functions as this process.
    EXPECT_EQ(out[4 * i], ::expf(in[i])) << i;
    EXPECT_EQ(out[4 * i + 1], ::sinf(in[i])) << i;
    EXPECT_EQ(out[4 * i + 2], ::sqrtf(in[i])) << i;
    EXPECT_EQ(out[4 * i + 3], ::powf(in[i], 1.5f)) << i;
  }
}

TEST_P(PicTest, CallsLibmFunctions) {
  const auto& object = compile_c(kLibmKernel, {GetParam(), "", {"-fno-builtin"}});
  const ElfInspector elf(object);
  for (const char* name : {"expf", "sinf", "sqrtf", "powf"}) {
    EXPECT_TRUE(elf.references(name)) << name << " should be a real external call";
  }
  check_libm_kernel(LoadedImage::load(object));
}

TEST(LoaderTest, NonPicCodeIsMappedLowAndReachesLibmThroughStubs) {
  const auto& object = compile_c(R"(
    float expf(float);
    static float bias[4] = {1, 2, 3, 4};
    void k(float* out, const float* in, int n) { for (int i = 0; i < n; ++i) out[i] = expf(in[i]) + bias[i & 3]; })",
                                 {false, "", {"-fno-builtin"}});
  EXPECT_TRUE(ElfInspector(object).has_relocation_type(R_X86_64_32S));
  const auto image = LoadedImage::load(object);
  // 32-bit absolute addresses of its own data must reach the image, so it is
  // mapped below 2 GiB, while libm sits near the top of the address space:
  // the call can only go through a far-call stub.
  const auto text = reinterpret_cast<std::uintptr_t>(image->regions()[0].address);
  EXPECT_LT(text + image->mapped_bytes(), std::uintptr_t{1} << 31);
  EXPECT_GT(reinterpret_cast<std::uintptr_t>(detail::resolve_host_symbol("expf")) - text,
            std::uintptr_t{1} << 32);
  EXPECT_EQ(image->stubs_used(), 1u);
  float in[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f}, out[6];
  entry<void (*)(float*, const float*, int)>(image, "k")(out, in, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], ::expf(in[i]) + static_cast<float>((i & 3) + 1));
}

TEST(LoaderTest, FarCallsGoThroughStubs) {
  const auto& object = compile_c(kLibmKernel, {true, "", {"-fno-builtin"}});
  detail::LinkOptions options;
  options.force_stubs = true;
  const auto forced = detail::load_with_options(object, options);
  EXPECT_EQ(forced->stubs_used(), 4u);  // one per libm function
  check_libm_kernel(forced);

  // Without forcing, stubs are used exactly when libm is beyond rel32 reach.
  const auto image = LoadedImage::load(object);
  const auto text = reinterpret_cast<std::intptr_t>(image->regions()[0].address);
  bool any_far = false;
  for (const char* name : {"expf", "sinf", "sqrtf", "powf"}) {
    const auto target = reinterpret_cast<std::intptr_t>(detail::resolve_host_symbol(name));
    ASSERT_NE(target, 0) << name;
    if (std::llabs(target - text) > (std::int64_t{1} << 31) - 4096) any_far = true;
  }
  if (any_far) {
    EXPECT_GT(image->stubs_used(), 0u);
  } else {
    EXPECT_EQ(image->stubs_used(), 0u);
  }
  check_libm_kernel(image);
}

TEST_P(PicTest, ReadsStaticConstTables) {
  const auto image = load_c(R"(
    static const int table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    static const double scale[4] = {0.5, 1.5, 2.5, 3.5};
    void lut(double* out, const int* idx, int n) {
      for (int i = 0; i < n; ++i) out[i] = table[idx[i] & 15] * scale[idx[i] & 3];
    })",
                            GetParam());
  const int table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
  const double scale[4] = {0.5, 1.5, 2.5, 3.5};
  std::vector<int> idx(100);
  std::vector<double> out(100);
  for (int i = 0; i < 100; ++i) idx[i] = i * 7 + 3;
  entry<void (*)(double*, const int*, int)>(image, "lut")(out.data(), idx.data(), 100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(out[i], table[idx[i] & 15] * scale[idx[i] & 3]) << i;
}

int switch_reference(int x, int y) {
  switch (x) {
    case 0: return y * 3 + 1;
    case 1: return y - 7;
    case 2: return y * y;
    case 3: return y ^ 0x55;
    case 4: return y << 3;
    case 5: return y / 3;
    case 6: return -y;
    case 7: return y + 100;
    case 8: return y % 7;
    case 9: return y | 1;
    case 10: return y & 12;
    case 11: return y * 11 - 5;
    default: return 42;
  }
}

TEST_P(PicTest, SwitchJumpTable) {
  const auto& object = compile_c(R"(
    __attribute__((noinline)) int sw(int x, int y) {
      switch (x) {
        case 0: return y * 3 + 1;
        case 1: return y - 7;
        case 2: return y * y;
        case 3: return y ^ 0x55;
        case 4: return y << 3;
        case 5: return y / 3;
        case 6: return -y;
        case 7: return y + 100;
        case 8: return y % 7;
        case 9: return y | 1;
        case 10: return y & 12;
        case 11: return y * 11 - 5;
        default: return 42;
      }
    }
    void swk(int* out, int n, int y) { for (int i = 0; i < n; ++i) out[i] = sw(i - 2, y); })",
                                 {GetParam(), "", {}});
  // A jump table is a .rodata array of code addresses (non-PIC: R_X86_64_64/32S)
  // or of offsets relative to the table (PIC: the table holds differences).
  const ElfInspector elf(object);
  bool text_in_rodata = false;
  for (const auto& relocation : elf.relocations()) {
    if (elf.section_name(relocation.target_section).starts_with(".rodata")) text_in_rodata = true;
  }
  if (!GetParam()) {
    EXPECT_TRUE(text_in_rodata) << "expected a jump table relocated in .rodata";
  }

  const auto image = LoadedImage::load(object);
  const auto sw = entry<int (*)(int, int)>(image, "sw");
  const auto swk = entry<void (*)(int*, int, int)>(image, "swk");
  for (int y : {-13, 0, 5, 77}) {
    for (int x = -3; x < 15; ++x) ASSERT_EQ(sw(x, y), switch_reference(x, y)) << x << " " << y;
    int out[16];
    swk(out, 16, y);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(out[i], switch_reference(i - 2, y));
  }
}

TEST_P(PicTest, StaticMutableStateSurvivesAcrossCalls) {
  const auto image = load_c(R"(
    static int counter;                     /* .bss */
    static int hist[4] = {1, 2, 3, 4};      /* .data */
    int bump(int k) { counter += k; hist[k & 3] += counter; return counter * 1000 + hist[k & 3]; })",
                            GetParam());
  const auto bump = entry<int (*)(int)>(image, "bump");
  int counter = 0;
  int hist[4] = {1, 2, 3, 4};
  for (int k = 0; k < 20; ++k) {
    counter += k;
    hist[k & 3] += counter;
    ASSERT_EQ(bump(k), counter * 1000 + hist[k & 3]) << k;
  }
}

TEST_P(PicTest, CallsNonStaticHelperDefinedBeforeEntry) {
  const auto image = load_c(R"(
    __attribute__((noinline)) float helper(float x) { return x * x + 1.0f; }
    void entry(float* out, const float* in, int n) { for (int i = 0; i < n; ++i) out[i] = helper(in[i]); })",
                            GetParam());
  float in[5] = {0, 1, 2, -3, 0.5f}, out[5];
  entry<void (*)(float*, const float*, int)>(image, "entry")(out, in, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], in[i] * in[i] + 1.0f);
  EXPECT_EQ(entry<float (*)(float)>(image, "helper")(4.0f), 17.0f);
}

TEST(LoaderTest, SixtyFourBitScalarAboveTwoToThe31) {
  const auto image = load_c(R"(
    void big(long long* out, long long n) { out[0] = n * 3; out[1] = n + 0x100000000LL; })");
  long long out[2];
  const long long n = 5'000'000'000LL;
  entry<void (*)(long long*, long long)>(image, "big")(out, n);
  EXPECT_EQ(out[0], n * 3);
  EXPECT_EQ(out[1], n + 0x100000000LL);
}

TEST(LoaderTest, Int128DivisionUsesLibgcc) {
  const auto& object = compile_c(R"(
    void div128(unsigned __int128* out, const unsigned __int128* a, const unsigned __int128* b,
                __int128* sout, const __int128* sa, const __int128* sb) {
      out[0] = a[0] / b[0]; out[1] = a[0] % b[0]; sout[0] = sa[0] / sb[0]; sout[1] = sa[0] % sb[0];
    })");
  EXPECT_TRUE(ElfInspector(object).references("__udivti3"));
  const auto image = LoadedImage::load(object);
  using U = unsigned __int128;
  const U a = (U{0x0123456789ABCDEFull} << 64) | 0xFEDCBA9876543210ull;
  const U b = (U{0x12345ull} << 32) | 0x6789ull;
  const __int128 sa = -static_cast<__int128>(a >> 3);
  const __int128 sb = 987654321987654321LL;
  U out[2];
  __int128 sout[2];
  entry<void (*)(U*, const U*, const U*, __int128*, const __int128*, const __int128*)>(
      image, "div128")(out, &a, &b, sout, &sa, &sb);
  EXPECT_TRUE(out[0] == a / b);
  EXPECT_TRUE(out[1] == a % b);
  EXPECT_TRUE(sout[0] == sa / sb);
  EXPECT_TRUE(sout[1] == sa % sb);
}

std::uint16_t half_bits(float value) {
  // Exact for the values used below (small dyadic rationals).
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
  const std::uint32_t mantissa = (bits >> 13) & 0x3FF;
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exponent) << 10) | mantissa);
}

class Float16Test : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Loader, Float16Test, ::testing::Values("-march=native", "-march=x86-64"),
                         [](const auto& info) {
                           return std::string(info.param) == "-march=native" ? "native" : "libgcc";
                         });

TEST_P(Float16Test, HalfPrecisionMath) {
  const auto& object = compile_c(R"(
    void half(_Float16* restrict out, const _Float16* restrict a, const _Float16* restrict b,
              float* restrict widened, int n) {
      for (int i = 0; i < n; ++i) { out[i] = a[i] + b[i] * (_Float16)2.0f; widened[i] = (float)a[i]; }
    })",
                                 {true, "", {GetParam()}});
  if (std::string(GetParam()) == "-march=x86-64") {
    // Without F16C the conversions are libgcc_s calls.
    const ElfInspector elf(object);
    EXPECT_TRUE(elf.references("__extendhfsf2") || elf.references("__truncsfhf2"));
  }
  const auto image = LoadedImage::load(object);
  constexpr int kCount = 9;
  std::uint16_t a[kCount], b[kCount], out[kCount];
  float widened[kCount];
  for (int i = 0; i < kCount; ++i) {
    a[i] = half_bits(1.0f + 0.25f * static_cast<float>(i));
    b[i] = half_bits(0.5f * static_cast<float>(i + 1));
  }
  entry<void (*)(std::uint16_t*, const std::uint16_t*, const std::uint16_t*, float*, int)>(
      image, "half")(out, a, b, widened, kCount);
  for (int i = 0; i < kCount; ++i) {
    const float fa = 1.0f + 0.25f * static_cast<float>(i);
    const float fb = 0.5f * static_cast<float>(i + 1);
    EXPECT_EQ(widened[i], fa) << i;
    EXPECT_EQ(out[i], half_bits(fa + fb * 2.0f)) << i;
  }
}

TEST(LoaderTest, GotLoadOfExternalData) {
  const auto& object = compile_c(R"(
    extern char** environ;
    char** get_env(void) { return environ; })",
                                 {true, "", {}});
  const ElfInspector elf(object);
  EXPECT_TRUE(elf.has_relocation_type(R_X86_64_REX_GOTPCRELX) ||
              elf.has_relocation_type(R_X86_64_GOTPCRELX) ||
              elf.has_relocation_type(R_X86_64_GOTPCREL));
  const auto image = LoadedImage::load(object);
  EXPECT_EQ(entry<char** (*)()>(image, "get_env")(), ::environ);
}

TEST(LoaderTest, WeakUndefinedResolvesToNull) {
  const auto image = load_c(R"(
    extern void svod_surely_absent_function(void) __attribute__((weak));
    extern int svod_surely_absent_data __attribute__((weak));
    int probe(void) { return (svod_surely_absent_function ? 1 : 0) + (&svod_surely_absent_data ? 2 : 0); })");
  EXPECT_EQ(entry<int (*)()>(image, "probe")(), 0);
}

TEST(LoaderTest, HonoursAlignmentAbovePageSize) {
  const auto image = load_c(R"(
    static char block[8192] __attribute__((aligned(65536)));
    static const char table[4096] __attribute__((aligned(32768))) = {7};
    char* get_block(void) { block[1]++; return block; }
    const char* get_table(void) { return table; })");
  const auto block = reinterpret_cast<std::uintptr_t>(entry<char* (*)()>(image, "get_block")());
  const auto table = reinterpret_cast<std::uintptr_t>(entry<const char* (*)()>(image, "get_table")());
  EXPECT_EQ(block % 65536, 0u);
  EXPECT_EQ(table % 32768, 0u);
  EXPECT_EQ(*reinterpret_cast<const char*>(table), 7);
}

TEST(LoaderTest, CommonSymbolsLiveInBss) {
  const auto& object = compile_c(R"(
    int shared_counter;
    double shared_values[4];
    int bump_common(void) { shared_values[shared_counter & 3] += 1.5; return ++shared_counter; })",
                                 {true, "", {"-fcommon"}});
  bool saw_common = false;
  for (const auto& symbol : ElfInspector(object).symbols()) {
    if (symbol.raw.st_shndx == SHN_COMMON) saw_common = true;
  }
  EXPECT_TRUE(saw_common);
  const auto image = LoadedImage::load(object);
  const auto bump = entry<int (*)()>(image, "bump_common");
  EXPECT_EQ(bump(), 1);
  EXPECT_EQ(bump(), 2);
  EXPECT_EQ(*static_cast<int*>(image->symbol("shared_counter")), 2);
  const auto* values = static_cast<double*>(image->symbol("shared_values"));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(values) % alignof(double), 0u);
  EXPECT_EQ(values[0], 1.5);
  EXPECT_EQ(values[1], 1.5);
}

TEST(LoaderTest, IgnoresDebugInfoAndItsRelocations) {
  const auto image = load_c(R"(
    struct pair { int a, b; };
    int sum_pairs(const struct pair* p, int n) { int s = 0; for (int i = 0; i < n; ++i) s += p[i].a * p[i].b; return s; })",
                            true, {"-g"});
  const int pairs[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(entry<int (*)(const int*, int)>(image, "sum_pairs")(pairs, 3), 2 + 12 + 30);
}

struct MapsEntry {
  std::uintptr_t begin, end;
  std::string permissions;
};

std::vector<MapsEntry> read_maps() {
  std::vector<MapsEntry> entries;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions;
    fields >> range >> permissions;
    const auto dash = range.find('-');
    entries.push_back({std::stoull(range.substr(0, dash), nullptr, 16),
                       std::stoull(range.substr(dash + 1), nullptr, 16), permissions.substr(0, 3)});
  }
  return entries;
}

TEST(LoaderTest, MappingsAreWriteXorExecute) {
  const auto image = load_c(R"(
    static const float table[1000] = {1, 2, 3};
    static float state[1000] = {4};
    static int scratch[1000];
    float touch(int i) { scratch[i] += 1; state[i] += table[i]; return state[i] + scratch[i]; })",
                            true);
  EXPECT_EQ(entry<float (*)(int)>(image, "touch")(0), 6.0f);
  ASSERT_EQ(image->regions().size(), 3u);
  const auto maps = read_maps();
  for (const MappedRegion& region : image->regions()) {
    const auto begin = reinterpret_cast<std::uintptr_t>(region.address);
    const auto end = begin + region.size;
    const char* expected = region.access == RegionAccess::ReadExecute ? "r-x"
                           : region.access == RegionAccess::ReadOnly  ? "r--"
                                                                      : "rw-";
    bool covered = false;
    for (const MapsEntry& entry : maps) {
      if (entry.end <= begin || entry.begin >= end) continue;
      covered = true;
      EXPECT_EQ(entry.permissions, expected) << std::hex << begin;
    }
    EXPECT_TRUE(covered);
  }
  // Nothing anywhere in the image's range is writable and executable.
  const auto image_begin = reinterpret_cast<std::uintptr_t>(image->regions().front().address);
  const auto image_end = image_begin + image->mapped_bytes();
  for (const MapsEntry& entry : maps) {
    if (entry.end <= image_begin || entry.begin >= image_end) continue;
    EXPECT_FALSE(entry.permissions[1] == 'w' && entry.permissions[2] == 'x');
  }
}

TEST(LoaderTest, FindsSymbolsAndNamesMissingOnes) {
  const auto image = load_c(R"(
    int answer(void) { return 42; }
    int value = 7;
    static int hidden_helper(int x) { return x + 1; }
    int use(int x) { return hidden_helper(x) * value; })");
  EXPECT_NE(image->find_symbol("answer"), nullptr);
  EXPECT_NE(image->find_symbol("value"), nullptr);
  EXPECT_EQ(image->find_symbol("no_such_entry"), nullptr);
  EXPECT_EQ(*static_cast<int*>(image->symbol("value")), 7);
  try {
    image->symbol("no_such_entry");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::UndefinedSymbol);
    const std::string message = error.what();
    EXPECT_NE(message.find("no_such_entry"), std::string::npos) << message;
    EXPECT_NE(message.find("answer"), std::string::npos) << message;
  }
}

TEST(LoaderTest, ConcurrentLoadsShareTheSymbolCache) {
  const auto& object = compile_c(kLibmKernel, {true, "", {"-fno-builtin"}});
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        const auto image = LoadedImage::load(object);
        float in[2] = {1.0f, 4.0f}, out[8];
        entry<void (*)(float*, const float*, int)>(image, "mathk")(out, in, 2);
        if (out[6] != 2.0f || out[0] != ::expf(1.0f)) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace svod
