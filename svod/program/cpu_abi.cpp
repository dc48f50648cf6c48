#include "svod/program/cpu_abi.h"

#include <utility>

namespace svod::detail {
namespace {

template <size_t>
using Word = uint64_t;

template <size_t... I>
void call_with(void* entry, const uint64_t* args, std::index_sequence<I...>) {
  using Fn = void (*)(Word<I>...);
  reinterpret_cast<Fn>(entry)(args[I]...);
}

template <size_t N>
void call_n(void* entry, const uint64_t* args) {
  call_with(entry, args, std::make_index_sequence<N>{});
}

template <size_t... N>
constexpr std::array<KernelCaller, sizeof...(N)> make_callers(std::index_sequence<N...>) {
  return {&call_n<N>...};
}

}  // namespace

constexpr std::array<KernelCaller, kMaxKernelArgs + 1> kKernelCallers =
    make_callers(std::make_index_sequence<kMaxKernelArgs + 1>{});

}  // namespace svod::detail
