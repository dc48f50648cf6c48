// The sandbox from the svod command beside `svod run --sandbox`: `svod bench
// --sandbox` times the whole plan through the real helper (and reports a
// hostile kernel as a violation), `svod tune --sandbox` searches with every
// kernel in the sandbox, and `svod tune --variants --sandbox` is refused
// saying why.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svod/sandbox/sandbox.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::one_kernel_plan;
using test::TempDir;

const std::string kMlp = std::string(SVOD_SOURCE_DIR) + "/examples/mlp/plan.json";

// `svod ARGS` with stdout and stderr together, and its exit status.
std::pair<std::string, int> svod(const std::string& args) {
  const std::string command = std::string(SVOD_BINARY_DIR) + "/svod " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char chunk[4096];
  size_t got = 0;
  while (pipe != nullptr && (got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) output.append(chunk, got);
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// `svod sandbox-info` names every optional layer, each as a helper started
// here has it.
TEST(SandboxCli, SandboxInfoNamesEachOptionalLayerAsTheHelperHasIt) {
  const auto [output, status] = svod("sandbox-info");
  ASSERT_EQ(status, 0) << output;
  const SandboxLayers layers = probe_sandbox();
  const std::pair<std::string, bool> optional[] = {{"user namespace", layers.user_namespace},
                                                   {"network namespace", layers.network_namespace},
                                                   {"mount namespace with an empty root", layers.mount_namespace},
                                                   {"IPC namespace", layers.ipc_namespace},
                                                   {"Landlock", layers.landlock}};
  for (const auto& [name, on] : optional)
    EXPECT_NE(output.find(name + (on ? " active" : " not available here")), std::string::npos)
        << name << ": " << output;
}

TEST(SandboxCli, BenchTimesTheWholePlanThroughTheHelper) {
  TempDir dir;
  const std::string json = (dir / "bench.json").string();
  const auto [output, status] = svod("bench --sandbox --runs 3 --min-time-ms 0 --json " + json + " " + kMlp);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("sandbox: no_new_privs, seccomp allow-list"), std::string::npos) << output;
  EXPECT_NE(output.find("per op: not timed: the sandbox's helper runs the plan as a whole"), std::string::npos)
      << output;
  EXPECT_NE(output.find("the plan, in the sandbox"), std::string::npos) << output;
  std::ifstream in(json);
  const nlohmann::json written = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  EXPECT_GT(written["sandbox"]["copied_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(written["plan"]["samples_ns"].size(), 3u);
  EXPECT_GT(written["plan"]["median_ns"].get<double>(), 0);
}

TEST(SandboxCli, BenchReportsAHostileKernelAsAViolation) {
  TempDir dir;
  const std::string plan =
      dir.write("plan.json", one_kernel_plan("peek", R"(int open(const char*, int, ...);\n)"
                                                     R"(void peek(float* y) { y[0] = open(\"/etc/shadow\", 0); })"))
          .string();
  const auto [output, status] = svod("bench --sandbox " + plan);
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("error (sandbox violation)"), std::string::npos) << output;
  EXPECT_NE(output.find("openat"), std::string::npos) << output;
  EXPECT_NE(output.find("rule: no files"), std::string::npos) << output;
  const auto [plain, plain_status] = svod("bench --sandbox --plot roof.svg " + kMlp);
  EXPECT_EQ(plain_status, 2) << plain;
  EXPECT_NE(plain.find("--plot shows each op's time, and --sandbox times the plan as a whole"), std::string::npos)
      << plain;
}

TEST(SandboxCli, TuneSearchesInTheSandbox) {
  TempDir dir;
  const std::string json = (dir / "tune.json").string();
  const auto [output, status] =
      svod("tune --sandbox --json " + json + " " + std::string(SVOD_SOURCE_DIR) + "/examples/tune_matmul/tune_small.json");
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("sandbox: no_new_privs, seccomp allow-list"), std::string::npos) << output;
  EXPECT_NE(output.find("sources compiled confined"), std::string::npos) << output;
  EXPECT_NE(output.find("best: ORDER="), std::string::npos) << output;
  std::ifstream in(json);
  const nlohmann::json written = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  for (const auto& c : written["candidates"]) EXPECT_EQ(c["status"], "ok") << c.dump();
}

TEST(SandboxCli, TuneRefusesVariantsInTheSandboxAndSaysWhy) {
  const auto [output, status] = svod("tune --variants --sandbox " + kMlp);
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("error (unsupported): --variants --sandbox: variants are compiled and timed in this process, "
                        "outside any confinement"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace svod
