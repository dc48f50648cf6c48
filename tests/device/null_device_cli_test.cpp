// `svod run` on a plan of a device whose queue is not inline (the test-only
// NULL device, null_device.cpp): a plain run submits every op without
// waiting for each, so a plan of one device's kernels may go to it as one
// graph; only what needs each op's end (the per-op table on request,
// --timeout) waits for each op as it is submitted. Seen in the NULL queue's
// log, with the command run in this process (libsvod_command.so, opened as
// the launcher opens it) so that it finds the NULL kind registered here.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/device/null_device.h"
#include "tests/support/temp_dir.h"
#include "tools/svod/entry.h"

namespace svod {
namespace {

// Three kernels in a chain on NULL:0, then a copy of the result to the CPU,
// which the host makes (NULL:0 moves no bytes to other devices) once the last
// kernel is done.
constexpr const char* kPlan = R"({
  "svod_plan": 1,
  "device": "NULL",
  "buffers": {
    "x": { "dtype": "f32", "count": 64, "init": { "arange": { "start": 0, "step": 1 } } },
    "y": { "dtype": "f32", "count": 64 },
    "z": { "dtype": "f32", "count": 64 },
    "w": { "dtype": "f32", "count": 64 },
    "out": { "dtype": "f32", "count": 64, "device": "CPU" }
  },
  "programs": {
    "twice": {
      "language": "c", "entry": "twice",
      "source": "void twice(float* restrict o, const float* restrict x, int n) { for (int i = 0; i < n; i++) o[i] = 2 * x[i]; }",
      "buffers": [ { "name": "o", "access": "write" }, { "name": "x" } ],
      "scalars": [ { "name": "n", "type": "i32" } ]
    },
    "inc": {
      "language": "c", "entry": "inc",
      "source": "void inc(float* restrict o, const float* restrict x, int n) { for (int i = 0; i < n; i++) o[i] = x[i] + 1; }",
      "buffers": [ { "name": "o", "access": "write" }, { "name": "x" } ],
      "scalars": [ { "name": "n", "type": "i32" } ]
    }
  },
  "ops": [
    { "run": "twice", "buffers": ["y", "x"], "scalars": { "n": 64 } },
    { "run": "inc", "buffers": ["z", "y"], "scalars": { "n": 64 } },
    { "run": "twice", "buffers": ["w", "z"], "scalars": { "n": 64 } },
    { "copy": { "dst": "out", "src": "w" } }
  ],
  "outputs": { "out": { "expect": { "values": [2, 6, 10, 14], "prefix": true } } }
})";

using CommandMain = int (*)(int, char**);

class NullDeviceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = dlopen(SVOD_COMMAND_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
    main_ = reinterpret_cast<CommandMain>(dlsym(library_, SVOD_COMMAND_ENTRY));
    ASSERT_NE(main_, nullptr) << dlerror();
    plan_ = dir_.write("plan.json", kPlan).string();
  }
  void TearDown() override {
    if (library_ != nullptr) dlclose(library_);
  }

  // Runs `svod run plan.json <extra>` and returns the NULL queue's log of it.
  std::string queue_log_of_run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"svod", "run", plan_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    take_null_queue_log();
    testing::internal::CaptureStdout();
    const int status = main_(static_cast<int>(argv.size()), argv.data());
    output_ = testing::internal::GetCapturedStdout();
    EXPECT_EQ(status, 0) << output_;
    return take_null_queue_log();
  }

  test::TempDir dir_;
  std::string plan_;
  void* library_ = nullptr;
  CommandMain main_ = nullptr;
  std::string output_;
};

TEST_F(NullDeviceCli, APlainRunSubmitsEveryOpBeforeWaitingForAny) {
  const std::string log = queue_log_of_run({});
  ASSERT_EQ(log.substr(0, 3), "LLL") << log;
  EXPECT_EQ(log.find_first_not_of('W', 3), std::string::npos) << log;
  EXPECT_NE(output_.find("expect: ok"), std::string::npos) << output_;
  EXPECT_NE(output_.find("per op: not timed"), std::string::npos) << output_;
}

TEST_F(NullDeviceCli, WarmRunsDoNotWaitPerOpEither) {
  const std::string log = queue_log_of_run({"--repeat", "3"});
  size_t at = 0;
  for (int run = 0; run < 3; ++run) {
    ASSERT_EQ(log.substr(at, 3), "LLL") << "run " << run << ": " << log;
    at = log.find_first_not_of('W', at + 3);
  }
  EXPECT_EQ(at, std::string::npos) << log;
}

TEST_F(NullDeviceCli, AskingForEachOpsTimesWaitsForEachOp) {
  // --profile needs each op's end: every op is waited for before the next.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--profile", (dir_ / "trace.json").string()},
        std::vector<std::string>{"--timeout", "600"}}) {
    const std::string log = queue_log_of_run(extra);
    EXPECT_EQ(log.substr(0, 6), "LWLWLW") << extra[0] << ": " << log;
  }
  EXPECT_NE(output_.find("per op in the cold run"), std::string::npos) << output_;
}

}  // namespace
}  // namespace svod
