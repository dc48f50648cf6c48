#include "tests/device/conformance_kernels.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "svod/base/error.h"

namespace svod::test {
namespace {

struct Registered {
  std::mutex mutex;
  std::deque<ConformanceKernels> kernels;  // guarded by mutex; a deque keeps references valid
};

// Made at the first registration, which runs before main() from another
// file's initializer: a function's static is there whatever the order.
Registered& registered() {
  static Registered instance;
  return instance;
}

std::string names(std::span<const Language> languages) {
  std::string out;
  for (const Language& language : languages) out += (out.empty() ? "" : ", ") + std::string(to_string(language));
  return out.empty() ? "none" : out;
}

}  // namespace

bool register_conformance_kernels(ConformanceKernels kernels) {
  Registered& all = registered();
  const std::lock_guard lock(all.mutex);
  for (const ConformanceKernels& known : all.kernels)
    if (known.language == kernels.language)
      throw make_error(ErrorKind::Validation, "conformance kernels in {} are registered twice",
                       to_string(kernels.language));
  all.kernels.push_back(std::move(kernels));
  return true;
}

const ConformanceKernels& conformance_kernels_for(std::span<const Language> languages) {
  Registered& all = registered();
  const std::lock_guard lock(all.mutex);
  for (const Language& language : languages)
    for (const ConformanceKernels& kernels : all.kernels)
      if (kernels.language == language) return kernels;
  std::vector<Language> with_kernels;
  for (const ConformanceKernels& kernels : all.kernels) with_kernels.push_back(kernels.language);
  throw make_error(ErrorKind::Unsupported,
                   "no conformance kernels in its languages ({}); kernels are registered in {} "
                   "(a device's test folder registers its language's: tests/device/conformance_kernels.h)",
                   names(languages), names(with_kernels));
}

}  // namespace svod::test
