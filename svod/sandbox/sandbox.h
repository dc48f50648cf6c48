// Sandboxed runs: a plan's CPU kernels run in a helper process that can do
// nothing but compute on the plan's buffers (docs/SECURITY.md, "The sandbox").
//
// The helper (svod-sandbox-helper, beside libsvod_runtime.so) is executed
// fresh, never forked, so it holds nothing of this process: no keys, no
// other plans, no interpreter heap. It gets three shared-memory files and
// no other descriptor: the kernels' ELF objects, which it loads with svod's
// loader, the plan's buffers (the arena), and a control file for requests
// and replies. Then it locks itself down — no_new_privs, a seccomp-bpf
// allow-list, resource limits, and where the machine allows new user,
// network and IPC namespaces, a mount namespace whose root is empty and
// read-only, and Landlock — and stays alive between runs, so that
// one run is one round trip through the control file (each side spins for
// the other a while, then sleeps on a futex). It runs a kernel's core_id
// slices on as many threads as svod's pool has, made before the lockdown.
//
// This process trusts nothing from the helper: it copies the reply out
// before reading it, bounds every number in it, and enforces the wall-clock
// limit itself. A helper that breaks a rule, faults, dies, hangs or answers
// nonsense is an Error(SandboxViolation) naming the op, the program and the
// rule; the helper is ended and the next run starts a fresh one. No helper
// outlives this process (it is killed with the SandboxedPlan, and by the
// kernel when the thread that started it ends).
//
// Only precompiled CPU kernels (ELF objects), copies and views run
// sandboxed: host functions and collectives would run in this process, and
// device kernels on drivers the sandbox cannot confine, so a plan with any of
// them is refused (Error(Unsupported)). The programs are compiled before the
// sandbox exists: compile untrusted sources with load_confined
// (confined_compile.h), as `svod run --sandbox` does for a plan file's;
// Device::compile compiles in this process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "svod/plan/execution_plan.h"

namespace svod {

struct SandboxOptions {
  // How long one execute() may take in the helper; past it the helper is
  // killed and the run fails.
  std::chrono::milliseconds wall_limit{std::chrono::seconds(60)};
  // Address space the helper may map beyond what it holds once loaded (its
  // code, the kernels and the arena); also the largest single mapping.
  uint64_t memory_limit = uint64_t{1} << 30;
  // Threads the helper spreads a kernel's core_id slices over, as svod's pool
  // does in this process; 0: as many as that pool has (SVOD_THREADS, else
  // the processors).
  int threads = 0;
};

// The layers of confinement a helper has on this machine.
struct SandboxLayers {
  bool no_new_privs = false;
  bool seccomp = false;
  bool resource_limits = false;
  bool user_namespace = false;
  bool network_namespace = false;
  // A mount namespace whose root is an empty read-only tmpfs: no file of the
  // machine can be named.
  bool mount_namespace = false;
  bool ipc_namespace = false;
  bool landlock = false;
  // "no_new_privs, seccomp allow-list, resource limits, ..."
  std::string describe() const;
};

// Whether sandboxed runs work here: starts a helper with nothing to run and
// says which layers it got. Error(Unsupported) naming what is missing when
// the required ones (no_new_privs, seccomp, resource limits) cannot be had.
SandboxLayers probe_sandbox();

// The path of the helper program this process starts; Error(Unsupported)
// when svod was built without libseccomp or the helper is not installed.
std::string sandbox_helper_path();

class SandboxedPlan {
 public:
  // Moves every buffer of `plan` into memory shared with a new helper (each
  // base slot is rebound to its copy there, so the plan's buffers are the
  // sandbox's from now on and results are read from the plan as always) and
  // starts the helper. The plan must outlive this object and its buffers
  // must not be rebound meanwhile (execute() refuses a buffer that left the
  // shared memory). Error(Unsupported) for an op that cannot run sandboxed or
  // when the sandbox is unavailable here, naming what is missing: never an
  // unsandboxed run.
  explicit SandboxedPlan(ExecutionPlan& plan, SandboxOptions options = {});
  ~SandboxedPlan();
  SandboxedPlan(const SandboxedPlan&) = delete;
  SandboxedPlan& operator=(const SandboxedPlan&) = delete;

  // Runs the plan's ops in the helper, one after another in the plan's
  // topological order, with the plan's current variables. Error(Validation)
  // as execute() for variables that do not suit an op; Error(SandboxViolation)
  // when the helper broke a rule, faulted, died or hung.
  void execute();

  // The layers the current helper has.
  const SandboxLayers& layers() const;
  // The helper's process id; 0 when none is running (after a failure, until
  // the next run starts one).
  int helper_pid() const;
  // Bytes of the plan's buffers copied into shared memory when it was made.
  uint64_t copied_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace svod
