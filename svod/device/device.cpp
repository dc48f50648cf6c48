#include "svod/device/device.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/cache/cache_key.h"
#include "svod/cache/object_cache.h"
#include "svod/compile/compile_policy.h"
#include "svod/device/block_cache.h"
#include "svod/device/host_device.h"
#include "svod/device/kernel_cache.h"

namespace svod {

Device::Device() : host_queue_(std::make_unique<HostQueue>(*this)), cache_scope_(new_cache_scope()) {
  // debug_level() is read where nothing may throw: a malformed SVOD_DEBUG is
  // refused here, where every use of svod starts.
  check_debug_level();
}
Device::~Device() = default;

Buffer Device::allocate_host(DType dtype, size_t count) { return host_device().allocate(dtype, count); }

BlockCache& Device::block_cache() {
  std::call_once(block_cache_once_, [&] {
    block_cache_ = make_block_cache(*this, BlockCache::Memory::Device);
    block_cache_made_.store(block_cache_.get(), std::memory_order_release);
  });
  return *block_cache_;
}

BlockCache& Device::host_block_cache() {
  std::call_once(host_block_cache_once_, [&] {
    host_block_cache_ = make_block_cache(*this, BlockCache::Memory::Host);
    host_block_cache_made_.store(host_block_cache_.get(), std::memory_order_release);
  });
  return *host_block_cache_;
}

Buffer Device::allocate_cached(DType dtype, size_t count) { return block_cache().allocate(dtype, count); }

Buffer Device::allocate_host_cached(DType dtype, size_t count) { return host_block_cache().allocate(dtype, count); }

// Only caches that exist are emptied: making one here would give nothing
// back, and would read SVOD_BLOCK_CACHE_MB, whose error thrown from a
// device's destructor would end the process.
void Device::free_cached() noexcept {
  for (const auto* made : {&block_cache_made_, &host_block_cache_made_})
    if (BlockCache* cache = made->load(std::memory_order_acquire)) cache->clear();
}

bool Device::accepts(Language language) const noexcept {
  const auto own = languages();
  return std::find(own.begin(), own.end(), language) != own.end();
}

std::string Device::artifact_mismatch(const CompilerIdentity& made_by) const {
  const CompilerIdentity& here = compiler().identity();
  auto fields = [](const CompilerIdentity& id) {
    return std::tie(id.name, id.path, id.version, id.target_triple, id.target_cpu, id.target_features, id.flags,
                    id.abi_version);
  };
  if (fields(made_by) == fields(here)) return {};
  auto describe = [](const CompilerIdentity& id) {
    return fmt::format("{} {} for \"{}\" ({})", id.name, id.path, id.target_cpu, id.version);
  };
  return fmt::format("they were made by {}, and {} compiles with {}", describe(made_by), name(), describe(here));
}

void Device::check_spec(const ProgramSpec&) const {}

std::shared_ptr<const Program> Device::compile(const ProgramSpec& spec) {
  // The kernel key covers the whole spec, so a hit was checked when it was built.
  return kernel_cache().get_or_build(kernel_key(cache_scope_, spec), [&] {
    check_compilable(spec);
    return load_or_compile(*this, spec);
  });
}

std::string Device::language_names() const {
  std::string names;
  for (const Language& l : languages()) names += fmt::format("{}{}", names.empty() ? "" : ", ", l.name());
  return names;
}

void Device::check_compilable(const ProgramSpec& spec) const {
  if (!accepts(spec.language)) {
    const std::string runs = language_names();
    throw make_error(ErrorKind::Unsupported, "program \"{}\": {} runs {} programs, not {}", spec.display_name(), name(),
                     runs.empty() ? "no" : runs, to_string(spec.language));
  }
  spec.validate();
  // Only a named recipe asks the compiler: a device that compiles nothing
  // has none to ask.
  if (!spec.recipe.empty()) compiler().check_recipe(spec);
  check_spec(spec);
}

bool Device::direct_copy(const Buffer&, const Buffer&) const noexcept { return false; }

bool Device::submit_graph(std::span<const KernelLaunch>) { return false; }

Program::Program(ProgramSpec spec) : spec_(std::move(spec)), layout_(spec_) {}
Program::~Program() = default;

std::chrono::nanoseconds Program::time_launch(const LaunchArgs& args) const {
  const auto start = std::chrono::steady_clock::now();
  launch(args);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
}

void Program::run_bound(const uint64_t*, int64_t) const {
  throw make_error(ErrorKind::Unsupported, "program \"{}\" on {} takes no pre-bound host arguments",
                   spec().display_name(), device().name());
}

std::shared_ptr<const Program> load_program(Device& device, const ProgramSpec& spec, Artifact artifact,
                                            std::optional<CompilerIdentity> made_by) {
  std::shared_ptr<const Program> program = device.load(spec, artifact);
  artifact.diagnostics.clear();
  artifact.diagnostics.shrink_to_fit();
  program->artifact_ = std::make_shared<const LoadedArtifact>(LoadedArtifact{std::move(artifact), std::move(made_by)});
  return program;
}

std::shared_ptr<const Program> load_or_compile(Device& device, const ProgramSpec& spec) {
  const std::shared_ptr<ObjectCache> objects = object_cache();
  const Compiler& compiler = device.compiler();
  if (objects == nullptr || !objects->enabled()) {
    begin_compile(spec, {});
    return load_program(device, spec, compiler.compile(spec));
  }
  const Hash128 key = object_key(spec, objects->identity_hash(compiler));
  if (auto stored = objects->get(key)) {
    try {
      auto program = load_program(device, spec, std::move(*stored));
      detail::note_build_source(detail::BuildSource::DiskCache);
      return program;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Load && e.kind() != ErrorKind::UndefinedSymbol) throw;
      // The bytes passed the digest, so they are what some compiler wrote;
      // they just do not load here. Start over from the source.
      log_warning("object cache: stored object for \"{}\" does not load ({}); recompiling", spec.display_name(),
                    e.what());
      objects->remove(key);
    }
  }
  begin_compile(spec, {});
  Artifact artifact = compiler.compile(spec);
  // Load before publishing, so an object that cannot load is never stored.
  auto program = load_program(device, spec, artifact);
  objects->put(key, artifact);
  return program;
}

void copy_buffer(const Buffer& dst, const Buffer& src) {
  if (dst.is_host() && src.is_host()) {
    copy_host_buffers(dst, src);
    return;
  }
  (dst.is_host() ? src : dst).device().copy(dst, src);
}

Device* direct_copy_device(const Buffer& dst, const Buffer& src) noexcept {
  if (dst.device().direct_copy(dst, src)) return &dst.device();
  if (src.device().direct_copy(dst, src)) return &src.device();
  return nullptr;
}

void copy_through_host(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (dst.is_host() && src.is_host()) {
    std::memmove(dst.data(), src.data(), src.bytes());
    return;
  }
  const Buffer staging = host_device().allocate(DType::U8, src.bytes());
  const Buffer from = src.view_bytes(0, src.bytes(), DType::U8);
  const Buffer to = dst.view_bytes(0, dst.bytes(), DType::U8);
  if (from.is_host()) std::memcpy(staging.data(), from.data(), from.bytes());
  else from.device().copy(staging, from);
  if (to.is_host()) std::memcpy(to.data(), staging.data(), to.bytes());
  else to.device().copy(to, staging);
}

void check_launch_buffer(const ProgramSpec& spec, const LaunchLayout& layout, size_t index, const Buffer& buffer,
                         const int64_t* abi) {
  if (!buffer.valid())
    throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") is empty", spec.display_name(), index,
                     spec.buffers[index].name);
  layout.check_dtype(index, buffer.dtype(), buffer.first_byte());
  if (auto need = layout.min_bytes(index, abi); need && buffer.bytes() < *need)
    throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") holds {} bytes but the launch needs {}",
                     spec.display_name(), index, spec.buffers[index].name, buffer.bytes(), *need);
}

}  // namespace svod
