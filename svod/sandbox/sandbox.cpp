#include "svod/sandbox/sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <unordered_map>

#include "svod/base/error.h"
#include "svod/base/plugin.h"
#include "svod/base/thread_pool.h"
#include "svod/base/visit.h"
#include "svod/device/device.h"
#include "svod/program/launch_layout.h"
#include "svod/sandbox/protocol.h"
#include "svod/sandbox/rules.h"
#include "svod/sandbox/shared_memory.h"

namespace svod {
namespace {

using namespace sandbox;

constexpr const char* kHelperName = "svod-sandbox-helper";
constexpr uint32_t kRequiredLayers = kNoNewPrivs | kSeccomp | kResourceLimits;
// The longest execute() spins for the reply before it sleeps. Where the
// helper's threads leave this process a processor, a run's time: this thread
// would have been as busy running it in process, and a woken thread takes
// microseconds to run again. Where they take every processor, a small plan's
// round trip and not much longer: the helper's threads need this one's.
constexpr std::chrono::nanoseconds kReplySpinBeside = std::chrono::milliseconds(1);
constexpr std::chrono::nanoseconds kReplySpin = std::chrono::microseconds(20);

// The processors this process may run on.
int usable_cpus() {
  cpu_set_t set;
  return ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A plan buffer's memory in the arena.
class SandboxStorage final : public Storage {
 public:
  SandboxStorage(Device& device, size_t bytes, std::byte* data, bool read_only, std::shared_ptr<Mapping> arena)
      : Storage(device, bytes, data), arena_(std::move(arena)) {
    if (read_only) set_read_only();
  }

 private:
  std::shared_ptr<Mapping> arena_;
};

SandboxLayers layers_of(uint32_t bits) {
  return {.no_new_privs = (bits & kNoNewPrivs) != 0,
          .seccomp = (bits & kSeccomp) != 0,
          .resource_limits = (bits & kResourceLimits) != 0,
          .user_namespace = (bits & kUserNamespace) != 0,
          .network_namespace = (bits & kNetworkNamespace) != 0,
          .mount_namespace = (bits & kMountNamespace) != 0,
          .ipc_namespace = (bits & kIpcNamespace) != 0,
          .landlock = (bits & kLandlock) != 0};
}

// Where the helper program is: beside libsvod_runtime.so (a build tree, or
// an install moved as a whole), then in the install prefix's library folder;
// named without symbolic links (the loader may have found the runtime through
// /lib, a link to /usr/lib).
std::optional<std::string> find_helper() {
  std::vector<std::filesystem::path> candidates;
  if (auto folder = detail::runtime_folder(); !folder.empty()) candidates.push_back(folder / kHelperName);
  candidates.push_back(std::filesystem::path(SVOD_INSTALL_LIBDIR) / kHelperName);
  for (const auto& path : candidates) {
    if (::access(path.c_str(), X_OK) != 0) continue;
    std::error_code error;
    const std::filesystem::path real = std::filesystem::canonical(path, error);
    return (error ? path : real).string();
  }
  return std::nullopt;
}

// A region of the arena: one storage's bytes that the plan's buffers use,
// ending at most 63 bytes before a guard page.
struct Region {
  uint64_t data;   // offset of its first byte
  uint64_t bytes;  // its bytes
  uint64_t guard;  // offset of the guard page after it
  std::string name;  // how errors name it: the first slot over it
};

// A kernel op as it goes to the helper, fixed when the sandbox is made.
struct KernelEntry {
  size_t op;
  uint32_t program;
  uint32_t buffers;
  uint32_t core_slot;  // UINT32_MAX: no core_id
};

struct CopyEntry {
  size_t op;
  size_t dst;
  size_t src;
};

}  // namespace

struct SandboxedPlan::State {
  ExecutionPlan* plan;
  SandboxOptions options;
  std::string helper;
  Fd control_fd, objects_fd, arena_fd;
  std::unique_ptr<Mapping> control_map;
  Control* control = nullptr;
  std::shared_ptr<Mapping> arena;
  std::vector<Region> regions;
  std::vector<GuardRange> guards;  // the arena's pages no buffer owns
  std::vector<std::variant<KernelEntry, CopyEntry>> ops;  // in the order they run
  std::vector<std::string> program_names;
  pid_t pid = 0;
  SandboxLayers layers;
  uint64_t copied = 0;
  Spin reply_spin{kReplySpin};  // set for each helper by its threads

  void move_buffers();
  void write_objects(const std::vector<std::shared_ptr<const Program>>& programs);
  void start();
  void kill_helper();
  void encode();
  [[noreturn]] void fail(std::string_view what, std::string_view rule);
  std::string op_title(int32_t position) const;
  std::string where(uint64_t offset) const;
  std::optional<int> reap(bool wait);
};

std::string SandboxLayers::describe() const {
  std::vector<std::string> names;
  if (no_new_privs) names.push_back("no_new_privs");
  if (seccomp) names.push_back("seccomp allow-list");
  if (resource_limits) names.push_back("resource limits (address space, files, file size, processes)");
  if (user_namespace) names.push_back("user namespace");
  if (network_namespace) names.push_back("network namespace");
  if (mount_namespace) names.push_back("mount namespace (empty root)");
  if (ipc_namespace) names.push_back("IPC namespace");
  if (landlock) names.push_back("Landlock (no file access)");
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

std::string sandbox_helper_path() {
#if !SVOD_HAVE_SECCOMP
  throw make_error(ErrorKind::Unsupported, "the sandbox is unavailable: svod was built without libseccomp");
#else
  if (auto path = find_helper()) return *path;
  throw make_error(ErrorKind::Unsupported,
                   "the sandbox is unavailable: its helper {} is neither beside libsvod_runtime.so ({}) nor in {}",
                   kHelperName, detail::runtime_folder().string(), SVOD_INSTALL_LIBDIR);
#endif
}

// Each storage the plan's base slots use becomes a region of the arena, its
// bytes copied there, and every base slot is rebound to its region (views
// follow their base).
void SandboxedPlan::State::move_buffers() {
  struct Use {
    std::shared_ptr<Storage> storage;
    size_t lo = SIZE_MAX, hi = 0;
    std::vector<size_t> slots;
  };
  std::map<uint64_t, Use> uses;
  std::vector<uint64_t> order;
  for (size_t slot = 0; slot < plan->buffer_count(); ++slot) {
    if (plan->view(slot)) continue;
    const Buffer& b = plan->buffer(slot);
    if (!b.is_host() || !b.device().memory_is_host())
      throw make_error(ErrorKind::Unsupported, "sandbox: buffer {} (\"{}\") is on {}: sandboxed runs take CPU plans only",
                       slot, plan->buffer_name(slot), b.device().name());
    auto [it, added] = uses.try_emplace(b.storage_id());
    if (added) order.push_back(b.storage_id());
    Use& use = it->second;
    use.storage = b.storage_ptr();
    use.lo = std::min(use.lo, b.byte_offset());
    use.hi = std::max(use.hi, b.byte_offset() + b.bytes());
    use.slots.push_back(slot);
  }
  const size_t page = page_size();
  uint64_t at = page;  // a guard page first
  guards = {{0, page}};
  for (uint64_t id : order) {
    Use& use = uses[id];
    const size_t span = use.hi - use.lo;
    const size_t pages = round_up(std::max<size_t>(round_up(span, 64), 1), page);
    const size_t slot = use.slots.front();
    regions.push_back({at + pages - round_up(span, 64), span, at + pages,
                       plan->buffer_name(slot).empty() ? fmt::format("buffer {}", slot)
                                                       : fmt::format("buffer {} (\"{}\")", slot, plan->buffer_name(slot))});
    guards.push_back({at + pages, page});
    at += pages + page;
  }
  arena_fd = shared_file("svod-sandbox-arena", at);
  arena = std::make_shared<Mapping>(arena_fd, at);
  for (size_t r = 0; r < order.size(); ++r) {
    Use& use = uses[order[r]];
    std::byte* data = arena->base + regions[r].data;
    std::memcpy(data, static_cast<const std::byte*>(use.storage->host_data()) + use.lo, regions[r].bytes);
    copied += regions[r].bytes;
    auto storage = std::make_shared<SandboxStorage>(use.storage->device(), regions[r].bytes, data,
                                                    use.storage->read_only(), arena);
    for (size_t slot : use.slots) {
      const Buffer& b = plan->buffer(slot);
      plan->rebind(slot, Buffer(storage, b.dtype(), b.byte_offset() - use.lo, b.bytes()));
    }
  }
}

// The objects file: the program table, the guards, then each program's
// object and entry name.
void SandboxedPlan::State::write_objects(const std::vector<std::shared_ptr<const Program>>& programs) {
  const size_t table = sizeof(ObjectsHeader) + programs.size() * sizeof(ProgramEntry) + guards.size() * sizeof(GuardRange);
  size_t bytes = table;
  std::vector<ProgramEntry> entries;
  for (const auto& program : programs) {
    const auto& object = program->artifact()->artifact.bytes;
    const std::string& entry = program->spec().entry;
    entries.push_back({bytes, object.size(), bytes + object.size(), entry.size()});
    bytes += object.size() + entry.size();
  }
  objects_fd = shared_file("svod-sandbox-objects", bytes);
  Mapping map(objects_fd, bytes);
  const ObjectsHeader header{kProtocolVersion, static_cast<uint32_t>(programs.size()),
                             static_cast<uint32_t>(guards.size()), 0, arena->bytes};
  std::memcpy(map.base, &header, sizeof header);
  // A plan without programs or guards (probe_sandbox's) has empty tables,
  // whose data() may be null, which memcpy must not get even for no bytes.
  if (!entries.empty())
    std::memcpy(map.base + sizeof header, entries.data(), entries.size() * sizeof(ProgramEntry));
  if (!guards.empty())
    std::memcpy(map.base + sizeof header + entries.size() * sizeof(ProgramEntry), guards.data(),
                guards.size() * sizeof(GuardRange));
  for (size_t p = 0; p < programs.size(); ++p) {
    const auto& object = programs[p]->artifact()->artifact.bytes;
    const std::string& entry = programs[p]->spec().entry;
    std::memcpy(map.base + entries[p].object_offset, object.data(), object.size());
    std::memcpy(map.base + entries[p].entry_offset, entry.data(), entry.size());
  }
}

// Reaps the helper when it has ended (waiting for it when `wait`): its raw
// wait status, or nullopt while it runs.
std::optional<int> SandboxedPlan::State::reap(bool wait) {
  if (pid == 0) return std::nullopt;
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &status, wait ? 0 : WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) return std::nullopt;
  pid = 0;
  // ECHILD: someone else reaped it (SIGCHLD ignored); its end is unknown.
  return r < 0 ? 0 : status;
}

void SandboxedPlan::State::kill_helper() {
  if (pid == 0) return;
  ::kill(pid, SIGKILL);
  reap(true);
}

// Starts a helper over the files and waits until it is locked down (or
// says why it cannot be).
void SandboxedPlan::State::start() {
  // A fresh control file for each helper: all zero, so only a few fields
  // need setting (the ops' pages are touched only as requests use them).
  control_map.reset();
  control_fd = shared_file("svod-sandbox-control", sizeof(Control));
  control_map = std::make_unique<Mapping>(control_fd, sizeof(Control));
  control = reinterpret_cast<Control*>(control_map->base);
  control->version = kProtocolVersion;
  control->memory_limit = options.memory_limit;
  control->threads = static_cast<uint32_t>(options.threads > 0 ? options.threads : thread_count());
  reply_spin = Spin(static_cast<int>(control->threads) < usable_cpus() ? kReplySpinBeside : kReplySpin);
  control->running.store(-1);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (int fd = 0; fd < 3; ++fd) posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, control_fd.get(), kControlFd);
  posix_spawn_file_actions_adddup2(&actions, objects_fd.get(), kObjectsFd);
  posix_spawn_file_actions_adddup2(&actions, arena_fd.get(), kArenaFd);
  posix_spawn_file_actions_addclosefrom_np(&actions, kArenaFd + 1);
  const std::string parent = std::to_string(::getpid());
  char* argv[] = {const_cast<char*>(helper.c_str()), const_cast<char*>(parent.c_str()), nullptr};
  char* envp[] = {nullptr};  // a clean environment: nothing of this process's
  pid_t child = 0;
  const int rc = ::posix_spawn(&child, helper.c_str(), &actions, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw make_error(ErrorKind::Unsupported, "the sandbox is unavailable: cannot start {}: {}", helper, std::strerror(rc));
  pid = child;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (control->state.load() == static_cast<uint32_t>(HelperState::Starting)) {
    futex_wait(control->state, static_cast<uint32_t>(HelperState::Starting), std::chrono::milliseconds(20));
    if (control->state.load() != static_cast<uint32_t>(HelperState::Starting)) break;
    if (auto status = reap(false)) {
      throw make_error(ErrorKind::Unsupported, "the sandbox is unavailable: its helper ended while starting ({})",
                       WIFSIGNALED(*status) ? signal_name(WTERMSIG(*status))
                                            : fmt::format("status {}", WEXITSTATUS(*status)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill_helper();
      throw make_error(ErrorKind::Unsupported, "the sandbox is unavailable: its helper did not start within 30 s");
    }
  }
  const auto state = static_cast<HelperState>(control->state.load());
  const uint32_t bits = control->layers.load();
  if (state != HelperState::Ready || (bits & kRequiredLayers) != kRequiredLayers) {
    char failure[sizeof control->failure];
    std::memcpy(failure, control->failure, sizeof failure);
    failure[sizeof failure - 1] = '\0';
    kill_helper();
    throw make_error(ErrorKind::Unsupported, "the sandbox is unavailable here, so nothing ran: {}",
                     state == HelperState::Ready ? fmt::format("its helper lacks a required layer (it has {})",
                                                               layers_of(bits).describe())
                                                 : std::string(failure));
  }
  layers = layers_of(bits);
}

std::string SandboxedPlan::State::op_title(int32_t position) const {
  if (position < 0 || static_cast<size_t>(position) >= ops.size()) return "between ops";
  return std::visit(
      [&](const auto& entry) {
        std::string title = plan->op_title(entry.op);
        if constexpr (std::is_same_v<std::decay_t<decltype(entry)>, KernelEntry>)
          title += fmt::format(" (program {})", program_names[entry.program]);
        return title;
      },
      ops[static_cast<size_t>(position)]);
}

// What an arena offset is: a buffer's byte, or the guard after one.
std::string SandboxedPlan::State::where(uint64_t offset) const {
  for (const Region& r : regions) {
    if (offset >= r.data && offset < r.data + r.bytes) return fmt::format("inside {}", r.name);
    if (offset >= r.data + r.bytes && offset < r.guard + page_size())
      return fmt::format("{} bytes past the end of {}", offset - (r.data + r.bytes), r.name);
  }
  return "in a guard page before the first buffer";
}

void SandboxedPlan::State::fail(std::string_view what, std::string_view rule) {
  throw make_error(ErrorKind::SandboxViolation, "{} (rule: {}); the helper was ended, the next run starts a fresh one",
                   what, rule);
}

// The request: each op's words, buffer addresses as arena offsets. What a
// run before wrote already stays untouched, so that the helper's processor
// keeps those cache lines.
void SandboxedPlan::State::encode() {
  const std::byte* base = arena->base;  // never empty: a guard page comes first
  auto offset_of = [&](uint64_t address, size_t op) -> uint64_t {
    const auto* a = reinterpret_cast<const std::byte*>(address);
    if (a < base || a > base + arena->bytes)
      throw make_error(ErrorKind::Validation,
                       "{}: a buffer of the op is not in the sandbox's shared memory (it was rebound after the "
                       "sandbox was made)",
                       plan->op_title(op));
    return static_cast<uint64_t>(a - base);
  };
  for (size_t position = 0; position < ops.size(); ++position) {
    RequestOp out{};
    visit_exhaustively(
        ops[position],
        [&](const KernelEntry& k) {
          const ExecutionPlan::HostLaunch launch = plan->host_launch(k.op);
          out.kind = OpKind::Kernel;
          out.program = k.program;
          out.words = static_cast<uint32_t>(launch.words.size());
          out.buffers = k.buffers;
          out.core_slot = k.core_slot;
          out.index = static_cast<uint32_t>(k.op);
          out.slices = launch.slices;
          for (size_t w = 0; w < launch.words.size(); ++w)
            out.word[w] = w < k.buffers ? offset_of(launch.words[w], k.op) : launch.words[w];
        },
        [&](const CopyEntry& c) {
          const Buffer& dst = plan->buffer(c.dst);
          const Buffer& src = plan->buffer(c.src);
          out.kind = OpKind::Copy;
          out.index = static_cast<uint32_t>(c.op);
          out.words = 3;
          out.word[0] = offset_of(reinterpret_cast<uint64_t>(dst.data()), c.op);
          out.word[1] = offset_of(reinterpret_cast<uint64_t>(src.data()), c.op);
          out.word[2] = dst.bytes();
        });
    RequestOp& shared = control->ops[position];
    const size_t bytes = offsetof(RequestOp, word) + out.words * sizeof(uint64_t);
    if (std::memcmp(&shared, &out, bytes) != 0) std::memcpy(&shared, &out, bytes);
  }
  if (control->op_count != ops.size()) control->op_count = static_cast<uint32_t>(ops.size());
}

SandboxedPlan::SandboxedPlan(ExecutionPlan& plan, SandboxOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.plan = &plan;
  s.options = options;
  if (options.threads < 0 || options.threads > static_cast<int>(Control::kMaxThreads))
    throw make_error(ErrorKind::Validation,
                     "sandbox: {} threads asked for; a helper runs 1 to {} (0: as many as svod's pool)", options.threads,
                     Control::kMaxThreads);
  s.helper = sandbox_helper_path();
  // What runs, in order, and the programs it needs: refused before anything
  // is moved or started.
  std::vector<std::shared_ptr<const Program>> programs;
  std::unordered_map<const Program*, uint32_t> program_index;
  const std::vector<size_t> order = plan.topological_order();
  if (order.size() > Control::kMaxOps)
    throw make_error(ErrorKind::Unsupported, "sandbox: the plan has {} ops; a sandboxed run takes at most {}",
                     order.size(), Control::kMaxOps);
  auto refuse = [&](size_t op, std::string_view why) {
    throw make_error(ErrorKind::Unsupported, "sandbox: {}: {}", plan.op_title(op), why);
  };
  for (size_t op : order) {
    visit_exhaustively(
        plan.op(op),
        [&](const KernelOp& k) {
          const Program& program = *k.program;
          const auto& artifact = program.artifact();
          if (!program.device().memory_is_host() || !artifact || artifact->artifact.kind != ArtifactKind::ElfObject)
            refuse(op, fmt::format("program \"{}\" is not a CPU kernel loaded from an ELF object (sandboxed runs "
                                   "load ELF objects only: no shared libraries, no device kernels)",
                                   program.spec().display_name()));
          auto [it, added] = program_index.try_emplace(&program, static_cast<uint32_t>(programs.size()));
          if (added) {
            programs.push_back(k.program);
            s.program_names.push_back(program.spec().display_name());
          }
          const LaunchLayout layout(program.spec());
          const uint32_t buffers = static_cast<uint32_t>(layout.buffer_count());
          const auto core = layout.core_id();
          s.ops.emplace_back(KernelEntry{op, it->second, buffers,
                                         core ? buffers + static_cast<uint32_t>(*core) : UINT32_MAX});
        },
        [&](const CopyOp& c) { s.ops.emplace_back(CopyEntry{op, c.dst, c.src}); },
        [&](const ViewOp&) {},
        [&](const CustomOp& c) {
          refuse(op, fmt::format("host function \"{}\" would run in this process, outside the sandbox", c.name));
        },
        [&](const CollectiveOp&) { refuse(op, "collectives are not sandboxed in this version"); });
  }
  s.move_buffers();
  s.write_objects(programs);
  s.start();
}

SandboxedPlan::~SandboxedPlan() { state_->kill_helper(); }

void SandboxedPlan::execute() {
  State& s = *state_;
  // A helper that ended while idle ended without a kernel running (its
  // starting thread ended, or someone killed it): a fresh one takes over.
  if (s.pid != 0 && s.reap(false)) s.pid = 0;
  if (s.pid == 0) s.start();
  s.encode();
  Control& c = *s.control;
  const uint32_t seq = c.request.load(std::memory_order_relaxed) + 1;
  publish(c.request, seq, c.helper_asleep);
  const auto deadline = std::chrono::steady_clock::now() + s.options.wall_limit;
  bool replied = false;
  std::optional<int> ended;
  // A small run ends within microseconds: spin for those before sleeping,
  // then look at the helper and the clock every 10 ms.
  for (Spin* spin = &s.reply_spin;; spin = nullptr) {
    // The word the helper last wrote, whatever it was: a helper that writes
    // nonsense there makes this wait no busier.
    const uint32_t last = c.reply.load(std::memory_order_acquire);
    if (last == seq || wait_while(c.reply, last, c.parent_asleep, spin, std::chrono::milliseconds(10)) == seq) {
      replied = true;
      break;
    }
    if ((ended = s.reap(false))) break;
    if (std::chrono::steady_clock::now() > deadline) {
      const int32_t running = c.running.load();
      s.kill_helper();
      s.fail(fmt::format("{}: ran past the sandbox's wall-clock limit of {:g} s and was killed", s.op_title(running),
                         std::chrono::duration<double>(s.options.wall_limit).count()),
             "wall-clock limit");
    }
  }
  // Everything the helper says is copied out before it is read.
  Reply reply;
  std::memcpy(static_cast<void*>(&reply), &c.result, sizeof reply);
  const int32_t running = c.running.load();
  if (replied && reply.outcome == Outcome::Done) return;
  s.kill_helper();
  if (!replied) {
    const int status = *ended;
    // The kernel ends the helper with SIGSYS for a refused system call made
    // while SIGSYS was blocked (glibc blocks every signal while it makes a
    // thread), where the handler that names the call cannot run.
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
      s.fail(fmt::format("{}: the sandbox refused a system call made with SIGSYS blocked, so it could not name it, "
                         "and the helper was ended by SIGSYS",
                         s.op_title(running)),
             "only the allow-list's system calls");
    const std::string how = WIFSIGNALED(status) ? fmt::format("was ended by {}", signal_name(WTERMSIG(status)))
                                                : fmt::format("exited with status {}", WEXITSTATUS(status));
    s.fail(fmt::format("{}: the sandbox's helper {} while it ran", s.op_title(running), how),
           WIFSIGNALED(status) ? "the helper must not be ended" : "a kernel must not end its process");
  }
  switch (reply.outcome) {
    case Outcome::Violation: {
      reply.syscall_name[sizeof reply.syscall_name - 1] = '\0';
      const std::string name = reply.syscall_name[0] != '\0' ? std::string(reply.syscall_name)
                                                             : fmt::format("number {}", reply.syscall);
      s.fail(fmt::format("{}: the sandbox refused system call {}({:#x}, {:#x}, {:#x}, ...)", s.op_title(reply.op), name,
                         reply.args[0], reply.args[1], reply.args[2]),
             rule_of(name, reply.args, s.options.memory_limit));
    }
    case Outcome::Fault:
      s.fail(fmt::format("{}: {} at {}", s.op_title(reply.op), signal_name(reply.signal),
                         reply.address_in_arena && reply.address < s.arena->bytes
                             ? fmt::format("{}", s.where(reply.address))
                             : fmt::format("{:#x}, outside the plan's buffers", reply.address)),
             "only the plan's buffers");
    default:
      s.fail(fmt::format("{}: the sandbox's helper answered nonsense (outcome {})", s.op_title(reply.op),
                         static_cast<uint32_t>(reply.outcome)),
             "the helper answers by the protocol");
  }
}

const SandboxLayers& SandboxedPlan::layers() const { return state_->layers; }
int SandboxedPlan::helper_pid() const { return state_->pid; }
uint64_t SandboxedPlan::copied_bytes() const { return state_->copied; }

SandboxLayers probe_sandbox() {
  ExecutionPlan plan = ExecutionPlanBuilder().build();
  const SandboxedPlan sandboxed(plan);
  return sandboxed.layers();
}

}  // namespace svod
