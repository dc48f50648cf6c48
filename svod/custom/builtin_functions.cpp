#include "svod/custom/builtin_functions.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "svod/base/error.h"
#include "svod/comm/reduce.h"

namespace svod::detail {
namespace {

void require_host(std::string_view function, std::span<const Buffer> buffers) {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!buffers[i].is_host())
      throw make_error(ErrorKind::Validation, "custom function \"{}\": buffer {} is not in host memory", function, i);
}

// ---- all_reduce -----------------------------------------------------------

// sum, prod, min or max, as the collectives name them.
ReduceOp parse_all_reduce_op(const Attrs& attrs) {
  const std::string& op = attr_string("all_reduce", attrs, "op");
  for (ReduceOp known : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max})
    if (op == to_string(known)) return known;
  throw make_error(ErrorKind::Validation, "custom function \"all_reduce\": op \"{}\" is not one of sum, prod, min, max",
                   op);
}

std::vector<Access> validate_all_reduce(std::span<const Buffer> buffers, const Attrs& attrs) {
  check_attr_names("all_reduce", attrs, {"op"});
  parse_all_reduce_op(attrs);
  if (buffers.empty()) throw make_error(ErrorKind::Validation, "custom function \"all_reduce\" needs at least one buffer");
  require_host("all_reduce", buffers);
  for (size_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i].dtype() != buffers[0].dtype() || buffers[i].count() != buffers[0].count())
      throw make_error(ErrorKind::Validation,
                       "custom function \"all_reduce\": buffer {} holds {} {} elements but buffer 0 holds {} {}", i,
                       buffers[i].count(), to_string(buffers[i].dtype()), buffers[0].count(),
                       to_string(buffers[0].dtype()));
    // The reduction reads and writes element by element in place, which is
    // only right when no two buffers share bytes.
    for (size_t j = 0; j < i; ++j)
      if (buffers[i].overlaps(buffers[j]))
        throw make_error(ErrorKind::Validation, "custom function \"all_reduce\": buffers {} and {} overlap", j, i);
  }
  return std::vector<Access>(buffers.size(), Access::ReadWrite);
}

// The ranks' arithmetic of the collectives (comm/reduce.h), with every
// buffer both an input and an output.
void run_all_reduce(std::span<const Buffer> buffers, const Attrs& attrs, const VariableValues&) {
  const ReduceOp op = parse_all_reduce_op(attrs);
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  for (const Buffer& b : buffers) {
    inputs.push_back(b.data());
    outputs.push_back(b.data());
  }
  reduce_in_rank_order(buffers[0].dtype(), op, inputs, outputs, buffers[0].count());
}

// ---- fill -----------------------------------------------------------------

// Whether `value` is exactly representable in integer dtype `t`.
bool fits(DType t, const AttrValue& value) {
  const int bits = static_cast<int>(8 * size_of(t));
  const double lo = is_signed(t) ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = std::ldexp(1.0, is_signed(t) ? bits - 1 : bits);
  if (const auto* i = std::get_if<int64_t>(&value)) {
    if (t == DType::I64) return true;
    if (t == DType::U64) return *i >= 0;
    return static_cast<double>(*i) >= lo && static_cast<double>(*i) < hi;
  }
  const double d = std::get<double>(value);
  return d == std::trunc(d) && d >= lo && d < hi;
}

std::vector<Access> validate_fill(std::span<const Buffer> buffers, const Attrs& attrs) {
  check_attr_names("fill", attrs, {"value"});
  attr_number("fill", attrs, "value");
  const AttrValue& value = attrs.find("value")->second;
  if (buffers.empty()) throw make_error(ErrorKind::Validation, "custom function \"fill\" needs at least one buffer");
  require_host("fill", buffers);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const DType t = buffers[i].dtype();
    if (is_integer(t) && !fits(t, value))
      throw make_error(ErrorKind::Validation,
                       "custom function \"fill\": value {} is not an integer that fits buffer {} of {}",
                       to_string(value), i, to_string(t));
  }
  return std::vector<Access>(buffers.size(), Access::Write);
}

void run_fill(std::span<const Buffer> buffers, const Attrs& attrs, const VariableValues&) {
  const AttrValue& value = attrs.find("value")->second;
  for (const Buffer& b : buffers) {
    // One element's bytes, then repeated: integers are written exactly (the
    // validator checked the range), everything else through double.
    unsigned char pattern[8];
    const size_t width = size_of(b.dtype());
    if (const auto* i = std::get_if<int64_t>(&value); i && is_integer(b.dtype())) {
      const uint64_t bits = static_cast<uint64_t>(*i);
      std::memcpy(pattern, &bits, width);  // little-endian: the low bytes
    } else {
      store_from_double(b.dtype(), pattern, attr_number("fill", attrs, "value"));
    }
    auto* out = static_cast<unsigned char*>(b.data());
    for (size_t k = 0; k < b.count(); ++k) std::memcpy(out + k * width, pattern, width);
  }
}

// ---- print ----------------------------------------------------------------

std::vector<Access> validate_print(std::span<const Buffer> buffers, const Attrs& attrs) {
  check_attr_names("print", attrs, {"label", "limit"});
  if (attrs.contains("label")) attr_string("print", attrs, "label");
  if (attrs.contains("limit") && attr_int("print", attrs, "limit") < 0)
    throw make_error(ErrorKind::Validation, "custom function \"print\": limit must not be negative");
  require_host("print", buffers);
  return std::vector<Access>(buffers.size(), Access::Read);
}

std::string format_element(DType t, const void* p) {
  if (t == DType::U64) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return fmt::format("{}", v);
  }
  if (t == DType::I64) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return fmt::format("{}", v);
  }
  if (t == DType::Bool) return load_as_double(t, p) != 0 ? "true" : "false";
  return fmt::format("{}", load_as_double(t, p));
}

void run_print(std::span<const Buffer> buffers, const Attrs& attrs, const VariableValues& vars) {
  constexpr int64_t kDefaultLimit = 32;
  const std::string label = attrs.contains("label") ? attr_string("print", attrs, "label") : std::string("print");
  const size_t limit = static_cast<size_t>(attrs.contains("limit") ? attr_int("print", attrs, "limit") : kDefaultLimit);
  std::string text;
  for (size_t i = 0; i < vars.names.size(); ++i)
    text += fmt::format("{}{}={}", i == 0 ? fmt::format("{}: vars ", label) : ", ", vars.names[i], vars.values[i]);
  if (!text.empty()) text += '\n';
  for (size_t k = 0; k < buffers.size(); ++k) {
    const Buffer& b = buffers[k];
    const size_t width = size_of(b.dtype());
    const auto* data = static_cast<const unsigned char*>(b.data());
    text += fmt::format("{}: buffer {} {}[{}] = [", label, k, to_string(b.dtype()), b.count());
    for (size_t i = 0; i < b.count() && i < limit; ++i)
      text += (i ? ", " : "") + format_element(b.dtype(), data + i * width);
    text += b.count() > limit ? ", ...]\n" : "]\n";
  }
  // One write per call, so concurrent prints do not interleave mid-line.
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

std::vector<std::pair<std::string, CustomFunctionDef>> builtin_custom_functions() {
  std::vector<std::pair<std::string, CustomFunctionDef>> defs;
  defs.emplace_back("all_reduce", CustomFunctionDef{run_all_reduce, validate_all_reduce});
  defs.emplace_back("fill", CustomFunctionDef{run_fill, validate_fill});
  defs.emplace_back("print", CustomFunctionDef{run_print, validate_print});
  return defs;
}

}  // namespace svod::detail
