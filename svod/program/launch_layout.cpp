#include "svod/program/launch_layout.h"

#include <algorithm>
#include <bit>

#include "svod/base/error.h"

namespace svod {
namespace {

// "2^62" for powers of two from 2^10, else the decimal count.
std::string count_text(int64_t count) {
  if (count >= 1024 && (count & (count - 1)) == 0)
    return fmt::format("2^{}", std::countr_zero(static_cast<uint64_t>(count)));
  return fmt::format("{}", count);
}

// The expression bound to `names`, or nullopt when it uses another name.
std::optional<Expr> try_bind(const Expr& e, std::span<const std::string> names) {
  for (const auto& v : e.variables())
    if (std::find(names.begin(), names.end(), v) == names.end()) return std::nullopt;
  return e.bind_to(names);
}

}  // namespace

LaunchLayout::LaunchLayout(const ProgramSpec& spec)
    : program_(spec.display_name()), buffer_count_(spec.buffers.size()), core_id_(spec.core_id_index()) {
  for (const auto& s : spec.scalars) {
    bounds_.push_back(s.bounds());
    scalar_names_.push_back(s.name);
  }
  for (size_t d = 0; d < 3; ++d) {
    global_[d] = {try_bind(spec.global_size[d], scalar_names_), spec.global_size[d].text()};
    local_[d] = {try_bind(spec.local_size[d], scalar_names_), spec.local_size[d].text()};
  }
  if (core_id_) {
    // Slices 0 .. n-1 stay within [min, max] for n up to max + 1; none do
    // when min is above 0.
    const Variable& core = bounds_[*core_id_];
    max_slices_ = core.min > 0 ? 0 : core.max == INT64_MAX ? INT64_MAX : core.max + 1;
  }
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    const auto& b = spec.buffers[i];
    buffer_names_.push_back(b.name);
    dtypes_.push_back(b.dtype);
    if (!b.min_count) {
      min_counts_.emplace_back();
      continue;
    }
    auto bound = try_bind(*b.min_count, scalar_names_);
    if (!bound)
      throw make_error(ErrorKind::Validation, "program \"{}\": buffers[{}] min_count \"{}\" uses names that are not scalars",
                       program_, i, b.min_count->text());
    min_counts_.push_back(SizeRule{std::move(*bound), b.dtype.value_or(DType::U8)});
  }
}

void LaunchLayout::fill_scalars(std::span<const int64_t> caller, int64_t* abi) const {
  if (caller.size() != caller_scalar_count())
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} scalars{}, got {}", program_, caller_scalar_count(),
                     core_id_ ? " (core_id is set by the runtime)" : "", caller.size());
  size_t next = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (core_id_ && *core_id_ == i) {
      abi[i] = 0;
      continue;
    }
    int64_t v = caller[next++];
    const Variable& b = bounds_[i];
    if (v < b.min || v > b.max) [[unlikely]]
      throw make_error(ErrorKind::Validation, "program \"{}\": scalar {} = {} is outside its bounds [{}, {}]", program_,
                       b.name, v, b.min, b.max);
    abi[i] = v;
  }
}

int64_t LaunchLayout::size(const SizeExpr& e, std::string_view which, size_t dim, const int64_t* abi) const {
  if (!e.bound)
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": {}[{}] \"{}\" uses variables that are not scalars; launch it through a "
                     "plan that binds them",
                     program_, which, dim, e.text);
  int64_t n = e.bound->is_constant() ? e.bound->constant_value() : e.bound->evaluate({abi, bounds_.size()});
  if (n < 1) throw make_error(ErrorKind::Validation, "program \"{}\": {}[{}] = {} is below 1", program_, which, dim, n);
  return n;
}

int64_t LaunchLayout::global_size(size_t dim, const int64_t* abi) const { return size(global_[dim], "global_size", dim, abi); }
int64_t LaunchLayout::local_size(size_t dim, const int64_t* abi) const { return size(local_[dim], "local_size", dim, abi); }

LaunchDims LaunchLayout::dims(std::span<const int64_t> caller) const {
  std::vector<int64_t> abi(scalar_count());
  fill_scalars(caller, abi.data());
  LaunchDims out;
  for (size_t d = 0; d < 3; ++d) {
    out.global[d] = global_size(d, abi.data());
    out.local[d] = local_size(d, abi.data());
  }
  return out;
}

std::optional<size_t> LaunchLayout::min_bytes(size_t index, const int64_t* abi) const {
  const auto& rule = min_counts_[index];
  if (!rule) return std::nullopt;
  int64_t count = rule->count.evaluate({abi, bounds_.size()});
  if (count < 0) return 0;
  const auto bytes = byte_size(rule->dtype, static_cast<size_t>(count));
  if (!bytes) [[unlikely]]
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": buffer {} (\"{}\") needs {} {} elements (min_count \"{}\"): more bytes than "
                     "fit in 64 bits",
                     program_, index, buffer_names_[index], count_text(count), to_string(rule->dtype),
                     rule->count.text());
  return *bytes;
}

bool dtype_accepts(DType declared, DType given, uint64_t address) noexcept {
  if (given == declared) return true;
  if (declared == DType::BF16 && given == DType::U16) return true;
  return given == DType::U8 && address % size_of(declared) == 0;
}

void LaunchLayout::check_dtype_slow(size_t index, DType dtype, uint64_t address) const {
  const DType declared = *dtypes_[index];
  if (dtype_accepts(declared, dtype, address)) return;
  if (dtype == DType::U8)
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": buffer {} (\"{}\"): u8 storage at address/offset {:#x} is not aligned to the "
                     "declared {}'s {} bytes",
                     program_, index, buffer_names_[index], address, to_string(declared), size_of(declared));
  throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\"): dtype {} does not match the declared {}",
                   program_, index, buffer_names_[index], to_string(dtype), to_string(declared));
}

void LaunchLayout::throw_dims(const std::array<int64_t, 3>& global) const {
  throw make_error(ErrorKind::Validation,
                   "program \"{}\": global_size ({}, {}, {}): the CPU runs global_size[0] core_id slices; dimensions 1 "
                   "and 2 must be 1",
                   program_, global[0], global[1], global[2]);
}

void LaunchLayout::throw_slices(int64_t slices) const {
  if (slices < 1)
    throw make_error(ErrorKind::Validation, "program \"{}\": {} core_id slices; a launch needs at least 1", program_,
                     slices);
  if (!core_id_)
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": global_size[0] = {} needs a core_id scalar to split the work across cores",
                     program_, slices);
  const Variable& core = bounds_[*core_id_];
  if (core.min > 0)
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": core_id's bounds [{}, {}] leave out slice 0, which every launch runs", program_,
                     core.min, core.max);
  throw make_error(ErrorKind::Validation,
                   "program \"{}\": {} core_id slices would pass core_id = {}, outside its bounds [{}, {}] (at most "
                   "{} slices)",
                   program_, slices, slices - 1, core.min, core.max, max_slices_);
}

}  // namespace svod
