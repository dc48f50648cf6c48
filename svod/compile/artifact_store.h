// ArtifactStore: where a compiler keeps, by key, what it makes to speed up
// later processes besides the objects themselves (the in-process C
// compiler's precompiled preambles). The store is the object cache, a layer
// above this one: it registers itself when the runtime loads, so that a
// compiler reaches it without naming it (docs/ARCHITECTURE.md's layers).
#pragma once

#include <memory>
#include <optional>

#include "svod/base/hash.h"
#include "svod/compile/compiler.h"

namespace svod {

class ArtifactStore {
 public:
  virtual ~ArtifactStore();
  // None of them throws: a store that fails only stops helping.
  virtual std::optional<Artifact> get(const Hash128& key) = 0;
  virtual void put(const Hash128& key, const Artifact& artifact) = 0;
  virtual void remove(const Hash128& key) = 0;
};

// The process's store now, or null: none registered, or it is off.
std::shared_ptr<ArtifactStore> artifact_store();

// Called by the store's own layer, once: `current` returns the store in use
// at the time of the call, or null.
void register_artifact_store(std::shared_ptr<ArtifactStore> (*current)());

}  // namespace svod
