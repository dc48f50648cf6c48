#include "svod/compile/cpu_recipe.h"

#include "svod/base/error.h"

namespace svod {

size_t cpu_recipe_index(std::string_view name) {
  if (name.empty()) return 0;
  for (size_t i = 0; i < kCpuRecipes.size(); ++i)
    if (kCpuRecipes[i].name == name) return i;
  throw make_error(ErrorKind::Validation, "unknown CPU recipe \"{}\": the CPU compilers have {}", name,
                   cpu_recipe_names());
}

// By position, never by address: the LLVM plugin holds a copy of the table
// of its own.
const CpuRecipe& find_cpu_recipe(std::string_view name) { return kCpuRecipes[cpu_recipe_index(name)]; }

std::string cpu_recipe_names() {
  std::string names;
  for (const CpuRecipe& recipe : kCpuRecipes) names += (names.empty() ? "" : ", ") + std::string(recipe.name);
  return names;
}

}  // namespace svod
