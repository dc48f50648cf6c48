// Catching what a killed process leaves running. A test that kills a process
// to see whether its children die with it makes itself the child subreaper
// for the while: a child that outlives its parent is then re-parented to the
// test, which can wait for it and, when it does not end, name and kill it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace svod::test {

// The processes whose parent is `parent` (read from /proc).
std::vector<pid_t> children_of(pid_t parent);

class OrphanCatcher {
 public:
  OrphanCatcher();   // this process becomes the child subreaper
  ~OrphanCatcher();  // kills and reaps every child left; subreaper no more
  OrphanCatcher(const OrphanCatcher&) = delete;
  OrphanCatcher& operator=(const OrphanCatcher&) = delete;

  // Reaps this process's children as they end, until none is left or
  // `timeout` has passed; returns those still running.
  std::vector<pid_t> wait_for_none(std::chrono::milliseconds timeout);
};

}  // namespace svod::test
