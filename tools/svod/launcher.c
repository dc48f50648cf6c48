// The `svod` executable: answers `svod` alone, `svod --help` (`-h`, `help`)
// and `svod --version` (`-V`) itself and hands every other command line to the command in
// libsvod_command.so (tools/svod/entry.h says why).
//
// Built twice from this file: svod_launcher_bare without SVOD_LAUNCHER_TEXT
// always opens the library; the build runs it for the two answers
// (launcher_text.cmake) and compiles them into `svod` (svod_launcher_text.h).
#define _GNU_SOURCE  // dlinfo
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

// Opens the command's library from the folders the dynamic linker would search
// for this program (LD_LIBRARY_PATH, its RUNPATH, the system's), by full
// path, else by name (the system's cache: the Debian package). Not by name
// alone: a dlopen interposed by a library loaded first (AddressSanitizer's,
// ThreadSanitizer's) searches on that library's behalf, without this
// program's RUNPATH.
static void* open_command(void) {
  void* self = dlopen(NULL, RTLD_LAZY);
  Dl_serinfo size;
  if (self != NULL && dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0) {
    Dl_serinfo* folders = malloc(size.dls_size);
    if (folders != NULL && dlinfo(self, RTLD_DI_SERINFOSIZE, folders) == 0 &&
        dlinfo(self, RTLD_DI_SERINFO, folders) == 0) {
      for (unsigned int i = 0; i < folders->dls_cnt; ++i) {
        char path[PATH_MAX];
        const int n = snprintf(path, sizeof path, "%s/%s", folders->dls_serpath[i].dls_name, SVOD_COMMAND_LIBRARY);
        if (n > 0 && (size_t)n < sizeof path && access(path, F_OK) == 0) {
          free(folders);
          return dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        }
      }
    }
    free(folders);
  }
  return dlopen(SVOD_COMMAND_LIBRARY, RTLD_LAZY | RTLD_LOCAL);
}

int main(int argc, char** argv) {
#ifdef SVOD_LAUNCHER_TEXT
  if (argc == 1 || (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                                   strcmp(argv[1], "help") == 0))) {
    return answer(svod_help_text, sizeof svod_help_text);
  }
  if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0))
    return answer(svod_version_text, sizeof svod_version_text);
#endif
  void* library = open_command();
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
