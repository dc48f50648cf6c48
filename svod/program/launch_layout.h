// LaunchLayout: what a spec implies for each launch, worked out once —
// how the caller's scalars map to ABI scalars (core_id is filled by the
// runtime), the bounds each must satisfy, and the launch-size and buffer-size
// expressions bound to the ABI scalar slots. Devices use it to check a launch
// in a few nanoseconds before anything runs.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "svod/program/program_spec.h"

namespace svod {

// The launch sizes of a device that runs grids (OpenCL, CUDA): work-groups
// (blocks) per dimension in `global`, work-items (threads) per group in
// `local`. svod's convention: global_size counts work-groups, not items.
struct LaunchDims {
  std::array<int64_t, 3> global = {1, 1, 1};
  std::array<int64_t, 3> local = {1, 1, 1};
  bool operator==(const LaunchDims&) const = default;
};

// Whether a parameter declared `declared` takes a buffer of `given` whose
// first byte is at `address` (host address or device byte offset): the same
// dtype; u16 for bf16 (its bit patterns); or untyped byte storage (u8, as
// compilers allocate it) aligned to the declared element size. The bytes a
// launch needs are checked apart (min_count).
bool dtype_accepts(DType declared, DType given, uint64_t address) noexcept;

class LaunchLayout {
 public:
  explicit LaunchLayout(const ProgramSpec& spec);

  size_t buffer_count() const noexcept { return buffer_count_; }
  size_t scalar_count() const noexcept { return bounds_.size(); }  // ABI scalars, core_id included
  size_t caller_scalar_count() const noexcept { return bounds_.size() - (core_id_ ? 1 : 0); }
  std::optional<size_t> core_id() const noexcept { return core_id_; }

  // Checks the caller's scalars (count and bounds) and writes all ABI scalars
  // into `abi` (core_id, if any, as 0). Throws Validation naming the scalar.
  void fill_scalars(std::span<const int64_t> caller, int64_t* abi) const;

  // Dimension `dim` of the global size for these ABI scalars. Throws
  // Validation when the expression uses names that are not scalars (such a
  // program must be launched through a plan that binds them) or is < 1.
  int64_t global_size(size_t dim, const int64_t* abi) const;
  // The same for local_size.
  int64_t local_size(size_t dim, const int64_t* abi) const;
  // Both in every dimension, for the caller's scalars (checked as by
  // fill_scalars).
  LaunchDims dims(std::span<const int64_t> caller) const;

  // Bytes buffer `index` must hold, when its spec declares min_count.
  // Throws Validation naming the program and buffer when that count of
  // elements is more bytes than 64 bits hold.
  std::optional<size_t> min_bytes(size_t index, const int64_t* abi) const;

  // Throws Validation naming the program and buffer unless buffer `index`
  // may be passed a buffer of `dtype` whose first byte is at `address` (a
  // host address, or the byte offset into device memory): see
  // dtype_accepts. Any dtype when none is declared.
  void check_dtype(size_t index, DType dtype, uint64_t address) const {
    if (dtypes_[index] && *dtypes_[index] != dtype) [[unlikely]]
      check_dtype_slow(index, dtype, address);
  }

  // The slice count of a CPU launch (global_size[0]: core_id takes the
  // values 0 .. slices-1). Throws Validation naming the program unless it is
  // at least 1, is 1 without a core_id scalar, and keeps every core_id
  // within that scalar's bounds (declared min/max and its type's range: an
  // i32 core_id takes at most 2^31 slices). A compare when it passes.
  void check_slices(int64_t slices) const {
    if (slices < 1 || slices > max_slices_) [[unlikely]]
      throw_slices(slices);
  }
  // The slice count of a CPU launch given the global size: global[0], checked
  // as check_slices does, with the other dimensions 1 (Validation otherwise).
  int64_t host_slices(const std::array<int64_t, 3>& global) const {
    if (global[1] != 1 || global[2] != 1) [[unlikely]]
      throw_dims(global);
    check_slices(global[0]);
    return global[0];
  }

 private:
  struct SizeRule {
    Expr count;  // bound to the ABI scalar names
    DType dtype;
  };
  [[noreturn]] void throw_slices(int64_t slices) const;
  [[noreturn]] void throw_dims(const std::array<int64_t, 3>& global) const;
  void check_dtype_slow(size_t index, DType dtype, uint64_t address) const;

  std::string program_;
  std::vector<std::string> buffer_names_;
  std::vector<std::optional<DType>> dtypes_;  // declared, per buffer
  int64_t max_slices_ = 1;                    // by core_id's bounds; 1 without one
  size_t buffer_count_ = 0;
  std::optional<size_t> core_id_;
  std::vector<Variable> bounds_;
  std::vector<std::string> scalar_names_;
  // A launch-size expression bound to the ABI scalars; nullopt when it uses
  // other names (a plan variable).
  struct SizeExpr {
    std::optional<Expr> bound;
    std::string text;
  };
  int64_t size(const SizeExpr& e, std::string_view which, size_t dim, const int64_t* abi) const;

  std::array<SizeExpr, 3> global_;
  std::array<SizeExpr, 3> local_;
  std::vector<std::optional<SizeRule>> min_counts_;
};

}  // namespace svod
