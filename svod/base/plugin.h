// Finding and opening svod's plugin libraries: parts built as their own
// shared objects (the in-process LLVM compiler, the mpi communicator) so that
// their heavy dependencies load only into processes that use them. Each is
// looked for beside libsvod_runtime.so first (a build tree, or an install
// moved as a whole), then in the install prefix's library folder. Also how
// the libraries svod opens at run time are tried (NVRTC, NCCL).
#pragma once

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "svod/base/env.h"

namespace svod::detail {

// The folder of the shared object holding this code (libsvod_runtime.so);
// empty when the dynamic loader cannot say.
std::filesystem::path runtime_folder();

// The paths to try for plugin `file_name`, in order: only the value of the
// environment variable `env_var` when it is set; otherwise beside the
// runtime, then the install library folder (once, when they are the same).
std::vector<std::string> plugin_candidates(EnvVar env_var, const char* file_name);

// dlopen()s `path` with `flags` and looks up `symbol` in it. On failure
// returns null and appends a line to `tried` saying why (the loader's own
// message, or the missing symbol), for an error listing every path tried.
// A library that opened stays open: plugins are never closed.
void* open_plugin_symbol(const std::string& path, int flags, const char* symbol, std::string& tried);

// dlopen()s the first of `candidates` that opens (RTLD_NOW | RTLD_LOCAL; an
// absolute path that does not exist is skipped) and returns its handle, with
// `path` set to the file the loader opened. Null when none did, with `tried`
// listing each candidate and why ("/x/libfoo.so (no such file), libfoo.so.2
// (<the loader's message>)"). A library that opened stays open.
void* open_first_library(const std::vector<std::string>& candidates, std::string& path, std::string& tried);

// Binds a library's functions to typed pointers by name, remembering the
// first required one the library lacks, for one error that names it:
//   SymbolBinder bind(handle);
//   bind(api.cuInit, "cuInit");
//   if (bind.missing()) ...
class SymbolBinder {
 public:
  explicit SymbolBinder(void* handle) noexcept : handle_(handle) {}
  template <typename Fn>
  void operator()(Fn*& fn, const char* name, bool required = true) noexcept {
    fn = reinterpret_cast<Fn*>(::dlsym(handle_, name));
    if (fn == nullptr && required && missing_ == nullptr) missing_ = name;
  }
  // The first required function not found; null when all were.
  const char* missing() const noexcept { return missing_; }

 private:
  void* handle_;
  const char* missing_ = nullptr;
};

}  // namespace svod::detail
