// Host side of the JIT loader: one anonymous mapping per image, linked in place
// by ObjectLinker while every page is still read-write, then each permission
// class is mprotect'ed to its final access so no page is ever writable and
// executable at once.
#include "svod/loader/elf_loader.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "svod/base/error.h"
#include "svod/loader/elf_link.h"

namespace svod {
namespace detail {
namespace {

std::uint64_t host_page_size() noexcept {
  static const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};

// Process-wide memo of external symbol addresses. Loads of many kernels ask for
// the same few names (expf, memcpy, __udivti3, ...); dlsym walks every loaded
// library's hash table, so each name is looked up once and then served from
// here under a shared lock.
class HostSymbolTable {
 public:
  static HostSymbolTable& instance() {
    // Leaked on purpose: kernels may still be loaded while static destructors run.
    static auto* table = new HostSymbolTable;
    return *table;
  }

  void override_symbol(std::string_view name, void* address) {
    std::unique_lock lock(mutex_);
    cache_.insert_or_assign(std::string(name), address);
  }

  void* resolve(std::string_view name) {
    {
      std::shared_lock lock(mutex_);
      if (const auto it = cache_.find(name); it != cache_.end()) return it->second;
    }
    std::string key(name);
    void* address = dlsym(RTLD_DEFAULT, key.c_str());
    // libm and libgcc_s may not be linked into the process; they are opened
    // once and kept open for the life of the process, as the loaded code may
    // point into them.
    if (address == nullptr) address = lookup(libm_once_, libm_, "libm.so.6", key);
    if (address == nullptr) address = lookup(libgcc_once_, libgcc_, "libgcc_s.so.1", key);
    if (address == nullptr) return nullptr;  // not cached: a later dlopen may provide it
    std::unique_lock lock(mutex_);
    cache_.emplace(std::move(key), address);
    return address;
  }

 private:
  static void* lookup(std::once_flag& once, void*& handle, const char* library,
                      const std::string& name) {
    std::call_once(once, [&] { handle = dlopen(library, RTLD_NOW | RTLD_LOCAL); });
    return handle != nullptr ? dlsym(handle, name.c_str()) : nullptr;
  }

  std::shared_mutex mutex_;
  std::unordered_map<std::string, void*, StringHash, std::equal_to<>> cache_;
  std::once_flag libm_once_;
  void* libm_ = nullptr;
  std::once_flag libgcc_once_;
  void* libgcc_ = nullptr;
};

std::string errno_text(int error) { return std::strerror(error); }

// Recycles the mappings of released images. On this class of machine a system
// call or a page fault costs microseconds, so a fresh mmap plus first-touch
// faults plus munmap would dominate a load; a recycled mapping is already
// populated and needs only the mprotect calls that W^X demands. Mappings are
// returned read-write (never writable and executable at once) and zeroed again
// before reuse. The pool is small and bounded; anything beyond it is unmapped.
class MappingPool {
 public:
  static MappingPool& instance() {
    static auto* pool = new MappingPool;  // leaked: images may outlive static destruction
    return *pool;
  }

  // A pooled read-write mapping of exactly `size` bytes aligned to `alignment`,
  // zero-filled; nullptr when none is pooled.
  void* acquire(std::size_t size, std::size_t alignment, bool low) {
    void* mapping = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = free_.size(); i-- > 0;) {
        const Entry& entry = free_[i];
        if (entry.size == size && entry.low == low &&
            reinterpret_cast<std::uintptr_t>(entry.address) % alignment == 0) {
          mapping = entry.address;
          pooled_bytes_ -= size;
          free_[i] = free_.back();
          free_.pop_back();
          break;
        }
      }
    }
    if (mapping != nullptr) std::memset(mapping, 0, size);
    return mapping;
  }

  void release(void* address, std::size_t size, bool low) noexcept {
    if (size <= kMaxPooledMapping) {
      std::lock_guard lock(mutex_);
      if (pooled_bytes_ + size <= kMaxPooledBytes &&
          mprotect(address, size, PROT_READ | PROT_WRITE) == 0) {
        free_.push_back({address, size, low});
        pooled_bytes_ += size;
        return;
      }
    }
    munmap(address, size);
  }

 private:
  static constexpr std::size_t kMaxPooledMapping = std::size_t{256} << 10;
  static constexpr std::size_t kMaxPooledBytes = std::size_t{8} << 20;
  struct Entry {
    void* address;
    std::size_t size;
    bool low;
  };
  std::mutex mutex_;
  std::vector<Entry> free_;
  std::size_t pooled_bytes_ = 0;
};

// A fresh read-write anonymous mapping of `size` bytes aligned to `alignment`.
void* map_fresh(std::uint64_t size, std::uint64_t alignment, std::uint64_t page, bool low) {
  // Over-allocate when a section wants more than page alignment, then trim.
  const std::uint64_t slack = alignment > page ? alignment - page : 0;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (low) {
#if defined(MAP_32BIT)
    flags |= MAP_32BIT;  // non-PIC code embeds its own addresses as 32-bit immediates
#else
    throw make_error(ErrorKind::Load,
                     "the object uses 32-bit absolute addresses (non-PIC code), which this host "
                     "cannot place; compile with -fPIC");
#endif
  }
  void* raw = mmap(nullptr, size + slack, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (raw == MAP_FAILED) {
    const int error = errno;
    throw make_error(ErrorKind::Load, "cannot map {} bytes{} for a loaded object: {}{}",
                     size + slack, low ? " below 2 GiB" : "", errno_text(error),
                     low ? "; compile with -fPIC to load anywhere" : "");
  }
  const auto raw_address = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t base = (raw_address + alignment - 1) & ~(alignment - 1);
  if (base > raw_address) munmap(raw, base - raw_address);
  if (const std::uint64_t tail = raw_address + slack - base; tail > 0) {
    munmap(reinterpret_cast<void*>(base + size), tail);
  }
  return reinterpret_cast<void*>(base);
}

}  // namespace

void* resolve_host_symbol(std::string_view name) { return HostSymbolTable::instance().resolve(name); }

std::shared_ptr<const LoadedImage> load_with_options(std::span<const std::byte> object,
                                                     const LinkOptions& options) {
  LinkOptions host_options = options;
  const std::uint64_t page = host_page_size();
  host_options.page_size = page;
  const ObjectLinker linker(object, host_machine(), host_options);

  const std::uint64_t size = linker.image_size();
  const bool low = linker.needs_low_address();
  void* mapping = MappingPool::instance().acquire(size, linker.image_alignment(), low);
  if (mapping == nullptr) mapping = map_fresh(size, linker.image_alignment(), page, low);
  const auto base = reinterpret_cast<std::uintptr_t>(mapping);
  auto image = std::make_shared<LoadedImage>(LoadedImage::Passkey{}, mapping, size, low);
  auto* memory = reinterpret_cast<std::byte*>(base);
  const SymbolResolver resolver = [](std::string_view name) -> std::optional<std::uint64_t> {
    void* address = HostSymbolTable::instance().resolve(name);
    if (address == nullptr) return std::nullopt;
    return reinterpret_cast<std::uintptr_t>(address);
  };
  image->stubs_used_ = linker.link(memory, base, resolver).stubs_used;

  image->regions_.reserve(linker.regions().size());
  for (const ImageRegion& region : linker.regions()) {
    const std::uint64_t protected_size = (region.size + page - 1) & ~(page - 1);
    RegionAccess access = RegionAccess::ReadWrite;
    int protection = PROT_READ | PROT_WRITE;
    if (region.kind == RegionKind::Text) {
      access = RegionAccess::ReadExecute;
      protection = PROT_READ | PROT_EXEC;
#if defined(__aarch64__)
      __builtin___clear_cache(reinterpret_cast<char*>(memory + region.offset),
                              reinterpret_cast<char*>(memory + region.offset + region.size));
#endif
    } else if (region.kind == RegionKind::ReadOnly) {
      access = RegionAccess::ReadOnly;
      protection = PROT_READ;
    }
    if (protection != (PROT_READ | PROT_WRITE) &&
        mprotect(memory + region.offset, protected_size, protection) != 0) {
      throw make_error(ErrorKind::Load, "cannot protect {} bytes of a loaded object: {}",
                       protected_size, errno_text(errno));
    }
    image->regions_.push_back({memory + region.offset, region.size, access});
  }

  std::vector<ImageSymbol> symbols = linker.symbols();  // sorted by name, unique
  image->symbols_.reserve(symbols.size());
  for (ImageSymbol& symbol : symbols) {
    image->symbols_.emplace_back(std::move(symbol.name), memory + symbol.offset);
  }
  return image;
}

}  // namespace detail

LoadedImage::LoadedImage(Passkey, void* mapping, std::size_t mapping_size, bool low) noexcept
    : mapping_(mapping), mapping_size_(mapping_size), low_(low) {}

LoadedImage::~LoadedImage() {
  detail::MappingPool::instance().release(mapping_, mapping_size_, low_);
}

void override_host_symbol(std::string_view name, void* address) {
  detail::HostSymbolTable::instance().override_symbol(name, address);
}

std::shared_ptr<const LoadedImage> LoadedImage::load(std::span<const std::byte> object) {
  return detail::load_with_options(object, detail::LinkOptions{});
}

std::shared_ptr<const LoadedImage> LoadedImage::load(std::span<const std::uint8_t> object) {
  return load(std::as_bytes(object));
}

void* LoadedImage::find_symbol(std::string_view name) const noexcept {
  const auto it = std::lower_bound(
      symbols_.begin(), symbols_.end(), name,
      [](const std::pair<std::string, void*>& entry, std::string_view key) { return entry.first < key; });
  return it != symbols_.end() && it->first == name ? it->second : nullptr;
}

void* LoadedImage::symbol(std::string_view name) const {
  if (void* address = find_symbol(name)) return address;
  constexpr std::size_t kListed = 8;
  std::string defined;
  for (std::size_t i = 0; i < symbols_.size() && i < kListed; ++i) {
    if (i > 0) defined += ", ";
    defined += symbols_[i].first;
  }
  if (symbols_.size() > kListed) defined += fmt::format(" and {} more", symbols_.size() - kListed);
  throw make_error(ErrorKind::UndefinedSymbol,
                   "symbol '{}' is not defined by the loaded object (it defines: {})", name,
                   defined.empty() ? "nothing" : defined);
}

}  // namespace svod
