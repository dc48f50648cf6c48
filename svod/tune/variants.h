// Per-kernel variants chosen by measurement.
//
// A variant of a program is its spec compiled by another recipe of its
// device's compiler (ProgramSpec::recipe; the CPU compilers' recipes are
// svod/compile/cpu_recipe.h). choose_variant() compiles each candidate
// recipe, checks its outputs against the default's and times them all in
// alternating rounds, then keeps the default unless a candidate wins by the
// margin. Everything runs on copies of the launch's storages, so a kernel
// that writes in place (an accumulator, a KV cache) leaves the caller's
// buffers as they were.
//
// Which recipes are candidates: the exact ones always; the inexact ones
// (reassociation) only when the caller gives a tolerance, and then only if
// every output element stays within it against the default on the launch's
// own inputs and on a few random ones (per element, allclose's rule:
// |variant - default| <= atol + rtol * |default|; a NaN or an infinity must
// be the same in both). An exact recipe must give the same values.
//
// The choice is kept in the object cache's directory (svod/cache), keyed by
// the program's source and recipe-free spec, the compiler's identity, the
// host CPU, the thread count, the tolerance, the margin and the launch's
// scalars and sizes (each rounded up to a power of two: one choice per
// bucket), so a later process compiles the chosen variant (or loads it from
// the object cache) and times nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/device/device.h"
#include "svod/device/launch_args.h"
#include "svod/plan/execution_plan.h"

namespace svod {

// allclose's tolerance, per element: |variant - default| <= atol + rtol *
// |default|, with NaN and infinities equal exactly.
struct VariantTolerance {
  double atol = 0;
  double rtol = 0;
};

// A tolerance written "ATOL,RTOL" (1e-5,1e-4), as `svod tune --tolerance`
// and SVOD_VARIANTS_TOLERANCE take it; Error(Validation) naming `what` for
// anything but two numbers of at least 0.
VariantTolerance parse_variant_tolerance(std::string_view text, std::string_view what);

// SVOD_VARIANTS_TOLERANCE's tolerance; nullopt when it is unset.
std::optional<VariantTolerance> variant_tolerance_from_env();

struct VariantOptions {
  // None: the exact recipes only (never an inexact one).
  std::optional<VariantTolerance> tolerance;
  // A candidate replaces the default only when its median is at least this
  // fraction faster (0.05: 5%) and it was faster in most rounds.
  double margin = 0.05;
  // Rounds of timing, each candidate's turn in another order each round, and
  // how long each candidate is timed per round (at least one run).
  int rounds = 5;
  std::chrono::nanoseconds round_time = std::chrono::milliseconds(2);
  // Random inputs, besides the launch's own, that an inexact candidate's
  // outputs are checked on.
  int random_inputs = 2;
  // Read and write choices in the object cache (when it is on).
  bool use_cache = true;
};

// How one candidate fared.
struct VariantTrial {
  std::string recipe;
  double median_ns = 0;  // the median of its per-round medians; 0 when it was not timed
  int rounds_won = 0;    // rounds it was faster than the default in
  std::string rejected;  // why it could not be chosen; empty when it could
};

struct VariantChoice {
  // The recipe chosen; empty: the compiler's default.
  std::string recipe;
  // The program to run: the given one when the default stays, else the variant.
  std::shared_ptr<const Program> program;
  // Found in the cache: nothing was timed.
  bool cached = false;
  // The default's median, then each candidate's trial; empty when cached or
  // when the compiler has no other recipe.
  double default_ns = 0;
  std::vector<VariantTrial> trials;
  // Wall time the choice took (compiles, checks and timing, or the cache).
  double seconds = 0;

  // The default's median over the chosen one's (1 when the default stays or
  // nothing was timed).
  double speedup() const;
};

// Chooses the variant of `program` to run for launches like `args` (the
// program's device, buffers, scalars and sizes). Never touches args' memory.
// A program that already names a recipe is compared from its default.
VariantChoice choose_variant(const std::shared_ptr<const Program>& program, const KernelArgs& args,
                             const VariantOptions& options = {});

// Chooses for every kernel op of `plan` at its current variables, compiling
// every op's candidates at once on the thread pool, and runs each op with
// its chosen program from then on (ExecutionPlan::replace_program). One
// choice per kernel op, in op order.
std::vector<VariantChoice> choose_variants(ExecutionPlan& plan, const VariantOptions& options = {});

// How many programs this process has timed variants of (not counting choices
// found in the cache), for tests and SVOD_DEBUG.
uint64_t variant_measurements() noexcept;

// The object cache entry kind of a stored choice.
inline constexpr ArtifactKind kVariantChoiceKind{"variant_choice"};

}  // namespace svod
