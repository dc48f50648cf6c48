// `svod run` as a user runs it: the real binary on real plan files, checking
// exit statuses (0 ok, 1 expectation failed, 2 cannot run, 3 a kernel
// faulted and was stopped, 124 timed out, 70 a kernel called exit(), 128 + N
// a signal that could not be stopped), the one-line
// error on stderr, written outputs and traces, and the shipped examples.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "svod/base/npy.h"
#include "svod/capi/svod.h"
#include "svod/registry/registry.h"
#include "tests/support/temp_dir.h"
#include "tests/support/orphans.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::TempDir;

struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
  std::string first_err_line() const { return err.substr(0, err.find('\n')); }
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `svod ARGS...`, its status and what it printed; `env`: NAME=VALUE settings
// (or -u NAME) for env(1) to start it with.
RunResult svod_cli(const TempDir& dir, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::string command = "env";
  for (const auto& e : env) command += " " + quote(e);
  command += " " + quote(SVOD_BINARY_DIR "/svod");
  for (const auto& a : args) command += " " + quote(a);
  command += " >" + quote((dir / "stdout.txt").string()) + " 2>" + quote((dir / "stderr.txt").string());
  const int raw = std::system(command.c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(dir / "stdout.txt");
  r.err = read_text(dir / "stderr.txt");
  return r;
}

RunResult svod_run(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  return svod_cli(dir, args);
}

constexpr const char* kAddPlan = R"J({
  "svod_plan": 1,
  "variables": { "N": { "min": 1, "max": 64, "value": 64 } },
  "buffers": {
    "a":   { "dtype": "f32", "count": 64, "init": { "arange": { "start": 0, "step": 1 } } },
    "b":   { "dtype": "f32", "count": 64, "init": { "fill": 2 } },
    "out": { "dtype": "f32", "shape": [8, 8] }
  },
  "programs": {
    "add": { "language": "c", "entry": "add",
             "source": "void add(float* o, const float* a, const float* b, int n) { for (int i = 0; i < n; i++) o[i] = a[i] + b[i]; }",
             "buffers": [ { "name": "o", "access": "write" }, { "name": "a" }, { "name": "b" } ],
             "scalars": [ { "name": "n", "type": "i32" } ], "flops": "n", "bytes": "12*n" }
  },
  "ops": [ { "id": "add", "run": "add", "buffers": ["out", "a", "b"], "scalars": { "n": "N" } },
           { "copy": { "dst": "b", "src": "out" }, "after": ["add"] } ],
  "outputs": { "out": { "npy": "out.npy", "expect": { "values": [2, 3, 4, 5, 6, 7, 8, 9], "prefix": true } } }
})J";

TEST(SvodRun, RunsAPlanAndReportsOutputsAndTimes) {
  TempDir dir;
  const auto plan = dir.write("plan.json", kAddPlan);
  RunResult r = svod_run(dir, {plan.string(), "--repeat", "3", "--profile", (dir / "trace.json").string()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("out: f32 [8, 8] [2, 3, 4, 5, 6, 7, 8, 9, …]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sum 2144"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expect: ok (8 values"), std::string::npos) << r.out;
  // The cold first execution apart from the warm ones, the load on its own.
  EXPECT_NE(r.out.find("\nload: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ms (read, compile or find in the cache, load)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("execute (parallel): first run "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" us (cold), then 2 warm runs: median "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per op over the warm runs ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("median", r.out.find("per op")), r.out.find("median us")) << r.out;
  EXPECT_NE(r.out.find("op 0 (add) kernel add"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("op 1 copy b <- out"), std::string::npos) << r.out;

  // Without --out, an output's npy file lands beside the plan, in its shape.
  NpyArray written = read_npy(dir / "out.npy");
  EXPECT_EQ(written.shape, (std::vector<size_t>{8, 8}));
  EXPECT_EQ(reinterpret_cast<const float*>(written.data.data())[63], 65.0f);

  // One complete event per op per warm execution plus one per warm execution, on named threads.
  EXPECT_NE(r.out.find("wrote trace " + (dir / "trace.json").string() + " (the warm runs)\n"), std::string::npos);
  auto trace = nlohmann::json::parse(read_text(dir / "trace.json"));
  size_t op_events = 0, run_events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "plan") ++run_events;
    if (e["ph"] == "X" && e["cat"] != "plan") {
      ++op_events;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_TRUE(e.contains("tid"));
    }
  }
  EXPECT_EQ(op_events, 4u);
  EXPECT_EQ(run_events, 2u);
}

TEST(SvodRun, OutWritesEveryOutputAndVarsOverride) {
  TempDir dir;
  const auto plan = dir.write("plan.json", kAddPlan);
  RunResult r = svod_run(dir, {plan.string(), "--var", "N=4", "--out", (dir / "results").string(), "--sequential"});
  // With N=4 only the first four sums are computed: the expectation of eight values fails.
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("expect: FAILED: 4 of 8 values differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[4] got 0 expected 6"), std::string::npos) << r.out;
  // One execution is said to be one cold run, never a "median" of one sample.
  EXPECT_NE(r.out.find("execute (sequential): one run, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" us, the first: cold (--repeat N adds warm runs and times them)\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("median 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("median 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per op in the cold run ("), std::string::npos) << r.out;
  EXPECT_EQ(r.first_err_line(), "svod run: 1 output did not match the expectation");
  EXPECT_EQ(read_npy(dir / "results" / "out.npy").count(), 64u);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.npy"));
}

// kAddPlan with a kernel that does not compile, as DIR/plan.json: an error
// about an output path must come before the plan is even loaded.
std::filesystem::path uncompilable_plan(const TempDir& dir) {
  std::string text = kAddPlan;
  const std::string body = "o[i] = a[i] + b[i];";
  text.replace(text.find(body), body.size(), "o[i] = undeclared;");
  return dir.write("plan.json", text);
}

TEST(SvodRun, AnOutFolderThatCannotBeMadeFailsBeforeTheRun) {
  TempDir dir;
  const auto plan = uncompilable_plan(dir);
  dir.write("taken", "a file, not a folder");
  RunResult r = svod_run(dir, {plan.string(), "--out", (dir / "taken" / "results").string()});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("--out"), std::string::npos) << r.err;
  EXPECT_NE(r.first_err_line().find("is not a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("undeclared"), std::string::npos) << r.err;
}

// --input feeds a buffer from an .npy file instead of its init, --output
// writes any buffer after the first execution, as iree-run-module users
// expect; mistakes are named before anything runs.
TEST(SvodRun, InputAndOutputFeedAndWriteBuffersWithoutEditingThePlan) {
  TempDir dir;
  const auto plan = dir.write("plan.json", kAddPlan);
  std::vector<float> tens(64, 10.0f);
  const size_t shape[] = {64};
  write_npy(dir / "tens.npy", DType::F32, shape, std::as_bytes(std::span(tens)));
  RunResult r = svod_run(dir, {plan.string(), "--input", "a=@" + (dir / "tens.npy").string(), "--output",
                               "b=" + (dir / "b.npy").string(), "--output", "out=" + (dir / "o.npy").string()});
  // The plan's expectation is for its own inputs (0 + 2, not 10 + 2): with
  // --input it is not judged, unless --expect asks, and then it fails.
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("out: f32 [8, 8] [12, 12, 12,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expect: not judged"), std::string::npos) << r.out;
  const RunResult judged = svod_run(dir, {plan.string(), "--input", "a=@" + (dir / "tens.npy").string(), "--expect"});
  EXPECT_EQ(judged.status, 1) << judged.out << judged.err;
  EXPECT_NE(judged.out.find("expect: FAILED"), std::string::npos) << judged.out;
  EXPECT_NE(r.out.find("b: wrote " + (dir / "b.npy").string()), std::string::npos) << r.out;
  const NpyArray b = read_npy(dir / "b.npy");  // after the copy of out into b
  ASSERT_EQ(b.count(), 64u);
  EXPECT_EQ(reinterpret_cast<const float*>(b.data.data())[5], 12.0f);
  EXPECT_EQ(read_npy(dir / "o.npy").shape, (std::vector<size_t>{8, 8}));

  std::vector<double> wide(64, 1.0);
  write_npy(dir / "wide.npy", DType::F64, shape, std::as_bytes(std::span(wide)));
  const std::string p = plan.string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--input", "a=@" + (dir / "wide.npy").string()}, p + ": inputs.a: " + (dir / "wide.npy").string() +
                                                             " holds f64 values, the buffer is f32"},
      {{"--input", "z=@" + (dir / "tens.npy").string()}, p + ": inputs.z: the plan has no buffer named \"z\" (its buffers: a, b, out)"},
      {{"--input", "a=@" + (dir / "absent.npy").string()}, p + ": inputs.a: "},
      {{"--input", "a"}, "--input a: expected NAME=@FILE.npy"},
      {{"--output", "z=" + (dir / "z.npy").string()}, "--output z: the plan has no buffer named \"z\""},
      {{"--output", "b=" + (dir / "no" / "b.npy").string()}, "--output: cannot write " + (dir / "no" / "b.npy").string()},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> all = {p};
    all.insert(all.end(), args.begin(), args.end());
    const RunResult bad = svod_run(dir, all);
    EXPECT_EQ(bad.status, 2) << args[1] << bad.out << bad.err;
    EXPECT_NE(bad.first_err_line().find(expected), std::string::npos) << expected << "\n" << bad.err;
    EXPECT_EQ(bad.out.find("execute ("), std::string::npos) << bad.out;
  }
}

// --profile (as bench's --json, --plot and --profile, tune's --json and
// --plot) is refused before the plan is even loaded, not after the run.
TEST(SvodRun, AnOutputFileThatCannotBeWrittenFailsBeforeTheRun) {
  TempDir dir;
  const auto plan = uncompilable_plan(dir);
  for (const std::string& bad : {(dir / "missing" / "trace.json").string(), dir.path().string()}) {
    RunResult r = svod_run(dir, {plan.string(), "--profile", bad});
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_NE(r.first_err_line().find("--profile: cannot write " + bad), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("undeclared"), std::string::npos) << r.err;
  }
}

TEST(SvodRun, PlansThatCannotRunExitWith2AndOneLine) {
  TempDir dir;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = kAddPlan;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return dir.write("plan.json", text.replace(at, from.size(), to)).string();
  };
  struct Case {
    std::vector<std::string> args;
    std::string first_line;  // the start of stderr's first line; {plan} is the plan file
  };
  const std::string plan = (dir / "plan.json").string();
  const std::vector<std::pair<std::function<void()>, Case>> cases = {
      {[&] { with("[\"out\", \"a\", \"b\"]", "[\"out\", \"c\", \"b\"]"); },
       {{plan}, "svod run: error (validation): {plan}: ops[0].buffers[1]: no buffer named \"c\""}},
      {[&] { with("\"svod_plan\": 1", "\"svod_plan\": 1, \"device\": \"CUDA:99\""); },
       {{plan}, "svod run: error (device unavailable): {plan}: device: device \"CUDA:99\""}},
      {[&] { with("o[i] = a[i] + b[i];", "o[i] = a[i] + undeclared;"); },
       {{plan}, "svod run: error (compile): {plan}: programs.add: "}},
      {[&] { with("\"fill\": 2", "\"npy\": \"missing.npy\""); },
       {{plan}, "svod run: error (io): {plan}: buffers.b.init.npy: "}},
      {[&] { dir.write("plan.json", "{ not json"); }, {{plan}, "svod run: error (validation): {plan}: not valid JSON"}},
      {[&] { dir.write("plan.json", kAddPlan); },
       {{plan, "--var", "N=65"}, "svod run: error (validation): {plan}: variables.N: "}},
      {[&] {}, {{plan, "--var", "M=1"}, "svod run: error (validation): {plan}: variables: no variable named \"M\""}},
      {[&] {}, {{plan, "--var", "N=lots"}, "svod run: error (validation): --var N=lots: expected NAME=VALUE"}},
      {[&] {}, {{plan, "--cpu-compiler", "gcc"},
                "svod run: error (validation): --cpu-compiler gcc: expected clang, llvm or dlopen"}},
      {[&] {}, {{(dir / "absent.json").string()}, "svod run: error (io): "}},
      {[&] {}, {{plan, "--profile", (dir / "no" / "such" / "dir" / "t.json").string()},
                "svod run: error (io): --profile: cannot write "}},
  };
  for (const auto& [prepare, c] : cases) {
    SCOPED_TRACE(c.first_line);
    prepare();
    RunResult r = svod_run(dir, c.args);
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    std::string expected = c.first_line;
    if (auto at = expected.find("{plan}"); at != std::string::npos) expected.replace(at, 6, plan);
    EXPECT_EQ(r.first_err_line().substr(0, expected.size()), expected) << r.err;
  }
}

TEST(SvodRun, AFifoForThePlanOrAnInputFailsAtOnceWithStatus2) {
  TempDir dir;
  test::Watchdog watchdog("svod run on a FIFO", std::chrono::seconds(120));
  const auto fifo = dir / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  RunResult r = svod_run(dir, {fifo.string()});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.first_err_line(),
            "svod run: error (io): " + fifo.string() + ": the plan file is a FIFO, not a regular file");

  ASSERT_EQ(::mkfifo((dir / "in.npy").c_str(), 0644), 0);
  std::string text = kAddPlan;
  text.replace(text.find("\"fill\": 2"), 9, "\"npy\": \"in.npy\"");
  const std::string plan = dir.write("plan.json", text).string();
  r = svod_run(dir, {plan});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.first_err_line(), "svod run: error (io): " + plan + ": buffers.b.init.npy: " + (dir / "in.npy").string() +
                                    ": the .npy file is a FIFO, not a regular file");
}

// An output that is a FIFO: written through to a reader; with no reader the
// run fails after kFifoReaderWait (2 s) naming it, instead of waiting for ever.
TEST(SvodRun, AnOutputFifoWithNoReaderFailsInsteadOfWaiting) {
  TempDir dir;
  test::Watchdog watchdog("svod run writing into a FIFO", std::chrono::seconds(120));
  const auto plan = dir.write("plan.json", kAddPlan);
  const auto fifo = dir / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  RunResult r = svod_run(dir, {plan.string(), "--output", "out=" + fifo.string()});
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot write " + fifo.string() + ": the FIFO has no reader (none opened it within 2 s)"),
            std::string::npos)
      << r.err;

  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    received.assign(std::istreambuf_iterator<char>(in), {});
  });
  r = svod_run(dir, {plan.string(), "--output", "out=" + fifo.string()});
  reader.join();
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(received.substr(0, 6), "\x93NUMPY");
}

// A kernel that never returns, one that calls exit(0), and one that writes
// through NULL (issue 24): each run fails with a documented status and names
// the op, never hangs and never exits 0.
TEST(SvodRun, HangingExitingAndFaultingKernelsEndTheRunNamingTheOp) {
  TempDir dir;
  test::Watchdog watchdog("svod run of misbehaving kernels", std::chrono::seconds(120));
  auto plan_with = [&](const std::string& name, const std::string& body) {
    return dir.write(name + ".json", R"({"svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 4}},
      "programs": {"k": {"language": "c", "entry": "k", "buffers": [{"name": "o", "access": "write", "dtype": "f32"}],
                         "source": "void exit(int); void k(float* o) { )" + body + R"( }"}},
      "ops": [{"id": "first", "run": "k", "buffers": ["o"]}, {"id": ")" + name + R"(", "run": "k", "buffers": ["o"], "after": ["first"]}]})")
        .string();
  };
  // The first op runs fine only when the kernel is harmless; here each op misbehaves, so op 0 is named.
  // A kernel spinning in its own code is stopped: the run fails with 124 naming the op.
  RunResult r = svod_run(dir, {"--timeout", "1", plan_with("spins", "volatile int s = 1; while (s) {}")});
  EXPECT_EQ(r.status, 124) << r.out << r.err;
#if defined(__SANITIZE_THREAD__)
  // (ThreadSanitizer holds the stop signal back: the run ends as an unstoppable one.)
  EXPECT_NE(r.err.find("timed out after 1 s (--timeout) running op 0 (first)"), std::string::npos) << r.err;
#else
  EXPECT_NE(r.first_err_line().find("svod run: error (timeout): "), std::string::npos) << r.err;
  EXPECT_NE(r.first_err_line().find("op 0 (first) kernel k failed: kernel stopped: program \"k\" (entry k) on "
                                    "CPU, op 0 (first): the run timed out after 1 s (--timeout)"),
            std::string::npos)
      << r.err;
#endif
  // One waiting in a system call cannot be stopped: a second later the process ends, naming it.
  r = svod_run(dir, {"--timeout", "1", plan_with("pauses", "int pause(void); for (;;) pause();")});
  EXPECT_EQ(r.status, 124) << r.out << r.err;
  EXPECT_NE(r.err.find("timed out after 1 s (--timeout) running op 0 (first) kernel k, which could not be stopped"),
            std::string::npos)
      << r.err;
  // A kernel's exit(0) is stopped at the call like a fault (status 3), never a silent 0.
  r = svod_run(dir, {plan_with("exits", "exit(0);")});
#if defined(__x86_64__)
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("op 0 (first) kernel k failed: kernel fault: the kernel called exit(0), "
                                    "which would end the process"),
            std::string::npos)
      << r.err;
#else
  EXPECT_EQ(r.status, 70) << r.out << r.err;
  EXPECT_NE(r.err.find("svod: program \"k\" called exit() while running on CPU, op 0 (first)"), std::string::npos)
      << r.err;
#endif
  // A fault is stopped: the run fails with status 3 and one error line naming it.
  r = svod_run(dir, {plan_with("faults", "*(volatile float*)0 = 1.0f;")});
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_NE(r.status, 0) << r.out << r.err;  // a sanitizer's own handler may end the process its way
#else
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("svod run: error (kernel fault): "), std::string::npos) << r.err;
  EXPECT_NE(r.first_err_line().find("op 0 (first) kernel k failed: kernel fault: SIGSEGV (invalid memory "
                                    "access) at address 0x0"),
            std::string::npos)
      << r.err;
#endif
  EXPECT_NE(r.err.find("in program \"k\" (entry k) on CPU, op 0 (first)"), std::string::npos) << r.err;
  // A run that finishes in time is not affected by --timeout.
  r = svod_run(dir, {"--timeout", "60", SVOD_SOURCE_DIR "/examples/mlp/plan.json"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// An OpenCL kernel that faults on PoCL runs on PoCL's threads, where svod
// stops nothing: the process ends with the signal, but the report names the
// kernel and the plan op that were in flight (issue 40).
TEST(SvodRun, AFaultingKernelOnADevicesHostThreadsIsNamedBeforeTheProcessEnds) {
  bool host_threads = false;
  for (const auto& d : device_registry().list_devices())
    host_threads |= d.name == "CL:0" && d.available && d.description.find("(CPU,") != std::string::npos;
  if (!host_threads) GTEST_SKIP() << "no OpenCL device that runs kernels on host threads (PoCL)";
  TempDir dir;
  test::Watchdog watchdog("svod run of a faulting OpenCL kernel", std::chrono::seconds(120));
  const std::string plan = dir.write("boom.json", R"({"svod_plan": 1, "device": "CL:0",
    "buffers": {"d": {"dtype": "f32", "count": 64}},
    "programs": {"boom": {"language": "opencl", "entry": "boom", "global_size": [64],
                          "buffers": [{"name": "g", "access": "write"}],
                          "source": "__kernel void boom(__global float* g) { ((__global float*)16)[get_global_id(0)] = 1; }"}},
    "ops": [{"id": "bad", "run": "boom", "buffers": ["d"]}]})")
                               .string();
  RunResult r = svod_run(dir, {plan});
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // a sanitizer's own handler may end it its way
  EXPECT_EQ(r.status, 128 + SIGSEGV) << r.out << r.err;
  EXPECT_NE(r.err.find("on a thread svod did not start, while these device kernels ran on host threads:\n"
                       "  program \"boom\" (entry boom) on CL:0, op 0 (bad)\n"),
            std::string::npos)
      << r.err;
#endif
  EXPECT_NE(r.status, 0) << r.out << r.err;
  // An integer division by zero is one PoCL's own SIGFPE handler steps over: the run goes on, and
  // svod must not have said that the process ends. (Where the division ends it, it is reported.)
  const std::string divide = dir.write("divide.json", R"({"svod_plan": 1, "device": "CL:0",
    "buffers": {"d": {"dtype": "i32", "count": 64}},
    "programs": {"divide": {"language": "opencl", "entry": "divide", "global_size": [64],
                            "buffers": [{"name": "g", "access": "readwrite", "dtype": "i32"}],
                            "source": "__kernel void divide(__global int* g) { size_t i = get_global_id(0); g[i] = 100 / g[i]; }"}},
    "ops": [{"run": "divide", "buffers": ["d"]}]})")
                                 .string();
  r = svod_run(dir, {divide});
  if (r.status == 0)
    EXPECT_EQ(r.err.find("kernel fault"), std::string::npos) << r.err;
  else
    EXPECT_NE(r.err.find("SIGFPE"), std::string::npos) << r.status << r.err;
}

// A run that fails says which of the plan's inputs are intact: those no op
// writes (issue 35, item 4).
TEST(SvodRun, AFailedRunSaysWhichInputsAreIntact) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "a kernel's abort() is stopped at the call on x86-64 only";
#endif
  TempDir dir;
  const std::string plan = dir.write("inputs.json", R"({"svod_plan": 1,
      "buffers": {"x": {"dtype": "f32", "count": 4, "init": {"fill": 2}}, "acc": {"dtype": "f32", "count": 4, "init": {"fill": 1}},
                  "o": {"dtype": "f32", "count": 4}},
      "programs": {"k": {"language": "c", "entry": "k",
                         "source": "void abort(void); void k(const float* x, float* acc, float* o) { acc[0] += x[0]; abort(); }",
                         "buffers": [{"name": "x", "access": "read", "dtype": "f32"}, {"name": "acc", "access": "readwrite", "dtype": "f32"},
                                     {"name": "o", "access": "write", "dtype": "f32"}]}},
      "ops": [{"id": "step", "run": "k", "buffers": ["x", "acc", "o"]}], "outputs": {"o": {}}})")
                                 .string();
  const RunResult r = svod_run(dir, {plan});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("op 0 (step) kernel k failed: kernel fault: the kernel called abort()"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("  | inputs: x intact (no op writes them); acc may be half-written (ops write them)\n"),
            std::string::npos)
      << r.err;
}

// --timeout takes what a deadline can wait for: 1e10 s used to overflow the
// clock and time out at once, nan was taken (issue 35).
TEST(SvodRun, TimeoutsThatNoClockCanWaitForAreRefused) {
  TempDir dir;
  const std::string plan = SVOD_SOURCE_DIR "/examples/mlp/plan.json";
  for (const char* bad : {"1e10", "nan", "inf", "0", "-1", "soon"}) {
    const RunResult r = svod_run(dir, {"--timeout", bad, plan});
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--timeout must be a positive number of seconds, at most 1e9; got " + std::string(bad)),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(svod_run(dir, {"--timeout", "1e9", plan}).status, 0);
}

// A plan of two kernels on one f32[4] "o": op "first" runs `ok` (body
// `ok_body`), then op "second" runs `k` (`k_access`; its source is
// `k_source`, declarations and all, around the body `k_body`). Written as
// DIR/NAME.json; returns its path.
std::string two_kernel_plan(const TempDir& dir, const std::string& name, const std::string& ok_body,
                            const std::string& k_access, const std::string& k_decls, const std::string& k_body) {
  return dir.write(name + ".json", R"({"svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 4}},
      "programs": {"ok": {"language": "c", "entry": "ok", "buffers": [{"name": "o", "access": "write", "dtype": "f32"}],
                          "source": "void ok(float* o) { )" + ok_body + R"( }"},
                   "k": {"language": "c", "entry": "k", "buffers": [{"name": "o", "access": ")" + k_access +
                                       R"(", "dtype": "f32"}],
                         "source": ")" + k_decls + R"( void k(float* o) { )" + k_body + R"( }"}},
      "ops": [{"id": "first", "run": "ok", "buffers": ["o"]}, {"id": "second", "run": "k", "buffers": ["o"], "after": ["first"]}],
      "outputs": {"o": {}}})")
      .string();
}

// Checked mode (issue 24): an overrun that is silent without it faults at
// the first element past the end, named; --check=nan names the first op
// whose output holds a NaN.
TEST(SvodRun, CheckedModeNamesTheOverrunAndTheFirstNan) {
  TempDir dir;
  test::Watchdog watchdog("svod run --check", std::chrono::seconds(120));
  auto plan_with = [&](const std::string& name, const std::string& body) {
    return two_kernel_plan(dir, name, "for (int i = 0; i < 4; i++) o[i] = i;", "readwrite", "float logf(float);", body);
  };
  const std::string overrun = plan_with("overrun", "for (int i = 0; i <= 4; i++) o[i] = 1;");
  RunResult r = svod_run(dir, {overrun});
  EXPECT_EQ(r.status, 0) << r.out << r.err;  // the write lands in the allocator's slack: nobody notices
  r = svod_run(dir, {overrun, "--check"});
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_NE(r.status, 0) << r.out << r.err;
#else
  EXPECT_EQ(r.status, 3) << r.out << r.err;
#endif
  EXPECT_NE(r.err.find("in program \"k\" (entry k) on CPU, op 1 (second)\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("checked mode: wrote 0 bytes past the end of buffer 0 (\"o\", f32[4]) at element 4\n"),
            std::string::npos)
      << r.err;

  const std::string nan = plan_with("nan", "o[2] = logf(o[2] - 5);");
  r = svod_run(dir, {nan});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("o: f32 [4] [0, 1, "), std::string::npos) << r.out;  // then nan or -nan: unnoticed
  EXPECT_NE(r.out.find("nan, 3]"), std::string::npos) << r.out;
  r = svod_run(dir, {nan, "--check=nan"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("op 1 (second) kernel k failed: buffer 0 (\"o\") (f32[4]) holds NaN at "
                                    "element 2: the first non-finite value (checked mode: nan)"),
            std::string::npos)
      << r.err;
  r = svod_run(dir, {overrun, "--check=all"});
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("past the end of buffer 0 (\"o\", f32[4]) at element 4"), std::string::npos) << r.err;

  r = svod_run(dir, {nan, "--check=bogus"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("--check: unknown check \"bogus\""), std::string::npos) << r.err;
  // The examples pass under every check: guard pages and per-op checks change no result.
  r = svod_run(dir, {SVOD_SOURCE_DIR "/examples/mlp/plan.json", "--check=all"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// The newcomer's overrun: a kernel writing 64 floats into a buffer of 16.
// Every host buffer ends at a guard page, so this is a kernel fault with the
// full report, not heap corruption that kills or hangs the process later.
TEST(SvodRun, AnOverrunOfASmallBufferIsAKernelFaultNamingItByDefault) {
  TempDir dir;
  test::Watchdog watchdog("svod run of an overrun", std::chrono::seconds(120));
  const auto plan = dir.write("plan.json", R"J({ "svod_plan": 1,
  "buffers": { "o": { "dtype": "f32", "count": 16 } },
  "programs": { "bad": { "language": "c", "entry": "bad",
    "source": "void bad(float* o) { for (int i = 0; i < 64; i++) o[i] = 1; }",
    "buffers": [ { "name": "o", "access": "write" } ] } },
  "ops": [ { "id": "first", "run": "bad", "buffers": ["o"] } ] })J");
  RunResult r = svod_run(dir, {plan.string()});
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_NE(r.status, 0) << r.out << r.err;
#else
  EXPECT_EQ(r.status, 3) << r.out << r.err;
#endif
  EXPECT_NE(r.err.find("in program \"bad\" (entry bad) on CPU, op 0 (first)\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" 0 bytes past the end of buffer 0 (\"o\", 64 bytes)\n"), std::string::npos) << r.err;
}

// --isolate runs the plan in a child process: whatever ends it, the parent
// says how and in which op; a kernel's exit_group(0) is never a silent 0.
// SVOD_OP_TIMEOUT ends a run whose op hangs, naming it.
TEST(SvodRun, IsolateReportsHowTheRunEndedAndOpTimeoutNamesTheHangingOp) {
  TempDir dir;
  test::Watchdog watchdog("svod run --isolate", std::chrono::seconds(120));
  auto plan_with = [&](const std::string& name, const std::string& body) {
    return two_kernel_plan(dir, name, "o[0] = 1;", "write", "long syscall(long, ...);", body);
  };
  // exit_group(0) made by the kernel's own system call instruction skips every exit handler and
  // svod's routing of syscall(): without isolation the run would end with 0 and print nothing.
#if defined(__x86_64__)
  const std::string exit_group =
      plan_with("exit_group", "long r; __asm__ volatile(\\\"syscall\\\" : \\\"=a\\\"(r) : \\\"a\\\"(231L), "
                              "\\\"D\\\"(0L) : \\\"rcx\\\", \\\"r11\\\", \\\"memory\\\");");
#else
  const std::string exit_group =
      plan_with("exit_group", "register long x8 __asm__(\\\"x8\\\") = 94; register long x0 __asm__(\\\"x0\\\") = 0; "
                              "__asm__ volatile(\\\"svc #0\\\" : \\\"+r\\\"(x0) : \\\"r\\\"(x8) : \\\"memory\\\");");
#endif
  RunResult r = svod_run(dir, {exit_group, "--isolate"});
  EXPECT_EQ(r.status, 70) << r.out << r.err;
  EXPECT_NE(r.err.find("the isolated run ended with status 0 before the plan finished, in op 1 (second)"),
            std::string::npos)
      << r.err;
#if defined(__x86_64__)
  // Through syscall(), svod sees the call: the kernel is stopped there, without isolation.
  r = svod_run(dir, {plan_with("exit_group_call", "syscall(231, 0);")});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.first_err_line().find("op 1 (second) kernel k failed: kernel fault: the kernel called "
                                    "syscall(SYS_exit_group, 0)"),
            std::string::npos)
      << r.err;
#endif

  // A fault the child stopped is its own failure (status 3); a raised SIGABRT is not stopped
  // and ends the child with the signal.
  r = svod_run(dir, {plan_with("faults", "*(volatile float*)0 = 1.0f;"), "--isolate"});
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(r.status, 3) << r.out << r.err;
#endif
  EXPECT_NE(r.err.find("kernel fault: SIGSEGV"), std::string::npos) << r.err;
  r = svod_run(dir, {two_kernel_plan(dir, "aborts", "o[0] = 1;", "write", "int raise(int);", "raise(6);"), "--isolate"});
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(r.status, 128 + SIGABRT) << r.out << r.err;
  EXPECT_NE(r.err.find("the isolated run was ended by SIGABRT (Aborted) in op 1 (second)"), std::string::npos)
      << r.err;
#endif
  EXPECT_NE(r.err.find("svod: kernel fault: SIGABRT"), std::string::npos) << r.err;

  // A run that finishes reports as without --isolate.
  r = svod_run(dir, {plan_with("fine", "o[1] = 2;"), "--isolate"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("o: f32 [4] [1, 2, 0, 0]"), std::string::npos) << r.out;

  // SVOD_OP_TIMEOUT: a spinning kernel is stopped and its op fails with 124; one that
  // cannot be stopped is named and the process ends with 124.
  const std::string spins = plan_with("spins", "volatile int s = 1; while (s) {}");
  ASSERT_EQ(setenv("SVOD_OP_TIMEOUT", "0.5", 1), 0);
  r = svod_run(dir, {spins});
  EXPECT_EQ(r.status, 124) << r.out << r.err;
#if !defined(__SANITIZE_THREAD__)
  EXPECT_NE(r.first_err_line().find("op 1 (second) kernel k failed: kernel stopped: program \"k\" (entry k) on "
                                    "CPU, op 1 (second): it ran past SVOD_OP_TIMEOUT=0.5 s"),
            std::string::npos)
      << r.err;
#endif
  // A plan op whose kernel spins on every core_id slice of the pool: the op's deadline reaches them.
  const std::string slices = dir.write("slices.json", R"({"svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 4}},
      "programs": {"k": {"language": "c", "entry": "k", "buffers": [{"name": "o", "access": "write", "dtype": "f32"}],
                         "scalars": [{"name": "core_id", "type": "i32"}], "global_size": [4],
                         "source": "void k(float* o, int core_id) { volatile int s = 1; while (s) {} }"}},
      "ops": [{"id": "spins", "run": "k", "buffers": ["o"]}]})")
                                   .string();
  r = svod_run(dir, {slices});
  EXPECT_EQ(r.status, 124) << r.out << r.err;
#if !defined(__SANITIZE_THREAD__)
  EXPECT_NE(r.first_err_line().find("failed: kernel stopped: program \"k\" (entry k) on CPU, core_id slice "),
            std::string::npos)
      << r.err;
#endif
  r = svod_run(dir, {plan_with("pauses", "int pause(void); for (;;) pause();")});
  EXPECT_EQ(r.status, 124) << r.out << r.err;
  EXPECT_NE(r.err.find("svod: op 1 (second) kernel k has run for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("past SVOD_OP_TIMEOUT=0.5, and could not be stopped"), std::string::npos) << r.err;
  ASSERT_EQ(setenv("SVOD_OP_TIMEOUT", "soon", 1), 0);
  r = svod_run(dir, {spins});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("SVOD_OP_TIMEOUT=\"soon\": expected a positive number of seconds"), std::string::npos) << r.err;
  ASSERT_EQ(unsetenv("SVOD_OP_TIMEOUT"), 0);
}

// The isolated run dies with svod run: killed with -9, the parent used to
// leave its child spinning in the kernel forever (issue 40).
TEST(SvodRun, TheIsolatedRunDiesWithItsParent) {
  TempDir dir;
  test::Watchdog watchdog("svod run --isolate killed", std::chrono::seconds(120));
  const std::string spins = two_kernel_plan(dir, "spins", "o[0] = 1;", "write", "", "volatile int s = 1; while (s) {}");
  test::OrphanCatcher catcher;
  const pid_t svod = ::fork();
  ASSERT_GE(svod, 0);
  if (svod == 0) {
    const int quiet = ::open("/dev/null", O_WRONLY);
    ::dup2(quiet, STDOUT_FILENO);
    ::dup2(quiet, STDERR_FILENO);
    ::execl(SVOD_BINARY_DIR "/svod", "svod", "run", "--isolate", spins.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  // Once the isolated run exists (and has had a moment to reach the kernel), kill its parent.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (test::children_of(svod).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(test::children_of(svod).empty()) << "svod run --isolate started no child";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(svod, SIGKILL);
  const auto left = catcher.wait_for_none(std::chrono::seconds(10));
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) outlived svod run";
}

TEST(SvodRun, TheFeaturesExamplePasses) {
  TempDir dir;
  RunResult r = svod_run(dir, {SVOD_SOURCE_DIR "/examples/features/plan.json", "--repeat", "2", "--out", dir.path().string()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("z_edge: f32 [4] [595.5, 598.5, 0, 0]"), std::string::npos) << r.out;
  EXPECT_EQ(read_npy(dir / "z.npy").count(), 256u);
  // The bounded variable changes the result: the expectation written for N=200 then fails.
  r = svod_run(dir, {SVOD_SOURCE_DIR "/examples/features/plan.json", "--var", "N=256"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[2] got 601.5 expected 0"), std::string::npos) << r.out;
}

TEST(SvodRun, TheMlpExampleMatchesNumpy) {
  TempDir dir;
  RunResult r = svod_run(dir, {SVOD_SOURCE_DIR "/examples/mlp/plan.json", "--out", dir.path().string()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("probs: f32 [64, 10]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expect: ok (640 values"), std::string::npos) << r.out;
  EXPECT_EQ(read_npy(dir / "probs.npy").shape, (std::vector<size_t>{64, 10}));
}


// --- ranks: the collective plans of tests/planfile/data --------------------

constexpr const char* kCollectivePlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective.json";
constexpr const char* kGatherPlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective4.json";
constexpr const char* kFailedRankPlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective_failed_rank.json";

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(SvodRunRanks, LocalRanksRunACollectivePlanAndOnlyRankZeroPrintsAndWrites) {
  for (int ranks : {1, 2, 4}) {
    TempDir dir;
    const auto out = dir / "results";
    RunResult r = svod_run(dir, {kCollectivePlan, "--ranks", std::to_string(ranks), "--repeat", "3", "--out", out.string()});
    EXPECT_EQ(r.status, 0) << ranks << r.out << r.err;
    EXPECT_EQ(count_of(r.out, "expect: ok"), 3u) << r.out;
    EXPECT_EQ(count_of(r.out, "  wrote "), 3u) << r.out;
    EXPECT_NE(r.out.find("part: f32 [1] [120]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("then 2 warm runs: median"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("op 1 (sum) collective all_reduce"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("[rank"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("ranks: "), ranks == 1 ? std::string::npos : 0) << r.out;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(read_npy(out / "w.npy").count(), 4u);
    // Nothing but the outputs (no temporary files of other ranks' writes).
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out), std::filesystem::directory_iterator()), 3);
  }
  TempDir dir;
  RunResult r = svod_run(dir, {kGatherPlan, "--ranks", "4", "--sequential"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("parts: f32 [8] [0, 4, 8, 12, 16, 20, 24, 28]"), std::string::npos) << r.out;
}

TEST(SvodRunRanks, AllRanksPrintsEveryRankPrefixed) {
  TempDir dir;
  RunResult r = svod_run(dir, {kCollectivePlan, "--ranks", "2", "--all-ranks"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank 0] ranks: 2 (local), this is rank 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] ranks: 2 (local), this is rank 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] part: f32 [1] [120]"), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, "expect: ok"), 6u) << r.out;
  // Every line is prefixed, and rank 0's lines come first.
  EXPECT_LT(r.out.rfind("[rank 0]"), r.out.find("[rank 1]")) << r.out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_EQ(line.rfind("[rank ", 0), 0u) << line;
}

TEST(SvodRunRanks, VarsWorkWithRanksAndRankIsReadOnly) {
  TempDir dir;
  // N = 8: the shards sum to 28, not the 120 the plan expects: every rank
  // reports the mismatch, and the status is 1.
  RunResult r = svod_run(dir, {kCollectivePlan, "--ranks", "4", "--var", "N=8"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("got 28 expected 120"), std::string::npos) << r.out;
  for (int k = 0; k < 4; ++k)
    EXPECT_NE(r.err.find(fmt::format("[rank {}] svod run: 1 output did not match the expectation", k)),
              std::string::npos)
        << r.err;
  r = svod_run(dir, {kCollectivePlan, "--ranks", "2", "--var", "rank=1"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("[rank 1] svod run: error (validation): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("variables: \"rank\" is read-only"), std::string::npos) << r.err;
}

TEST(SvodRunRanks, BadInputFailsEveryRankWithStatus2) {
  TempDir dir;
  const std::string plan = read_text(kCollectivePlan);
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = plan;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  struct Case {
    std::string text;
    const char* message;
  };
  const std::vector<Case> cases = {
      {edited("\"kind\": \"broadcast\"", "\"kind\": \"scatter\""), "ops[3].collective.kind: unknown collective \"scatter\""},
      {edited("\"root\": 0", "\"root\": 2"), "op 3 collective broadcast: root 2 is out of range"},
      {edited("\"op\": \"sum\"", "\"op\": \"mean\""), "ops[1].collective.op: unknown reduction \"mean\""},
  };
  for (const auto& c : cases) {
    const auto path = dir.write("bad.json", c.text);
    RunResult r = svod_run(dir, {path.string(), "--ranks", "2", "--out", (dir / "results").string()});
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    for (int k = 0; k < 2; ++k) {
      EXPECT_NE(r.err.find(fmt::format("[rank {}] svod run: error (validation): {}: ", k, path.string())),
                std::string::npos)
          << r.err;
    }
    EXPECT_EQ(count_of(r.err, c.message), 2u) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "results"));
  }
  // all_gather sizes fit 4 ranks, not 2.
  RunResult r = svod_run(dir, {kGatherPlan, "--ranks", "2"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(count_of(r.err, "collective all_gather: buffer 1 (\"all\") holds 8 elements but must hold 2 ranks x 2"), 2u)
      << r.err;
}

TEST(SvodRunRanks, AFailedRankFailsEveryOtherRankNamingIt) {
  TempDir dir;
  RunResult r = svod_run(dir, {kFailedRankPlan, "--ranks", "4", "--out", (dir / "results").string()});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("[rank 1] svod run: error (validation): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("scalar r = 1 is outside its bounds"), std::string::npos) << r.err;
  for (int k : {0, 2, 3}) {
    EXPECT_NE(r.err.find(fmt::format("[rank {}] svod run: error (execution): ", k)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(fmt::format("local rank {}: all_reduce(f32 x 4, sum) failed because rank 1 failed", k)),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "results"));
}

// A rank stuck in a kernel: the others time out naming it and the group's
// failure stops its kernel, so the run ends at the communicator timeout
// instead of waiting for it for ever (issues 24 and 35); where it cannot be
// stopped, one communicator timeout later the run ends naming it and its op.
TEST(SvodRunRanks, ARankStuckInAKernelEndsTheRunNamingIt) {
  TempDir dir;
  test::Watchdog watchdog("svod run --ranks 2 with a stuck rank", std::chrono::seconds(60));
  ASSERT_EQ(setenv("SVOD_COMM_TIMEOUT", "1", 1), 0);
  RunResult r = svod_run(dir, {SVOD_SOURCE_DIR "/tests/planfile/data/collective_stuck_rank.json", "--ranks", "2"});
  ASSERT_EQ(unsetenv("SVOD_COMM_TIMEOUT"), 0);
  EXPECT_NE(r.err.find("[rank 0] svod run: error (timeout): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("waiting for rank(s) 1"), std::string::npos) << r.err;
#if defined(__SANITIZE_THREAD__)
  // (ThreadSanitizer holds the stop signal back: the stuck rank is named after the grace.)
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("rank(s) 1 still running 1000 ms after another rank failed (running op 0 (spin) kernel spin), "
                       "and could not be stopped"),
            std::string::npos)
      << r.err;
#else
  EXPECT_EQ(r.status, 124) << r.out << r.err;  // the worst rank's: the timeout
  EXPECT_NE(r.err.find("[rank 1] svod run: error (execution): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kernel spin failed: kernel stopped: program \"spin\" (entry spin) on CPU, op 0 "
                       "(spin): its local group failed: local rank 0: all_reduce"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("still running"), std::string::npos) << r.err;  // stopped, not left behind
#endif
}

TEST(SvodRunRanks, RankCountsPastTheLimitAreRefusedBeforeAnythingStarts) {
  TempDir dir;
  for (const char* ranks : {"100000", "1025", "0"}) {
    RunResult r = svod_run(dir, {kCollectivePlan, "--ranks", ranks});
    EXPECT_NE(r.status, 0) << ranks;
    EXPECT_NE(r.err.find("--ranks"), std::string::npos) << ranks << r.err;
    EXPECT_NE(r.err.find("1024"), std::string::npos) << ranks << r.err;
    EXPECT_EQ(r.err.find("system_error"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("ranks: "), std::string::npos) << r.out;
  }
}

TEST(SvodRunRanks, HelpDocumentsTheFlags) {
  TempDir dir;
  RunResult r = svod_run(dir, {"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--all-ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mpirun"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("At most 1024"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--check"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--isolate"), std::string::npos) << r.out;
}

// `svod --version`: the version, the C API's and the LLVM the in-process
// compiler was built with (known at build time: nothing is opened to say it).
TEST(SvodCli, VersionNamesTheApiAndTheLlvm) {
  TempDir dir;
  const std::string out = (dir / "version.txt").string();
  ASSERT_EQ(std::system((quote(SVOD_BINARY_DIR "/svod") + " --version >" + quote(out)).c_str()), 0);
  const std::string text = read_text(out);
  EXPECT_EQ(text.rfind("svod ", 0), 0u) << text;
  const std::string api = fmt::format("(C API {}.{}, in-process compiler LLVM ", SVOD_API_VERSION_MAJOR,
                                      SVOD_API_VERSION_MINOR);
  EXPECT_NE(text.find(api), std::string::npos) << text;
}

// What the parser refuses is said in svod's words, with status 2: the
// command, the option, a plain range, the nearest command or flag.
TEST(SvodCli, MistakesAreNamedPlainlyWithTheNearestWord) {
  TempDir dir;
  const std::string plan = SVOD_SOURCE_DIR "/examples/mlp/plan.json";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"rnu", plan}, "svod: error (usage): \"rnu\" is not a command; did you mean run?"},
      {{"cache", "stat"}, "svod cache: error (usage): \"stat\" is not a command; did you mean stats?"},
      {{"cache"}, "svod cache: error (usage): a command is required: stats, clear"},
      {{"--versio"}, "svod: error (usage): unknown option --versio; did you mean --version?"},
      {{"run", plan, "--profle", "x.json"}, "svod run: error (usage): unknown option --profle; did you mean --profile?"},
      {{"run", plan, "--profle=x.json"}, "unknown option --profle; did you mean --profile?"},
      {{"run", plan, "--zzz"}, "svod run: error (usage): unknown option --zzz\n"},
      {{"run", plan, "extra"}, "svod run: error (usage): unexpected argument \"extra\""},
      {{"run", plan, "--repeat", "0"}, "svod run: error (usage): --repeat must be a whole number of at least 1; got 0"},
      {{"run", plan, "--repeat", "many"}, "--repeat must be a whole number of at least 1; got many"},
      {{"run", plan, "--ranks", "2000"}, "--ranks must be a whole number from 1 to 1024; got 2000"},
      {{"bench", plan, "--warmup", "-1"}, "svod bench: error (usage): --warmup must be a whole number of at least 0; got -1"},
      {{"run"}, "svod run: error (usage): plan is required (Usage: svod run [OPTIONS] plan)"},
      {{"tune"}, "svod tune: error (usage): tune_file is required (Usage: svod tune [OPTIONS] tune_file)"},
  };
  for (const auto& [args, expected] : cases) {
    const RunResult r = svod_cli(dir, args);
    EXPECT_EQ(r.status, 2) << args.front() << ": " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << expected << "\n" << r.err;
    EXPECT_EQ(r.err.find("179769"), std::string::npos) << r.err;  // CLI11's range up to DBL_MAX
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// `svod` alone and `svod help` print the usage; `svod help COMMAND` a
// command's, with its required arguments shown as required.
TEST(SvodCli, BareSvodAndHelpPrintTheUsage) {
  TempDir dir;
  for (const std::vector<std::string>& args : {std::vector<std::string>{}, {"help"}}) {
    const RunResult r = svod_cli(dir, args);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("Usage: svod [OPTIONS] SUBCOMMAND"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("svod help COMMAND"), std::string::npos) << r.out;
  }
  const RunResult run = svod_cli(dir, {"help", "run"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("Usage: svod run [OPTIONS] plan\n"), std::string::npos) << run.out;
  EXPECT_NE(svod_cli(dir, {"help", "cache", "stats"}).out.find("Usage: svod cache stats"), std::string::npos);
  const RunResult tune = svod_cli(dir, {"tune", "--help"});
  EXPECT_NE(tune.out.find("Usage: svod tune [OPTIONS] tune_file\n"), std::string::npos) << tune.out;
  const RunResult wrong = svod_cli(dir, {"help", "rnu"});
  EXPECT_EQ(wrong.status, 2);
  EXPECT_NE(wrong.err.find("did you mean run?"), std::string::npos) << wrong.err;
}

// `svod info` says where its thread count comes from.
TEST(SvodCli, InfoSaysWhereTheThreadCountComesFrom) {
  TempDir dir;
  const RunResult set = svod_cli(dir, {"info"}, {"SVOD_THREADS=3"});
  EXPECT_NE(set.out.find("\nthreads: 3 (SVOD_THREADS)\n"), std::string::npos) << set.out;
  const RunResult unset = svod_cli(dir, {"info"}, {"-u", "SVOD_THREADS"});
  EXPECT_NE(unset.out.find(" (the CPUs this process may run on; SVOD_THREADS sets another count)\n"),
            std::string::npos)
      << unset.out;
  const RunResult bad = svod_cli(dir, {"info"}, {"SVOD_THREADS=-2"});
  EXPECT_EQ(bad.status, 0) << bad.err;
  EXPECT_NE(bad.out.find("\nthreads: SVOD_THREADS=\"-2\": expected an integer from 0 to 4096\n"), std::string::npos)
      << bad.out;
}

// SVOD_PROFILE and SVOD_DEBUG follow the environment's one rule
// (docs/ENVIRONMENT.md): a switch's off words leave profiling off (any value
// but "0" used to turn it on, "false" included), "yes" is debug level 1 (it
// used to be 0), and a word that is neither is refused, naming the variable.
TEST(SvodRun, ProfileAndDebugFollowTheEnvironmentsRule) {
  TempDir dir;
  const std::string plan = dir.write("plan.json", kAddPlan).string();
  const RunResult on = svod_cli(dir, {"run", plan, "--repeat", "2"}, {"SVOD_PROFILE=yes"});
  EXPECT_EQ(on.status, 0) << on.err;
  EXPECT_NE(on.out.find("per kernel (SVOD_PROFILE)"), std::string::npos) << on.out;
  for (const char* off : {"false", "Off", "0", " "}) {
    const RunResult r = svod_cli(dir, {"run", plan, "--repeat", "2"}, {std::string("SVOD_PROFILE=") + off});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find("per kernel"), std::string::npos) << "SVOD_PROFILE=" << off << ":\n" << r.out;
  }
  const RunResult sometimes = svod_cli(dir, {"run", plan}, {"SVOD_PROFILE=sometimes"});
  EXPECT_EQ(sometimes.status, 2) << sometimes.out;
  EXPECT_NE(sometimes.err.find("SVOD_PROFILE=\"sometimes\": expected 1 or 0 (or true/false, yes/no, on/off)"),
            std::string::npos)
      << sometimes.err;

  const RunResult debug = svod_cli(dir, {"run", plan}, {"SVOD_DEBUG=yes"});
  EXPECT_EQ(debug.status, 0) << debug.err;
  EXPECT_NE(debug.err.find("svod: kernel cache: "), std::string::npos) << debug.err;
  const RunResult quiet = svod_cli(dir, {"run", plan}, {"SVOD_DEBUG=no"});
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("svod: kernel cache: "), std::string::npos) << quiet.err;
  const RunResult verbose = svod_cli(dir, {"run", plan}, {"SVOD_DEBUG=verbose"});
  EXPECT_EQ(verbose.status, 2) << verbose.out;
  EXPECT_NE(verbose.err.find("SVOD_DEBUG=\"verbose\": expected a level from 0 to 4 (or a switch: on is 1, off is 0)"),
            std::string::npos)
      << verbose.err;
}

// The manual page is made from the help of every command the build made.
TEST(SvodCli, TheManualPageHoldsEveryCommandsHelp) {
  TempDir dir;
  const std::string page = read_text(SVOD_BINARY_DIR "/tools/svod/svod.1");
  ASSERT_EQ(page.find(".TH SVOD 1 "), page.find('\n') + 1) << page.substr(0, 200);
  for (const char* command :
       {"info", "demo", "run", "pack", "bench", "compile", "tune", "sandbox-info", "cache", "cache stats",
        "cache clear"}) {
    EXPECT_NE(page.find(fmt::format("\n.SS svod {}\n", command)), std::string::npos) << command;
    EXPECT_NE(page.find(fmt::format("Usage: svod {} [OPTIONS]", command)), std::string::npos) << command;
  }
  // Help text is shown as it is: a line of it is never a roff request.
  const RunResult run = svod_cli(dir, {"help", "run"});
  EXPECT_NE(page.find(run.out.substr(run.out.find("Usage:"), 200)), std::string::npos);
}

// `svod` alone, `svod help`, `--help`, `-h`, `--version` and `-V` are answered by the launcher itself from
// text made at build time, without opening libsvod_command.so: byte for byte
// what the command prints (the launcher built without that text asks it).
TEST(SvodCli, TheLauncherAnswersHelpAndVersionAsTheCommandDoesWithoutOpeningIt) {
  TempDir dir;
  const auto run = [&](const char* launcher, const char* flag, const char* name) {
    const std::string out = (dir / (std::string(name) + ".out")).string();
    const std::string err = (dir / (std::string(name) + ".err")).string();
    // The dynamic linker names every object it opens on stderr.
    const std::string command = "LD_DEBUG=files " + quote(launcher) + " " + flag + " >" + quote(out) + " 2>" + quote(err);
    const int raw = std::system(command.c_str());
    RunResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
  };
  for (const char* flag : {"", "help", "--help", "-h", "--version", "-V"}) {
    const RunResult fast = run(SVOD_BINARY_DIR "/svod", flag, "svod");
    const RunResult command = run(SVOD_BARE_LAUNCHER, flag, "bare");
    EXPECT_EQ(fast.status, 0) << flag;
    EXPECT_EQ(command.status, 0) << flag;
    EXPECT_FALSE(command.out.empty()) << flag;
    EXPECT_EQ(fast.out, command.out) << flag;
    EXPECT_EQ(fast.err.find("libsvod_command.so"), std::string::npos) << flag << fast.err;
    EXPECT_NE(command.err.find("libsvod_command.so"), std::string::npos) << flag << command.err;
  }
  // The usage line names `svod`, not the path it was started by.
  EXPECT_NE(run(SVOD_BINARY_DIR "/svod", "--help", "usage").out.find("Usage: svod [OPTIONS] SUBCOMMAND"),
            std::string::npos);
}

}  // namespace
}  // namespace svod
