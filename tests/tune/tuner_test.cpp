// Tune files, candidate specs and the tuner end to end: worker processes
// (the svod binary), wrong, crashing, hanging and non-compiling candidates,
// the JSON report and the `svod tune` command on the example.
#include "svod/tune/tuner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>

#include "svod/base/json_depth.h"
#include "svod/base/subprocess.h"
#include "svod/tune/tune_worker.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::expect_error;

const fs::path kSvod = fs::path(SVOD_BINARY_DIR) / "svod";

// op 0 fills `in` (so the tuned op sees what a real run gives it), op 1
// ("k") is tuned: out += 2 * in, readwrite, so a candidate run on
// unrestored buffers would differ. MODE picks a behaviour:
//   0, 5 right; 1 wrong; 2 segfaults; 3 never returns; 4 does not compile;
//   6 right only when `in` is all zeros (so it is wrong when op 0 ran);
//   7 opens /etc/shadow, 8 #includes /etc/passwd (for sandboxed searches).
constexpr std::string_view kPlan = R"({
  "svod_plan": 1,
  "variables": { "N": { "min": 1, "max": 64, "value": 64 }, "PARTS": { "min": 1, "max": 8, "value": 1 } },
  "buffers": {
    "src": { "dtype": "f32", "count": 64, "init": { "arange": { "start": 1, "step": 1 } } },
    "in": { "dtype": "f32", "count": 64 },
    "out": { "dtype": "f32", "count": 64, "init": { "fill": 1 } }
  },
  "programs": {
    "k": {
      "language": "c",
      "source": "#if MODE == 7\nint open(const char*, int, ...);\n#elif MODE == 8\n#include \"/etc/passwd\"\n#endif\nvoid k(float* restrict out, const float* restrict in, int n) {\n#if MODE == 1\n for (int i = 0; i < n; i++) out[i] += 2.0f * in[i] + 1.0f;\n#elif MODE == 2\n *(volatile int*)0 = 1;\n#elif MODE == 3\n volatile int spin = 1; while (spin) {}\n#elif MODE == 4\n#error this candidate does not compile\n#elif MODE == 6\n for (int i = 0; i < n; i++) out[i] += 3.0f * in[i];\n#elif MODE == 5\n for (int i = n - 1; i >= 0; i--) out[i] += in[i] + in[i];\n#elif MODE == 7\n out[0] = open(\"/etc/shadow\", 0);\n#else\n for (int i = 0; i < n; i++) out[i] += 2.0f * in[i];\n#endif\n}\n",
      "entry": "k",
      "buffers": [ { "name": "out", "access": "readwrite" }, { "name": "in" } ],
      "scalars": [ { "name": "n", "type": "i32" } ],
      "global_size": ["PARTS * 1"],
      "flops": "N * PARTS"
    }
  },
  "ops": [
    { "copy": { "dst": "in", "src": "src" } },
    { "id": "k", "run": "k", "buffers": ["out", "in"], "scalars": { "n": "N" } }
  ]
})";

class TunerTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  fs::path plan = dir.write("plan.json", kPlan);

  fs::path tune_file(std::string_view body) { return dir.write("tune.json", body); }
  // A tune file of the test plan with `fields` added to svod_tune/plan.
  fs::path tune_with(std::string_view fields) {
    return tune_file(fmt::format(R"({{"svod_tune": 1, "plan": "plan.json", {}}})", fields));
  }
  Error bad(std::string_view fields) { return expect_error([&] { parse_tune_file(tune_with(fields)); }); }
  void expect_bad(std::string_view fields, std::string_view where, std::string_view what) {
    const Error e = bad(fields);
    const std::string message = e.what();
    EXPECT_EQ(message.rfind((dir / "tune.json").string() + ": " + std::string(where) + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }
};

TEST_F(TunerTest, ParsesATuneFile) {
  const TuneFile f = parse_tune_file(tune_with(
      R"("op": "k", "parameters": {"MODE": [0, 5], "PARTS": [1, 2]}, "beam": 2, "check": {"rtol": 0.5},
         "timeout_ms": 2000, "benchmark": {"min_runs": 2, "max_runs": 4, "min_time_ms": 0}, "min_gain": 0)"));
  EXPECT_EQ(f.op, 1u);
  ASSERT_EQ(f.parameters.size(), 2u);
  EXPECT_EQ(f.parameters[0].name, "MODE");
  EXPECT_EQ(f.parameters[1].values[1].integer, 2);
  EXPECT_EQ(f.search.beam_width, 2u);
  EXPECT_EQ(f.rtol, 0.5);
  EXPECT_FALSE(f.atol);
  EXPECT_EQ(f.timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(f.benchmark.max_runs, 4);
  EXPECT_EQ(f.describe({1, 1}), "MODE=5 PARTS=2");
}

TEST_F(TunerTest, CandidateSpecsCarryDefinesAndFixedLaunchSizes) {
  const TuneFile f = parse_tune_file(tune_with(R"("op": 1, "parameters": {"MODE": [0, 5], "PARTS": [1, 4]})"));
  const ProgramSpec spec = candidate_spec(f, {1, 1});
  EXPECT_EQ(spec.defines, (std::vector<std::pair<std::string, std::string>>{{"MODE", "5"}, {"PARTS", "4"}}));
  ASSERT_TRUE(spec.global_size[0].is_constant());
  EXPECT_EQ(spec.global_size[0].constant_value(), 4);
  // Plan variables are fixed too, so the program launches without a plan.
  EXPECT_EQ(spec.flops->constant_value(), 64 * 4);
  EXPECT_EQ(candidate_spec(f, {0, 0}).global_size[0].constant_value(), 1);
}

TEST_F(TunerTest, BadTuneFilesNameTheFileAndField) {
  EXPECT_EQ(expect_error([&] { parse_tune_file(dir / "absent.json"); }).kind(), ErrorKind::Io);
  const Error missing = bad(R"("op": 0, "parameters": {"MODE": [0]}, "plan": "nope.json")");
  EXPECT_NE(std::string(missing.what()).find("tune.json: plan: "), std::string::npos) << missing.what();
  EXPECT_NE(std::string(missing.what()).find("nope.json"), std::string::npos) << missing.what();
  EXPECT_EQ(expect_error([&] { parse_tune_file(tune_file(R"({"svod_tune": 1, "plan": "gone.json"})")); }).kind(),
            ErrorKind::Io);

  expect_bad(R"("op": "zz", "parameters": {"MODE": [0]})", "op", "no op with id \"zz\"");
  expect_bad(R"("op": 7, "parameters": {"MODE": [0]})", "op", "out of range");
  expect_bad(R"("op": 0, "parameters": {"MODE": [0]})", "op", "does not run a program");
  expect_bad(R"("op": 1.5, "parameters": {"MODE": [0]})", "op", "expected an op index or an op id");
  expect_bad(R"("parameters": {"MODE": [0]})", "(the tune file)", "missing field \"op\"");
  expect_bad(R"("op": 1, "parameters": {"NOPE": [1, 2]})", "parameters.NOPE", "does not use \"NOPE\"");
  expect_bad(R"("op": 1, "parameters": {"MODE": []})", "parameters.MODE", "non-empty array");
  expect_bad(R"("op": 1, "parameters": {})", "parameters", "at least one parameter");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0, 0]})", "parameters.MODE[1]", "listed twice");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0.5]})", "parameters.MODE[0]", "expected an integer or a non-empty string");
  expect_bad(R"("op": 1, "parameters": {"n": [1]})", "parameters.n", "is a scalar parameter");
  expect_bad(R"("op": 1, "parameters": {"PARTS": ["two"]})", "parameters.PARTS[0]", "must be integers");
  expect_bad(R"("op": 1, "parameters": {"PARTS": [1, 9]})", "parameters.PARTS[1]", "9");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "beam": 0)", "beam", "expected an integer from 1");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "beam": "wide")", "beam", "expected an integer");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "beem": 2)", "beem", "unknown field");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "vars": {"M": 2})", "vars.M", "no variable");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "check": {"rtol": -1})", "check.rtol", "tolerance");
  expect_bad(R"("op": 1, "parameters": {"MODE": [0]}, "benchmark": {"min_runs": 5, "max_runs": 2})", "benchmark",
             "below min_runs");
  const Error json = expect_error([&] { parse_tune_file(tune_file("{ nope")); });
  EXPECT_NE(std::string(json.what()).find("not valid JSON"), std::string::npos);
}

// JSON nested 100,000 deep (which once overflowed the stack) is refused
// before parsing: in the tune file, and in the plan it names.
TEST_F(TunerTest, TuneFilesNestedTooDeepAreRefused) {
  const std::string file = (dir / "tune.json").string();
  auto expect_too_deep = [&](const fs::path& path, const std::string& message) {
    const Error e = expect_error([&] { parse_tune_file(path); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_EQ(std::string(e.what()), message);
  };
  expect_too_deep(tune_file("{\"svod_tune\": " + test::nested_arrays(100000) + "}"),
                  file + ": JSON nesting exceeds the limit of 256 levels (line 1, column 270)");
  expect_too_deep(tune_with(R"("op": 1, "vars": )" + test::nested_objects(100000)),
                  file + ": JSON nesting exceeds the limit of 256 levels (line 1, column 1331)");
  dir.write("deep_plan.json", "{\"svod_plan\": " + test::nested_arrays(100000) + "}");
  expect_too_deep(tune_file(R"({"svod_tune": 1, "plan": "deep_plan.json", "op": 1, "parameters": {"MODE": [0]}})"),
                  file + ": plan: " + (dir / "deep_plan.json").string() +
                      ": JSON nesting exceeds the limit of 256 levels (line 1, column 270)");
  // At the limit the depth passes and the field is checked as usual.
  const Error e = bad(R"("op": 1, "parameters": {"MODE": [0]}, "vars": )" + test::nested_arrays(kMaxJsonDepth - 1));
  EXPECT_NE(std::string(e.what()).find("vars: expected an object"), std::string::npos) << e.what();
}

// The worker refuses a job nested too deep with an error event (its parent
// writes jobs a few levels deep).
TEST_F(TunerTest, WorkerRefusesAJobNestedTooDeep) {
  std::FILE* events = std::tmpfile();
  ASSERT_NE(events, nullptr);
  const std::string job = R"({"tune_file": "tune.json", "candidates": )" + test::nested_arrays(100000) + "}";
  EXPECT_EQ(run_tune_worker(job, events), 2);
  std::rewind(events);
  std::string out;
  for (int c; (c = std::fgetc(events)) != EOF;) out += static_cast<char>(c);
  std::fclose(events);
  const auto event = nlohmann::json::parse(out);
  EXPECT_EQ(event["event"], "error");
  EXPECT_EQ(event["kind"], "validation");
  EXPECT_EQ(event["message"], "worker job: JSON nesting exceeds the limit of 256 levels (line 1, column 297)");
}

// Lines of the worker's output nested too deep are not events: the tuner
// skips them (as it skips a kernel's own printing) and reads on.
TEST_F(TunerTest, TunerSkipsWorkerLinesNestedTooDeep) {
  const TuneFile f = parse_tune_file(tune_with(R"("op": "k", "parameters": {"MODE": [0, 5]})"));
  // A real error event, then a deeper one that, were it read, would replace it.
  const std::string script =
      "cat >/dev/null; "
      "printf '{\"event\": \"error\", \"kind\": \"validation\", \"message\": \"the worker error\"}\\n'; "
      "printf '{\"event\": \"error\", \"kind\": \"io\", \"message\": \"too deep to read\", \"x\": '; "
      "head -c 100000 /dev/zero | tr '\\0' '['; head -c 100000 /dev/zero | tr '\\0' ']'; printf '}\\n'";
  const TuneOptions options{.worker_command = {"/bin/sh", "-c", script}, .on_progress = {}};
  const Error e = expect_error([&] { tune(f, options); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_STREQ(e.what(), "the worker error");
}

TEST_F(TunerTest, AFifoTuneFileOrPlanIsRefusedWithoutWaiting) {
  test::Watchdog watchdog("refusing a FIFO tune file", 20s);
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0644), 0);
  const Error tune = expect_error([&] { parse_tune_file(dir / "fifo.json"); });
  EXPECT_EQ(tune.kind(), ErrorKind::Io);
  EXPECT_EQ(std::string(tune.what()), (dir / "fifo.json").string() + ": the tune file is a FIFO, not a regular file");
  // The plan it names, too.
  const Error plan = expect_error([&] { parse_tune_file(tune_file(R"({"svod_tune": 1, "plan": "fifo.json"})")); });
  EXPECT_EQ(plan.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(plan.what()).find("tune.json: plan: " + (dir / "fifo.json").string() +
                                          ": the plan file is a FIFO, not a regular file"),
            std::string::npos)
      << plan.what();
  std::filesystem::create_directory(dir / "folder.json");
  const Error folder = expect_error([&] { parse_tune_file(dir / "folder.json"); });
  EXPECT_EQ(folder.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(folder.what()).find("the tune file is a directory, not a regular file"), std::string::npos);
}

TuneOptions worker_options() { return {.worker_command = {kSvod.string(), "tune", "--worker"}, .on_progress = {}}; }

TEST_F(TunerTest, SurvivesWrongCrashingHangingAndBrokenCandidates) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  const TuneFile f = parse_tune_file(tune_with(
      R"("op": "k", "parameters": {"MODE": [0, 1, 2, 3, 4, 5, 6]}, "beam": 1, "timeout_ms": 1000,
         "benchmark": {"warmup_runs": 0, "min_runs": 2, "max_runs": 3, "min_time_ms": 0})"));
  size_t progress_calls = 0;
  std::vector<TuneProgress> round_ends;
  TuneOptions options = worker_options();
  options.on_progress = [&](const TuneProgress& p) {
    ++progress_calls;
    EXPECT_LE(p.done, p.total);
    EXPECT_EQ(p.timed + p.failed, p.done);
    EXPECT_LE(p.compiled, p.done);
    if (p.done == p.total) round_ends.push_back(p);
  };
  const TuneReport report = tune(f, options);
  ASSERT_EQ(report.candidates.size(), 7u);
  EXPECT_EQ(progress_calls, 7u);
  // Every round ends with a call: the start alone, then the six others, of
  // which all but MODE=4 compiled, only MODE=5 was timed.
  ASSERT_EQ(round_ends.size(), 2u);
  EXPECT_EQ(round_ends[0].round, 0u);
  EXPECT_EQ(round_ends[0].compiled, 1u);
  EXPECT_EQ(round_ends[0].timed, 1u);
  EXPECT_EQ(round_ends[1].total, 6u);
  EXPECT_EQ(round_ends[1].compiled, 5u);
  EXPECT_EQ(round_ends[1].timed, 1u);
  EXPECT_EQ(round_ends[1].failed, 5u);
  // The progress's best is the pick's.
  ASSERT_TRUE(round_ends[1].best_median_ns);
  EXPECT_EQ(*round_ends[1].best_median_ns, report.candidates[report.best].median_ns);
  EXPECT_EQ(round_ends[1].best_point, report.candidates[report.best].point);
  std::map<size_t, TuneStatus> status;
  for (const auto& c : report.candidates) status[c.point[0]] = c.status;
  EXPECT_EQ(status[0], TuneStatus::Ok);
  EXPECT_EQ(status[1], TuneStatus::Wrong);
  EXPECT_EQ(status[2], TuneStatus::Crashed);
  EXPECT_EQ(status[3], TuneStatus::Timeout);
  EXPECT_EQ(status[4], TuneStatus::CompileError);
  EXPECT_EQ(status[5], TuneStatus::Ok) << "buffers must be restored before each run";
  EXPECT_EQ(status[6], TuneStatus::Wrong) << "the ops before the tuned one must have run";
  const size_t best = report.candidates[report.best].point[0];
  EXPECT_TRUE(best == 0 || best == 5);
  for (const auto& c : report.candidates) {
    if (c.point[0] == 4) EXPECT_NE(c.message.find("does not compile"), std::string::npos) << c.message;
    if (c.point[0] == 2) EXPECT_NE(c.message.find("kernel fault: SIGSEGV"), std::string::npos) << c.message;
  }

  // The JSON report lists every candidate with its status.
  write_tune_json(f, report, dir / "report.json");
  std::ifstream in(dir / "report.json");
  const auto json = nlohmann::json::parse(in);
  ASSERT_EQ(json["candidates"].size(), 7u);
  EXPECT_EQ(json["best"].get<size_t>(), report.best);
  for (const auto& c : json["candidates"]) {
    const std::string s = c["status"].get<std::string>();
    EXPECT_TRUE(c["params"].contains("MODE"));
    if (s == "ok") EXPECT_GT(c["median_ns"].get<double>(), 0);
    else EXPECT_FALSE(c["message"].get<std::string>().empty());
  }
  EXPECT_NE(render_tune_table(f, report).find("compile_error"), std::string::npos);
}

// Sandboxed, the same search gives the same statuses, and a candidate that
// breaks the sandbox's rules is one more failed candidate: each is named with
// the rule while the search goes on.
TEST_F(TunerTest, SandboxedSearchContainsHostileCandidates) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  const TuneFile f = parse_tune_file(tune_with(
      R"("op": "k", "parameters": {"MODE": [0, 1, 2, 3, 4, 5, 6, 7, 8]}, "beam": 1, "timeout_ms": 1000,
         "benchmark": {"warmup_runs": 0, "min_runs": 2, "max_runs": 3, "min_time_ms": 0})"));
  TuneOptions options = worker_options();
  options.sandbox = true;
  const TuneReport report = tune(f, options);
  ASSERT_EQ(report.candidates.size(), 9u);
  std::map<size_t, const TuneCandidate*> by_mode;
  for (const auto& c : report.candidates) by_mode[c.point[0]] = &c;
  const std::map<size_t, TuneStatus> expected = {
      {0, TuneStatus::Ok},      {1, TuneStatus::Wrong},        {2, TuneStatus::Crashed},
      {3, TuneStatus::Timeout}, {4, TuneStatus::CompileError}, {5, TuneStatus::Ok},
      {6, TuneStatus::Wrong},   {7, TuneStatus::Crashed},      {8, TuneStatus::CompileError}};
  for (const auto& [mode, status] : expected)
    EXPECT_EQ(by_mode[mode]->status, status) << "MODE=" << mode << ": " << by_mode[mode]->message;
  const auto says = [&](size_t mode, std::string_view text) {
    EXPECT_NE(by_mode[mode]->message.find(text), std::string::npos) << "MODE=" << mode << ": " << by_mode[mode]->message;
  };
  says(2, "SIGSEGV");
  says(3, "ran past the sandbox's wall-clock limit of 1 s");
  says(4, "does not compile");
  says(7, "openat");
  says(7, "rule: no files");
  says(8, "#include \"/etc/passwd\": the file is outside what the sandbox's compiler may read");
  EXPECT_EQ(by_mode[8]->message.find("root:"), std::string::npos) << "nothing of the file is shown";
  const size_t best = report.candidates[report.best].point[0];
  EXPECT_TRUE(best == 0 || best == 5);
}

TEST_F(TunerTest, AFailingStartIsAnError) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  const TuneFile f = parse_tune_file(tune_with(R"("op": "k", "parameters": {"MODE": [4, 0]})"));
  const Error e = expect_error([&] { tune(f, worker_options()); });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("start candidate (MODE=4)"), std::string::npos) << e.what();
}

TEST_F(TunerTest, CommandTunesTheExampleAndWritesJson) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  const fs::path out = dir / "tune.json.out";
  const fs::path plot = dir / "tune.svg";
  const ProcessResult r =
      run_process({kSvod.string(), "tune", SVOD_SOURCE_DIR "/examples/tune_matmul/tune_small.json", "--json", out.string(),
                   "--plot", plot.string()},
                  "", std::chrono::minutes(5));
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  EXPECT_NE(r.out.find("best: ORDER="), std::string::npos) << r.out;
  std::ifstream in(out);
  const auto json = nlohmann::json::parse(in);
  EXPECT_EQ(json["parameters"], (nlohmann::json{"ORDER", "TJ", "SPLIT"}));
  ASSERT_GE(json["candidates"].size(), 4u);
  for (const auto& c : json["candidates"]) EXPECT_EQ(c["status"], "ok") << c.dump();

  // The pick: the lowest median, never a candidate stopped early, and every
  // one stopped early slower than it.
  const auto& best = json["candidates"][json["best"].get<size_t>()];
  EXPECT_FALSE(best["stopped_early"].get<bool>()) << best.dump();
  for (const auto& c : json["candidates"]) {
    EXPECT_GE(c["median_ns"].get<double>(), best["median_ns"].get<double>()) << c.dump();
    if (c["stopped_early"].get<bool>()) EXPECT_GT(c["median_ns"].get<double>(), best["median_ns"].get<double>());
  }

  // stderr is a pipe here: no bar redrawn in place, one plain line per
  // round, the last one naming the pick as its best.
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
  const size_t rounds = json["rounds"].get<size_t>() + 1;
  std::vector<std::string> lines;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("round ", 0) == 0) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), rounds) << r.err;
  EXPECT_EQ(lines.front().rfind("round 0 (start): 1 candidate, 1 compiled, 1 timed, 0 failed; best ", 0), 0u)
      << lines.front();
  for (size_t k = 0; k < rounds; ++k) {
    EXPECT_EQ(lines[k].rfind(fmt::format("round {}", k), 0), 0u) << lines[k];
    EXPECT_NE(lines[k].find(" compiled, "), std::string::npos) << lines[k];
  }
  std::string best_params;
  for (const auto& name : json["parameters"]) {
    best_params += (best_params.empty() ? "" : " ") + name.get<std::string>() + "=" +
                   best["params"][name.get<std::string>()].dump();
  }
  EXPECT_NE(lines.back().find("(" + best_params + ")"), std::string::npos) << lines.back() << " vs " << best_params;
  EXPECT_NE(lines.back().find(", 0 failed; best "), std::string::npos) << lines.back();

  // The picture: well-formed XML with one mark per candidate, titled by its
  // parameters, and the best path.
  std::ifstream svg_in(plot);
  const std::string svg{std::istreambuf_iterator<char>(svg_in), {}};
  if (fs::exists("/usr/bin/python3")) {
    const ProcessResult xml = run_process(
        {"/usr/bin/python3", "-c", "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])", plot.string()}, "",
        std::chrono::seconds(60));
    EXPECT_TRUE(xml.ok()) << xml.err;
  }
  size_t marks = 0;
  for (size_t at = svg.find("class=\"candidate\""); at != std::string::npos; at = svg.find("class=\"candidate\"", at + 1)) {
    ++marks;
  }
  EXPECT_EQ(marks, json["candidates"].size());
  for (const auto& c : json["candidates"]) {
    std::string params;
    for (const auto& name : json["parameters"]) {
      const auto& value = c["params"][name.get<std::string>()];
      params += (params.empty() ? "" : " ") + name.get<std::string>() + "=" +
                (value.is_string() ? value.get<std::string>() : value.dump());
    }
    EXPECT_NE(svg.find("<title>" + params + ":"), std::string::npos) << params;
  }
  EXPECT_NE(svg.find("class=\"best-path\""), std::string::npos);
  EXPECT_NE(svg.find("(best)</title>"), std::string::npos);

  // Ticks in scaled units: a whole number and ns, µs, ms or s.
  const std::regex tick("<text class=\"tick\"[^>]*>([^<]*)</text>");
  const std::regex label("[1-9][0-9]{0,2} (ns|µs|ms)|[1-9][0-9]* s");
  size_t ticks = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it, ++ticks) {
    EXPECT_TRUE(std::regex_match((*it)[1].str(), label)) << (*it)[1];
  }
  EXPECT_GE(ticks, 2u) << svg;
}

TEST_F(TunerTest, CommandRejectsABadTuneFileWithStatus2) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  const fs::path bad_file = tune_with(R"("op": 1, "parameters": {"MODE": []})");
  const ProcessResult r = run_process({kSvod.string(), "tune", bad_file.string()}, "", std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("svod tune: error (validation): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("parameters.MODE"), std::string::npos) << r.err;
  const ProcessResult none = run_process({kSvod.string(), "tune"}, "", std::chrono::seconds(60));
  EXPECT_EQ(none.exit_code, 2);
}

TEST_F(TunerTest, CommandRefusesAnOutputItCannotWriteBeforeSearching) {
  if (!fs::exists(kSvod)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  for (const char* flag : {"--json", "--plot"}) {
    const ProcessResult r = run_process({kSvod.string(), "tune", SVOD_SOURCE_DIR "/examples/tune_matmul/tune_small.json",
                                         flag, "/nonexistent/out"},
                                        "", std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find(fmt::format("svod tune: error (io): {}: cannot write /nonexistent/out", flag)),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out.find("tuning "), std::string::npos) << r.out;  // nothing searched
  }
}

}  // namespace
}  // namespace svod
