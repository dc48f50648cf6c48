// Playing a machine that refuses some system calls: a test body run in a
// forked child under a classic-BPF seccomp filter, so that the test process
// itself stays unfiltered.
#pragma once

#include <linux/filter.h>

#include <functional>
#include <span>

namespace svod::test {

// The child's exit status when the filter could not be installed.
inline constexpr int kNoFilter = 10;

// Forks; the child installs `code` as its seccomp filter (after
// no_new_privs) and exits with what `body` returns (kNoFilter when the filter
// did not take). Returns the child's exit status, or -1 when it did not exit.
int exit_status_under_filter(std::span<sock_filter> code, const std::function<int()>& body);

}  // namespace svod::test
