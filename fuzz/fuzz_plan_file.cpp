// libFuzzer target for plan files: arbitrary text goes through
// parse_plan_text with the scratch folder as the plan's folder, where a small
// kernel source exists for source_file to find. Any outcome but a PlanFile or
// svod::Error is a bug. Inputs that start with the repeat marker are expanded
// first (fuzz_common.h), so nesting far deeper than 64 KiB allows is reached.
// Built and run by scripts/fuzz.sh plan_file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/planfile/plan_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool ready = [] {
    svod::fuzz::write_file("k.c", "void k(float* o) { o[0] = 1; }");
    return true;
  }();
  (void)ready;
  const std::string text = svod::fuzz::expand_repeats(data, size);
  try {
    const svod::PlanFile plan = svod::parse_plan_text(text, svod::fuzz::scratch(), "fuzz.json");
    for (const auto& b : plan.buffers) (void)b.bytes();
  } catch (const svod::Error&) {
  }
  return 0;
}
