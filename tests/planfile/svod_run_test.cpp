// `svod run` as a user runs it: the real binary on real plan files, checking
// exit statuses (0 ok, 1 expectation failed, 2 cannot run), the one-line
// error on stderr, written outputs and traces, and the shipped examples.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "svod/base/npy.h"
#include "tests/planfile/temp_dir.h"

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

RunResult svod_run(const TempDir& dir, const std::vector<std::string>& args) {
  std::string command = quote(SVOD_BINARY_DIR "/svod") + " run";
  for (const auto& a : args) command += " " + quote(a);
  command += " >" + quote((dir / "stdout.txt").string()) + " 2>" + quote((dir / "stderr.txt").string());
  const int raw = std::system(command.c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(dir / "stdout.txt");
  r.err = read_text(dir / "stderr.txt");
  return r;
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
  EXPECT_NE(r.out.find("execute (parallel, 3 runs)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ops[0] (add) run add"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ops[1] copy b <- out"), std::string::npos) << r.out;

  // Without --out, an output's npy file lands beside the plan, in its shape.
  NpyArray written = read_npy(dir / "out.npy");
  EXPECT_EQ(written.shape, (std::vector<size_t>{8, 8}));
  EXPECT_EQ(reinterpret_cast<const float*>(written.data.data())[63], 65.0f);

  // One complete event per op per execution plus one per execution, on named threads.
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
  EXPECT_EQ(op_events, 6u);
  EXPECT_EQ(run_events, 3u);
}

TEST(SvodRun, OutWritesEveryOutputAndVarsOverride) {
  TempDir dir;
  const auto plan = dir.write("plan.json", kAddPlan);
  RunResult r = svod_run(dir, {plan.string(), "--var", "N=4", "--out", (dir / "results").string(), "--sequential"});
  // With N=4 only the first four sums are computed: the expectation of eight values fails.
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("expect: FAILED: 4 of 8 values differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[4] got 0 expected 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("execute (sequential, 1 run)"), std::string::npos) << r.out;
  EXPECT_EQ(r.first_err_line(), "svod run: 1 output did not match the expectation");
  EXPECT_EQ(read_npy(dir / "results" / "out.npy").count(), 64u);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.npy"));
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
      {[&] {}, {{plan, "--backend", "gcc"}, "svod run: error (validation): --backend gcc: expected clang, llvm or dlopen"}},
      {[&] {}, {{(dir / "absent.json").string()}, "svod run: error (io): "}},
      {[&] {}, {{plan, "--profile", (dir / "no" / "such" / "dir" / "t.json").string()},
                "svod run: error (io): --profile "}},
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

}  // namespace
}  // namespace svod
