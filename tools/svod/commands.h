// Subcommands of the svod tool; each returns the process exit status.
#pragma once

namespace svod::cli {

int info();
int demo();

}  // namespace svod::cli
