#include "svod/device/host_device.h"

#include <cstring>

#include "svod/base/error.h"

namespace svod {
namespace {

class HostDevice final : public Device {
 public:
  std::string name() const override { return "host"; }

  Buffer allocate(DType dtype, size_t count) override { return allocate_host_buffer(*this, dtype, count); }
  Buffer allocate_host(DType dtype, size_t count) override { return allocate(dtype, count); }
  bool memory_is_host() const noexcept override { return true; }

  std::span<const Language> languages() const noexcept override { return {}; }
  const Compiler& compiler() const override {
    throw make_error(ErrorKind::Unsupported, "the host device compiles no programs");
  }
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact&) override {
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the host device runs no programs", spec.display_name());
  }

  void copy(const Buffer& dst, const Buffer& src) override { copy_host_buffers(dst, src); }
};

}  // namespace

Device& host_device() {
  static HostDevice device;
  return device;
}

}  // namespace svod
