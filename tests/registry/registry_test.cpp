// DeviceRegistry: device strings, once-per-process creation, retry after a
// failed creation, concurrent opens, listings.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/registry/registry.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using namespace std::chrono_literals;

// A device that only has a name; enough to tell instances apart.
class NamedDevice final : public Device {
 public:
  explicit NamedDevice(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Buffer allocate(DType, size_t) override { throw make_error(ErrorKind::Unsupported, "test device"); }
  std::span<const Language> languages() const noexcept override { return {}; }
  const Compiler& compiler() const override { throw make_error(ErrorKind::Unsupported, "test device"); }
  std::shared_ptr<const Program> load(const ProgramSpec&, const Artifact&) override {
    throw make_error(ErrorKind::Unsupported, "test device");
  }
  void copy(const Buffer&, const Buffer&) override { throw make_error(ErrorKind::Unsupported, "test device"); }

 private:
  std::string name_;
};

DeviceKind test_kind(std::string name, size_t count, std::function<std::shared_ptr<Device>(size_t)> create) {
  DeviceKind kind;
  kind.name = std::move(name);
  kind.enumerate = [name = kind.name, count] {
    std::vector<DeviceInfo> out;
    for (size_t i = 0; i < count; ++i) out.push_back({name + ":" + std::to_string(i), "test device"});
    return out;
  };
  kind.create = std::move(create);
  return kind;
}

using test::kind_of;

TEST(Registry, CpuIsTheProcessCpuDeviceUnderEverySpelling) {
  auto cpu = open_device("CPU");
  EXPECT_EQ(cpu.get(), cpu_device().get());
  EXPECT_EQ(open_device("cpu").get(), cpu.get());
  EXPECT_EQ(open_device("CPU:0").get(), cpu.get());
  EXPECT_EQ(cpu->name(), "CPU");
  EXPECT_EQ(device_registry().canonical_name("cpu:0"), "CPU");
  EXPECT_EQ(device_registry().canonical_name("cl"), "CL:0");
}

TEST(Registry, BuiltInKinds) {
  const auto kinds = device_registry().kinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.front(), "CPU");
#if SVOD_HAVE_OPENCL
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "CL"), kinds.end());
#endif
}

TEST(Registry, UnknownStringsAreValidationErrorsListingKinds) {
  for (const char* spec : {"GPU", "TPU:0", "", ":0", "CPU:", "CPU:x", "CPU:-1", "CL:0:1", "CPU:1x"}) {
    std::string message;
    EXPECT_EQ(kind_of([&] { open_device(spec); }, &message), ErrorKind::Validation) << spec;
    EXPECT_NE(message.find("CPU"), std::string::npos) << message;
  }
}

TEST(Registry, KnownKindsWithoutThatDeviceAreUnavailable) {
  std::string message;
  // CUDA is in every build; no machine here has a driver and 100 GPUs.
  EXPECT_EQ(kind_of([&] { open_device("CUDA:99"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("device \"CUDA:99\""), std::string::npos) << message;
#if !SVOD_HAVE_OPENCL
  EXPECT_EQ(kind_of([&] { open_device("CL:0"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("not available in this build"), std::string::npos) << message;
#endif
}

TEST(Registry, MissingIndexSaysHowManyThereAre) {
  std::string message;
  EXPECT_EQ(kind_of([&] { open_device("CPU:1"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("has 1 CPU device"), std::string::npos) << message;

  DeviceRegistry registry;
  registry.register_kind(test_kind("TRIO", 3, [](size_t i) { return std::make_shared<NamedDevice>("TRIO:" + std::to_string(i)); }));
  EXPECT_EQ(kind_of([&] { registry.open("TRIO:3"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("has 3 TRIO devices (TRIO:0 to TRIO:2)"), std::string::npos) << message;
  registry.register_kind(test_kind("NONE", 0, [](size_t) -> std::shared_ptr<Device> { return nullptr; }));
  EXPECT_EQ(kind_of([&] { registry.open("NONE"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("no NONE device"), std::string::npos) << message;
}

// "KIND:local" is device local_rank % count of that kind, round robin; other
// names pass through unchanged; open() refuses it unresolved; a machine
// without such a device, an unknown kind and an unknown suffix are typed
// errors naming the device as written.
TEST(Registry, LocalDevicesFollowTheLocalRank) {
  DeviceRegistry registry;
  registry.register_kind(test_kind("TRIO", 3, [](size_t i) { return std::make_shared<NamedDevice>("TRIO:" + std::to_string(i)); }));
  registry.register_kind(test_kind("NONE", 0, [](size_t) -> std::shared_ptr<Device> { return nullptr; }));
  EXPECT_EQ(registry.resolve("TRIO:local", 0), "TRIO:0");
  EXPECT_EQ(registry.resolve("trio:LOCAL", 2), "TRIO:2");
  EXPECT_EQ(registry.resolve("TRIO:local", 3), "TRIO:0");
  EXPECT_EQ(registry.resolve("TRIO:local", 7), "TRIO:1");
  EXPECT_EQ(registry.resolve("CPU:local", 5), "CPU");
  EXPECT_EQ(registry.resolve("TRIO:2", 1), "TRIO:2");
  EXPECT_EQ(registry.resolve("whatever", 1), "whatever");  // open() judges it
  EXPECT_EQ(registry.open(registry.resolve("TRIO:local", 4))->name(), "TRIO:1");

  std::string message;
  EXPECT_EQ(kind_of([&] { registry.resolve("NONE:local", 0); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("device \"NONE:local\": this machine has no NONE device"), std::string::npos) << message;
  EXPECT_EQ(kind_of([&] { registry.resolve("GPU:local", 0); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("unknown device \"GPU:local\""), std::string::npos) << message;
  EXPECT_EQ(kind_of([&] { registry.resolve("TRIO:local", -1); }, &message), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { registry.open("TRIO:local"); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("device \"TRIO:local\": KIND:local names a device per rank"), std::string::npos) << message;
  EXPECT_EQ(kind_of([&] { registry.canonical_name("TRIO:local"); }), ErrorKind::Validation);
  for (const char* spec : {"TRIO:foo", "TRIO:locals", "TRIO:loc"}) {
    EXPECT_EQ(kind_of([&] { registry.open(registry.resolve(spec, 0)); }, &message), ErrorKind::Validation) << spec;
    EXPECT_NE(message.find(fmt::format("device \"{}\": expected KIND, KIND:INDEX or KIND:local", spec)),
              std::string::npos)
        << message;
  }
  // CUDA is in every build: its "local" device is this machine's first GPU
  // or, where there is none (or no driver), DeviceUnavailable naming it.
  try {
    EXPECT_EQ(resolve_device_name("CUDA:local", 0), "CUDA:0");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("device \"CUDA:local\""), std::string::npos) << e.what();
  }
}

TEST(Registry, RegisterKindValidates) {
  DeviceRegistry registry;
  EXPECT_EQ(kind_of([&] { registry.register_kind(test_kind("CPU", 1, nullptr)); }), ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { registry.register_kind(test_kind("A:B", 1, [](size_t) { return nullptr; })); }),
            ErrorKind::Validation);
  EXPECT_EQ(kind_of([&] { registry.register_kind(test_kind("", 1, [](size_t) { return nullptr; })); }),
            ErrorKind::Validation);
  registry.register_kind(test_kind("lower", 1, [](size_t) { return std::make_shared<NamedDevice>("LOWER:0"); }));
  EXPECT_EQ(registry.open("LOWER:0")->name(), "LOWER:0");
  EXPECT_EQ(kind_of([&] { registry.register_kind(test_kind("Lower", 1, [](size_t) { return nullptr; })); }),
            ErrorKind::Validation);
}

TEST(Registry, FailedCreationIsReportedAndRetried) {
  DeviceRegistry registry;
  std::atomic<int> calls{0};
  registry.register_kind(test_kind("FLAKY", 2, [&](size_t i) -> std::shared_ptr<Device> {
    if (calls.fetch_add(1) == 0) throw make_error(ErrorKind::DeviceUnavailable, "the driver is still starting");
    return std::make_shared<NamedDevice>("FLAKY:" + std::to_string(i));
  }));
  std::string message;
  EXPECT_EQ(kind_of([&] { registry.open("FLAKY:1"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("the driver is still starting"), std::string::npos) << message;
  auto device = registry.open("FLAKY:1");  // not cached: tried again
  ASSERT_TRUE(device);
  EXPECT_EQ(device->name(), "FLAKY:1");
  EXPECT_EQ(registry.open("flaky:1").get(), device.get());  // now cached
  EXPECT_EQ(calls.load(), 2);
  EXPECT_NE(registry.open("FLAKY:0").get(), device.get());
  EXPECT_EQ(calls.load(), 3);
}

TEST(Registry, ConcurrentOpensOfOneDeviceCreateItOnce) {
  DeviceRegistry registry;
  std::atomic<int> calls{0};
  registry.register_kind(test_kind("SLOW", 1, [&](size_t) {
    calls.fetch_add(1);
    std::this_thread::sleep_for(20ms);  // widen the window in which racers arrive
    return std::make_shared<NamedDevice>("SLOW:0");
  }));
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<Device>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { got[t] = registry.open("SLOW:0"); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& d : got) EXPECT_EQ(d.get(), got[0].get());
}

TEST(Registry, DifferentDevicesAreCreatedInParallel) {
  // Creating GATED:0 waits until GATED:1 has been created on another thread.
  // If creations shared a lock, GATED:1 would wait for GATED:0 and the wait
  // would run out (bounded, so a regression fails instead of hanging).
  DeviceRegistry registry;
  std::mutex mutex;
  std::condition_variable changed;
  bool zero_started = false;
  bool one_created = false;
  registry.register_kind(test_kind("GATED", 2, [&](size_t i) {
    std::unique_lock lock(mutex);
    if (i == 0) {
      zero_started = true;
      changed.notify_all();
      if (!changed.wait_for(lock, 30s, [&] { return one_created; }))
        throw make_error(ErrorKind::Timeout, "GATED:1 was not created while GATED:0 was being created");
    } else {
      one_created = true;
      changed.notify_all();
    }
    return std::make_shared<NamedDevice>("GATED:" + std::to_string(i));
  }));
  std::shared_ptr<Device> zero;
  std::exception_ptr error;
  std::thread first([&] {
    try {
      zero = registry.open("GATED:0");
    } catch (...) {
      error = std::current_exception();
    }
  });
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, 30s, [&] { return zero_started; }));
  }
  auto one = registry.open("GATED:1");
  first.join();
  ASSERT_FALSE(error);
  ASSERT_TRUE(zero && one);
  EXPECT_NE(zero.get(), one.get());
}

TEST(Registry, ListsDevicesAndUnavailableKinds) {
  const auto devices = device_registry().list_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front().name, "CPU");
  EXPECT_TRUE(devices.front().available);

  DeviceRegistry registry;
  DeviceKind broken;
  broken.name = "BROKEN";
  broken.enumerate = []() -> std::vector<DeviceInfo> {
    throw make_error(ErrorKind::DeviceUnavailable, "no driver installed");
  };
  broken.create = [](size_t) -> std::shared_ptr<Device> { return nullptr; };
  registry.register_kind(std::move(broken));
  bool found = false;
  for (const auto& d : registry.list_devices()) {
    if (d.name != "BROKEN") continue;
    found = true;
    EXPECT_FALSE(d.available);
    EXPECT_NE(d.description.find("no driver installed"), std::string::npos);
  }
  EXPECT_TRUE(found);
  std::string message;
  EXPECT_EQ(kind_of([&] { registry.open("BROKEN:0"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("device \"BROKEN:0\": no driver installed"), std::string::npos) << message;
}

#if SVOD_HAVE_OPENCL
TEST(Registry, OpenClDevicesAreSharedOrUnavailable) {
  std::shared_ptr<Device> cl;
  try {
    cl = open_device("CL:0");
  } catch (const Error& e) {
    ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  EXPECT_EQ(cl->name(), "CL:0");
  EXPECT_EQ(open_device("cl").get(), cl.get());
  bool listed = false;
  for (const auto& d : device_registry().list_devices()) listed |= d.name == "CL:0" && d.available;
  EXPECT_TRUE(listed);
  std::string message;
  EXPECT_EQ(kind_of([&] { open_device("CL:4096"); }, &message), ErrorKind::DeviceUnavailable);
  EXPECT_NE(message.find("CL device"), std::string::npos) << message;
}
#endif

}  // namespace
}  // namespace svod
