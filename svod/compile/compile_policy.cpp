#include "svod/compile/compile_policy.h"

#include <atomic>
#include <string>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {
namespace {

// -1: not decided yet (SVOD_COMPILE is read on first use), else 0 or 1.
std::atomic<int> allowed_state{-1};
std::atomic<uint64_t> compiles{0};

int from_env() {
  return env_switch(EnvVar::Compile).value_or(true) ? 1 : 0;
}

}  // namespace

bool compile_allowed() {
  int state = allowed_state.load(std::memory_order_acquire);
  if (state < 0) {
    int expected = -1;
    allowed_state.compare_exchange_strong(expected, from_env(), std::memory_order_acq_rel);
    state = allowed_state.load(std::memory_order_acquire);
  }
  return state == 1;
}

void set_compile_allowed(bool allowed) { allowed_state.store(allowed ? 1 : 0, std::memory_order_release); }

void begin_compile(const ProgramSpec& spec, std::string_view target) {
  if (!compile_allowed())
    throw make_error(ErrorKind::Unsupported,
                     "program \"{}\" would be compiled{}, but compiling is off in this process (SVOD_COMPILE=0 "
                     "or set_compile_allowed(false)); use a package built for this machine or allow compiling",
                     spec.display_name(),
                     target.empty() ? std::string() : " for " + std::string(target));
  compiles.fetch_add(1, std::memory_order_relaxed);
}

uint64_t compile_count() noexcept { return compiles.load(std::memory_order_relaxed); }

}  // namespace svod
