// libFuzzer target for the JIT ELF loader: arbitrary bytes go through the host
// load path (parse, map, relocate, protect) and through link_object for both
// supported machines. Any outcome but success or svod::Error is a bug.
// Built and run by scripts/fuzz.sh elf_loader.
#include <cstddef>
#include <cstdint>
#include <span>

#include "svod/base/error.h"
#include "svod/loader/elf_link.h"
#include "svod/loader/elf_loader.h"

namespace {

// Every external symbol resolves to a fixed far address, except names starting
// with 'w', which stay unresolved so weak/undefined paths run too.
std::optional<std::uint64_t> fake_resolver(std::string_view name) {
  if (!name.empty() && name.front() == 'w') return std::nullopt;
  return 0x7F0012345000u + name.size() * 16;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  svod::detail::LinkOptions options;
  options.max_image_bytes = std::uint64_t{64} << 20;  // keep ASan's memory use bounded
  try {
    const auto image = svod::detail::load_with_options(bytes, options);
    (void)image->find_symbol("kernel");
  } catch (const svod::Error&) {
  }
  for (const auto machine : {svod::detail::Machine::X86_64, svod::detail::Machine::AArch64}) {
    try {
      const auto linked = svod::detail::link_object(bytes, machine, 0x40000000, fake_resolver, options);
      (void)linked.address_of("kernel");
    } catch (const svod::Error&) {
    }
  }
  return 0;
}
