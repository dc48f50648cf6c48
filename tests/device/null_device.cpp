// NULL: a test-only device kind, registered from here and nowhere else, to
// show what adding a device takes: a Device that keeps the contract (memory,
// languages, a compiler, load, copy) and one register_kind call. The
// conformance suite beside this file then runs every check on "NULL:0" with
// no edit of its own, in nullc with the kernels null_conformance_kernels.cpp
// registers.
//
// It has a language and an artifact kind of its own, declared here and
// nowhere else: "nullc" (C under NULL's name) and "null_object" (an ELF
// object behind NULL's magic), which plan files name, the object cache stores
// and packages carry with no edit of theirs (null_device_test.cpp).
//
// It is made of parts below the registry: host memory, the CPU's clang
// compiler, svod's ELF loader, and CpuProgram for the launch, under a device
// of its own, so its programs, kernel cache scope and buffers are its own.
// Unlike the CPU's, its queue is not inline: runners submit to it and wait on
// its events as they do on a GPU's, and it keeps a log of both
// (null_device.h) for tests that check how a runner waits.
#include "tests/device/null_device.h"

#include <chrono>
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/loader/elf_loader.h"
#include "svod/registry/registry.h"

namespace svod {
namespace {

std::mutex log_mutex;
std::string queue_log;  // guarded by log_mutex

void log_queue(char what) {
  const std::lock_guard lock(log_mutex);
  queue_log += what;
}

// Its command ran when it was submitted, taking `took` on the host clock;
// waiting for it is logged.
class NullEvent final : public Event {
 public:
  explicit NullEvent(std::chrono::nanoseconds took) : took_(took) {}
  void wait() const override { log_queue('W'); }
  std::chrono::nanoseconds duration() const override { return took_; }

 private:
  std::chrono::nanoseconds took_;
};

// Runs `command` and returns its event.
template <typename Command>
EventPtr run_command(char what, Command&& command) {
  log_queue(what);
  const auto start = std::chrono::steady_clock::now();
  command();
  return std::make_shared<NullEvent>(std::chrono::steady_clock::now() - start);
}

// Runs each command on the calling thread as it is submitted (so its events
// are complete at once), logging the submission.
class NullQueue final : public Queue {
 public:
  explicit NullQueue(Device& device) : device_(&device) {}
  Device& device() const noexcept override { return *device_; }
  EventPtr launch(const Program& program, const LaunchArgs& call, std::span<const EventPtr> waits) override {
    if (&program.device() != device_)
      throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to NULL:0",
                       program.spec().display_name(), program.device().name());
    wait_all(waits);
    return run_command('L', [&] { program.launch(call); });
  }
  EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits) override {
    wait_all(waits);
    return run_command('C', [&] { copy_buffer(dst, src); });
  }
  EventPtr record(std::span<const EventPtr> waits) override {
    wait_all(waits);
    return std::make_shared<NullEvent>(std::chrono::nanoseconds(0));
  }
  void finish() override {}

 private:
  Device* device_;
};

constexpr char kNullMagic[8] = {'S', 'V', 'O', 'D', 'N', 'U', 'L', '1'};

// C and nullc through the CPU's clang compiler, the object behind NULL's magic.
class NullCompiler final : public Compiler {
 public:
  NullCompiler() : clang_(cpu_compiler(CpuCompiler::Clang)), identity_(clang_->identity()) {
    identity_.name = "null";  // its artifacts are not clang's: keys of their own
  }
  const CompilerIdentity& identity() const override { return identity_; }
  Artifact compile(const ProgramSpec& spec) const override {
    if (spec.language != kNullLanguage && spec.language != Language::C)
      throw make_error(ErrorKind::Unsupported, "program \"{}\": NULL compiles nullc and c, not {}",
                       spec.display_name(), to_string(spec.language));
    ProgramSpec c = spec;
    c.language = Language::C;
    Artifact object = clang_->compile(c);
    std::vector<std::byte> bytes(sizeof kNullMagic + object.bytes.size());
    std::memcpy(bytes.data(), kNullMagic, sizeof kNullMagic);
    std::copy(object.bytes.begin(), object.bytes.end(), bytes.begin() + sizeof kNullMagic);
    return Artifact{kNullObject, std::move(bytes), object.phases};
  }

 private:
  std::shared_ptr<const Compiler> clang_;
  CompilerIdentity identity_;
};

class NullDevice final : public Device {
 public:
  NullDevice() : queue_(*this) {}

  std::string name() const override { return "NULL:0"; }
  Buffer allocate(DType dtype, size_t count) override { return allocate_host_buffer(*this, dtype, count); }
  bool memory_is_host() const noexcept override { return true; }
  void copy(const Buffer& dst, const Buffer& src) override { copy_host_buffers(dst, src); }
  Queue& queue() override { return queue_; }

  std::span<const Language> languages() const noexcept override {
    static constexpr Language kLanguages[] = {kNullLanguage, Language::C};
    return kLanguages;
  }
  const Compiler& compiler() const override { return compiler_; }
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override {
    const std::span<const std::byte> bytes(artifact.bytes);
    if (artifact.kind != kNullObject || bytes.size() < sizeof kNullMagic ||
        std::memcmp(bytes.data(), kNullMagic, sizeof kNullMagic) != 0)
      throw make_error(ErrorKind::Load, "program \"{}\": NULL:0 loads null_object artifacts, not {}",
                       spec.display_name(), artifact.kind.name());
    auto image = LoadedImage::load(bytes.subspan(sizeof kNullMagic));
    void* entry = image->symbol(spec.entry);
    return std::make_shared<CpuProgram>(*this, spec, std::move(image), entry);
  }

 private:
  NullCompiler compiler_;
  NullQueue queue_;
};

DeviceKind null_device_kind() {
  DeviceKind kind;
  kind.name = "NULL";
  kind.enumerate = [] { return std::vector<DeviceInfo>{{"NULL:0", "test-only: host memory, nullc and C through clang"}}; };
  kind.create = [](size_t) -> std::shared_ptr<Device> { return std::make_shared<NullDevice>(); };
  return kind;
}

// Registered before main(), so before GoogleTest lists the conformance
// suite's devices.
const bool registered = (device_registry().register_kind(null_device_kind()), true);

}  // namespace

std::string take_null_queue_log() {
  const std::lock_guard lock(log_mutex);
  return std::exchange(queue_log, {});
}

}  // namespace svod
