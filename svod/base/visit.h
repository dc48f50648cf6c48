// Exhaustive visits of a std::variant. visit_exhaustively(v, handlers...)
// calls the handler that takes v's alternative, as std::visit would over the
// handlers' overloads, and compiles only when every alternative has a handler
// and no handler takes any type (a generic lambda, a catch-all). A variant
// that gains an alternative then fails to compile at each of its visits until
// that visit says what the new one does, instead of treating it as whatever
// an `else` or an `auto` handler stood for (tests/plan/visit/ checks it).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

namespace svod {
namespace detail {

template <typename... Handlers>
struct Overloads : Handlers... {
  using Handlers::operator()...;
};

// A type no handler of a visit should take.
struct NotAnAlternative {};

// One check per alternative, so that the compiler names the alternative
// left without a handler.
template <typename Visitor, typename Alternative>
constexpr bool has_handler() {
  static_assert(std::is_invocable_v<Visitor&, Alternative>,
                "visit_exhaustively: an alternative of the variant has no handler (the Alternative named above)");
  return true;
}

template <typename Visitor, typename Variant, size_t... I>
constexpr bool every_alternative_has_handler(std::index_sequence<I...>) {
  return (has_handler<Visitor, decltype(*std::get_if<I>(std::declval<Variant*>()))>() && ...);
}

// Calls `visitor` with v's alternative if its index is I, else tries the
// ones after it: compares and branches inline, as a chain of get_if would
// (std::visit's table of calls cost a plan's run about 0.4 ns an op, a call
// of this chain 0.2 ns, measured with bench_plan).
template <size_t I, typename Visitor, typename Variant>
[[gnu::always_inline]] inline decltype(auto) visit_from(Visitor& visitor, Variant& v) {
  if constexpr (I + 1 < std::variant_size_v<std::remove_const_t<Variant>>) {
    if (v.index() != I) return visit_from<I + 1>(visitor, v);
  } else {
    if (v.index() != I) throw std::bad_variant_access();  // valueless
  }
  return visitor(*std::get_if<I>(&v));
}

}  // namespace detail

// `v` is visited as an lvalue: the handlers take its alternatives by
// reference.
template <typename Variant, typename... Handlers>
[[gnu::always_inline]] inline decltype(auto) visit_exhaustively(Variant& v, Handlers&&... handlers) {
  using Visitor = detail::Overloads<std::decay_t<Handlers>...>;
  static_assert(!std::is_invocable_v<Visitor&, detail::NotAnAlternative&>,
                "visit_exhaustively: a handler takes any type (a catch-all); give each alternative a handler of its own");
  static_assert(detail::every_alternative_has_handler<Visitor, Variant>(
      std::make_index_sequence<std::variant_size_v<std::remove_const_t<Variant>>>()));
  Visitor visitor{std::forward<Handlers>(handlers)...};
  return detail::visit_from<0>(visitor, v);
}

}  // namespace svod
