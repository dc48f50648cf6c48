// libFuzzer target for .npy files: arbitrary bytes go through parse_npy, and
// an array that parses is written back and read again, which must give the
// same dtype, shape and data. Built and run by scripts/fuzz.sh npy.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "fuzz/fuzz_common.h"
#include "svod/base/error.h"
#include "svod/base/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  svod::NpyArray array;
  try {
    array = svod::parse_npy(std::as_bytes(std::span(data, size)), "fuzz.npy");
  } catch (const svod::Error&) {
    return 0;
  }
  const auto path = svod::fuzz::scratch() / "again.npy";
  svod::write_npy(path, array);
  const svod::NpyArray again = svod::read_npy(path);
  if (again.dtype != array.dtype || again.shape != array.shape || again.data != array.data) std::abort();
  return 0;
}
