// ProgramSpec: everything svod needs to know about one kernel — its source,
// language, entry point, parameters in ABI order, launch dimensions and cost
// estimates. It is device-neutral: the same spec compiles for any backend that
// accepts its language.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "svod/base/dtype.h"
#include "svod/base/short_name.h"
#include "svod/program/expr.h"

namespace svod {

// A kernel source language, by the name plan files, packages and Python's
// compile() give it ("c", "cuda"). The languages of the CPU compilers
// (svod/compile/) are here; a device with a language of its own declares it
// in its folder (the CUDA device's "cuda"), and whether a device runs a
// language is its languages() to say (Device::check_compilable).
class Language : public ShortName<Language> {
 public:
  constexpr explicit Language(std::string_view name) : ShortName(name, "language") {}
  static const Language C;       // "c"
  static const Language LlvmIr;  // "llvm": textual LLVM IR
};
inline constexpr Language Language::C{"c"};
inline constexpr Language Language::LlvmIr{"llvm"};
inline std::string_view to_string(const Language& language) noexcept { return language.name(); }
// Error(Validation) when `text` is no well-formed name; any such name is a
// language here, the device refuses one it does not run.
inline Language parse_language(std::string_view text) { return Language(text); }

enum class Access { Read, Write, ReadWrite };
std::string_view to_string(Access access) noexcept;
Access parse_access(std::string_view text);  // "read", "write", "readwrite"
inline bool writes(Access a) { return a != Access::Read; }
inline bool reads(Access a) { return a != Access::Write; }

enum class ScalarType { I32, I64 };
std::string_view to_string(ScalarType type) noexcept;
ScalarType parse_scalar_type(std::string_view text);  // "i32", "i64"

// An integer variable with inclusive bounds.
struct Variable {
  std::string name;
  int64_t min = INT64_MIN;
  int64_t max = INT64_MAX;
  // Set by the runtime, not by callers (a plan's rank and world_size):
  // execute_with_vars refuses to change it.
  bool read_only = false;
  // Throws Error(Validation) naming the variable when value is outside [min, max].
  void check(int64_t value) const;
};

// A pointer parameter. `min_count`, when set, is the element count (of `dtype`)
// the kernel touches, an expression over the scalars; launches with smaller
// buffers are refused.
struct BufferParam {
  std::string name;
  Access access = Access::Read;
  std::optional<DType> dtype;
  std::optional<Expr> min_count;
};

// An integer parameter, passed as int32_t or int64_t (never truncated):
// values outside the type's range, or outside [min, max] when given, are refused.
struct ScalarParam {
  std::string name;
  ScalarType type = ScalarType::I32;
  std::optional<int64_t> min;
  std::optional<int64_t> max;
  Variable bounds() const;  // the declared bounds intersected with the type's range
};

// The scalar that receives the slice index of a parallel CPU launch.
inline constexpr std::string_view kCoreIdName = "core_id";

struct ProgramSpec {
  Language language = Language::C;
  std::string name;  // for logs and profiles; the entry when empty
  std::string source;
  // What compile diagnostics call the source ("kernels/mm.c:3:5: error: ..."):
  // a plan's source_file as the plan gives it, or where inline source sat
  // ("plan.json: programs.mm.source"). Empty: display_name() + ".c". It labels
  // diagnostics, and is part of the cache keys only of sources it can change:
  // ones that use __FILE__ or a quoted #include (svod/cache/cache_key.cpp).
  std::string source_name;
  std::string entry;
  std::vector<BufferParam> buffers;  // ABI order: all buffers, then all scalars
  std::vector<ScalarParam> scalars;
  std::array<Expr, 3> global_size = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  std::array<Expr, 3> local_size = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  std::vector<std::pair<std::string, std::string>> defines;  // -DNAME=VALUE, in order
  // How the compiler optimises the source: a recipe it knows by name (the CPU
  // compilers': svod/compile/cpu_recipe.h), or its default when empty. A
  // variant of a program is the same spec with another recipe
  // (svod/tune/variants.h); the recipe is part of the cache keys.
  std::string recipe;
  std::optional<Expr> flops;  // per launch, for GFLOP/s
  std::optional<Expr> bytes;  // per launch, for GB/s

  const std::string& display_name() const { return name.empty() ? entry : name; }
  // The file name compilers give the source: source_name, else NAME.c (NAME.ll
  // for LLVM IR).
  std::string diagnostic_file_name() const {
    if (!source_name.empty()) return source_name;
    return display_name() + (language == Language::LlvmIr ? ".ll" : ".c");
  }
  // Index of the core_id scalar, if declared.
  std::optional<size_t> core_id_index() const;
  // Names, identifiers, uniqueness, defines; throws Error(Validation) naming the field.
  void validate() const;
};

}  // namespace svod
