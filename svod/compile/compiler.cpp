#include "svod/compile/compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace svod {

Compiler::~Compiler() = default;

Hash128 CompilerIdentity::hash() const {
  Hasher h;
  h.str(backend).str(path).str(version).str(target_triple).str(target_cpu).u64(abi_version);
  h.u64(target_features.size());
  for (const auto& f : target_features) h.str(f);
  h.u64(flags.size());
  for (const auto& f : flags) h.str(f);
  return h.finish();
}

std::string CompilerIdentity::describe() const {
  return fmt::format("{} {} ({}), target {} cpu {} ({} features)", backend, version, path, target_triple, target_cpu,
                     target_features.size());
}

}  // namespace svod
