// NumPy .npy files: the exchange format for buffer contents (plan inputs,
// outputs and expected results).
//
// Reads format versions 1.0, 2.0 and 3.0; writes 1.0, or 2.0 when the header
// is too long for 1.0's 16-bit length. Only little-endian bool, integer and
// float arrays in C order are accepted (the DType set minus bf16, which numpy
// does not have: write_npy refuses it with Error(Unsupported) — callers store
// bf16 either as its "<u2" bit patterns or widened to f32, whichever the
// reader expects). Every problem with a file raises an Error naming the file:
// Io for files that cannot be opened, read or written, for paths that name no
// regular file (a FIFO, a device, a directory: see file_read.h) and for
// truncated data,
// Validation for anything malformed or unsupported inside a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "svod/base/dtype.h"

namespace svod {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<size_t> shape;    // empty for a 0-d array (one element)
  std::vector<std::byte> data;  // count() * size_of(dtype) bytes, little-endian, C order

  size_t count() const noexcept;
};

// Reads a whole .npy file.
NpyArray read_npy(const std::filesystem::path& path);

// Parses the bytes of a .npy file; `name` is what errors call it.
NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name);

// Writes `data` (count(shape) elements of `dtype`) as a .npy file. The file
// is written beside its destination under a temporary name and renamed into
// place, so readers never see half of it.
void write_npy(const std::filesystem::path& path, DType dtype, std::span<const size_t> shape,
               std::span<const std::byte> data);
inline void write_npy(const std::filesystem::path& path, const NpyArray& array) {
  write_npy(path, array.dtype, array.shape, array.data);
}

}  // namespace svod
