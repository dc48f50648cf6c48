#include "svod/program/launch_layout.h"

#include <algorithm>

#include "svod/base/error.h"

namespace svod {
namespace {

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
    global_[d] = try_bind(spec.global_size[d], scalar_names_);
    global_text_[d] = spec.global_size[d].text();
  }
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    const auto& b = spec.buffers[i];
    if (!b.min_count) {
      min_counts_.emplace_back();
      continue;
    }
    auto bound = try_bind(*b.min_count, scalar_names_);
    if (!bound)
      throw make_error(ErrorKind::Validation, "program \"{}\": buffers[{}] min_count \"{}\" uses names that are not scalars",
                       program_, i, b.min_count->text());
    min_counts_.push_back(SizeRule{std::move(*bound), size_of(b.dtype.value_or(DType::U8))});
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

int64_t LaunchLayout::global_size(size_t dim, const int64_t* abi) const {
  const auto& e = global_[dim];
  if (!e)
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": global_size[{}] \"{}\" uses variables that are not scalars; launch it through a "
                     "plan that binds them",
                     program_, dim, global_text_[dim]);
  int64_t n = e->is_constant() ? e->constant_value() : e->evaluate({abi, bounds_.size()});
  if (n < 1) throw make_error(ErrorKind::Validation, "program \"{}\": global_size[{}] = {} is below 1", program_, dim, n);
  return n;
}

std::optional<size_t> LaunchLayout::min_bytes(size_t index, const int64_t* abi) const {
  const auto& rule = min_counts_[index];
  if (!rule) return std::nullopt;
  int64_t count = rule->count.evaluate({abi, bounds_.size()});
  if (count < 0) return 0;
  return static_cast<size_t>(count) * rule->element_bytes;
}

}  // namespace svod
