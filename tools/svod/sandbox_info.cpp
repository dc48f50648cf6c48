// `svod sandbox-info`: starts a sandbox helper with nothing to run and says
// which layers of confinement it got here, or why it could not start.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "svod/base/error.h"
#include "svod/sandbox/confined_compile.h"
#include "svod/sandbox/sandbox.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"

namespace svod::cli {

int sandbox_info() {
  try {
    const std::string helper = sandbox_helper_path();
    const SandboxLayers layers = probe_sandbox();
    auto mark = [](bool on) { return on ? "active" : "not available here"; };
    fmt::print("sandbox: available (helper {})\n", helper);
    fmt::print("  required: no_new_privs {}, seccomp allow-list {}, resource limits {}\n", mark(layers.no_new_privs),
               mark(layers.seccomp), mark(layers.resource_limits));
    fmt::print("  optional: user namespace {}, network namespace {}, mount namespace with an empty root {}, IPC "
               "namespace {}, Landlock {}\n",
               mark(layers.user_namespace), mark(layers.network_namespace), mark(layers.mount_namespace),
               mark(layers.ipc_namespace), mark(layers.landlock));
    // Sources of sandboxed runs are compiled confined; packages need no compile.
    try {
      const std::vector<std::string> reads = probe_confined_compile();
      fmt::print("  confined compile of sources: works; the compiler reads only (read-only): {}\n",
                 fmt::join(reads, ", "));
    } catch (const Error& e) {
      fmt::print("  confined compile of sources: not available here ({}); sandboxed runs take precompiled objects (packages) only\n",
                 e.what());
    }
    return 0;
  } catch (const Error& e) {
    return fail("sandbox-info", e);
  }
}

}  // namespace svod::cli
