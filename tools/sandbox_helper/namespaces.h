// A root of the sandbox helper's own, for both of its modes: the run helper
// enters an empty one, compile mode one that holds only the toolchain.
//
// Each function returns what failed, or an empty string when it worked: an
// error ends compile mode, while the run helper goes on without the layer.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace svod::sandbox {

// The user and group this process has in its new user namespace: not 0, so
// that a program it executes keeps no capability there.
inline constexpr unsigned kInsideId = 1000;

// Maps this process's user and group (`uid` and `gid`, read before
// unshare(CLONE_NEWUSER)) to kInsideId in the user namespace it entered.
// Making files in the new root's tmpfs needs them mapped.
[[nodiscard]] std::string map_ids(uid_t uid, gid_t gid);

// Replaces this process's root, in the mount namespace it entered, with a
// tmpfs that holds the bound paths and nothing else, made read-only, with the
// old root detached. Each bind is (source, path): `source` of the old root,
// named without symbolic links, bound read-only at `path`; a source that is
// not there is left out. A failure may leave the process between roots.
[[nodiscard]] std::string build_root(const std::vector<std::pair<std::string, std::string>>& binds);

}  // namespace svod::sandbox
