#include "svod/compile/compiler.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <fmt/ranges.h>

#include "svod/base/cpu_features.h"
#include "svod/base/error.h"

namespace svod {

Compiler::~Compiler() = default;

void Compiler::check_recipe(const ProgramSpec& spec) const {
  if (spec.recipe.empty()) return;
  const std::span<const CpuRecipe> own = recipes();
  if (own.empty())
    throw make_error(ErrorKind::Unsupported, "program \"{}\" names the recipe \"{}\", but its compiler has no recipes",
                     spec.display_name(), spec.recipe);
  std::string names;
  for (const CpuRecipe& recipe : own) {
    if (recipe.name == spec.recipe) return;
    names += (names.empty() ? "" : ", ") + std::string(recipe.name);
  }
  throw make_error(ErrorKind::Validation, "program \"{}\" names the recipe \"{}\", which its compiler does not have ({})",
                   spec.display_name(), spec.recipe, names);
}

Hash128 CompilerIdentity::hash() const {
  Hasher h;
  h.str(name).str(path).str(version).str(target_triple).str(target_cpu).u64(abi_version);
  h.u64(target_features.size());
  for (const auto& f : target_features) h.str(f);
  h.u64(flags.size());
  for (const auto& f : flags) h.str(f);
  return h.finish();
}

std::string CompilerIdentity::describe() const {
  return fmt::format("{} {} ({}), target {} cpu {} ({} features)", name, version, path, target_triple, target_cpu,
                     target_features.size());
}

std::optional<Hash128> host_tool_identity_source(std::string_view kind, const std::string& path,
                                                 std::initializer_list<std::span<const std::string>> inputs) {
  const std::string& cpu = host_cpu_signature();
  struct stat st {};
  if (cpu.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  Hasher h;
  h.str(kind).str(path).u64(st.st_dev).u64(st.st_ino).u64(static_cast<uint64_t>(st.st_size));
  h.u64(static_cast<uint64_t>(st.st_mtim.tv_sec)).u64(static_cast<uint64_t>(st.st_mtim.tv_nsec));
  for (std::span<const std::string> input : inputs) {
    h.u64(input.size());
    for (const std::string& item : input) h.str(item);
  }
  return h.str(cpu).finish();
}

}  // namespace svod
