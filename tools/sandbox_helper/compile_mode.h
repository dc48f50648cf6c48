// The sandbox helper's compile mode (compile_mode.cpp): clang run over
// untrusted source in a confinement that sees only the toolchain.
#pragma once

namespace svod::sandbox {

// Runs the mode for the helper's whole command line (svod/sandbox/compile_protocol.h
// says what it holds); returns only when the command line is malformed, with
// the helper's exit status.
int compile_mode(int argc, char** argv);

}  // namespace svod::sandbox
