#include "svod/device/buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "svod/base/error.h"
#include "svod/base/host_memory.h"
#include "svod/device/device.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/guarded_memory.h"

namespace svod {
namespace {
std::atomic<uint64_t> next_storage_id{1};
}

Storage::Storage(Device& device, size_t bytes, void* host_data)
    : host_data_(host_data), device_(&device), bytes_(bytes), id_(next_storage_id++) {}
Storage::~Storage() = default;

void check_writable(const Buffer& b, std::string_view what) {
  if (b.valid() && b.storage().read_only()) [[unlikely]]
    throw make_error(ErrorKind::Validation, "{}: the memory is read-only (a read-only array svod wraps) and would be written",
                     what);
}

namespace {
std::string size_text(uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }
}  // namespace

HostStorage::HostStorage(Device& device, size_t bytes) : Storage(device, bytes) {
  const uint64_t limit = host_memory_limit();
  if (bytes > limit) {
    throw make_error(ErrorKind::Unsupported,
                     "a host buffer of {} bytes ({}) is more than this machine can give: {} bytes ({}) available "
                     "(RAM plus swap, or the cgroup memory limit when lower)",
                     bytes, size_text(bytes), limit, size_text(limit));
  }
  if (check_mode().memory) {
    set_host_data(allocate_guarded(bytes, Guards::Around));
    set_guarded();
    kind_ = Memory::Guarded;
    return;
  }
  if (fence_host_memory()) {
    if (void* data = try_allocate_fenced(bytes)) {
      set_host_data(data);
      kind_ = Memory::Fenced;
      return;
    }
  }
  if (bytes >= kMapThreshold) {
    // Page-aligned, so 64-byte aligned; zero pages appear on first touch.
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED)
      throw make_error(ErrorKind::Execution, "out of host memory allocating {} bytes ({}) on {}: {}", bytes,
                       size_text(bytes), device.name(), std::strerror(errno));
    set_host_data(data);
    kind_ = Memory::Mapping;
    return;
  }
  // aligned_alloc needs a size that is a multiple of the alignment; a zero-byte
  // buffer still gets a distinct address.
  const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr)
    throw make_error(ErrorKind::Execution, "out of host memory allocating {} bytes on {}", bytes, device.name());
  std::memset(data, 0, rounded);
  set_host_data(data);
}

HostStorage::~HostStorage() {
  switch (kind_) {
    case Memory::Guarded:
    case Memory::Fenced: {
      const Guards guards = kind_ == Memory::Guarded ? Guards::Around : Guards::After;
      if (!gaps_intact(host_data(), bytes(), guards))
        std::fprintf(stderr, "svod: a buffer of %zu bytes at %p being freed was written just outside its range (the "
                     "canary in its alignment slack changed)\n", bytes(), host_data());
      free_guarded(host_data(), bytes(), guards);
      break;
    }
    case Memory::Mapping: ::munmap(host_data(), bytes()); break;
    case Memory::Heap: std::free(host_data()); break;
  }
}

size_t checked_byte_size(DType dtype, size_t count) {
  const auto bytes = byte_size(dtype, count);
  if (!bytes) [[unlikely]]
    throw make_error(ErrorKind::Validation, "a buffer of {} {} elements is too large: more bytes than fit in 64 bits",
                     count, to_string(dtype));
  return *bytes;
}

Buffer allocate_host_buffer(Device& owner, DType dtype, size_t count) {
  return Buffer(std::make_shared<HostStorage>(owner, checked_byte_size(dtype, count)), dtype);
}

void copy_host_buffers(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal", src.bytes(),
                     dst.bytes());
  std::memmove(dst.data(), src.data(), src.bytes());
}

Buffer::Buffer(std::shared_ptr<Storage> storage, DType dtype, size_t byte_offset, size_t bytes)
    : storage_(std::move(storage)), dtype_(dtype), offset_(byte_offset), bytes_(bytes) {
  if (!storage_) throw make_error(ErrorKind::Validation, "buffer without storage");
  if (byte_offset > storage_->bytes() || bytes > storage_->bytes() - byte_offset)
    throw make_error(ErrorKind::Validation, "buffer range [{}, {}+{}) leaves its storage of {} bytes", byte_offset,
                     byte_offset, bytes, storage_->bytes());
  if (bytes % size_of(dtype) != 0)
    throw make_error(ErrorKind::Validation, "buffer of {} bytes is not a whole number of {} elements", bytes,
                     to_string(dtype));
}

Buffer::Buffer(std::shared_ptr<Storage> storage, DType dtype)
    : Buffer(storage, dtype, 0, storage ? storage->bytes() : 0) {}

void* Buffer::data() const {
  void* base = storage_ ? storage_->host_data() : nullptr;
  if (base == nullptr)
    throw make_error(ErrorKind::Unsupported, "buffer on {} is not host memory; copy it to a CPU buffer first",
                     storage_ ? storage_->device().name() : std::string("no device"));
  return static_cast<std::byte*>(base) + offset_;
}

Buffer Buffer::view(size_t offset, size_t count) const {
  const size_t elem = size_of(dtype_);
  if (offset > this->count() || count > this->count() - offset)
    throw make_error(ErrorKind::Validation, "view [{}, {}+{}) leaves its base of {} {} elements", offset, offset, count,
                     this->count(), to_string(dtype_));
  return Buffer(storage_, dtype_, offset_ + offset * elem, count * elem);
}

Buffer Buffer::view_bytes(size_t byte_offset, size_t bytes, DType dtype) const {
  if (byte_offset > bytes_ || bytes > bytes_ - byte_offset)
    throw make_error(ErrorKind::Validation, "view of bytes [{}, {}+{}) leaves its base of {} bytes", byte_offset,
                     byte_offset, bytes, bytes_);
  // A view whose first byte is not aligned to its element size would hand
  // kernels a misaligned pointer.
  if ((first_byte() + byte_offset) % size_of(dtype) != 0)
    throw make_error(ErrorKind::Validation,
                     "a {} view at byte {} of its base is misaligned: {} elements must start at a multiple of {} bytes",
                     to_string(dtype), byte_offset, to_string(dtype), size_of(dtype));
  return Buffer(storage_, dtype, offset_ + byte_offset, bytes);
}

bool Buffer::overlaps(const Buffer& other) const noexcept {
  if (!storage_ || !other.storage_) return false;
  if (storage_ == other.storage_) return offset_ < other.offset_ + other.bytes_ && other.offset_ < offset_ + bytes_;
  // Two storages over one host memory: two wraps of one numpy array, or of an
  // array and a view of it.
  if (!is_host() || !other.is_host()) return false;
  const uint64_t begin = first_byte(), other_begin = other.first_byte();
  return begin < other_begin + other.bytes_ && other_begin < begin + bytes_;
}

}  // namespace svod
