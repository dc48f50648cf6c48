#include "svod/loader/shared_library.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "svod/base/error.h"
#include "svod/base/file_read.h"

namespace svod {
namespace {

// dlerror() text, which glibc phrases "<path>: undefined symbol: <name>" when
// a needed symbol is missing.
std::string last_dl_error() {
  const char* text = dlerror();
  return text != nullptr ? text : "unknown dlopen error";
}

}  // namespace

std::shared_ptr<const SharedLibrary> SharedLibrary::open_path(const std::string& path, const std::string& shown) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const std::string why = last_dl_error();
    const size_t undefined = why.find("undefined symbol: ");
    if (undefined != std::string::npos)
      throw make_error(ErrorKind::UndefinedSymbol, "shared library {} needs symbol \"{}\", which nothing provides", shown,
                       why.substr(undefined + 18));
    throw make_error(ErrorKind::Load, "cannot open shared library {}: {}", shown, why);
  }
  return std::shared_ptr<const SharedLibrary>(new SharedLibrary(handle, shown));
}

std::shared_ptr<const SharedLibrary> SharedLibrary::open(const std::filesystem::path& path) {
  // dlopen() would wait for a writer on a FIFO: what is not a regular file is
  // refused here (dlopen() takes a name, so this check is by name too).
  if (const RegularFile file = try_open_regular_file(path); file.not_regular())
    throw make_error(ErrorKind::Load, "cannot open shared library {}: it is {}, not a regular file", path.string(),
                     file_type_name(file.status.st_mode));
  return open_path(path.string(), path.string());
}

std::shared_ptr<const SharedLibrary> SharedLibrary::open_image(std::span<const std::byte> image,
                                                                std::string_view label) {
  static std::atomic<uint64_t> serial{0};
  detail::PrivateFolder folder("a shared library");
  const std::filesystem::path file = folder.path() / fmt::format("{}-{}.so", serial++, label);
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
    out.close();
    if (!out) throw make_error(ErrorKind::Io, "cannot write shared library {}: {}", file.string(), std::strerror(errno));
  }
  return open_path(file.string(), std::string(label) + ".so");
}

void* SharedLibrary::find_symbol(std::string_view name) const noexcept {
  const std::string key(name);
  dlerror();
  void* address = dlsym(handle_, key.c_str());
  if (address == nullptr) return nullptr;
  // dlsym also searches the library's dependencies (libm, libc); the entry
  // must be this library's own.
  link_map* own = nullptr;
  link_map* holder = nullptr;
  Dl_info info{};
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &own) != 0 ||
      dladdr1(address, &info, reinterpret_cast<void**>(&holder), RTLD_DL_LINKMAP) == 0 || holder != own)
    return nullptr;
  return address;
}

void* SharedLibrary::symbol(std::string_view name) const {
  if (void* address = find_symbol(name)) return address;
  throw make_error(ErrorKind::UndefinedSymbol,
                   "shared library {} defines no symbol \"{}\" (it must exist with default visibility)", name_, name);
}

std::vector<std::span<const std::byte>> SharedLibrary::code_segments() const {
  struct Search {
    const link_map* library = nullptr;
    std::vector<std::span<const std::byte>> found;
  } search;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &search.library) != 0 || search.library == nullptr) return {};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& s = *static_cast<Search*>(data);
        if (info->dlpi_addr != s.library->l_addr || std::strcmp(info->dlpi_name, s.library->l_name) != 0) return 0;
        for (size_t i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_X)) continue;
          s.found.emplace_back(reinterpret_cast<const std::byte*>(info->dlpi_addr + segment.p_vaddr), segment.p_memsz);
        }
        return 1;
      },
      &search);
  return search.found;
}

SharedLibrary::~SharedLibrary() { dlclose(handle_); }

namespace detail {

PrivateFolder::PrivateFolder(std::string_view purpose) {
  const std::filesystem::path base = std::filesystem::temp_directory_path();
  std::string pattern = (base / "svod-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw make_error(ErrorKind::Io, "cannot create a private folder in {} for {}: {}", base.string(), purpose,
                     std::strerror(errno));
  path_ = pattern;
}

PrivateFolder::~PrivateFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace detail

}  // namespace svod
