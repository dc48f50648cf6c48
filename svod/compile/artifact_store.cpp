#include "svod/compile/artifact_store.h"

#include <atomic>

namespace svod {

namespace {
std::atomic<std::shared_ptr<ArtifactStore> (*)()> current_store{nullptr};
}  // namespace

ArtifactStore::~ArtifactStore() = default;

std::shared_ptr<ArtifactStore> artifact_store() {
  const auto current = current_store.load(std::memory_order_acquire);
  return current != nullptr ? current() : nullptr;
}

void register_artifact_store(std::shared_ptr<ArtifactStore> (*current)()) {
  current_store.store(current, std::memory_order_release);
}

}  // namespace svod
