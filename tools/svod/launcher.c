// The `svod` executable: answers `svod --help`, `svod -h` and `svod --version`
// itself and hands every other command line to the command in
// libsvod_command.so (tools/svod/entry.h says why).
//
// Built twice from this file: svod_launcher_bare without SVOD_LAUNCHER_TEXT
// always opens the library; the build runs it for the two answers
// (launcher_text.cmake) and compiles them into `svod` (svod_launcher_text.h).
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "tools/svod/entry.h"

#ifdef SVOD_LAUNCHER_TEXT
#include "svod_launcher_text.h"  // svod_help_text, svod_version_text

static int answer(const unsigned char* text, size_t size) {
  if (fwrite(text, 1, size, stdout) != size || fflush(stdout) != 0) {
    perror("svod: writing to standard output");
    return 1;
  }
  return 0;
}
#endif

int main(int argc, char** argv) {
#ifdef SVOD_LAUNCHER_TEXT
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    return answer(svod_help_text, sizeof svod_help_text);
  }
  if (argc == 2 && strcmp(argv[1], "--version") == 0) return answer(svod_version_text, sizeof svod_version_text);
#endif
  void* library = dlopen(SVOD_COMMAND_LIBRARY, RTLD_LAZY | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "svod: cannot open the svod command's library: %s (an incomplete installation: reinstall svod)\n",
            dlerror());
    return 127;
  }
  int (*command)(int, char**) = NULL;
  *(void**)&command = dlsym(library, SVOD_COMMAND_ENTRY);
  if (command == NULL) {
    fprintf(stderr, "svod: %s has no %s: %s (a library of another svod version: reinstall svod)\n",
            SVOD_COMMAND_LIBRARY, SVOD_COMMAND_ENTRY, dlerror());
    return 127;
  }
  return command(argc, argv);
}
