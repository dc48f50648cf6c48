#include "svod/planfile/buffer_init.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/device/device.h"

namespace svod {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and every seed, zero
// included, gives a full-period, well-mixed stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  uint64_t state_;
};

// Fills `buffer` (host memory) as desc.init says. Errors say what is wrong
// with the init (an .npy file's dtype or count); the caller says where.
void initialise_host(const PlanFileBuffer& desc, const Buffer& buffer) {
  const BufferInit& init = desc.init;
  const size_t size = size_of(desc.dtype);
  auto* out = static_cast<std::byte*>(buffer.data());
  auto each = [&](auto&& value_of) {
    for (size_t i = 0; i < desc.count; ++i) store_from_double(desc.dtype, out + i * size, value_of(i));
  };
  switch (init.kind) {
    case BufferInit::Kind::Zeros: return;  // device memory starts zeroed
    case BufferInit::Kind::Fill: each([&](size_t) { return init.a; }); return;
    case BufferInit::Kind::Arange: each([&](size_t i) { return init.a + init.b * double(i); }); return;
    case BufferInit::Kind::Uniform: {
      SplitMix64 rng(init.seed);
      each([&](size_t) { return init.a + (init.b - init.a) * rng.unit(); });
      return;
    }
    case BufferInit::Kind::Normal: {
      SplitMix64 rng(init.seed);
      each([&](size_t) {
        const double u0 = rng.unit();
        const double u1 = rng.unit();
        return init.a + init.b * std::sqrt(-2.0 * std::log(1.0 - u0)) * std::cos(2.0 * std::numbers::pi * u1);
      });
      return;
    }
    case BufferInit::Kind::Npy: {
      const NpyArray array = read_npy(init.npy);
      const bool bf16_bits = desc.dtype == DType::BF16 && array.dtype == DType::U16;
      const bool bf16_floats = desc.dtype == DType::BF16 && array.dtype == DType::F32;
      if (array.dtype != desc.dtype && !bf16_bits && !bf16_floats) {
        throw make_error(ErrorKind::Validation, "{} holds {} values, the buffer is {}{}", init.npy.string(),
                         to_string(array.dtype), to_string(desc.dtype),
                         desc.dtype == DType::BF16 ? " (bf16 buffers take u16 bit patterns or f32)" : "");
      }
      if (array.count() != desc.count) {
        throw make_error(ErrorKind::Validation, "{} holds {} elements, the buffer has {}", init.npy.string(),
                         array.count(), desc.count);
      }
      if (bf16_floats) {
        each([&](size_t i) { return double(reinterpret_cast<const float*>(array.data.data())[i]); });
      } else {
        std::memcpy(out, array.data.data(), array.data.size());
      }
      return;
    }
  }
}

}  // namespace

void initialise_buffer(const PlanFileBuffer& desc, const Buffer& buffer) {
  // Device memory is filled through a host staging buffer.
  if (desc.init.kind == BufferInit::Kind::Zeros) return;  // every device's memory starts zeroed
  if (buffer.is_host()) {
    initialise_host(desc, buffer);
    return;
  }
  // The whole buffer: an input's data may fill only its first elements.
  const Buffer staging = buffer.device().allocate_host(desc.dtype, buffer.count());
  initialise_host(desc, staging);
  buffer.device().copy(buffer, staging);
}

}  // namespace svod
