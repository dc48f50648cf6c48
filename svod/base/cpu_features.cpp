#include "svod/base/cpu_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace svod {
namespace {

#if defined(__x86_64__)

enum Reg : uint8_t { Eax, Ebx, Ecx, Edx };
// Which OS-saved register state a feature needs on top of its cpuid bit.
enum class State : uint8_t { None, Avx, Avx512, Amx };

struct FeatureBit {
  std::string_view name;  // LLVM's name
  uint32_t leaf;
  uint32_t subleaf;
  Reg reg;
  uint8_t bit;
  State state;
};

// Bits from the Intel SDM (vol. 2A, CPUID) and AMD APM (vol. 3, CPUID).
constexpr FeatureBit kFeatures[] = {
    {"sse", 1, 0, Edx, 25, State::None},
    {"sse2", 1, 0, Edx, 26, State::None},
    {"sse3", 1, 0, Ecx, 0, State::None},
    {"pclmul", 1, 0, Ecx, 1, State::None},
    {"ssse3", 1, 0, Ecx, 9, State::None},
    {"fma", 1, 0, Ecx, 12, State::Avx},
    {"cx16", 1, 0, Ecx, 13, State::None},
    {"sse4.1", 1, 0, Ecx, 19, State::None},
    {"sse4.2", 1, 0, Ecx, 20, State::None},
    {"movbe", 1, 0, Ecx, 22, State::None},
    {"popcnt", 1, 0, Ecx, 23, State::None},
    {"aes", 1, 0, Ecx, 25, State::None},
    {"xsave", 1, 0, Ecx, 26, State::None},
    {"avx", 1, 0, Ecx, 28, State::Avx},
    {"f16c", 1, 0, Ecx, 29, State::Avx},
    {"rdrnd", 1, 0, Ecx, 30, State::None},
    {"bmi", 7, 0, Ebx, 3, State::None},
    {"avx2", 7, 0, Ebx, 5, State::Avx},
    {"bmi2", 7, 0, Ebx, 8, State::None},
    {"avx512f", 7, 0, Ebx, 16, State::Avx512},
    {"avx512dq", 7, 0, Ebx, 17, State::Avx512},
    {"rdseed", 7, 0, Ebx, 18, State::None},
    {"adx", 7, 0, Ebx, 19, State::None},
    {"avx512ifma", 7, 0, Ebx, 21, State::Avx512},
    {"avx512cd", 7, 0, Ebx, 28, State::Avx512},
    {"sha", 7, 0, Ebx, 29, State::None},
    {"avx512bw", 7, 0, Ebx, 30, State::Avx512},
    {"avx512vl", 7, 0, Ebx, 31, State::Avx512},
    {"avx512vbmi", 7, 0, Ecx, 1, State::Avx512},
    {"avx512vbmi2", 7, 0, Ecx, 6, State::Avx512},
    {"gfni", 7, 0, Ecx, 8, State::None},
    {"vaes", 7, 0, Ecx, 9, State::Avx},
    {"vpclmulqdq", 7, 0, Ecx, 10, State::Avx},
    {"avx512vnni", 7, 0, Ecx, 11, State::Avx512},
    {"avx512bitalg", 7, 0, Ecx, 12, State::Avx512},
    {"avx512vpopcntdq", 7, 0, Ecx, 14, State::Avx512},
    {"avx512vp2intersect", 7, 0, Edx, 8, State::Avx512},
    {"amx-bf16", 7, 0, Edx, 22, State::Amx},
    {"avx512fp16", 7, 0, Edx, 23, State::Avx512},
    {"amx-tile", 7, 0, Edx, 24, State::Amx},
    {"amx-int8", 7, 0, Edx, 25, State::Amx},
    {"sha512", 7, 1, Eax, 0, State::Avx},
    {"sm3", 7, 1, Eax, 1, State::Avx},
    {"sm4", 7, 1, Eax, 2, State::Avx},
    {"avxvnni", 7, 1, Eax, 4, State::Avx},
    {"avx512bf16", 7, 1, Eax, 5, State::Avx512},
    {"cmpccxadd", 7, 1, Eax, 7, State::None},
    {"amx-fp16", 7, 1, Eax, 21, State::Amx},
    {"avxifma", 7, 1, Eax, 23, State::Avx},
    {"avxvnniint8", 7, 1, Edx, 4, State::Avx},
    {"avxneconvert", 7, 1, Edx, 5, State::Avx},
    {"amx-complex", 7, 1, Edx, 8, State::Amx},
    {"avxvnniint16", 7, 1, Edx, 10, State::Avx},
    {"sahf", 0x80000001, 0, Ecx, 0, State::None},
    {"lzcnt", 0x80000001, 0, Ecx, 5, State::None},
    {"sse4a", 0x80000001, 0, Ecx, 6, State::None},
    {"prfchw", 0x80000001, 0, Ecx, 8, State::None},
    {"xop", 0x80000001, 0, Ecx, 11, State::Avx},
    {"fma4", 0x80000001, 0, Ecx, 16, State::Avx},
    {"tbm", 0x80000001, 0, Ecx, 21, State::None},
};

// The processor's answers, each cpuid leaf asked once: cpuid traps to the
// hypervisor in virtual machines (microseconds each), and the table asks
// about the same few leaves seventy times.
class CpuidAnswers {
 public:
  bool has(const FeatureBit& f) {
    const std::array<uint32_t, 4>* regs = leaf(f.leaf, f.subleaf);
    if (regs == nullptr || !(((*regs)[f.reg] >> f.bit) & 1)) return false;
    if (f.state == State::None) return true;
    const uint64_t avx = 0x6;            // SSE and AVX state
    const uint64_t avx512 = avx | 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
    const uint64_t amx = 0x60000;        // XTILECFG, XTILEDATA
    const uint64_t need = f.state == State::Avx ? avx : f.state == State::Avx512 ? avx512 : amx;
    return (os_saved_state() & need) == need;
  }

  // The vendor (leaf 0) and the family, model and stepping (leaf 1's eax):
  // "AuthenticAMD a20f10".
  std::string model() {
    std::string out;
    if (const std::array<uint32_t, 4>* zero = leaf(0, 0)) {
      for (const Reg r : {Ebx, Edx, Ecx})
        for (int byte = 0; byte < 4; ++byte) out += static_cast<char>(((*zero)[r] >> (8 * byte)) & 0xFF);
    }
    if (const std::array<uint32_t, 4>* one = leaf(1, 0)) out += fmt::format(" {:x}", (*one)[Eax]);
    return out;
  }

 private:
  struct Asked {
    uint32_t leaf, subleaf;
    std::optional<std::array<uint32_t, 4>> regs;  // nullopt: past the highest leaf
  };

  const std::array<uint32_t, 4>* leaf(uint32_t leaf, uint32_t subleaf) {
    for (const Asked& a : asked_)
      if (a.leaf == leaf && a.subleaf == subleaf) return a.regs ? &*a.regs : nullptr;
    Asked a{leaf, subleaf, std::nullopt};
    if (__get_cpuid_max(leaf & 0x80000000u, nullptr) >= leaf) {
      std::array<uint32_t, 4> r{};
      __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
      a.regs = r;
    }
    asked_.push_back(a);
    return asked_.back().regs ? &*asked_.back().regs : nullptr;
  }

  // The register state the OS saves (XCR0); 0 without OSXSAVE.
  uint64_t os_saved_state() {
    if (!xcr0_) {
      const std::array<uint32_t, 4>* one = leaf(1, 0);
      uint64_t xcr0 = 0;
      if (one != nullptr && (((*one)[Ecx] >> 27) & 1)) {
        uint32_t low, high;
        __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
        xcr0 = (uint64_t{high} << 32) | low;
      }
      xcr0_ = xcr0;
    }
    return *xcr0_;
  }

  std::vector<Asked> asked_;
  std::optional<uint64_t> xcr0_;
};

#endif

}  // namespace

std::string host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

namespace {

struct HostCpu {
  std::vector<KnownCpuFeature> features;
  std::string signature;
};

const HostCpu& host_cpu() {
  static const HostCpu cpu = [] {
    HostCpu out;
#if defined(__x86_64__)
    CpuidAnswers answers;
    for (const auto& f : kFeatures) out.features.push_back({std::string(f.name), answers.has(f)});
    out.signature = answers.model();
    out.signature += ' ';
    for (const KnownCpuFeature& f : out.features) out.signature += f.present ? '1' : '0';
#endif
    return out;
  }();
  return cpu;
}

}  // namespace

const std::vector<KnownCpuFeature>& known_cpu_features() { return host_cpu().features; }

const std::string& host_cpu_signature() { return host_cpu().signature; }

std::vector<std::string> missing_cpu_features(std::span<const std::string> features) {
  const std::vector<KnownCpuFeature>& known = known_cpu_features();
  std::vector<std::string> missing;
  for (const auto& f : features) {
    if (f.size() < 2 || f[0] != '+') continue;
    const std::string_view name = std::string_view(f).substr(1);
    auto it = std::find_if(known.begin(), known.end(), [&](const KnownCpuFeature& k) { return k.name == name; });
    if (it != known.end() && !it->present) missing.emplace_back(name);
  }
  return missing;
}

}  // namespace svod
