// Buffers: typed byte ranges of a Storage (one allocation on one device).
// Views share their base's storage; the storage id and byte range are what
// plans use to find read/write hazards between operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "svod/base/dtype.h"

namespace svod {

class Device;

// One allocation. Subclasses own device memory; host-visible storage passes
// its address to the constructor, and host_data() returns it without a
// virtual call (it is read on every kernel launch).
class Storage {
 public:
  Storage(Device& device, size_t bytes, void* host_data = nullptr);
  virtual ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device& device() const noexcept { return *device_; }
  size_t bytes() const noexcept { return bytes_; }
  uint64_t id() const noexcept { return id_; }  // unique in the process, never reused
  void* host_data() const noexcept { return host_data_; }
  // Memory svod may read but never write (a read-only array it wraps):
  // launches, plans and copies that would write it are Validation errors.
  bool read_only() const noexcept { return read_only_; }
  // Host memory between guard pages (checked mode, svod/guard/guarded_memory.h).
  bool guarded() const noexcept { return guarded_; }

 protected:
  void set_host_data(void* data) noexcept { host_data_ = data; }
  void set_read_only() noexcept { read_only_ = true; }
  void set_guarded() noexcept { guarded_ = true; }

 private:
  void* host_data_;
  bool read_only_ = false;
  bool guarded_ = false;
  Device* device_;
  size_t bytes_;
  uint64_t id_;
};

// Host memory: 64-byte aligned, zero-filled. By default each allocation ends
// at most 63 bytes before an inaccessible guard page (fenced:
// svod/guard/guarded_memory.h, Guards::After), so a kernel that writes past
// its end faults at once and the fault names the buffer; in checked mode
// (memory) it lies between guards on both sides instead (16-byte aligned).
// Either is an anonymous mapping, which the kernel zeroes a page at a time
// on first touch: a large buffer of which a kernel uses a little costs only
// the pages it uses, and making it writes nothing. Where fencing is off
// (SVOD_GUARD_PAGES=0) or the process has too many fenced buffers alive,
// allocations from kMapThreshold bytes up are plain mappings and smaller
// ones come from malloc's heap. A
// request above host_memory_limit() is refused up front (Error Unsupported,
// with the size asked for and the memory available) instead of failing
// later, page by page, in the OOM killer.
class HostStorage final : public Storage {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMapThreshold = size_t{1} << 20;
  HostStorage(Device& device, size_t bytes);
  ~HostStorage() override;

 private:
  enum class Memory : uint8_t { Heap, Mapping, Fenced, Guarded };
  Memory kind_ = Memory::Heap;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<Storage> storage, DType dtype, size_t byte_offset, size_t bytes);
  explicit Buffer(std::shared_ptr<Storage> storage, DType dtype);  // the whole storage

  bool valid() const noexcept { return storage_ != nullptr; }
  DType dtype() const noexcept { return dtype_; }
  size_t byte_offset() const noexcept { return offset_; }
  size_t bytes() const noexcept { return bytes_; }
  size_t count() const noexcept { return bytes_ / size_of(dtype_); }
  Storage& storage() const noexcept { return *storage_; }
  const std::shared_ptr<Storage>& storage_ptr() const noexcept { return storage_; }
  uint64_t storage_id() const noexcept { return storage_->id(); }
  Device& device() const noexcept { return storage_->device(); }

  bool is_host() const noexcept { return storage_ && storage_->host_data() != nullptr; }
  // Where the first byte is, for alignment checks: its host address, or its
  // offset into device memory (whose allocations are aligned).
  uint64_t first_byte() const noexcept {
    const auto* base = static_cast<const std::byte*>(storage_ ? storage_->host_data() : nullptr);
    return base ? reinterpret_cast<uint64_t>(base + offset_) : offset_;
  }
  // Host address of the first byte; throws Error(Unsupported) for device memory.
  void* data() const;
  template <typename T>
  std::span<T> span() const {
    return {static_cast<T*>(data()), bytes_ / sizeof(T)};
  }

  // A view of `count` elements starting at element `offset`, in this buffer's
  // dtype (or `dtype`, whose size must divide the range). Throws Validation
  // when the range leaves this buffer.
  Buffer view(size_t offset, size_t count) const;
  // `bytes` from `byte_offset` as elements of `dtype`; the first byte must be
  // aligned to the element size (Error(Validation) otherwise).
  Buffer view_bytes(size_t byte_offset, size_t bytes, DType dtype) const;

  // True when the two share at least one byte: overlapping ranges of one
  // storage, or host memory at overlapping addresses whatever its storages
  // (wrapped arrays, package data). Device memory of different storages
  // never overlaps.
  bool overlaps(const Buffer& other) const noexcept;

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::U8;
  size_t offset_ = 0;
  size_t bytes_ = 0;
};

// Error(Validation) "`what`: ... is read-only" when `b`'s storage is.
void check_writable(const Buffer& b, std::string_view what);

// The bytes of `count` elements of `dtype`; Error(Validation) naming both
// when that is more than 64 bits hold. Every device's allocate() sizes its
// memory with it.
size_t checked_byte_size(DType dtype, size_t count);
// `count` elements of `dtype` in new HostStorage owned by `owner`;
// Error(Validation) when the byte size overflows.
Buffer allocate_host_buffer(Device& owner, DType dtype, size_t count);
// dst <- src for host buffers (equal byte sizes, Error(Validation) otherwise);
// the ranges may overlap.
void copy_host_buffers(const Buffer& dst, const Buffer& src);

}  // namespace svod
