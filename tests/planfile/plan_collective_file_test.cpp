// Collective ops and the rank/world_size variables in plan files: parsing
// errors with their JSON paths, loading on real local ranks, and the digest
// that stops ranks loading different plans.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "svod/base/error.h"
#include "svod/comm/communicator.h"
#include "svod/registry/registry.h"
#include "svod/plan/op_description.h"
#include "svod/planfile/plan_file.h"
#include "svod/planfile/plan_save.h"
#include "tests/support/temp_dir.h"
#include "tests/support/comm_checks.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using Json = nlohmann::ordered_json;
using test::TempDir;

// Each rank fills `mine` with rank + 1 (a kernel taking rank as a scalar,
// sized by world_size through a variable-free launch), all_reduces `g`,
// gathers `mine` into `all`, and broadcasts `w` from rank 0.
Json collective_plan() {
  return Json::parse(R"J({
    "svod_plan": 1,
    "variables": { "K": { "min": 0, "max": 100, "value": 3 } },
    "buffers": {
      "mine": { "dtype": "f32", "count": 2 },
      "all":  { "dtype": "f32", "count": 8 },
      "g":    { "dtype": "f32", "count": 4, "init": { "fill": 1 } },
      "w":    { "dtype": "i32", "count": 3, "init": { "arange": { "start": 0, "step": 1 } } }
    },
    "programs": {
      "fill": { "language": "c", "entry": "fill",
                "source": "void fill(float* o, int n, int v, int k) { for (int i = 0; i < n; i++) o[i] = v + k; }",
                "buffers": [ { "name": "o", "access": "write" } ],
                "scalars": [ { "name": "n", "type": "i32" }, { "name": "v", "type": "i32" },
                             { "name": "k", "type": "i32" } ] }
    },
    "ops": [
      { "id": "fill", "run": "fill", "buffers": ["mine"], "scalars": { "n": 2, "v": "rank + 1", "k": "K * (world_size - 1)" } },
      { "collective": { "kind": "all_reduce", "buffers": ["g"], "op": "sum" } },
      { "id": "gather", "collective": { "kind": "all_gather", "src": "mine", "dst": "all" } },
      { "collective": { "kind": "broadcast", "buffers": ["w"], "root": 0 }, "after": ["fill"] }
    ]
  })J");
}

PlanFile parse(const TempDir& dir, const Json& plan, std::string_view name = "plan.json") {
  return parse_plan_file(dir.write(name, plan.dump(2)));
}

template <typename T>
std::vector<T> values(const LoadedPlan& loaded, std::string_view name) {
  auto span = loaded.plan.buffer(*loaded.plan.find_buffer(name)).span<T>();
  return {span.begin(), span.end()};
}

TEST(PlanFileCollective, RunsOnFourLocalRanksWithRankAndWorldSize) {
  TempDir dir;
  const PlanFile file = parse(dir, collective_plan());
  ASSERT_EQ(file.ops[1].kind, PlanFileOp::Kind::Collective);
  EXPECT_EQ(file.ops[2].collective, CollectiveKind::AllGather);
  EXPECT_EQ(file.ops[2].buffers, (std::vector<std::string>{"mine", "all"}));
  run_local_ranks(
      4,
      [&](Communicator& comm) {
        // Ranks other than 0 start with other weights: the broadcast replaces them.
        PlanFile mine = file;
        LoadedPlan loaded = load_plan(mine, LoadOptions{.communicator = borrowed(comm)});
        if (comm.rank() != 0) loaded.plan.buffer(*loaded.plan.find_buffer("w")).span<int32_t>()[1] = 99;
        EXPECT_EQ(loaded.plan.variable("rank"), comm.rank());
        EXPECT_EQ(loaded.plan.variable("world_size"), 4);
        EXPECT_EQ(loaded.plan.op_title(1), "op 1 collective all_reduce");
        loaded.execute();
        EXPECT_EQ(values<float>(loaded, "mine"), std::vector<float>(2, float(comm.rank() + 1 + 9)));
        EXPECT_EQ(values<float>(loaded, "g"), std::vector<float>(4, 4.0f));
        EXPECT_EQ(values<float>(loaded, "all"), (std::vector<float>{10, 10, 11, 11, 12, 12, 13, 13}));
        EXPECT_EQ(values<int32_t>(loaded, "w"), (std::vector<int32_t>{0, 1, 2}));
      },
      test::quick_comm_options());
}

TEST(PlanFileCollective, WithoutALauncherRankIsZeroAndWorldSizeOne) {
  TempDir dir;
  Json plan = collective_plan();
  plan["buffers"]["all"]["count"] = 2;  // one rank gathers one part
  LoadedPlan loaded = load_plan(parse(dir, plan));
  EXPECT_EQ(loaded.plan.variable("rank"), 0);
  EXPECT_EQ(loaded.plan.variable("world_size"), 1);
  loaded.execute();
  EXPECT_EQ(values<float>(loaded, "mine"), std::vector<float>(2, 1.0f));
  EXPECT_EQ(values<float>(loaded, "all"), std::vector<float>(2, 1.0f));
  EXPECT_EQ(values<float>(loaded, "g"), std::vector<float>(4, 1.0f));
  // Read-only, whichever way one tries to set them.
  test::expect_error([&] { loaded.plan.execute_with_vars({{"world_size", 2}}); });
  EXPECT_EQ(test::kind_of([&] { loaded.plan.execute_with_vars({{"rank", 0}}); }), ErrorKind::Validation);
  std::string message;
  EXPECT_EQ(test::kind_of([&] { load_plan(parse(dir, plan), LoadOptions{.vars = {{"rank", 1}}}); }, &message),
            ErrorKind::Validation);
  EXPECT_NE(message.find("plan.json: variables: \"rank\" is read-only"), std::string::npos) << message;
  plan["variables"]["world_size"] = {{"min", 1}, {"max", 4}, {"value", 2}};
  EXPECT_EQ(test::kind_of([&] { parse(dir, plan); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("variables.world_size: \"world_size\" is set by the launcher"), std::string::npos) << message;
}

struct BadCollective {
  const char* name;
  std::function<void(Json&)> edit;
  const char* message;
};

TEST(PlanFileCollective, InvalidCollectivesNameTheField) {
  const std::vector<BadCollective> cases = {
      {"kind", [](Json& j) { j["ops"][1]["collective"]["kind"] = "all_to_all"; },
       "ops[1].collective.kind: unknown collective \"all_to_all\" (expected all_reduce, broadcast, all_gather or "
       "reduce_scatter)"},
      {"no kind", [](Json& j) { j["ops"][1]["collective"].erase("kind"); },
       "ops[1].collective: missing field \"kind\""},
      {"not an object", [](Json& j) { j["ops"][1]["collective"] = "all_reduce"; },
       "ops[1].collective: expected an object, got a string"},
      {"no buffers", [](Json& j) { j["ops"][1]["collective"].erase("buffers"); },
       "ops[1].collective: missing field \"buffers\""},
      {"empty buffers", [](Json& j) { j["ops"][1]["collective"]["buffers"] = Json::array(); },
       "ops[1].collective.buffers: expected at least one buffer"},
      {"twice", [](Json& j) { j["ops"][1]["collective"]["buffers"] = {"g", "g"}; },
       "ops[1].collective.buffers[1]: buffer \"g\" is listed twice"},
      {"unknown buffer", [](Json& j) { j["ops"][1]["collective"]["buffers"] = {"gg"}; },
       "ops[1].collective.buffers[0]: no buffer named \"gg\""},
      {"extra field", [](Json& j) { j["ops"][1]["collective"]["root"] = 0; },
       "ops[1].collective.root: unknown field (expected one of: kind, buffers, op)"},
      {"no op", [](Json& j) { j["ops"][1]["collective"].erase("op"); }, "ops[1].collective: missing field \"op\""},
      {"bad op", [](Json& j) { j["ops"][1]["collective"]["op"] = "avg"; },
       "ops[1].collective.op: unknown reduction \"avg\" (expected sum, prod, min or max)"},
      {"op on a gather", [](Json& j) { j["ops"][2]["collective"]["op"] = "sum"; },
       "ops[2].collective.op: unknown field (expected one of: kind, src, dst)"},
      {"no dst", [](Json& j) { j["ops"][2]["collective"].erase("dst"); }, "ops[2].collective: missing field \"dst\""},
      {"unknown src", [](Json& j) { j["ops"][2]["collective"]["src"] = "nope"; },
       "ops[2].collective.src: no buffer named \"nope\""},
      {"dtypes", [](Json& j) { j["ops"][2]["collective"]["dst"] = "w"; },
       "ops[2].collective: src \"mine\" is f32 but dst \"w\" is i32; the dtypes must match"},
      {"same buffer", [](Json& j) { j["ops"][2]["collective"]["dst"] = "mine"; },
       "ops[2].collective: src and dst must be different buffers"},
      {"negative root", [](Json& j) { j["ops"][3]["collective"]["root"] = -1; },
       "ops[3].collective.root: expected a non-negative integer, got -1"},
      {"no root", [](Json& j) { j["ops"][3]["collective"].erase("root"); }, "ops[3].collective: missing field \"root\""},
      {"op field next to collective", [](Json& j) { j["ops"][1]["buffers"] = {"g"}; },
       "ops[1].buffers: unknown field (expected one of: collective, id, after)"},
      {"two kinds", [](Json& j) { j["ops"][1]["copy"] = {{"dst", "g"}, {"src", "g"}}; },
       "ops[1]: an op has exactly one of \"run\", \"copy\", \"custom\" or \"collective\""},
      {"rank declared", [](Json& j) { j["variables"]["rank"] = {{"min", 0}, {"max", 0}, {"value", 0}}; },
       "variables.rank: \"rank\" is set by the launcher"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    Json plan = collective_plan();
    c.edit(plan);
    std::string message;
    const ErrorKind kind = test::kind_of([&] { parse(dir, plan); }, &message);
    EXPECT_EQ(kind, ErrorKind::Validation) << c.name << ": " << message;
    EXPECT_NE(message.find(std::string("plan.json: ") + c.message), std::string::npos) << c.name << ": " << message;
  }
}

// rank and world_size in launch sizes: rank r runs r + 1 slices, each
// writing its core_id + world_size into its element.
TEST(PlanFileCollective, RankAndWorldSizeWorkInLaunchSizes) {
  TempDir dir;
  const Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "buffers": { "o": { "dtype": "f32", "count": 4, "init": { "fill": -1 } } },
    "programs": {
      "put": { "language": "c", "entry": "put",
               "source": "void put(float* o, int w, int core_id) { o[core_id] = core_id + w; }",
               "buffers": [ { "name": "o", "access": "write" } ],
               "scalars": [ { "name": "w", "type": "i32" }, { "name": "core_id", "type": "i32" } ],
               "global_size": ["rank + 1"] }
    },
    "ops": [ { "run": "put", "buffers": ["o"], "scalars": { "w": "world_size" } } ]
  })J");
  const PlanFile file = parse(dir, plan);
  run_local_ranks(
      3,
      [&](Communicator& comm) {
        LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
        EXPECT_EQ(loaded.plan.communicator(), nullptr);  // no collectives: the plan never calls it
        loaded.execute();
        std::vector<float> want(4, -1.0f);
        for (int k = 0; k <= comm.rank(); ++k) want[size_t(k)] = float(k + 3);
        EXPECT_EQ(values<float>(loaded, "o"), want);
      },
      test::quick_comm_options());
}

// What depends on the number of ranks is checked at load, naming the op.
TEST(PlanFileCollective, RootsAndSizesAreCheckedAgainstWorldSizeAtLoad) {
  TempDir dir;
  Json plan = collective_plan();
  plan["ops"][3]["collective"]["root"] = 2;
  std::string message;
  // Two ranks: all is 8 = 2 x 2 elements too many, so fix it first.
  plan["buffers"]["all"]["count"] = 4;
  const auto errors = test::local_rank_errors(2, [&](Communicator& comm) {
    load_plan(parse(dir, plan, fmt::format("plan{}.json", comm.rank())), LoadOptions{.communicator = borrowed(comm)});
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[size_t(r)]);
    EXPECT_EQ(errors[size_t(r)]->kind(), ErrorKind::Validation) << errors[size_t(r)]->what();
    const std::string m = errors[size_t(r)]->what();
    EXPECT_NE(m.find(fmt::format("plan{}.json: ops: op 3 collective broadcast: root 2 is out of range "
                                 "(the communicator has ranks 0 to 1)",
                                 r)),
              std::string::npos)
        << m;
  }
  plan["ops"][3]["collective"]["root"] = 0;
  plan["buffers"]["all"]["count"] = 6;
  EXPECT_EQ(test::kind_of([&] { load_plan(parse(dir, plan)); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("ops: op 2 (gather) collective all_gather: buffer 1 (\"all\") holds 6 elements but must "
                         "hold 1 ranks x 2"),
            std::string::npos)
      << message;
}

// Every rank fails, naming the ranks whose plan or variables differ from
// rank 0's, before anything runs.
TEST(PlanFileCollective, RanksWithDifferentPlansOrVariablesFailTogether) {
  TempDir dir;
  const Json plan = collective_plan();
  Json other = plan;
  other["programs"]["fill"]["source"] = "void fill(float* o, int n, int v, int k) { for (int i = 0; i < n; i++) o[i] = v; }";
  struct Case {
    const char* name;
    std::function<LoadOptions(int rank)> options;
    std::function<Json(int rank)> plan;
    const char* differ;
  };
  const std::vector<Case> cases = {
      {"source", [](int) { return LoadOptions{}; }, [&](int r) { return r == 2 ? other : plan; }, "rank 2 differs"},
      {"variables", [](int r) { return r % 2 ? LoadOptions{.vars = {{"K", 4}}} : LoadOptions{}; },
       [&](int) { return plan; }, "ranks 1, 3 differ"},
      {"same values", [](int r) { return r == 1 ? LoadOptions{.vars = {{"K", 3}}} : LoadOptions{}; },
       [&](int) { return plan; }, nullptr},
  };
  for (const auto& c : cases) {
    const auto errors = test::local_rank_errors(4, [&](Communicator& comm) {
      LoadOptions options = c.options(comm.rank());
      options.communicator = borrowed(comm);
      load_plan(parse(dir, c.plan(comm.rank()), fmt::format("plan{}.json", comm.rank())), options).execute();
    });
    for (int r = 0; r < 4; ++r) {
      if (!c.differ) {
        EXPECT_FALSE(errors[size_t(r)]) << c.name << ": " << errors[size_t(r)]->what();
        continue;
      }
      ASSERT_TRUE(errors[size_t(r)]) << c.name;
      EXPECT_EQ(errors[size_t(r)]->kind(), ErrorKind::Validation) << errors[size_t(r)]->what();
      const std::string m = errors[size_t(r)]->what();
      EXPECT_NE(m.find(fmt::format("plan{}.json: the ranks load different plans or variable values: {} from rank 0 "
                                   "(this is rank {} of 4)",
                                   r, c.differ, r)),
                std::string::npos)
          << c.name << ": " << m;
    }
  }
}

// A rank that fails before it loads makes the others' load fail naming it,
// not wait for the timeout.
TEST(PlanFileCollective, ARankThatFailsBeforeLoadingFailsTheOthers) {
  TempDir dir;
  const PlanFile file = parse(dir, collective_plan());
  const auto start = std::chrono::steady_clock::now();
  const auto errors = test::local_rank_errors(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) throw make_error(ErrorKind::Io, "rank 1 cannot read its plan");
        load_plan(file, LoadOptions{.communicator = borrowed(comm)});
      },
      CommOptions{.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(errors[0]);
  const std::string message = errors[0]->what();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(message.find("plan.json: (comparing the plan across ranks): local rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("because rank 1 failed: rank 1 cannot read its plan"), std::string::npos) << message;
}

TEST(PlanFileCollective, TheDigestCoversTheFileButNotItsName) {
  TempDir dir;
  const Json plan = collective_plan();
  const Hash128 base = plan_digest(parse(dir, plan), {});
  EXPECT_EQ(plan_digest(parse(dir, plan, "sub/other.json"), {}), base);
  EXPECT_EQ(plan_digest(parse(dir, plan), {{"K", 3}}), base);
  EXPECT_NE(plan_digest(parse(dir, plan), {{"K", 4}}), base);
  const std::vector<std::function<void(Json&)>> edits = {
      [](Json& j) { j["buffers"]["g"]["init"]["fill"] = 2; },
      [](Json& j) { j["buffers"]["g"]["count"] = 5; },
      [](Json& j) { j["programs"]["fill"]["source"] = "void fill(float* o, int n, int v, int k) {}"; },
      [](Json& j) { j["ops"][1]["collective"]["op"] = "max"; },
      [](Json& j) { j["ops"][3]["collective"]["root"] = 1; },
      [](Json& j) { j["ops"][0]["scalars"]["k"] = 1; },
      [](Json& j) { j["outputs"] = Json::parse(R"({"g": {"expect": {"values": [4, 4, 4, 4]}}})"); },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    Json edited = plan;
    edits[i](edited);
    EXPECT_NE(plan_digest(parse(dir, edited), {}), base) << "edit " << i;
  }
}


// Buffers on an OpenCL device: the collective waits (on the communication
// thread) for the device kernel that writes its buffer, stages it through
// host memory, and the device kernel after it sees the reduced values.
TEST(PlanFileCollective, DeviceBuffersAreReducedBetweenDeviceKernels) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  TempDir dir;
  const Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "buffers": {
      "d_g": { "dtype": "f32", "count": 64, "device": "CL:0" },
      "d_h": { "dtype": "f32", "count": 64, "device": "CL:0" },
      "h":   { "dtype": "f32", "count": 64 }
    },
    "programs": {
      "set": { "language": "opencl", "device": "CL:0", "entry": "set",
               "source": "__kernel void set(__global float* g, int v) { g[get_global_id(0)] = v; }",
               "buffers": [ { "name": "g", "access": "write" } ], "scalars": [ { "name": "v", "type": "i32" } ],
               "global_size": [4], "local_size": [16] },
      "inc": { "language": "opencl", "device": "CL:0", "entry": "inc",
               "source": "__kernel void inc(__global float* h, __global const float* g) { h[get_global_id(0)] = g[get_global_id(0)] + 1; }",
               "buffers": [ { "name": "h", "access": "write" }, { "name": "g" } ],
               "global_size": [4], "local_size": [16] }
    },
    "ops": [
      { "run": "set", "buffers": ["d_g"], "scalars": { "v": "rank + 1" } },
      { "collective": { "kind": "all_reduce", "buffers": ["d_g"], "op": "sum" } },
      { "run": "inc", "buffers": ["d_h", "d_g"], "scalars": {} },
      { "copy": { "dst": "h", "src": "d_h" } }
    ],
    "outputs": { "h": { "expect": { "values": [11], "prefix": true } } }
  })J");
  const PlanFile file = parse(dir, plan);
  run_local_ranks(
      4,
      [&](Communicator& comm) {
        LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
        EXPECT_TRUE(loaded.uses_devices);
        for (int run = 0; run < 3; ++run) {
          loaded.execute();
          EXPECT_EQ(values<float>(loaded, "h"), std::vector<float>(64, 11.0f));
        }
      },
      test::quick_comm_options());
}

// "CL:local" (OpenCL here: PoCL has one device) is device local_rank % count
// on each rank: one plan file, the same digest on every rank, each rank's
// own device; without a communicator it is device 0. The name stays as
// written in the plan; an unknown suffix or a kind the machine lacks is a
// typed error naming the device and the field.
Json local_device_plan(std::string_view device) { return Json::parse(test::opencl_all_reduce_plan(device)); }

TEST(PlanFileCollective, LocalDevicesFollowTheLocalRank) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  size_t count = 0;
  for (const auto& d : device_registry().list_devices()) count += d.available && d.name.rfind("CL:", 0) == 0;
  TempDir dir;
  const PlanFile file = parse(dir, local_device_plan("CL:local"));
  EXPECT_EQ(file.device, "CL:local");
  run_local_ranks(
      2,
      [&](Communicator& comm) {
        LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
        EXPECT_EQ(loaded.plan.buffer(*loaded.plan.find_buffer("d")).device().name(),
                  "CL:" + std::to_string(comm.local_rank() % static_cast<int>(count)));
        loaded.execute();
        EXPECT_EQ(values<float>(loaded, "h"), std::vector<float>(64, 3.0f));
      },
      test::quick_comm_options());
  // Without a communicator: one rank, local rank 0.
  LoadedPlan alone = load_plan(file);
  EXPECT_EQ(alone.plan.buffer(*alone.plan.find_buffer("d")).device().name(), "CL:0");
  alone.execute();
  EXPECT_EQ(values<float>(alone, "h"), std::vector<float>(64, 1.0f));

  std::string message;
  EXPECT_EQ(test::kind_of([&] { load_plan(parse(dir, local_device_plan("CL:foo"))); }, &message),
            ErrorKind::Validation);
  EXPECT_NE(message.find("plan.json: device: device \"CL:foo\": expected KIND, KIND:INDEX or KIND:local"),
            std::string::npos)
      << message;
  Json on_cuda = local_device_plan("CL:local");
  on_cuda["buffers"]["h"]["device"] = "CUDA:local";
  try {
    load_plan(parse(dir, on_cuda));  // a machine with a GPU opens its first
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("buffers.h.device: device \"CUDA:local\""), std::string::npos) << e.what();
  }
}

// "CPU:local" is the CPU on every rank (one CPU device), in every build.
TEST(PlanFileCollective, CpuLocalIsTheCpu) {
  TempDir dir;
  Json plan = collective_plan();
  plan["device"] = "cpu:local";
  const PlanFile file = parse(dir, plan);
  run_local_ranks(
      4,
      [&](Communicator& comm) {
        LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
        EXPECT_EQ(loaded.plan.buffer(*loaded.plan.find_buffer("g")).device().name(), "CPU");
      },
      test::quick_comm_options());
}

}  // namespace
}  // namespace svod

namespace svod {
namespace {

// A plan with collectives saves on each rank and loads back on the ranks:
// the saved plans compute bitwise what the originals do (g, all-reduced in
// place, is state and keeps its value).
TEST(PlanFileCollective, SavedOnTwoLocalRanksComputesBitwiseTheSame) {
  TempDir dir;
  Json plan = collective_plan();
  plan["buffers"]["all"]["count"] = 4;  // two ranks gather two parts
  const PlanFile file = parse(dir, plan);
  run_local_ranks(
      2,
      [&](Communicator& comm) {
        LoadedPlan original = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
        original.execute();
        const std::filesystem::path folder = dir / fmt::format("rank{}", comm.rank());
        save_plan(original.plan, folder);
        const PlanFile saved = parse_plan_file(folder / "plan.json");
        EXPECT_EQ(saved.find_buffer("g")->role, BufferRole::State);
        LoadedPlan copy = load_plan(saved, LoadOptions{.communicator = borrowed(comm)});
        for (int run = 0; run < 2; ++run) {
          original.execute();
          copy.execute();
          for (const char* name : {"mine", "all", "g"})
            EXPECT_EQ(values<float>(original, name), values<float>(copy, name)) << name << ", rank " << comm.rank();
          EXPECT_EQ(values<int32_t>(original, "w"), values<int32_t>(copy, "w")) << "rank " << comm.rank();
        }
      },
      test::quick_comm_options());
}

}  // namespace
}  // namespace svod
