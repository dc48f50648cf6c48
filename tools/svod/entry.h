// The svod command's entry point. The command is a library, libsvod_command.so
// (every tools/svod/*.cpp), and the `svod` executable a small C launcher
// (launcher.c) that answers `svod --help` and `svod --version` from text made
// at build time and opens the library for everything else: a C program that
// links only the C library starts in about a third of the time of a C++ one
// linking libstdc++, oneTBB and the runtime (docs/ARCHITECTURE.md, "Start-up").
#ifndef SVOD_TOOLS_SVOD_ENTRY_H_
#define SVOD_TOOLS_SVOD_ENTRY_H_

// The library's file name, looked up in the folders of the launcher's RUNPATH
// (the build tree's runtime folder, $ORIGIN/../lib when installed, $ORIGIN in
// the Python package), then the system's (the Debian package).
#define SVOD_COMMAND_LIBRARY "libsvod_command.so"
#define SVOD_COMMAND_ENTRY "svod_command_main"

#ifdef __cplusplus
extern "C" {
#endif

// Runs the command line argv[0..argc) as `svod` would and returns its exit
// status.
__attribute__((visibility("default"))) int svod_command_main(int argc, char** argv);

#ifdef __cplusplus
}
#endif

#endif  // SVOD_TOOLS_SVOD_ENTRY_H_
