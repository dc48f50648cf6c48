// NULL: a test-only device kind, registered from here and nowhere else, to
// show what adding a device takes: a Device that keeps the contract (memory,
// languages, a compiler, load, copy) and one register_kind call. The
// conformance suite beside this file then runs every check on "NULL:0" with
// no edit of its own.
//
// It is made of parts below the registry: host memory, the CPU compilers,
// svod's ELF loader, and CpuProgram for the launch, under a device of its
// own, so its programs, kernel cache scope and buffers are its own.
#include <memory>
#include <string>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/loader/elf_loader.h"
#include "svod/registry/registry.h"

namespace svod {
namespace {

class NullDevice final : public Device {
 public:
  NullDevice() : compiler_(cpu_compiler(CpuCompiler::Clang)) {}

  std::string name() const override { return "NULL:0"; }
  Buffer allocate(DType dtype, size_t count) override { return allocate_host_buffer(*this, dtype, count); }
  bool memory_is_host() const noexcept override { return true; }
  void copy(const Buffer& dst, const Buffer& src) override { copy_host_buffers(dst, src); }

  std::span<const Language> languages() const noexcept override {
    static constexpr Language kLanguages[] = {Language::C};
    return kLanguages;
  }
  const Compiler& compiler() const override { return *compiler_; }
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override {
    if (artifact.kind != ArtifactKind::ElfObject)
      throw make_error(ErrorKind::Load, "program \"{}\": NULL:0 loads ELF objects", spec.display_name());
    auto image = LoadedImage::load(artifact.bytes);
    void* entry = image->symbol(spec.entry);
    return std::make_shared<CpuProgram>(*this, spec, std::move(image), entry);
  }

 private:
  std::shared_ptr<const Compiler> compiler_;
};

DeviceKind null_device_kind() {
  DeviceKind kind;
  kind.name = "NULL";
  kind.enumerate = [] { return std::vector<DeviceInfo>{{"NULL:0", "test-only: host memory, C through clang"}}; };
  kind.create = [](size_t) -> std::shared_ptr<Device> { return std::make_shared<NullDevice>(); };
  return kind;
}

// Registered before main(), so before GoogleTest lists the conformance
// suite's devices.
const bool registered = (device_registry().register_kind(null_device_kind()), true);

}  // namespace
}  // namespace svod
