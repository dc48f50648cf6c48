#include "svod/guard/checked_mode.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {

namespace detail {
// The mode, once read: -1 until SVOD_CHECK is parsed or the mode set.
std::atomic<int> check_mode_bits{-1};
}  // namespace detail

namespace {

constexpr int kUnread = -1, kMemory = 1, kNan = 2;

int bits(CheckMode mode) { return (mode.memory ? kMemory : 0) | (mode.nan ? kNan : 0); }

}  // namespace

CheckMode parse_check_mode(std::string_view text, std::string_view what) {
  CheckMode mode;
  if (text.empty()) return mode;
  if (const auto on = switch_word(text)) return CheckMode{.memory = *on};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (item == "memory") mode.memory = true;
    else if (item == "nan") mode.nan = true;
    else if (item == "all") mode = CheckMode{true, true};
    else
      throw make_error(ErrorKind::Validation,
                       "{}: unknown check \"{}\" (expected memory, nan, all or a comma list of them, or a switch: "
                       "on is memory, off none)",
                       what, item);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return mode;
}

std::string to_string(CheckMode mode) {
  if (mode.memory && mode.nan) return "memory,nan";
  if (mode.memory) return "memory";
  return mode.nan ? "nan" : "off";
}

CheckMode check_mode() {
  int b = detail::check_mode_bits.load(std::memory_order_relaxed);
  if (b == kUnread) [[unlikely]] {
    const auto value = env_value(EnvVar::Check);
    const int parsed = value ? bits(parse_check_mode(value->text, to_string(*value))) : 0;
    detail::check_mode_bits.compare_exchange_strong(b, parsed, std::memory_order_relaxed);  // unless set meanwhile
    b = detail::check_mode_bits.load(std::memory_order_relaxed);
  }
  return {(b & kMemory) != 0, (b & kNan) != 0};
}

void set_check_mode(CheckMode mode) noexcept { detail::check_mode_bits.store(bits(mode), std::memory_order_relaxed); }

namespace {
template <typename T>
void fill(void* data, size_t bytes, T pattern) {
  auto* p = static_cast<std::byte*>(data);
  size_t at = 0;
  for (; at + sizeof(T) <= bytes; at += sizeof(T)) std::memcpy(p + at, &pattern, sizeof(T));
  std::memcpy(p + at, &pattern, bytes - at);  // a partial element at the end, if any
}
// The first element whose exponent bits (`mask`) are all ones: NaN or Inf.
template <typename T>
std::optional<size_t> first_all_ones(const void* data, size_t count, T mask) {
  const auto* p = static_cast<const std::byte*>(data);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if ((v & mask) == mask) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<size_t> first_non_finite(const void* data, size_t count, DType dtype) noexcept {
  switch (dtype) {
    case DType::F16: return first_all_ones<uint16_t>(data, count, 0x7C00);
    case DType::BF16: return first_all_ones<uint16_t>(data, count, 0x7F80);
    case DType::F32: return first_all_ones<uint32_t>(data, count, 0x7F800000);
    case DType::F64: return first_all_ones<uint64_t>(data, count, 0x7FF0000000000000);
    default: return std::nullopt;
  }
}

void poison(void* data, size_t bytes, DType dtype) noexcept {
  switch (dtype) {
    case DType::F16: return fill<uint16_t>(data, bytes, 0x7D25);             // quiet bit (9) clear
    case DType::BF16: return fill<uint16_t>(data, bytes, 0x7FA5);            // quiet bit (6) clear
    case DType::F32: return fill<uint32_t>(data, bytes, 0x7FA5A5A5);         // quiet bit (22) clear
    case DType::F64: return fill<uint64_t>(data, bytes, 0x7FF4A5A5A5A5A5A5);  // quiet bit (51) clear
    case DType::U8: return fill<uint8_t>(data, bytes, 0xFF);
    default: return fill<uint8_t>(data, bytes, 0xA5);
  }
}

}  // namespace svod
