// libFuzzer target for tune files: the input is written as tune.json next to
// a fixed, valid plan.json (one tunable op) and read with parse_tune_file;
// a parsed file is also specialised for its start point. Any outcome but
// that or svod::Error is a bug. Inputs that start with the repeat marker are
// expanded first (fuzz_common.h), so deep nesting is reached. Built and run by
// scripts/fuzz.sh tune_file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/tune/tune_file.h"

namespace {

constexpr std::string_view kPlan = R"J({
  "svod_plan": 1,
  "variables": { "N": { "min": 1, "max": 4096, "value": 64 }, "T": { "min": 1, "max": 64, "value": 4 } },
  "buffers": { "o": { "dtype": "f32", "count": 4096 }, "a": { "dtype": "f32", "count": 4096 } },
  "programs": {
    "k": { "language": "c", "entry": "k", "defines": { "TILE": 4 },
           "source": "void k(float* o, const float* a, int n, int core_id) { for (int i = core_id * TILE; i < n; i += TILE * UNROLL) o[i] = a[i]; }",
           "buffers": [ { "name": "o", "access": "write" }, { "name": "a" } ],
           "scalars": [ { "name": "n", "type": "i32" }, { "name": "core_id", "type": "i32" } ],
           "global_size": ["(N+T-1)/T"], "flops": "N*T", "bytes": "8*N" }
  },
  "ops": [ { "id": "k", "run": "k", "buffers": ["o", "a"], "scalars": { "n": "N" } } ]
})J";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool ready = [] {
    svod::fuzz::write_file("plan.json", kPlan);
    return true;
  }();
  (void)ready;
  const auto path = svod::fuzz::write_file("tune.json", svod::fuzz::expand_repeats(data, size));
  try {
    const svod::TuneFile tune = svod::parse_tune_file(path);
    svod::TunePoint start(tune.parameters.size(), 0);
    (void)tune.describe(start);
    (void)svod::candidate_spec(tune, start);
  } catch (const svod::Error&) {
  }
  return 0;
}
