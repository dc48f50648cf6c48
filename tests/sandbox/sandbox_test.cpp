// The sandbox (svod/sandbox/): real kernels compiled by the real compiler,
// run in the real helper process under its real seccomp filter. A corpus of
// hostile kernels, each of which must end as Error(SandboxViolation) naming
// its rule while this process and its other plans go on; legitimate plans,
// whose results must be the bits of an unsandboxed run; the helper's empty
// root, seen from outside, and a helper without it where mount namespaces
// are refused; and a process that refuses seccomp, where the sandbox must
// refuse to run at all.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/plan/execution_plan.h"
#include "svod/sandbox/sandbox.h"
#include "tests/support/seccomp_filter.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;

constexpr size_t kCount = 16;

// A plan of one kernel `entry(float* out, int n)` over a 16-float buffer
// "out" filled with 1.0f, n = 16; with `slices`, `entry(float* out, int n,
// int core_id)` launched over that many core_id slices.
ExecutionPlan one_kernel_plan(const std::string& entry, const std::string& source, int64_t slices = 1) {
  ProgramSpec spec =
      c_kernel(entry, source, {BufferParam{"out", Access::ReadWrite, DType::F32}}, {ScalarParam{"n"}});
  if (slices > 1) {
    spec.scalars.push_back(ScalarParam{"core_id", ScalarType::I32, 0, slices - 1});
    spec.global_size[0] = Expr::constant(slices);
  }
  auto program = cpu_device()->compile(spec);
  Buffer out = cpu_device()->allocate(DType::F32, kCount);
  for (float& v : out.span<float>()) v = 1.0f;
  ExecutionPlanBuilder builder;
  const size_t slot = builder.add_buffer(out, "out");
  builder.add_op(KernelOp{.program = program, .buffers = {slot}, .scalars = {Expr::constant(kCount)}},
                 OpOptions{.id = entry});
  builder.add_output(slot);
  return builder.build();
}

// A legitimate plan: out = in * 2 + 1 over 8 core_id slices, then a copy.
ExecutionPlan legitimate_plan() {
  auto scale = cpu_device()->compile([] {
    auto spec = c_kernel("scale",
                         "void scale(const float* in, float* out, int core_id) {\n"
                         "  for (int i = 0; i < 64; ++i) out[core_id * 64 + i] = in[core_id * 64 + i] * 2.0f + 1.0f;\n"
                         "}",
                         {BufferParam{"in", Access::Read, DType::F32}, BufferParam{"out", Access::Write, DType::F32}},
                         {ScalarParam{"core_id", ScalarType::I32, 0, 7}});
    spec.global_size[0] = Expr::constant(8);
    return spec;
  }());
  Buffer in = cpu_device()->allocate(DType::F32, 512);
  for (size_t i = 0; i < 512; ++i) in.span<float>()[i] = 0.37f * static_cast<float>(i) - 5.0f;
  ExecutionPlanBuilder builder;
  const size_t a = builder.add_buffer(in, "in");
  const size_t b = builder.add_buffer(cpu_device()->allocate(DType::F32, 512), "out");
  const size_t c = builder.add_buffer(cpu_device()->allocate(DType::F32, 512), "copy");
  builder.add_op(KernelOp{.program = scale, .buffers = {a, b}});
  builder.add_op(CopyOp{.dst = c, .src = b});
  builder.add_output(c);
  return builder.build();
}

std::vector<float> values(const ExecutionPlan& plan, std::string_view name) {
  auto s = plan.buffer(*plan.find_buffer(name)).span<float>();
  return {s.begin(), s.end()};
}

SandboxOptions quick(int threads = 0) {
  return SandboxOptions{.wall_limit = std::chrono::milliseconds(700), .threads = threads};
}

// Runs `source` sandboxed (over `slices` core_id slices, on `threads`
// threads) and expects a SandboxViolation whose message holds every
// fragment; then this process runs a legitimate plan, sandboxed in the same
// SandboxedPlan's next helper and unsandboxed, and both are right.
void expect_contained(const std::string& entry, const std::string& source,
                      std::initializer_list<std::string_view> fragments, int64_t slices = 1, int threads = 0) {
  SCOPED_TRACE(entry);
  ExecutionPlan plan = one_kernel_plan(entry, source, slices);
  SandboxedPlan sandboxed(plan, quick(threads));
  ASSERT_TRUE(sandboxed.layers().seccomp);
  const int first = sandboxed.helper_pid();
  try {
    sandboxed.execute();
    ADD_FAILURE() << "expected Error(sandbox violation)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::SandboxViolation) << e.what();
    EXPECT_NE(std::string_view(e.what()).find(entry), std::string_view::npos) << e.what();
    for (auto fragment : fragments)
      EXPECT_NE(std::string_view(e.what()).find(fragment), std::string_view::npos)
          << "\"" << fragment << "\" not in: " << e.what();
  }
  EXPECT_EQ(sandboxed.helper_pid(), 0);  // ended
  EXPECT_NE(::kill(first, 0), 0);        // and reaped: no such process any more

  ExecutionPlan good = legitimate_plan();
  ExecutionPlan reference = legitimate_plan();
  reference.execute();
  SandboxedPlan again(good, quick());
  again.execute();
  EXPECT_EQ(values(good, "copy"), values(reference, "copy"));
}

TEST(Sandbox, LegitimatePlanGivesTheBitsOfAnUnsandboxedRun) {
  ExecutionPlan reference = legitimate_plan();
  reference.execute();
  ExecutionPlan plan = legitimate_plan();
  SandboxedPlan sandboxed(plan);
  EXPECT_GT(sandboxed.copied_bytes(), 0u);
  for (int run = 0; run < 3; ++run) sandboxed.execute();
  EXPECT_EQ(values(plan, "copy"), values(reference, "copy"));
  EXPECT_EQ(values(plan, "out"), values(reference, "out"));
  // The plan runs in-process on the same (shared) memory as well.
  plan.execute();
  EXPECT_EQ(values(plan, "copy"), values(reference, "copy"));
}

// A large launch: y = x * 3 - 1 over 2^20 floats in 256 core_id slices.
ExecutionPlan large_plan() {
  constexpr int64_t kSlices = 256, kPer = 4096;
  ProgramSpec spec = c_kernel("axpb_large",
                              "void axpb_large(const float* x, float* y, int core_id) {\n"
                              "  for (int i = core_id * 4096; i < (core_id + 1) * 4096; ++i) y[i] = x[i] * 3.0f - 1.0f;\n"
                              "}",
                              {BufferParam{"x", Access::Read, DType::F32}, BufferParam{"y", Access::Write, DType::F32}},
                              {ScalarParam{"core_id", ScalarType::I32, 0, kSlices - 1}});
  spec.global_size[0] = Expr::constant(kSlices);
  auto program = cpu_device()->compile(spec);
  Buffer x = cpu_device()->allocate(DType::F32, kSlices * kPer);
  for (size_t i = 0; i < x.span<float>().size(); ++i) x.span<float>()[i] = 0.001f * static_cast<float>(i % 9973) - 4.0f;
  ExecutionPlanBuilder builder;
  const size_t a = builder.add_buffer(x, "x");
  const size_t b = builder.add_buffer(cpu_device()->allocate(DType::F32, kSlices * kPer), "y");
  builder.add_op(KernelOp{.program = program, .buffers = {a, b}});
  builder.add_output(b);
  return builder.build();
}

TEST(Sandbox, ALargeLaunchGivesTheSameBitsOnAnyNumberOfThreads) {
  ExecutionPlan reference = large_plan();
  reference.execute();
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    ExecutionPlan plan = large_plan();
    SandboxedPlan sandboxed(plan, SandboxOptions{.threads = threads});
    for (int run = 0; run < 3; ++run) sandboxed.execute();
    EXPECT_EQ(values(plan, "y"), values(reference, "y"));
  }
}

// Which thread ran each slice: each writes its thread id and sleeps 5 ms, so
// that a pool's other threads have time to take some.
TEST(Sandbox, TheHelperSpreadsSlicesOverItsThreads) {
  ExecutionPlan plan = one_kernel_plan("whose",
                                       "int gettid(void); int usleep(unsigned);\n"
                                       "void whose(float* out, int n, int core_id) {\n"
                                       "  out[core_id] = gettid(); usleep(5000);\n"
                                       "}",
                                       16);
  SandboxedPlan sandboxed(plan, SandboxOptions{.threads = 3});
  sandboxed.execute();
  const std::vector<float> tids = values(plan, "out");
  const std::set<float> distinct(tids.begin(), tids.end());
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_LE(distinct.size(), 3u);
  EXPECT_EQ(distinct.count(1.0f), 0u);  // every slice ran
}

TEST(Sandbox, EveryThreadOfTheHelperIsLockedDown) {
  ExecutionPlan plan = legitimate_plan();
  SandboxedPlan sandboxed(plan, SandboxOptions{.threads = 3});
  const std::string proc = "/proc/" + std::to_string(sandboxed.helper_pid());
  size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task")) {
    ++threads;
    std::ifstream status(task.path() / "status");
    const std::string text((std::istreambuf_iterator<char>(status)), {});
    EXPECT_NE(text.find("NoNewPrivs:\t1"), std::string::npos) << task.path() << text;
    EXPECT_NE(text.find("Seccomp:\t2"), std::string::npos) << task.path() << text;
  }
  EXPECT_EQ(threads, 3u);
  // No processes may be made, threads included, beside the filter's refusal.
  std::ifstream limits(proc + "/limits");
  const std::string text((std::istreambuf_iterator<char>(limits)), {});
  EXPECT_NE(text.find("Max processes             0                    0"), std::string::npos) << text;
}

TEST(Sandbox, RefusesAThreadCountItCannotHave) {
  ExecutionPlan plan = legitimate_plan();
  try {
    SandboxedPlan sandboxed(plan, SandboxOptions{.threads = -1});
    ADD_FAILURE() << "-1 threads were taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string_view(e.what()).find("-1 threads"), std::string_view::npos) << e.what();
  }
}

TEST(Sandbox, TheHelperHoldsNoDescriptorAndLocksItselfDown) {
  ExecutionPlan plan = legitimate_plan();
  SandboxedPlan sandboxed(plan);
  const SandboxLayers& layers = sandboxed.layers();
  EXPECT_TRUE(layers.no_new_privs && layers.seccomp && layers.resource_limits) << layers.describe();
  const std::string proc = "/proc/" + std::to_string(sandboxed.helper_pid());
  std::error_code ec;
  size_t fds = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(proc + "/fd", ec)) ++fds;
  if (!ec) EXPECT_EQ(fds, 0u);
  std::ifstream status(proc + "/status");
  std::string text((std::istreambuf_iterator<char>(status)), {});
  EXPECT_NE(text.find("NoNewPrivs:\t1"), std::string::npos) << text;
  EXPECT_NE(text.find("Seccomp:\t2"), std::string::npos) << text;
}

// Where the helper has its mount namespace, its root is an empty read-only
// tmpfs and the only mount it sees: read from this process through
// /proc/PID/root and /proc/PID/mountinfo, which show the helper's own view.
TEST(Sandbox, TheHelpersRootIsEmptyAndReadOnly) {
  ExecutionPlan reference = legitimate_plan();
  reference.execute();
  ExecutionPlan plan = legitimate_plan();
  SandboxedPlan sandboxed(plan);
  const SandboxLayers& layers = sandboxed.layers();
  if (!layers.mount_namespace) GTEST_SKIP() << "the helper has no mount namespace here; it has " << layers.describe();
  const std::string proc = "/proc/" + std::to_string(sandboxed.helper_pid());
  std::error_code ec;
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(proc + "/root", ec))
    entries.push_back(entry.path().filename().string());
  ASSERT_FALSE(ec) << "listing " << proc << "/root: " << ec.message();
  EXPECT_TRUE(entries.empty()) << "the helper's root holds " << entries.size() << " entries, the first "
                               << entries.front();
  EXPECT_FALSE(std::filesystem::exists(proc + "/root/etc"));
  std::ifstream mountinfo(proc + "/mountinfo");
  ASSERT_TRUE(mountinfo.is_open());
  std::vector<std::string> mounts;
  std::string text;
  for (std::string line; std::getline(mountinfo, line);) {
    mounts.push_back(line);
    text += line + "\n";
  }
  ASSERT_EQ(mounts.size(), 1u) << text;
  // "ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS ... - TYPE SOURCE SUPER-OPTIONS"
  std::istringstream fields(mounts[0]);
  std::string id, parent, device, root, point, options;
  fields >> id >> parent >> device >> root >> point >> options;
  EXPECT_EQ(point, "/") << mounts[0];
  EXPECT_TRUE(options == "ro" || options.starts_with("ro,")) << mounts[0];
  EXPECT_NE(mounts[0].find(" - tmpfs "), std::string::npos) << mounts[0];
  // And kernels run there as anywhere.
  sandboxed.execute();
  EXPECT_EQ(values(plan, "copy"), values(reference, "copy"));
}

TEST(Sandbox, HostileKernelsAreContained) {
  expect_contained("open_shadow",
                   "int open(const char*, int, ...);\n"
                   "void open_shadow(float* out, int n) { out[0] = open(\"/etc/shadow\", 0); }",
                   {"openat", "rule: no files"});
  expect_contained("write_proc_mem",
                   "int open(const char*, int, ...);\n"
                   "void write_proc_mem(float* out, int n) { out[0] = open(\"/proc/self/mem\", 2); }",
                   {"openat", "rule: no files"});
  expect_contained("connect_local",
                   "struct sa { unsigned short f; unsigned short port; unsigned addr; char zero[8]; };\n"
                   "int socket(int, int, int); int connect(int, const void*, unsigned);\n"
                   "void connect_local(float* out, int n) {\n"
                   "  struct sa a = {2, 0x5000, 0x0100007f, {0}};\n"
                   "  out[0] = connect(socket(2, 1, 0), &a, sizeof a);\n"
                   "}",
                   {"socket", "rule: no network"});
  expect_contained("fork_loop", "int fork(void);\nvoid fork_loop(float* out, int n) { for (;;) fork(); }",
                   {"clone", "rule: no new processes"});
  // On every thread of a pool at once, and a thread of its own (glibc makes
  // it with every signal blocked, so the call cannot be named).
  expect_contained("fork_slices",
                   "int fork(void);\nvoid fork_slices(float* out, int n, int core_id) { for (;;) fork(); }",
                   {"clone", "rule: no new processes"}, 8, 4);
  expect_contained("thread_of_its_own",
                   "struct pthread_attr; int pthread_create(unsigned long*, const struct pthread_attr*,\n"
                   "                                        void* (*)(void*), void*);\n"
                   "static void* idle(void* arg) { return arg; }\n"
                   "void thread_of_its_own(float* out, int n, int core_id) {\n"
                   "  unsigned long thread; out[0] = pthread_create(&thread, 0, idle, 0);\n"
                   "}",
                   {"SIGSYS", "rule: only the allow-list's system calls"}, 2, 2);
  expect_contained("exec_shell",
                   "int execve(const char*, char* const*, char* const*);\n"
                   "void exec_shell(float* out, int n) { char* argv[] = {\"/bin/sh\", 0}; execve(\"/bin/sh\", argv, 0); }",
                   {"execve", "rule: no programs"});
  expect_contained("map_exec",
                   "void* mmap(void*, unsigned long, int, int, int, long);\n"
                   "void map_exec(float* out, int n) { out[0] = mmap(0, 4096, 7, 0x22, -1, 0) != 0; }",
                   {"mmap", "rule: no executable memory"});
  expect_contained("kill_parent",
                   "int getppid(void); int kill(int, int);\n"
                   "void kill_parent(float* out, int n) { kill(getppid(), 9); }",
                   {"kill", "rule: no signals to other processes"});
  expect_contained("ptrace_parent",
                   "int getppid(void); long ptrace(int, int, void*, void*);\n"
                   "void ptrace_parent(float* out, int n) { ptrace(16, getppid(), 0, 0); }",
                   {"ptrace", "rule: no access to other processes"});
  expect_contained("read_parent",
                   "struct iov { void* base; unsigned long len; };\n"
                   "int getppid(void);\n"
                   "long process_vm_readv(int, const struct iov*, unsigned long, const struct iov*, unsigned long,"
                   " unsigned long);\n"
                   "void read_parent(float* out, int n) {\n"
                   "  struct iov local = {out, 4}, remote = {(void*)0x400000, 4};\n"
                   "  process_vm_readv(getppid(), &local, 1, &remote, 1, 0);\n"
                   "}",
                   {"process_vm_readv", "rule: no access to other processes"});
  expect_contained("allocate_64g",
                   "void* malloc(unsigned long);\n"
                   "void allocate_64g(float* out, int n) { char* p = malloc(64ull << 30); if (p) p[0] = 1; out[0] = p != 0; }",
                   {"mmap", "rule: no mapping larger than the memory limit"});
  expect_contained("spin", "void spin(float* out, int n) { volatile int x = 0; for (;;) x++; }",
                   {"wall-clock limit of 0.7 s", "rule: wall-clock limit"});
  expect_contained("sleep_forever", "unsigned sleep(unsigned);\nvoid sleep_forever(float* out, int n) { for (;;) sleep(1000); }",
                   {"rule: wall-clock limit"});
  expect_contained("raise_kill", "int raise(int);\nvoid raise_kill(float* out, int n) { raise(9); }",
                   {"ended by SIGKILL"});
  expect_contained("write_past", "void write_past(float* out, int n) { for (int i = 0; i < 100000; ++i) out[i] = 2.0f; }",
                   {"SIGSEGV", "0 bytes past the end of buffer 0 (\"out\")", "rule: only the plan's buffers"});
  // A fault on any thread of a pool is caught and named as on the main one.
  expect_contained("write_past_slices",
                   "void write_past_slices(float* out, int n, int core_id) {\n"
                   "  for (int i = 0; i < 100000; ++i) out[i] = core_id;\n"
                   "}",
                   {"SIGSEGV", "past the end of buffer 0 (\"out\")", "rule: only the plan's buffers"}, 8, 4);
  expect_contained("call_exit", "void exit(int);\nvoid call_exit(float* out, int n) { exit(3); }",
                   {"exited with status 3", "rule: a kernel must not end its process"});
}

// The lines of `svod run ARGS` that carry results (values, checksums,
// expectations), with its exit status.
std::pair<std::string, int> run_svod(const std::string& args) {
  const std::string command = std::string(SVOD_BINARY_DIR) + "/svod run " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string results;
  char line[4096];
  while (pipe != nullptr && std::fgets(line, sizeof line, pipe) != nullptr) {
    const std::string_view text(line);
    if (text.find("xxh3") != std::string_view::npos || text.find("expect:") != std::string_view::npos ||
        text.starts_with("sandbox: "))
      results += text;
  }
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  return {results, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// Every plan file of the project that holds only CPU kernels, copies and
// views: the MLP example, the tuning example's matmul, the named-input plan.
TEST(Sandbox, SvodRunSandboxGivesThePlanFilesBits) {
  for (const char* file : {"examples/mlp/plan.json", "examples/tune_matmul/plan.json",
                           "tests/planfile/data/named_inputs.json"}) {
    SCOPED_TRACE(file);
    const std::string plan = std::string(SVOD_SOURCE_DIR) + "/" + file;
    const auto [plain, plain_status] = run_svod(plan);
    const auto [sandboxed, sandboxed_status] = run_svod("--sandbox --repeat 3 " + plan);
    ASSERT_EQ(plain_status, 0) << plain;
    ASSERT_EQ(sandboxed_status, 0) << sandboxed;
    EXPECT_NE(plain.find("xxh3"), std::string::npos) << plain;  // its outputs' checksums are compared
    EXPECT_NE(sandboxed.find("sandbox: no_new_privs, seccomp allow-list"), std::string::npos) << sandboxed;
    // The same values, checksums and expectations, after the sandbox's line.
    EXPECT_EQ(sandboxed.substr(sandboxed.find('\n') + 1), plain);
  }
}

TEST(Sandbox, AHelperThatDiesWhileIdleIsReplaced) {
  ExecutionPlan plan = legitimate_plan();
  SandboxedPlan sandboxed(plan);
  const int first = sandboxed.helper_pid();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  for (int i = 0; i < 200 && ::kill(first, 0) == 0; ++i) usleep(5000);  // a zombie answers kill(0) too: wait a little
  sandboxed.execute();
  EXPECT_NE(sandboxed.helper_pid(), first);
}

TEST(Sandbox, RefusesWhatItCannotConfine) {
  ExecutionPlanBuilder builder;
  const size_t a = builder.add_buffer(cpu_device()->allocate(DType::F32, 4), "a");
  register_custom_function("sandbox_test_noop",
                           {[](std::span<const Buffer>, const Attrs&, const VariableValues&) {},
                            [](std::span<const Buffer> b, const Attrs&) {
                              return std::vector<Access>(b.size(), Access::Write);
                            }});
  builder.add_op(CustomOp{.name = "sandbox_test_noop", .buffers = {a}});
  ExecutionPlan plan = builder.build();
  try {
    SandboxedPlan sandboxed(plan);
    ADD_FAILURE() << "a host function was sandboxed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string_view(e.what()).find("host function \"sandbox_test_noop\""), std::string_view::npos)
        << e.what();
  }
}

// A filter under which seccomp() fails with EPERM and prctl cannot set a
// filter either, as in a container that refuses seccomp; every other call is
// allowed, so the helper starts and fails only there.
sock_filter kRefuseSeccomp[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

TEST(Sandbox, RefusesToRunWhereSeccompIsRefused) {
  ExecutionPlan plan = legitimate_plan();
  const int status = test::exit_status_under_filter(kRefuseSeccomp, [&] {
    try {
      SandboxedPlan sandboxed(plan);
      return 11;  // it ran: never
    } catch (const Error& e) {
      const std::string_view what = e.what();
      const bool named = e.kind() == ErrorKind::Unsupported && what.find("seccomp") != std::string_view::npos &&
                         what.find("nothing ran") != std::string_view::npos;
      if (!named) std::fprintf(stderr, "%s\n", e.what());
      return named ? 0 : 12;
    }
  });
  EXPECT_EQ(status, 0) << "10: no filter, 11: ran, 12: the wrong error";
}

// A filter under which unshare() of a new mount namespace fails with EPERM,
// as on a machine that refuses them; every other call is allowed.
sock_filter kRefuseMountNamespaces[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // the flags' low half (little-endian)
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWNS, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

// The empty root is optional: where mount namespaces are refused the helper
// runs without it, in the machine's root, and says so.
TEST(Sandbox, RunsWithoutTheEmptyRootWhereMountNamespacesAreRefused) {
  ExecutionPlan reference = legitimate_plan();
  reference.execute();
  ExecutionPlan plan = legitimate_plan();
  const int status = test::exit_status_under_filter(kRefuseMountNamespaces, [&] {
    try {
      SandboxedPlan sandboxed(plan);
      const SandboxLayers& layers = sandboxed.layers();
      if (layers.mount_namespace || !layers.seccomp) return 11;
      if (!std::filesystem::exists("/proc/" + std::to_string(sandboxed.helper_pid()) + "/root/etc")) return 12;
      sandboxed.execute();
      return values(plan, "copy") == values(reference, "copy") ? 0 : 13;
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 14;
    }
  });
  EXPECT_EQ(status, 0) << "10: no filter, 11: the wrong layers, 12: an empty root, 13: the wrong bits, 14: an error";
}

}  // namespace
}  // namespace svod
