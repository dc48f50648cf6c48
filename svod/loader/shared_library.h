// Shared libraries opened with dlopen(RTLD_NOW | RTLD_LOCAL): the dlopen CPU
// compiler's kernels and prebuilt kernel libraries built elsewhere.
//
// The system's dynamic loader does the linking, so anything a shared library
// may contain works (TLS, constructors, C++), at the cost of a file on the
// way in. A SharedLibrary closes its handle when destroyed; programs hold it
// through shared_ptr, so it is closed when the last program using it goes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace svod {

class SharedLibrary {
 public:
  // Opens a library file. Throws Error(Load) when dlopen refuses it or it is
  // not a regular file (a FIFO is refused, never waited on), or
  // Error(UndefinedSymbol) when a symbol it needs is missing.
  static std::shared_ptr<const SharedLibrary> open(const std::filesystem::path& path);
  // Opens a library image held in memory. dlopen needs a file, and treats a
  // path it has seen before as the library already loaded, so the image is
  // written to a private folder under a name never used before in this
  // process ("<n>-<label>.so"), opened, and the folder removed at once (the
  // mapping outlives the file). Throws as open(), or Error(Io).
  static std::shared_ptr<const SharedLibrary> open_image(std::span<const std::byte> image, std::string_view label);

  // The address of `name` when this library itself defines it (a symbol that
  // only one of its dependencies defines does not count); nullptr otherwise.
  void* find_symbol(std::string_view name) const noexcept;
  // As find_symbol, but throws Error(UndefinedSymbol) naming the symbol.
  void* symbol(std::string_view name) const;
  // The path it was opened from.
  const std::string& name() const noexcept { return name_; }
  // The library's executable segments as mapped (from dl_iterate_phdr).
  std::vector<std::span<const std::byte>> code_segments() const;

  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

 private:
  SharedLibrary(void* handle, std::string name) noexcept : handle_(handle), name_(std::move(name)) {}
  static std::shared_ptr<const SharedLibrary> open_path(const std::string& path, const std::string& shown);

  void* handle_;
  std::string name_;
};

namespace detail {

// A folder that only this process uses (mkdtemp under the system's temporary
// directory), removed with its contents on destruction.
class PrivateFolder {
 public:
  explicit PrivateFolder(std::string_view purpose);
  ~PrivateFolder();
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace detail
}  // namespace svod
