// svod-sandbox-helper: the process a sandboxed plan's kernels run in
// (svod/sandbox/sandbox.h starts it; svod/sandbox/protocol.h is what the two
// say to each other).
//
// It is started fresh (never forked from the parent), with a clean
// environment and only its three shared-memory files. It maps them, loads the
// kernels' objects with svod's ELF loader, and then locks itself down: every
// descriptor closed, resource limits, optional namespaces and Landlock,
// no_new_privs, its pool's threads started, and a seccomp allow-list on every
// thread that leaves futexes, memory that is never executable, clocks and
// sleeping. After that it only runs requests: the parent bumps
// Control::request, the helper runs the ops over the arena (a kernel's
// core_id slices spread over its threads) and answers by setting
// Control::reply. A system call outside the list traps into on_sigsys, which
// writes its name and arguments into the reply and exits; a fault writes the
// signal and the address.
//
// Started with --compile it is something else: clang confined for a source
// nobody vouches for (compile_mode.cpp).
//
// It is built without sanitizers and without libsvod_runtime: only the
// loader, the CPU ABI's callers and libseccomp, so that what runs confined is
// small and a sanitizer's own mappings never meet its address-space limit.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "svod/program/slice_schedule.h"
#include "svod/base/error.h"
#include "svod/loader/elf_loader.h"
#include "svod/program/cpu_abi.h"
#include "svod/sandbox/compile_protocol.h"
#include "svod/sandbox/protocol.h"
#include "tools/sandbox_helper/compile_mode.h"
#include "tools/sandbox_helper/namespaces.h"

namespace {

using namespace svod::sandbox;

Control* control = nullptr;
std::byte* arena = nullptr;
size_t arena_bytes = 0;

// Names of system calls by number, filled before the lockdown so that the
// SIGSYS handler only copies one.
constexpr int kNamedSyscalls = 512;
char syscall_names[kNamedSyscalls][32];

using namespace std::chrono_literals;

void copy_text(char* to, size_t size, const char* from) {
  size_t n = 0;
  for (; n + 1 < size && from[n] != '\0'; ++n) to[n] = from[n];
  to[n] = '\0';
}

// Before the lockdown: tells the parent why the helper cannot serve, and exits.
[[noreturn]] void fail(const std::string& why) {
  if (control != nullptr) {
    copy_text(control->failure, sizeof control->failure, why.c_str());
    control->state.store(static_cast<uint32_t>(HelperState::Failed));
    futex_wake(control->state);
  }
  _exit(kExitSetupFailed);
}

// From a signal handler: the request ends with what `reply` says, and so
// does the helper.
[[noreturn]] void end_request(int status) {
  control->result.op = control->running.load();
  control->reply.store(control->request.load());
  futex_wake(control->reply);
  _exit(status);
}

void on_sigsys(int, siginfo_t* info, void* context) {
  Reply& r = control->result;
  r.outcome = Outcome::Violation;
  r.syscall = info->si_syscall;
  if (info->si_syscall >= 0 && info->si_syscall < kNamedSyscalls)
    copy_text(r.syscall_name, sizeof r.syscall_name, syscall_names[info->si_syscall]);
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  const greg_t* g = uc->uc_mcontext.gregs;
  const uint64_t args[6] = {static_cast<uint64_t>(g[REG_RDI]), static_cast<uint64_t>(g[REG_RSI]),
                            static_cast<uint64_t>(g[REG_RDX]), static_cast<uint64_t>(g[REG_R10]),
                            static_cast<uint64_t>(g[REG_R8]),  static_cast<uint64_t>(g[REG_R9])};
#elif defined(__aarch64__)
  const uint64_t* x = uc->uc_mcontext.regs;
  const uint64_t args[6] = {x[0], x[1], x[2], x[3], x[4], x[5]};
#else
  const uint64_t args[6] = {};
#endif
  for (int k = 0; k < 6; ++k) r.args[k] = args[k];
  end_request(kExitViolation);
}

void on_fault(int signal, siginfo_t* info, void*) {
  Reply& r = control->result;
  r.outcome = Outcome::Fault;
  r.signal = signal;
  const auto* at = static_cast<const std::byte*>(info->si_addr);
  r.address_in_arena = at >= arena && at < arena + arena_bytes;
  r.address = r.address_in_arena ? static_cast<uint64_t>(at - arena) : reinterpret_cast<uint64_t>(at);
  end_request(kExitFault);
}

void install_handlers() {
  static std::byte alternate_stack[64 * 1024];
  const stack_t stack{alternate_stack, 0, sizeof alternate_stack};
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigfillset(&action.sa_mask);
  action.sa_sigaction = on_sigsys;
  sigaction(SIGSYS, &action, nullptr);
  action.sa_sigaction = on_fault;
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(signal, &action, nullptr);
}

void* map_file(int fd, size_t bytes, int protection) {
  void* p = mmap(nullptr, bytes, protection, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail(std::string("cannot map a shared file: ") + std::strerror(errno));
  return p;
}

size_t file_bytes(int fd) {
  struct stat s {};
  if (fstat(fd, &s) != 0) fail(std::string("cannot read a shared file's size: ") + std::strerror(errno));
  return static_cast<size_t>(s.st_size);
}

struct Program {
  std::shared_ptr<const svod::LoadedImage> image;
  void* entry;
};

// Loads every program of the objects file and makes the arena's guards
// inaccessible.
std::vector<Program> load_programs() {
  const size_t bytes = file_bytes(kObjectsFd);
  if (bytes < sizeof(ObjectsHeader)) fail("the objects file is too short");
  const auto* base = static_cast<const std::byte*>(map_file(kObjectsFd, bytes, PROT_READ));
  ObjectsHeader header;
  std::memcpy(&header, base, sizeof header);
  const size_t table = sizeof header + header.programs * sizeof(ProgramEntry) + header.guards * sizeof(GuardRange);
  if (header.version != kProtocolVersion || table > bytes || header.arena_bytes != arena_bytes)
    fail("the objects file does not match this helper");
  std::vector<Program> programs;
  const auto* entries = reinterpret_cast<const ProgramEntry*>(base + sizeof header);
  for (uint32_t p = 0; p < header.programs; ++p) {
    const ProgramEntry& e = entries[p];
    if (e.object_offset > bytes || e.object_bytes > bytes - e.object_offset || e.entry_offset > bytes ||
        e.entry_bytes > bytes - e.entry_offset)
      fail("the objects file's program table points outside it");
    const std::string entry(reinterpret_cast<const char*>(base + e.entry_offset), e.entry_bytes);
    try {
      auto image = svod::LoadedImage::load(std::span(base + e.object_offset, e.object_bytes));
      void* address = image->symbol(entry);
      programs.push_back({std::move(image), address});
    } catch (const svod::Error& error) {
      fail("program " + std::to_string(p) + " (" + entry + "): " + error.what());
    }
  }
  const auto* guards = reinterpret_cast<const GuardRange*>(entries + header.programs);
  for (uint32_t g = 0; g < header.guards; ++g) {
    if (guards[g].offset > arena_bytes || guards[g].bytes > arena_bytes - guards[g].offset) fail("a guard lies outside the arena");
    if (mprotect(arena + guards[g].offset, guards[g].bytes, PROT_NONE) != 0)
      fail(std::string("cannot protect a guard page: ") + std::strerror(errno));
  }
  munmap(const_cast<std::byte*>(base), bytes);
  return programs;
}

// The address space mapped now, from /proc (read before the lockdown).
uint64_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f == nullptr || std::fscanf(f, "%llu", &pages) != 1) fail("cannot read /proc/self/statm");
  std::fclose(f);
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void name_syscalls() {
  for (int nr = 0; nr < kNamedSyscalls; ++nr) {
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    copy_text(syscall_names[nr], sizeof syscall_names[nr], name != nullptr ? name : "");
    std::free(name);
  }
}

// The optional namespaces, each where the machine allows it: user and
// network (no interface but a loopback that is down), IPC, and mount, with a
// root that is an empty read-only tmpfs, so that no file of the machine can
// be named (the objects came from memfds, and nothing is opened after this).
// A root that cannot be built is a layer the helper lacks, not a failure:
// the rest of the lockdown holds without it.
uint32_t optional_layers() {
  uint32_t layers = 0;
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    layers |= kUserNamespace | kNetworkNamespace;
  } else if (unshare(CLONE_NEWNET) == 0) {
    layers |= kNetworkNamespace;
  }
  if (unshare(CLONE_NEWIPC) == 0) layers |= kIpcNamespace;
  // The new root's folders are made by the helper's user, which a user
  // namespace must map (the kernel refuses files of an unmapped owner).
  const bool mapped = (layers & kUserNamespace) == 0 || map_ids(uid, gid).empty();
  if (mapped && unshare(CLONE_NEWNS) == 0 && build_root({}).empty()) layers |= kMountNamespace;
  return layers;
}

// The last optional layer: a Landlock domain that handles every file access
// and allows none, where the kernel has Landlock.
uint32_t landlock() {
#ifdef SYS_landlock_create_ruleset
  struct {
    uint64_t handled_access_fs;
  } attr{(1ull << 13) - 1};  // every file access of Landlock's first ABI
  const long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0) return 0;
  const long restricted = syscall(SYS_landlock_restrict_self, fd, 0);
  close(static_cast<int>(fd));
  return restricted == 0 ? kLandlock : 0;
#else
  return 0;
#endif
}

void limit(int resource, rlim_t value, const char* name) {
  const rlimit r{value, value};
  if (setrlimit(resource, &r) != 0) fail(std::string("cannot set ") + name + ": " + std::strerror(errno));
}

// The allow-list, on every thread of the helper at once (TSYNC: the workers
// were started before it, and none is made after). Everything else traps
// (on_sigsys names it), clone included, but clone3, whose flags a filter
// cannot read, answers ENOSYS as if the kernel lacked it.
void install_filter(uint64_t memory_limit) {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_TRAP);
  if (filter == nullptr) fail("seccomp: libseccomp could not make a filter");
  if (seccomp_attr_set(filter, SCMP_FLTATR_CTL_TSYNC, 1) != 0)
    fail("seccomp: libseccomp cannot load a filter on every thread (TSYNC)");
  int rc = 0;
  for (int nr : {SCMP_SYS(futex), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(rt_sigreturn),
                 SCMP_SYS(restart_syscall), SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),
                 SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(nanosleep),
                 SCMP_SYS(clock_nanosleep), SCMP_SYS(sched_yield), SCMP_SYS(getpid), SCMP_SYS(gettid),
                 SCMP_SYS(getppid), SCMP_SYS(rt_sigprocmask), SCMP_SYS(getrandom)})
    rc |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, nr, 0);
  // Memory, never executable, and no mapping larger than the limit at once.
  rc |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 2, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0),
                         SCMP_A1(SCMP_CMP_LE, memory_limit));
  rc |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
  // Signals to itself only (raise, abort).
  const auto self = static_cast<scmp_datum_t>(getpid());
  rc |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, self));
  rc |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, self));
  rc |= seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0) fail("seccomp: libseccomp refused a rule of the allow-list");
  const int loaded = seccomp_load(filter);
  seccomp_release(filter);
  if (loaded != 0) fail(std::string("seccomp: the kernel refused the filter: ") + std::strerror(-loaded));
}

// The longest each thread spins before it sleeps: the main thread between
// requests (a plan run in a loop sends the next one within microseconds),
// and the pool's threads between a kernel's slices and the next kernel's.
constexpr std::chrono::nanoseconds kRequestSpin = 200us;
constexpr std::chrono::nanoseconds kWorkerSpin = 50us;

// The helper's threads: the main thread and `threads - 1` workers share each
// kernel's core_id slices, as svod's pool does in a process, and as there
// each program's SliceSchedule says whether its slices spread over the
// threads or run one after another on the main thread. The workers
// start after no_new_privs and Landlock, which they inherit with the
// namespaces, and before the seccomp filter, which is loaded on all threads
// at once, so that no thread is ever made under the filter.
class Pool {
 public:
  // Maps the workers' stacks: before the address space is measured for its limit.
  explicit Pool(uint32_t threads) : workers_(threads - 1) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (Worker& w : workers_) {
      // A guard page, the signal stack, a guard page, the stack.
      void* p = mmap(nullptr, 2 * page + kSignalStack + kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
      if (p == MAP_FAILED) fail(std::string("cannot map a thread's stack: ") + std::strerror(errno));
      w.memory = static_cast<std::byte*>(p);
      if (mprotect(w.memory, page, PROT_NONE) != 0 || mprotect(w.memory + page + kSignalStack, page, PROT_NONE) != 0)
        fail(std::string("cannot protect a thread's guard page: ") + std::strerror(errno));
      w.signal_stack = w.memory + page;
      w.stack = w.memory + 2 * page + kSignalStack;
      w.pool = this;
    }
  }

  // Starts the workers and returns once each runs, past the system calls a
  // thread makes as it starts.
  void start() {
    for (Worker& w : workers_) {
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstack(&attr, w.stack, kStack);
      pthread_t thread;
      const int rc = pthread_create(&thread, &attr, &Pool::work, &w);
      pthread_attr_destroy(&attr);
      if (rc != 0) fail(std::string("cannot start the pool's threads: ") + std::strerror(rc));
    }
    wait_for_workers();
  }

  // Calls entry with each core_id in 0 .. slices-1 (args[core_slot]);
  // returns when all slices ran.
  void run(void* entry, uint64_t* args, uint32_t words, uint32_t core_slot, int64_t slices,
           svod::SliceSchedule& schedule) {
    const auto alone = [&] {
      for (int64_t slice = 0; slice < slices; ++slice) {
        args[core_slot] = static_cast<uint64_t>(slice);
        svod::call_kernel(entry, args, words);
      }
    };
    if (workers_.empty() || slices == 1) return alone();
    const svod::SliceSchedule::Choice choice = schedule.next();
    const auto start = std::chrono::steady_clock::now();
    if (choice.spread) {
      // Every worker finished the last job: nobody reads these now.
      job_ = {entry, args, words, core_slot, slices};
      next_.store(0, std::memory_order_relaxed);
      finished_.store(0, std::memory_order_relaxed);
      publish(generation_, generation_.load(std::memory_order_relaxed) + 1, workers_asleep_);
      take_slices();
      wait_for_workers();
    } else {
      alone();
    }
    const auto took = std::chrono::steady_clock::now() - start;
    schedule.record(choice, std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
  }

 private:
  static constexpr size_t kSignalStack = 64 * 1024;
  static constexpr size_t kStack = 8 << 20;  // as a main thread's usual limit

  struct Worker {
    Pool* pool = nullptr;
    std::byte* memory = nullptr;
    std::byte* signal_stack = nullptr;
    std::byte* stack = nullptr;
  };

  struct Job {
    void* entry;
    const uint64_t* args;
    uint32_t words;
    uint32_t core_slot;
    int64_t slices;
  };

  static void* work(void* arg) {
    const Worker& w = *static_cast<const Worker*>(arg);
    Pool& pool = *w.pool;
    const stack_t stack{w.signal_stack, 0, kSignalStack};
    sigaltstack(&stack, nullptr);
    pool.finish();
    uint32_t seen = 0;
    Spin spin(kWorkerSpin);
    bool worked = true;  // spin only after a job: a worker asleep for a second waits for a wake
    for (;;) {
      const uint32_t now = wait_while(pool.generation_, seen, pool.workers_asleep_, worked ? &spin : nullptr, 1s);
      worked = now != seen;
      if (!worked) continue;
      seen = now;
      pool.take_slices();
      pool.finish();
    }
  }

  void take_slices() {
    const Job job = job_;
    uint64_t args[svod::kMaxKernelArgs];
    std::memcpy(args, job.args, job.words * sizeof(uint64_t));
    for (int64_t slice; (slice = next_.fetch_add(1, std::memory_order_relaxed)) < job.slices;) {
      args[job.core_slot] = static_cast<uint64_t>(slice);
      svod::call_kernel(job.entry, args, job.words);
    }
  }

  // A worker is done (with the job, or with starting).
  void finish() {
    finished_.fetch_add(1, std::memory_order_seq_cst);
    if (main_asleep_.load(std::memory_order_seq_cst) != 0) futex_wake(finished_);
  }

  void wait_for_workers() {
    for (uint32_t done; (done = finished_.load(std::memory_order_acquire)) != workers_.size();)
      wait_while(finished_, done, main_asleep_, &finish_spin_, 1s);
  }

  // The words a job changes lie on cache lines of their own (a word and its
  // sleepers' count share one), so that taking slices does not move the
  // line the workers spin on.
  std::vector<Worker> workers_;
  Job job_{};                                         // written by the main thread before it bumps generation_
  Spin finish_spin_{kWorkerSpin};                     // the main thread's, waiting for the workers
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped for each job; the workers wait on it
  std::atomic<uint32_t> workers_asleep_{0};
  alignas(64) std::atomic<int64_t> next_{0};         // the job's next slice
  alignas(64) std::atomic<uint32_t> finished_{0};    // workers done with the job; the main thread waits on it
  std::atomic<uint32_t> main_asleep_{0};
};

// Only the reply's outcome and op are written: whatever else it says ends
// the helper, and a fresh helper's control file is all zero.
void run_request(const std::vector<Program>& programs, std::vector<svod::SliceSchedule>& schedules, Pool& pool) {
  Reply& r = control->result;
  r.op = -1;
  const uint32_t count = control->op_count;
  if (count > Control::kMaxOps) {
    r.outcome = Outcome::BadRequest;
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const RequestOp& op = control->ops[i];
    control->running.store(static_cast<int32_t>(i));
    if (op.kind == OpKind::Kernel) {
      if (op.program >= programs.size() || op.words > svod::kMaxKernelArgs || op.buffers > op.words || op.slices < 1) {
        r.outcome = Outcome::BadRequest;
        r.op = static_cast<int32_t>(i);
        return;
      }
      uint64_t args[svod::kMaxKernelArgs];
      for (uint32_t w = 0; w < op.words; ++w) args[w] = op.word[w];
      for (uint32_t b = 0; b < op.buffers; ++b) args[b] = reinterpret_cast<uint64_t>(arena + op.word[b]);
      void* entry = programs[op.program].entry;
      if (op.core_slot < op.words) {
        pool.run(entry, args, op.words, op.core_slot, op.slices, schedules[op.program]);
      } else {
        svod::call_kernel(entry, args, op.words);
      }
    } else if (op.kind == OpKind::Copy) {
      const uint64_t dst = op.word[0], src = op.word[1], bytes = op.word[2];
      if (dst > arena_bytes || src > arena_bytes || bytes > arena_bytes - dst || bytes > arena_bytes - src) {
        r.outcome = Outcome::BadRequest;
        r.op = static_cast<int32_t>(i);
        return;
      }
      std::memmove(arena + dst, arena + src, bytes);
    } else {
      r.outcome = Outcome::BadRequest;
      r.op = static_cast<int32_t>(i);
      return;
    }
  }
  control->running.store(-1);
  r.outcome = Outcome::Done;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && argv[1] == kCompileMode) return compile_mode(argc, argv);
  if (argc != 2) return kExitSetupFailed;
  const pid_t parent = static_cast<pid_t>(std::strtol(argv[1], nullptr, 10));
  // No helper outlives the thread that started it, nor runs for another process.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitSetupFailed);

  if (file_bytes(kControlFd) < sizeof(Control)) return kExitSetupFailed;
  control = static_cast<Control*>(map_file(kControlFd, sizeof(Control), PROT_READ | PROT_WRITE));
  if (control->version != kProtocolVersion) fail("the control file does not match this helper");
  const uint32_t threads = control->threads;
  if (threads < 1 || threads > Control::kMaxThreads)
    fail("the control file asks for " + std::to_string(threads) + " threads (1 to " +
         std::to_string(Control::kMaxThreads) + " can be had)");
  arena_bytes = file_bytes(kArenaFd);
  if (arena_bytes > 0) arena = static_cast<std::byte*>(map_file(kArenaFd, arena_bytes, PROT_READ | PROT_WRITE));
  const std::vector<Program> programs = load_programs();
  std::vector<svod::SliceSchedule> schedules(programs.size());
  name_syscalls();
  install_handlers();
  Pool pool(threads);
  const uint64_t address_space = mapped_bytes() + control->memory_limit;

  // The namespaces while the helper has one thread (a new user namespace
  // needs that), once the objects are loaded and /proc read: its new root
  // holds nothing.
  uint32_t layers = optional_layers();
  // Nothing of the outside stays open: the files are mapped, and 0, 1 and 2
  // go too, so that a kernel has no descriptor to use even if it could.
  if (syscall(SYS_close_range, 0u, ~0u, 0u) != 0) fail(std::string("close_range: ") + std::strerror(errno));
  limit(RLIMIT_NOFILE, 0, "RLIMIT_NOFILE");
  limit(RLIMIT_FSIZE, 0, "RLIMIT_FSIZE");
  limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
  limit(RLIMIT_AS, address_space, "RLIMIT_AS");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(std::string("no_new_privs: ") + std::strerror(errno));
  layers |= kNoNewPrivs;
  layers |= landlock();
  // The workers inherit no_new_privs and Landlock, both the calling thread's own.
  pool.start();
  // After the workers: the process limit counts threads too.
  limit(RLIMIT_NPROC, 0, "RLIMIT_NPROC");
  layers |= kResourceLimits;
  install_filter(control->memory_limit);
  layers |= kSeccomp;
  control->layers.store(layers);
  // Read before Ready: the parent may send the first request right after it.
  uint32_t seen = control->request.load();
  control->state.store(static_cast<uint32_t>(HelperState::Ready));
  futex_wake(control->state);

  Spin spin(kRequestSpin);
  bool ran = true;  // spin only after a run: asleep for a second, the helper waits for a wake
  for (;;) {
    const uint32_t now = wait_while(control->request, seen, control->helper_asleep, ran ? &spin : nullptr, 1s);
    ran = now != seen;
    if (!ran) {
      if (getppid() != parent) _exit(0);
      continue;
    }
    seen = now;
    run_request(programs, schedules, pool);
    publish(control->reply, seen, control->parent_asleep);
  }
}
