// The JIT ELF loader: turns a relocatable object compiled for this machine
// (clang -c, in memory) into callable code without temp files or dlopen.
//
// Sections are mapped with their real permissions (text r-x, rodata and GOT
// r--, data and bss rw-; never writable and executable at once), relocations
// are applied with a real GOT and far-call stubs, and external symbols come
// from the process, then libm.so.6, then libgcc_s.so.1. Anything malformed or
// unsupported fails with svod::Error (Load, or UndefinedSymbol for names the
// object needs but nothing provides).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace svod {

class LoadedImage;

namespace detail {
struct LinkOptions;
// load() with explicit link options (e.g. force_stubs for tests).
std::shared_ptr<const LoadedImage> load_with_options(std::span<const std::byte> object,
                                                     const LinkOptions& options);
// Address of an external symbol as the loader resolves it (process, libm,
// libgcc_s), cached process-wide; nullptr when none provides it.
void* resolve_host_symbol(std::string_view name);
}  // namespace detail

// Makes every object loaded from now on resolve the external symbol `name`
// to `address` instead of the process's own (the CPU backend routes a
// kernel's calls of exit() and its kin to the launch boundary this way).
void override_host_symbol(std::string_view name, void* address);

// Access of one mapped region of a LoadedImage.
enum class RegionAccess : std::uint8_t { ReadExecute, ReadOnly, ReadWrite };

struct MappedRegion {
  const std::byte* address;
  std::size_t size;  // bytes in use; the protection covers whole pages
  RegionAccess access;
};

// Owns the mapped code/data; released in the destructor (unmapped, or made
// read-write again and kept for reuse by a later load).
class LoadedImage {
 public:
  // Loads a relocatable ELF object for the host machine (x86-64 here).
  static std::shared_ptr<const LoadedImage> load(std::span<const std::byte> object);
  static std::shared_ptr<const LoadedImage> load(std::span<const std::uint8_t> object);

  void* find_symbol(std::string_view name) const noexcept;  // nullptr when absent
  void* symbol(std::string_view name) const;  // throws UndefinedSymbol naming it and a few defined ones
  std::size_t mapped_bytes() const noexcept { return mapping_size_; }

  std::span<const MappedRegion> regions() const noexcept { return regions_; }
  // Far-call stubs the load routed calls through (targets beyond direct reach).
  std::size_t stubs_used() const noexcept { return stubs_used_; }

  LoadedImage(const LoadedImage&) = delete;
  LoadedImage& operator=(const LoadedImage&) = delete;
  ~LoadedImage();

  // Construction is reserved to the loader (make_shared needs a public constructor).
  class Passkey {
    explicit Passkey() = default;
    friend std::shared_ptr<const LoadedImage> detail::load_with_options(
        std::span<const std::byte>, const detail::LinkOptions&);
  };
  LoadedImage(Passkey, void* mapping, std::size_t mapping_size, bool low) noexcept;

 private:
  friend std::shared_ptr<const LoadedImage> detail::load_with_options(
      std::span<const std::byte>, const detail::LinkOptions&);
  void* mapping_;
  std::size_t mapping_size_;
  bool low_;  // mapped below 2 GiB for non-PIC code
  std::vector<MappedRegion> regions_;
  std::vector<std::pair<std::string, void*>> symbols_;  // sorted by name
  std::size_t stubs_used_ = 0;
};

}  // namespace svod
