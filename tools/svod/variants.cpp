// `svod tune --variants PLAN.json`: chooses the variant of every kernel of a
// plan file (svod/tune/variants.h) and prints what was chosen and why; the
// choices go to the object cache's directory, where `svod pack --variants`
// and every later choice find them.
#include <fmt/format.h>

#include "svod/base/error.h"
#include "svod/planfile/plan_file.h"
#include "svod/tune/time_scale.h"
#include "svod/tune/variants.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"
#include "tools/svod/variants.h"

namespace svod::cli {

VariantOptions variant_options(const std::string& tolerance) {
  VariantOptions options;
  if (!tolerance.empty()) options.tolerance = parse_variant_tolerance(tolerance, "--tolerance " + tolerance);
  return options;
}

std::string variant_table(const ExecutionPlan& plan, const std::vector<VariantChoice>& choices) {
  std::string text = fmt::format("{:<28} {:<11} {:>10} {:>10} {:>8}  {}\n", "op", "recipe", "default", "chosen",
                                 "speed-up", "how");
  size_t choice = 0;
  for (size_t i = 0; i < plan.op_count() && choice < choices.size(); ++i) {
    if (!std::holds_alternative<KernelOp>(plan.op(i))) continue;
    const VariantChoice& c = choices[choice++];
    std::string title = plan.op_title(i);
    if (title.size() > 28) title = title.substr(0, 27) + "~";
    const std::string recipe = c.recipe.empty() ? "default" : c.recipe;
    double chosen_ns = c.default_ns;
    std::string rejected;
    for (const VariantTrial& t : c.trials) {
      if (t.recipe == c.recipe) chosen_ns = t.median_ns;
      if (!t.rejected.empty()) rejected += fmt::format("; {} rejected: {}", t.recipe, t.rejected);
    }
    const std::string how = c.cached ? "from the cache" : c.trials.empty() ? "no other recipe" : "measured";
    text += fmt::format("{:<28} {:<11} {:>10} {:>10} {:>7.2f}x  {}{}\n", title, recipe,
                        c.default_ns > 0 ? format_time(c.default_ns) : "-", chosen_ns > 0 ? format_time(chosen_ns) : "-",
                        c.speedup(), how, rejected);
  }
  return text;
}

int tune_variants(const TuneOptions& options) {
  // Choosing variants compiles every recipe and times it in this process
  // (choose_variants); confining only part of that would protect nothing.
  if (options.sandbox)
    return fail("tune", make_error(ErrorKind::Unsupported,
                                   "--variants --sandbox: variants are compiled and timed in this process, outside any "
                                   "confinement; choose variants for sources you trust (`svod pack --variants`), or "
                                   "tune one op's parameters confined with `svod tune --sandbox TUNE.json`"));
  try {
    const VariantOptions variants = variant_options(options.tolerance);
    const std::string cpu_compiler = cpu_compiler_option(options.cpu_compiler);
    LoadedPlan loaded = load_plan(parse_plan_file(options.tune_file),
                                  LoadOptions{.vars = parse_vars(options.vars), .cpu_compiler = cpu_compiler});
    // Kernels are chosen for as they run: on the buffers the plan left.
    loaded.plan.execute();
    const uint64_t measured = variant_measurements();
    const std::vector<VariantChoice> choices = choose_variants(loaded.plan, variants);
    fmt::print("{}", variant_table(loaded.plan, choices));
    size_t changed = 0;
    for (const VariantChoice& c : choices) changed += c.recipe.empty() ? 0 : 1;
    fmt::print("{} of {} kernels run a variant; {} measured ({}), the rest from the cache\n", changed, choices.size(),
               variant_measurements() - measured,
               variants.tolerance ? fmt::format("inexact recipes within atol {} rtol {}", variants.tolerance->atol,
                                                variants.tolerance->rtol)
                                  : std::string("exact recipes only"));
    return 0;
  } catch (const Error& e) {
    return fail("tune", e);
  }
}

}  // namespace svod::cli
