// libFuzzer target for launch and scalar expressions: the input's first
// bytes give values, the rest is the expression text, expanded first when it
// starts with the repeat marker (fuzz_common.h) so that nesting far deeper
// than the parser's limit is reached. Parsing, evaluating, substituting and
// binding either work or throw svod::Error; a constant folded by substitute
// must evaluate to what the original gives for the same values. Built and run
// by scripts/fuzz.sh expr.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/program/expr.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int64_t seed_values[4] = {};
  const size_t head = size < sizeof seed_values ? size : sizeof seed_values;
  std::memcpy(seed_values, data, head);
  const std::string text = svod::fuzz::expand_repeats(data + head, size - head);
  try {
    const svod::Expr e = svod::Expr::parse(text);
    (void)e.text();
    const auto& names = e.variables();
    std::vector<int64_t> values(names.size());
    std::map<std::string, int64_t, std::less<>> by_name;
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = seed_values[i % 4] >> (i / 4);
      by_name[names[i]] = values[i];
    }
    std::optional<int64_t> direct;
    try {
      direct = e.evaluate(values);
    } catch (const svod::Error&) {
    }
    std::optional<int64_t> folded;
    try {
      const svod::Expr constant = e.substitute(by_name);
      folded = constant.constant_value();
    } catch (const svod::Error&) {
    }
    if (direct && folded && *direct != *folded) std::abort();
    (void)e.bind_to(names);
  } catch (const svod::Error&) {
  }
  return 0;
}
