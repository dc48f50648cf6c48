// save_plan and to_plan_file: a plan built in code, saved and loaded again,
// computes bitwise what the original computes, its buffers saved with the
// roles their accesses give them; what a plan file cannot express is refused
// naming it; and a save is all or nothing.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/planfile/plan_save.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

ProgramSpec kernel(std::string entry, std::string body, std::vector<BufferParam> buffers) {
  return test::c_kernel(std::move(entry), std::move(body), std::move(buffers), {ScalarParam{"n", ScalarType::I64}});
}

// y = x * w + acc after acc += x: x an input of n floats (n a variable, at
// most 8), w a constant, acc state, t scratch, y the output.
struct Model {
  ExecutionPlan plan;
  size_t x, w, acc, t, y;
};

Model build_model() {
  const auto mul = cpu_device()->compile(
      kernel("mul", "void mul(float* t, const float* x, const float* w, long long n) { for (long long i = 0; i < n; ++i) t[i] = x[i] * w[i]; }",
             {{"t", Access::Write, DType::F32}, {"x", Access::Read, DType::F32}, {"w", Access::Read, DType::F32}}));
  const auto accumulate = cpu_device()->compile(
      kernel("accumulate", "void accumulate(float* acc, const float* x, long long n) { for (long long i = 0; i < n; ++i) acc[i] += x[i]; }",
             {{"acc", Access::ReadWrite, DType::F32}, {"x", Access::Read, DType::F32}}));
  const auto add = cpu_device()->compile(
      kernel("add", "void add(float* y, const float* a, const float* b, long long n) { for (long long i = 0; i < n; ++i) y[i] = a[i] + b[i]; }",
             {{"y", Access::Write, DType::F32}, {"a", Access::Read, DType::F32}, {"b", Access::Read, DType::F32}}));
  ExecutionPlanBuilder b;
  auto floats = [&](const char* name, float first) {
    Buffer buffer = cpu_device()->allocate(DType::F32, 8);
    for (size_t i = 0; i < 8; ++i) buffer.span<float>()[i] = first + 0.25f * float(i);
    return b.add_buffer(std::move(buffer), name);
  };
  const size_t x = floats("x", 1.0f);
  const size_t w = floats("w", -0.5f);
  const size_t acc = floats("acc", 0.125f);
  const size_t t = floats("t", 0);
  const size_t y = floats("y", 0);
  b.add_variable(Variable{"n", 1, 8}, 8);
  const Expr n = Expr::parse("n");
  b.add_op(KernelOp{accumulate, {acc, x}, {n}, {}}, {.id = "accumulate"});
  b.add_op(KernelOp{mul, {t, x, w}, {n}, {}}, {.id = "mul"});
  b.add_op(KernelOp{add, {y, t, acc}, {n}, {}}, {.id = "add"});
  b.add_output(y);
  return Model{b.build(), x, w, acc, t, y};
}

SaveOptions model_options() {
  SaveOptions options;
  options.inputs.push_back(PlanPort{"x", std::string("x"), std::nullopt, {std::string("n")}});
  return options;
}

std::vector<std::byte> bytes_of(const Buffer& b) {
  const auto* p = static_cast<const std::byte*>(b.data());
  return {p, p + b.bytes()};
}

void set_floats(const Buffer& b, float first) {
  for (size_t i = 0; i < b.count(); ++i) b.span<float>()[i] = first - 0.75f * float(i);
}

TEST(PlanSave, AModelBuiltInCodeLoadsBackAndComputesBitwiseTheSame) {
  test::TempDir dir;
  Model model = build_model();
  model.plan.execute();  // the state moves on before it is saved
  save_plan(model.plan, dir.path() / "model", model_options());

  LoadedPlan loaded = load_plan(parse_plan_file(dir.path() / "model" / "plan.json"));
  ExecutionPlan& copy = loaded.plan;
  ASSERT_EQ(loaded.outputs.size(), 1u);
  EXPECT_EQ(loaded.outputs[0].name, "y");
  for (float first : {3.0f, -1.5f}) {
    set_floats(model.plan.buffer(model.x), first);
    set_floats(copy.buffer(*copy.find_buffer("x")), first);
    model.plan.execute();
    copy.execute();
    EXPECT_EQ(bytes_of(model.plan.buffer(model.y)), bytes_of(copy.buffer(*copy.find_buffer("y"))));
    EXPECT_EQ(bytes_of(model.plan.buffer(model.acc)), bytes_of(copy.buffer(*copy.find_buffer("acc"))));
  }
  // A smaller n runs over the first elements only, in both.
  model.plan.execute_with_vars({{"n", 3}});
  copy.execute_with_vars({{"n", 3}});
  EXPECT_EQ(bytes_of(model.plan.buffer(model.y)), bytes_of(copy.buffer(*copy.find_buffer("y"))));
}

// A plan loaded from a plan file saves too: the MLP example, its input x
// named with its shape, its outputs the file's.
TEST(PlanSave, APlanFromAPlanFileSavesAndComputesBitwiseTheSame) {
  test::TempDir dir;
  LoadedPlan original = load_plan(parse_plan_file(SVOD_SOURCE_DIR "/examples/mlp/plan.json"));
  SaveOptions options;
  options.inputs.push_back(PlanPort{"x", std::string("x"), std::nullopt, {int64_t{64}, int64_t{256}}});
  save_plan(original.plan, dir.path() / "mlp", options);
  const PlanFile file = parse_plan_file(dir.path() / "mlp" / "plan.json");
  EXPECT_EQ(file.find_buffer("x")->role, BufferRole::Input);
  EXPECT_EQ(file.find_buffer("x")->shape, (std::vector<size_t>{64, 256}));
  EXPECT_EQ(file.find_buffer("w1")->role, BufferRole::Constant);
  EXPECT_EQ(file.find_buffer("h1")->role, BufferRole::Scratch);
  ASSERT_EQ(file.outputs.size(), 2u);
  LoadedPlan copy = load_plan(file);
  std::memcpy(copy.plan.buffer(*copy.plan.find_buffer("x")).data(), original.plan.buffer(*original.plan.find_buffer("x")).data(),
              64 * 256 * sizeof(float));
  original.execute();
  copy.execute();
  for (const char* name : {"logits", "probs"})
    EXPECT_EQ(bytes_of(original.plan.buffer(*original.plan.find_buffer(name))),
              bytes_of(copy.plan.buffer(*copy.plan.find_buffer(name))))
        << name;
}

TEST(PlanSave, BuffersGetTheRolesTheirAccessesGive) {
  test::TempDir dir;
  Model model = build_model();
  const SavedPlan saved = to_plan_file(model.plan, model_options(), dir.path());
  auto role = [&](const char* name) {
    const PlanFileBuffer* b = saved.file.find_buffer(name);
    EXPECT_NE(b, nullptr) << name;
    return b ? b->role : std::nullopt;
  };
  EXPECT_EQ(role("x"), BufferRole::Input);
  EXPECT_EQ(role("w"), BufferRole::Constant);
  EXPECT_EQ(role("acc"), BufferRole::State);
  EXPECT_EQ(role("t"), BufferRole::Scratch);
  EXPECT_EQ(role("y"), BufferRole::Output);
  // Only constants and state carry their contents.
  EXPECT_EQ(saved.data.size(), 2u);
  EXPECT_TRUE(saved.data.contains("w"));
  EXPECT_TRUE(saved.data.contains("acc"));
  EXPECT_EQ(saved.file.find_buffer("x")->dim_variables, std::vector<std::string>{"n"});
  EXPECT_EQ(saved.file.find_buffer("t")->init.kind, BufferInit::Kind::Zeros);

  // The caller's roles win over the derived ones.
  SaveOptions options = model_options();
  options.roles.emplace_back(std::string("t"), BufferRole::State);
  EXPECT_EQ(to_plan_file(model.plan, options, dir.path()).file.find_buffer("t")->role, BufferRole::State);
}

TEST(PlanSave, UnnamedSlotsGetGeneratedNamesAndNamesGivenTwiceAreRefused) {
  ExecutionPlanBuilder b;
  const size_t a = b.add_buffer(cpu_device()->allocate(DType::F32, 4));
  const size_t c = b.add_buffer(cpu_device()->allocate(DType::F32, 4), "c");
  b.add_op(CopyOp{c, a});
  b.add_output(c);
  const ExecutionPlan plan = b.build();
  const SavedPlan saved = to_plan_file(plan, {}, ".");
  ASSERT_NE(saved.file.find_buffer("buffer0"), nullptr);
  EXPECT_EQ(saved.file.find_buffer("buffer0")->role, BufferRole::Constant);

  SaveOptions twice;
  twice.inputs.push_back(PlanPort{"c", size_t{0}, std::nullopt, {}});
  const Error e = expect_error([&] { to_plan_file(plan, twice, "."); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("\"c\" is named twice"), std::string::npos) << e.what();

  SaveOptions unknown;
  unknown.inputs.push_back(PlanPort{"q", std::string("nope"), std::nullopt, {}});
  const Error u = expect_error([&] { to_plan_file(plan, unknown, "."); });
  EXPECT_NE(std::string(u.what()).find("no buffer named \"nope\""), std::string::npos) << u.what();
}

TEST(PlanSave, AnInputShapeMustFillItsBuffer) {
  Model model = build_model();
  SaveOptions options;
  options.inputs.push_back(PlanPort{"x", std::string("x"), std::nullopt, {int64_t{2}, int64_t{3}}});
  const Error e = expect_error([&] { to_plan_file(model.plan, options, "."); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("inputs[0] (\"x\")"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("not the 32 bytes"), std::string::npos) << e.what();
}

// A host function that is not registered under its name (an executor's
// node) cannot be called by a plan file.
TEST(PlanSave, AnUnregisteredHostFunctionIsUnsupportedNamingTheOp) {
  ExecutionPlanBuilder b;
  const size_t a = b.add_buffer(cpu_device()->allocate(DType::F32, 4), "a");
  auto def = std::make_shared<CustomFunctionDef>();
  def->run = [](std::span<const Buffer>, const Attrs&, const VariableValues&) {};
  def->validate = [](std::span<const Buffer> buffers, const Attrs&) {
    return std::vector<Access>(buffers.size(), Access::ReadWrite);
  };
  b.add_op(CustomOp{"", {a}, {}, def}, {.id = "node7"});
  const ExecutionPlan plan = b.build();
  const Error e = expect_error([&] { to_plan_file(plan, {}, "."); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("node7"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("not registered"), std::string::npos) << e.what();
}

TEST(PlanSave, ASaveReplacesAnEarlierOneAndRefusesAnythingElse) {
  test::TempDir dir;
  Model model = build_model();
  const fs::path folder = dir.path() / "model";
  save_plan(model.plan, folder, model_options());
  model.plan.execute();
  save_plan(model.plan, folder, model_options());  // the state changed: saved again over the first
  LoadedPlan loaded = load_plan(parse_plan_file(folder / "plan.json"));
  EXPECT_EQ(bytes_of(model.plan.buffer(model.acc)), bytes_of(loaded.plan.buffer(*loaded.plan.find_buffer("acc"))));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u) << "a temporary folder was left behind";

  const fs::path other = dir.path() / "other";
  fs::create_directory(other);
  std::ofstream(other / "notes.txt") << "mine";
  const Error e = expect_error([&] { save_plan(model.plan, other, model_options()); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("is no saved plan"), std::string::npos) << e.what();
  EXPECT_TRUE(fs::exists(other / "notes.txt"));
}

// Nothing is left behind when writing fails: in a folder that cannot be
// written, and when a data file cannot be written (a full disk, here a
// file size limit).
TEST(PlanSave, AFailedSaveLeavesNothing) {
  test::TempDir dir;
  Model model = build_model();
  if (::geteuid() != 0) {
    const fs::path locked = dir.path() / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    const Error e = expect_error([&] { save_plan(model.plan, locked / "model", model_options()); });
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_TRUE(fs::is_empty(locked));
    fs::permissions(locked, fs::perms::owner_all);
  }
  // A child process whose file size limit is smaller than the data.
  const fs::path folder = dir.path() / "small";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {16, 16};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      save_plan(model.plan, folder, model_options());
    } catch (const Error& e) {
      ::_exit(e.kind() == ErrorKind::Io ? 3 : 4);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the save should fail with Error(Io)";
  EXPECT_TRUE(fs::is_empty(dir.path()) || !fs::exists(folder));
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".small"), std::string::npos) << e.path() << " was left behind";
}

}  // namespace
}  // namespace svod
