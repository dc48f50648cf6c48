#include "svod/device/compile_many.h"

#include <exception>
#include <unordered_map>

#include "svod/base/thread_pool.h"
#include "svod/cache/cache_key.h"

namespace svod {

std::vector<CompileResult> compile_many(Device& device, std::span<const ProgramSpec> specs,
                                        const CompileCallback& on_compiled, const CompileCallback& on_started) {
  // Duplicates are folded here rather than left to the kernel cache's
  // single-flight, so no pool thread sits blocked waiting on a sibling.
  std::vector<size_t> unique;           // index of the first spec of each group
  std::vector<size_t> group(specs.size());  // position in `unique` for each spec
  std::unordered_map<Hash128, size_t, Hash128Hasher> seen;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto [it, inserted] = seen.try_emplace(spec_hash(specs[i]), unique.size());
    if (inserted) unique.push_back(i);
    group[i] = it->second;
  }

  std::vector<std::vector<size_t>> members(unique.size());  // the positions of each group
  for (size_t i = 0; i < specs.size(); ++i) members[group[i]].push_back(i);
  std::vector<CompileResult> compiled(unique.size());
  parallel_for(unique.size(), [&](size_t u) {
    if (on_started) on_started(unique[u]);
    try {
      compiled[u] = device.compile(specs[unique[u]]);
    } catch (const Error& e) {
      compiled[u] = e;
    } catch (const std::exception& e) {
      compiled[u] = make_error(ErrorKind::Internal, "compiling \"{}\": {}", specs[unique[u]].display_name(), e.what());
    }
    if (on_compiled) {
      for (const size_t position : members[u]) on_compiled(position);
    }
  });

  std::vector<CompileResult> results;
  results.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) results.push_back(compiled[group[i]]);
  return results;
}

}  // namespace svod
