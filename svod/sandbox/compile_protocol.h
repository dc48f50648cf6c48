// What a confined compile (confined_compile.h) and the sandbox helper's
// compile mode (tools/sandbox_helper/compile_mode.cpp) say to each other:
// the command line that starts the mode, and how its own failures are told
// apart from the compiler's. One header for both sides.
//
// The helper is started as
//   svod-sandbox-helper --compile --cpu-seconds N --memory BYTES
//                       --library-path FOLDERS --bind SOURCE PATH ...
//                       -- CLANG ARGS...
// with the source on stdin, where each SOURCE is a file or folder of this
// machine with no symbolic link in its name and PATH where clang finds it
// (the name clang and its loader use, which may go through links). It
// confines itself, runs CLANG ARGS (with LD_LIBRARY_PATH=FOLDERS, as its
// loader cannot find its own folder without /proc) reading the
// source from stdin and writing the object to stdout, and ends as clang
// ended (its exit status, or the signal that ended it).
#pragma once

#include <string_view>

namespace svod::sandbox {

inline constexpr std::string_view kCompileMode = "--compile";
inline constexpr std::string_view kCpuSecondsOption = "--cpu-seconds";
inline constexpr std::string_view kMemoryOption = "--memory";
inline constexpr std::string_view kBindOption = "--bind";
inline constexpr std::string_view kLibraryPathOption = "--library-path";
inline constexpr std::string_view kEndOfOptions = "--";

// The helper's exit status when it could not confine itself (clang never
// ran); its last line on stderr, after kSetupPrefix, says why.
inline constexpr int kExitCompileSetupFailed = 90;
inline constexpr std::string_view kSetupPrefix = "svod-sandbox-helper: cannot confine the compiler: ";

}  // namespace svod::sandbox
