// Per-kernel variants from Python (svod/tune/variants.h): Plan.choose_variants,
// svod.choose_variant and Program.recipe.
#include "bindings.h"
#include "plan_objects.h"
#include "program_object.h"
#include "svod/tune/variants.h"

namespace svod::python {
namespace {

VariantOptions variant_options(std::string_view function, py::handle tolerance, py::handle margin,
                               py::handle rounds, py::handle cache) {
  VariantOptions options;
  if (!tolerance.is_none()) {
    const std::string what = fmt::format("{}: tolerance", function);
    const std::vector<py::object> pair = sequence_argument(tolerance, what, "(atol, rtol) or None");
    if (pair.size() != 2)
      throw make_error(ErrorKind::Validation, "{} has {} numbers; give (atol, rtol) or None", what, pair.size());
    options.tolerance = VariantTolerance{float_argument(pair[0], what + "[0] (atol)"),
                                         float_argument(pair[1], what + "[1] (rtol)")};
  }
  options.margin = float_argument(margin, fmt::format("{}: margin", function));
  const size_t count = size_argument(rounds, fmt::format("{}: rounds", function));
  if (count < 1 || count > 1000)
    throw make_error(ErrorKind::Validation, "{}: rounds = {} is not in [1, 1000]", function, count);
  options.rounds = static_cast<int>(count);
  options.use_cache = bool_argument(cache, fmt::format("{}: cache", function));
  return options;
}

py::dict choice_dict(const VariantChoice& choice) {
  py::dict out;
  out["recipe"] = choice.recipe.empty() ? py::object(py::none()) : py::object(py::str(choice.recipe));
  out["cached"] = choice.cached;
  out["default_ns"] = choice.default_ns;
  out["speedup"] = choice.speedup();
  out["seconds"] = choice.seconds;
  py::dict trials;
  for (const VariantTrial& t : choice.trials) {
    py::dict trial;
    trial["median_ns"] = t.median_ns;
    trial["rounds_won"] = t.rounds_won;
    trial["rejected"] = t.rejected.empty() ? py::object(py::none()) : py::object(py::str(t.rejected));
    trials[py::str(t.recipe)] = std::move(trial);
  }
  out["trials"] = std::move(trials);
  return out;
}

constexpr const char* kOptionsDoc =
    "tolerance=(atol, rtol) allows the inexact recipes too, each kept only where every output\n"
    "element stays within atol + rtol * |exact| against the default (NaN and infinities exactly)\n"
    "on the launch's own inputs and on random ones; None (the default): exact recipes only. A\n"
    "variant replaces the default only when its median is `margin` faster and it won most of the\n"
    "`rounds`. Everything runs on copies of the buffers. Choices are kept in svod's cache\n"
    "directory (cache=False: neither read nor written), so a later process times nothing.";

}  // namespace

void bind_variants(py::module_& m) {
  auto plan = py::reinterpret_borrow<py::class_<PyPlan>>(m.attr("Plan"));
  plan.def(
      "choose_variants",
      [](const PyPlan& p, py::handle tolerance, py::handle margin, py::handle rounds, py::handle cache) {
        const VariantOptions options = variant_options("choose_variants", tolerance, margin, rounds, cache);
        if (p.shared->sandbox)
          throw make_error(ErrorKind::Unsupported,
                           "{}: choose_variants: variants are timed in this process, and the plan is sandboxed",
                           p.source);
        std::vector<VariantChoice> choices;
        {
          std::unique_lock lock(p.shared->run_lock, std::defer_lock);
          GilReleased unlocked;
          lock.lock();
          choices = choose_variants(p.plan(), options);
        }
        py::list out;
        size_t at = 0;
        for (size_t i = 0; i < p.plan().op_count() && at < choices.size(); ++i) {
          if (!std::holds_alternative<KernelOp>(p.plan().op(i))) continue;
          py::dict d = choice_dict(choices[at++]);
          d["op"] = i;
          d["title"] = p.plan().op_title(i);
          out.append(std::move(d));
        }
        return out;
      },
      py::arg("tolerance") = py::none(), py::kw_only(), py::arg("margin") = 0.05, py::arg("rounds") = 5,
      py::arg("cache") = true,
      (std::string("Chooses each kernel op's variant (the recipe its compiler builds it by) by\n"
                   "measurement at the current variables, and runs the op with it from now on; save()\n"
                   "and pack() record it. Returns one dict per kernel op: op, title, recipe (None: the\n"
                   "default), cached, default_ns, speedup, seconds and trials {recipe: {median_ns,\n"
                   "rounds_won, rejected}}.\n") +
       kOptionsDoc)
          .c_str());

  auto program = py::reinterpret_borrow<py::class_<PyProgram, std::shared_ptr<PyProgram>>>(m.attr("Program"));
  program.def_property_readonly(
      "recipe",
      [](const PyProgram& p) -> std::optional<std::string> {
        if (p.program->spec().recipe.empty()) return std::nullopt;
        return p.program->spec().recipe;
      },
      "The recipe it was compiled by (svod.cpu_recipes), None for its compiler's default.");

  m.def(
      "choose_variant",
      [](py::handle target, py::handle args, py::handle tolerance, py::handle margin, py::handle rounds,
         py::handle cache, py::handle global_size) {
        if (!py::isinstance<PyProgram>(target))
          throw type_error("choose_variant: program", "a svod.Program", target);
        const PyProgram& p = py::cast<const PyProgram&>(target);
        const VariantOptions options = variant_options("choose_variant", tolerance, margin, rounds, cache);
        const KernelArgs kargs = kernel_args(p, args, global_size, "choose_variant");
        VariantChoice choice;
        {
          GilReleased unlocked;
          choice = choose_variant(p.program, kargs, options);
        }
        py::object chosen = choice.program == p.program ? py::reinterpret_borrow<py::object>(target)
                                                         : py::cast(std::make_shared<PyProgram>(choice.program));
        return py::make_tuple(chosen, choice_dict(choice));
      },
      py::arg("program"), py::arg("args") = py::tuple(), py::arg("tolerance") = py::none(), py::kw_only(),
      py::arg("margin") = 0.05, py::arg("rounds") = 5, py::arg("cache") = true, py::arg("global_size") = py::none(),
      (std::string("Chooses the variant of a Program to run for calls like `args` (buffers then scalars,\n"
                   "as in a call; `global_size` as a call's), by measurement; returns (program, info): the\n"
                   "program itself when its default stays, and info as Plan.choose_variants gives it per op.\n") +
       kOptionsDoc)
          .c_str());

  m.def(
      "_variants_tolerance_from_env",
      []() -> std::optional<std::pair<double, double>> {
        const auto tolerance = variant_tolerance_from_env();
        if (!tolerance) return std::nullopt;
        return std::pair{tolerance->atol, tolerance->rtol};
      },
      "SVOD_VARIANTS_TOLERANCE as (atol, rtol), None when it is unset; ValidationError when malformed. For "
      "svod.tinygrad.");

  py::list recipes;
  for (const CpuRecipe& recipe : kCpuRecipes) recipes.append(py::str(std::string(recipe.name)));
  m.attr("cpu_recipes") = py::tuple(recipes);
}

}  // namespace svod::python
