// The svod command-line tool.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "svod/base/error.h"
#include "tools/svod/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"svod: compile, load, run and time ML kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SVOD_VERSION);

  auto* info = app.add_subcommand("info", "print the version, toolchain, devices and thread count");
  auto* demo = app.add_subcommand("demo", "compile, load and run a few kernels, printing results and timings");

  CLI11_PARSE(app, argc, argv);
  try {
    if (info->parsed()) return svod::cli::info();
    if (demo->parsed()) return svod::cli::demo();
  } catch (const svod::Error& e) {
    fmt::print(stderr, "svod: error ({}): {}\n", svod::to_string(e.kind()), e.what());
    return 2;
  }
  return 0;
}
