// Device conformance: one suite, written once against Device, Program, Queue
// and ExecutionPlan, and instantiated for device 0 of every kind the registry
// holds (CPU, CL:0, CUDA:0, and any kind a test registers, like the NULL
// device beside this file). A device this machine lacks skips with the
// reason. Each kernel runs in the device's own language: the first of its
// Device::languages() whose kernels a test folder registered
// (conformance_kernels.h), with the same parameters everywhere, so the checks
// are the same everywhere: allocation,
// copies both ways and device to device, views at offsets, elementwise and
// reduction kernels against the CPU, launch checks, events and timing, plans
// with variables in launch sizes, poisoning and rebinding. Device-only
// behaviour (pinned staging, CUDA graphs, OpenCL sub-buffer alignment, build
// logs) stays in tests/cuda and tests/opencl.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "svod/base/error.h"
#include "svod/custom/custom_function.h"
#include "svod/device/host_device.h"
#include "svod/device/queue.h"
#include "svod/registry/registry.h"
#include "svod/plan/execution_plan.h"
#include "tests/device/conformance_kernels.h"
#include "tests/device/null_device.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::ConformanceKernels;
using test::kind_of;

class DeviceConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      device_ = open_device(GetParam());
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
      GTEST_SKIP() << GetParam() << " is not available here: " << e.what();
    }
    host_ = &host_device();
    try {
      kernels_ = &test::conformance_kernels_for(device_->languages());
    } catch (const Error& e) {
      FAIL() << device_->name() << ": " << e.what();
    }
  }

  Device& dev() { return *device_; }
  // Whether the kernels run over a grid of work-items, or on host threads
  // in core_id slices (ConformanceKernels::Launch).
  bool grid() const { return kernels_->launch == ConformanceKernels::Launch::Grid; }

  Buffer host(DType dtype, size_t count) { return host_->allocate(dtype, count); }
  template <typename T>
  Buffer upload(const std::vector<T>& values, DType dtype) {
    Buffer h = host(dtype, values.size());
    std::copy(values.begin(), values.end(), h.span<T>().begin());
    Buffer d = dev().allocate(dtype, values.size());
    dev().copy(d, h);
    return d;
  }
  template <typename T = float>
  std::vector<T> download(const Buffer& d) {
    Buffer h = host(d.dtype(), d.count());
    (d.is_host() ? *host_ : d.device()).copy(h, d);
    auto s = h.span<T>();
    return {s.begin(), s.end()};
  }

  // The spec of one of the kernels, for the caller to declare its parameters.
  ProgramSpec spec(const std::string& entry, const std::string& source) const {
    ProgramSpec s;
    s.entry = entry;
    s.language = kernels_->language;
    s.source = source;
    return s;
  }

  // o[i] = 2 a[i] + b[i] for i < n; every buffer declares n elements.
  std::shared_ptr<const Program> axpb() {
    ProgramSpec s = spec("axpb", kernels_->axpb);
    s.buffers = {{"o", Access::Write, DType::F32, Expr::parse("n")},
                 {"a", Access::Read, DType::F32, Expr::parse("n")},
                 {"b", Access::Read, DType::F32, Expr::parse("n")}};
    s.scalars = {{"n", ScalarType::I32, 1, 1 << 24}};
    if (grid()) {
      s.global_size[0] = Expr::parse("(n+63)/64");
      s.local_size[0] = Expr::constant(64);
    }
    return dev().compile(s);
  }

  // s[0] = a[0] + ... + a[n-1], summed in order by one work-item.
  std::shared_ptr<const Program> total() {
    ProgramSpec s = spec("total", kernels_->total);
    s.buffers = {{"s", Access::Write, DType::F32, Expr::constant(1)}, {"a", Access::Read, DType::F32, Expr::parse("n")}};
    s.scalars = {{"n", ScalarType::I32, 1, 1 << 24}};
    return dev().compile(s);
  }

  // o[i] = i + 1 for every work-item (grid kernels) or core_id slice;
  // the launch size names plan variables G (groups or slices) and L (items
  // per group), which the kernel does not take.
  std::shared_ptr<const Program> mark() {
    ProgramSpec s = spec("mark", kernels_->mark);
    s.buffers = {{"o", Access::Write, DType::I32}};
    if (!grid()) s.scalars = {{"core_id", ScalarType::I32}};
    s.global_size[0] = Expr::parse("G");
    s.local_size[0] = Expr::parse("L");
    return dev().compile(s);
  }
  int64_t items_per_group() const { return grid() ? 4 : 1; }

  static std::vector<float> ramp(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7) - 2.0f;
    return v;
  }

  std::shared_ptr<Device> device_;
  Device* host_ = nullptr;
  const ConformanceKernels* kernels_ = nullptr;  // in the device's language
};

TEST_P(DeviceConformance, AllocatesZeroedBuffersAndCopiesBothWaysAndWithinTheDevice) {
  Buffer d = dev().allocate(DType::F32, 1000);
  EXPECT_EQ(d.bytes(), 4000u);
  EXPECT_EQ(&d.device(), &dev());
  EXPECT_EQ(download(d), std::vector<float>(1000, 0.0f));
  const auto values = ramp(1000);
  Buffer up = upload(values, DType::F32);
  EXPECT_EQ(download(up), values);
  Buffer other = dev().allocate(DType::F32, 1000);
  dev().copy(other, up);  // device to device
  EXPECT_EQ(download(other), values);
  EXPECT_EQ(kind_of([&] { dev().copy(dev().allocate(DType::F32, 999), up); }), ErrorKind::Validation);
  Buffer empty = dev().allocate(DType::F32, 0);
  EXPECT_EQ(empty.bytes(), 0u);
}

TEST_P(DeviceConformance, ViewsAtOffsetsCopyAndRunKernels) {
  constexpr size_t kN = 2048, kAt = 256, kCount = 512;  // the view starts 1 KiB in
  const auto values = ramp(kN);
  Buffer base = upload(values, DType::F32);
  Buffer view = base.view(kAt, kCount);
  EXPECT_EQ(view.byte_offset(), kAt * 4);
  EXPECT_EQ(download(view), std::vector<float>(values.begin() + kAt, values.begin() + kAt + kCount));
  // Writing through the view touches only its range.
  Buffer ones = host(DType::F32, kCount);
  std::fill_n(ones.span<float>().begin(), kCount, 1.0f);
  dev().copy(view, ones);
  const auto after = download(base);
  EXPECT_EQ(after[kAt - 1], values[kAt - 1]);
  EXPECT_EQ(after[kAt], 1.0f);
  EXPECT_EQ(after[kAt + kCount - 1], 1.0f);
  EXPECT_EQ(after[kAt + kCount], values[kAt + kCount]);
  // A kernel over views: o = 2 * view + view into another view.
  Buffer out = dev().allocate(DType::F32, kN);
  const Buffer args[] = {out.view(kAt, kCount), view, view};
  const int64_t n[] = {kCount};
  axpb()->launch(args, n);
  const auto result = download(out);
  EXPECT_EQ(result[kAt - 1], 0.0f);
  EXPECT_EQ(result[kAt], 3.0f);
  EXPECT_EQ(result[kAt + kCount - 1], 3.0f);
  EXPECT_EQ(result[kAt + kCount], 0.0f);
}

TEST_P(DeviceConformance, ElementwiseKernelMatchesTheCpu) {
  constexpr size_t kN = 1000;
  std::vector<float> a = ramp(kN), b(kN);
  for (size_t i = 0; i < kN; ++i) b[i] = 0.5f * static_cast<float>(i);
  Buffer da = upload(a, DType::F32), db = upload(b, DType::F32), o = dev().allocate(DType::F32, kN);
  const Buffer args[] = {o, da, db};
  const int64_t n[] = {kN};
  axpb()->launch(args, n);
  const auto got = download(o);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(got[i], 2.0f * a[i] + b[i]) << i;
}

TEST_P(DeviceConformance, ReductionKernelMatchesTheCpu) {
  constexpr size_t kN = 4099;
  const auto a = ramp(kN);
  Buffer da = upload(a, DType::F32), s = dev().allocate(DType::F32, 1);
  const Buffer args[] = {s, da};
  const int64_t n[] = {kN};
  total()->launch(args, n);
  float want = 0.0f;
  for (float v : a) want += v;
  EXPECT_EQ(download(s)[0], want);
}

TEST_P(DeviceConformance, LaunchesAreCheckedBeforeAnythingRuns) {
  auto program = axpb();
  Buffer a = dev().allocate(DType::F32, 64), o = dev().allocate(DType::F32, 64);
  const int64_t n64[] = {64};
  const Buffer two[] = {o, a};
  EXPECT_EQ(kind_of([&] { program->launch(two, n64); }), ErrorKind::Validation);
  const Buffer three[] = {o, a, a};
  const int64_t n65[] = {65};  // the buffers declare n elements and hold 64
  std::string message;
  EXPECT_EQ(kind_of([&] { program->launch(three, n65); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("bytes"), std::string::npos) << message;
  const int64_t zero[] = {0};  // below the declared minimum of 1
  EXPECT_EQ(kind_of([&] { program->launch(three, zero); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { program->launch(three, {}); }), ErrorKind::Validation);
  const Buffer with_empty[] = {o, Buffer{}, a};
  EXPECT_EQ(kind_of([&] { program->launch(with_empty, n64); }), ErrorKind::Validation);
  if (!dev().memory_is_host()) {
    // Host memory is not an argument of a device kernel.
    const Buffer with_host[] = {o, host(DType::F32, 64), a};
    EXPECT_EQ(kind_of([&] { program->launch(with_host, n64); }), ErrorKind::Validation);
  }
  EXPECT_EQ(download(o), std::vector<float>(64, 0.0f));  // nothing ran
}

TEST_P(DeviceConformance, QueuesOrderWorkAndEventsTimeIt) {
  Queue& queue = dev().queue();
  EXPECT_EQ(&queue.device(), &dev());
  if (!dev().memory_is_host()) EXPECT_FALSE(queue.runs_inline());  // a host device's queue may be either
  EXPECT_TRUE(queue.can_wait_on(queue));
  constexpr size_t kN = 4096;
  const auto a = ramp(kN);
  Buffer h = host(DType::F32, kN);
  std::copy(a.begin(), a.end(), h.span<float>().begin());
  Buffer da = dev().allocate(DType::F32, kN), o = dev().allocate(DType::F32, kN), back = host(DType::F32, kN);
  // Copy in, launch after it, copy out after that: each waits on the last.
  const EventPtr in = queue.copy(da, h);
  const Buffer args[] = {o, da, da};
  const int64_t n[] = {kN};
  const EventPtr waits_in[] = {in};
  const EventPtr ran = queue.launch(*axpb(), {args, n}, waits_in);
  const EventPtr waits_ran[] = {ran};
  const EventPtr out = queue.copy(back, o, waits_ran);
  const EventPtr waits_out[] = {out};
  const EventPtr all = queue.record(waits_out);  // after everything so far
  EXPECT_EQ(all == nullptr, queue.runs_inline());
  if (all) all->wait();
  for (size_t i = 0; i < kN; i += 97) ASSERT_EQ(back.span<float>()[i], 3.0f * a[i]) << i;
  queue.finish();
  // Devices with events time the command on the device; inline queues
  // finish before returning and give no event.
  EXPECT_EQ(ran == nullptr, queue.runs_inline());
  if (ran) EXPECT_GE(ran->duration().count(), 0);
  EXPECT_GE(axpb()->time_launch({args, n}).count(), 0);
  // A launch refused by its checks submits nothing.
  const Buffer bad[] = {o, da};
  EXPECT_EQ(kind_of([&] { queue.launch(*axpb(), {bad, n}); }), ErrorKind::Validation);
}

TEST_P(DeviceConformance, PlansTakeLaunchSizesFromVariables) {
  constexpr size_t kCells = 64;
  const int64_t per_group = items_per_group();
  ExecutionPlanBuilder builder;
  builder.add_variable({"G", 1, 16}, 2);
  builder.add_variable({"L", per_group, per_group}, per_group);
  const size_t d = builder.add_buffer(dev().allocate(DType::I32, kCells), "d");
  const size_t h = builder.add_buffer(host(DType::I32, kCells), "h");
  builder.add_op(KernelOp{mark(), {d}, {}, {}}, OpOptions{.id = "mark"});
  builder.add_op(CopyOp{h, d});
  ExecutionPlan plan = builder.build();
  auto check = [&](int64_t groups) {
    const auto got = plan.buffer(h).span<int32_t>();
    const int64_t items = groups * per_group;
    for (int64_t i = 0; i < static_cast<int64_t>(kCells); ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], i < items ? i + 1 : 0) << i << " with G = " << groups;
  };
  plan.execute();
  check(2);
  plan.execute_with_vars({{"G", 5}}, ExecuteOptions{.sequential = true});
  check(5);
  EXPECT_EQ(plan.variable("G"), 5);
  // A value out of bounds changes nothing and runs nothing.
  EXPECT_EQ(kind_of([&] { plan.execute_with_vars({{"G", 17}}); }), ErrorKind::Validation);
  EXPECT_EQ(plan.variable("G"), 5);
  EXPECT_FALSE(plan.poisoned());
}

TEST_P(DeviceConformance, AFailureInAPlanPoisonsIt) {
  for (bool sequential : {false, true}) {
    constexpr size_t kN = 256;
    ExecutionPlanBuilder builder;
    const size_t a = builder.add_buffer(upload(ramp(kN), DType::F32), "a");
    const size_t o = builder.add_buffer(dev().allocate(DType::F32, kN), "o");
    const size_t h = builder.add_buffer(host(DType::F32, kN), "h");
    builder.add_op(KernelOp{axpb(), {o, a, a}, {Expr::constant(kN)}, {}});
    CustomOp fail{"fail", {o}, {}, nullptr};
    fail.def = std::make_shared<const CustomFunctionDef>(CustomFunctionDef{
        [](std::span<const Buffer>, const Attrs&, const VariableValues&) {
          throw make_error(ErrorKind::Execution, "the host step failed");
        },
        [](std::span<const Buffer>, const Attrs&) { return std::vector<Access>{Access::ReadWrite}; }});
    builder.add_op(std::move(fail), OpOptions{.id = "host step"});
    builder.add_op(CopyOp{h, o});
    ExecutionPlan plan = builder.build();
    std::string message;
    EXPECT_EQ(kind_of([&] { plan.execute(ExecuteOptions{.sequential = sequential}); }, &message),
              ErrorKind::Execution);
    EXPECT_NE(message.find("op 1 (host step)"), std::string::npos) << message;
    EXPECT_TRUE(plan.poisoned());
    EXPECT_EQ(plan.buffer(h).span<float>()[1], 0.0f);  // the copy after it never ran
    EXPECT_EQ(kind_of([&] { plan.execute(); }, &message), ErrorKind::PlanPoisoned);
    EXPECT_NE(message.find("the host step failed"), std::string::npos) << message;
    EXPECT_EQ(kind_of([&] { plan.replicate(); }), ErrorKind::PlanPoisoned);
  }
}

TEST_P(DeviceConformance, RebindingMovesResultsAndReplicasAreIndependent) {
  constexpr size_t kN = 300;
  const auto a = ramp(kN);
  ExecutionPlanBuilder builder;
  const size_t sa = builder.add_buffer(upload(a, DType::F32), "a");
  const size_t so = builder.add_buffer(dev().allocate(DType::F32, kN), "o");
  builder.add_op(KernelOp{axpb(), {so, sa, sa}, {Expr::constant(kN)}, {}});
  ExecutionPlan plan = builder.build();
  Buffer first = plan.buffer(so);
  plan.execute();
  Buffer second = dev().allocate(DType::F32, kN);
  plan.rebind(so, second);
  Buffer first_before = dev().allocate(DType::F32, kN);
  dev().copy(first_before, first);
  ExecutionPlan replica = plan.replicate();
  plan.execute();
  const auto got = download(second);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(got[i], 3.0f * a[i]) << i;
  // The replica writes its own copy of the output.
  EXPECT_NE(replica.buffer(so).storage_id(), second.storage_id());
  replica.execute();
  EXPECT_EQ(download(replica.buffer(so))[5], 3.0f * a[5]);
  // The replacement must match the slot: size, dtype and device.
  EXPECT_EQ(kind_of([&] { plan.rebind(so, dev().allocate(DType::F32, kN + 1)); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { plan.rebind(so, dev().allocate(DType::I32, kN)); }), ErrorKind::Validation);
  if (!dev().memory_is_host())
    EXPECT_EQ(kind_of([&] { plan.rebind(so, host(DType::F32, kN)); }), ErrorKind::Validation);
}

// NULL runs the suite in its own language with the kernels NULL's files
// register (null_conformance_kernels.cpp), although it runs C too.
TEST(ConformanceKernels, NullRunsTheSuiteInItsOwnLanguage) {
  EXPECT_EQ(test::conformance_kernels_for(open_device("NULL:0")->languages()).language, kNullLanguage);
}

TEST(ConformanceKernels, ADeviceWhoseLanguagesHaveNoneIsToldWhatIsMissing) {
  const Language languages[] = {Language("glsl"), Language("spirv")};
  std::string message;
  EXPECT_EQ(kind_of([&] { test::conformance_kernels_for(languages); }, &message), ErrorKind::Unsupported);
  EXPECT_NE(message.find("no conformance kernels in its languages (glsl, spirv)"), std::string::npos) << message;
  EXPECT_NE(message.find("nullc"), std::string::npos) << message;  // one that has some
}

TEST(ConformanceKernels, OneLanguageHasOneSet) {
  std::string message;
  EXPECT_EQ(kind_of([&] { test::register_conformance_kernels({.language = kNullLanguage}); }, &message),
            ErrorKind::Validation);
  EXPECT_NE(message.find("conformance kernels in nullc are registered twice"), std::string::npos) << message;
}

std::string device_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (char c : info.param)
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  return name;
}

// Device 0 of every registered kind, named as the registry names it.
std::vector<std::string> every_kind() {
  std::vector<std::string> devices;
  for (const auto& kind : device_registry().kinds()) devices.push_back(device_registry().canonical_name(kind));
  return devices;
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceConformance, ::testing::ValuesIn(every_kind()), device_test_name);

}  // namespace
}  // namespace svod
