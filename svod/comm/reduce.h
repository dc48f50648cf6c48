// The arithmetic of svod's collectives, shared by every transport: the names of
// the reductions (to_string, parse_reduce_op, declared in communicator.h and
// kept here so that plan-file parsing needs nothing else of comm), how an
// element count is split into one chunk per rank, and how the ranks'
// contributions to a chunk are combined (in rank order, so that the result
// does not depend on the transport).
#pragma once

#include <cstddef>
#include <span>

#include "svod/base/dtype.h"
#include "svod/comm/communicator.h"

namespace svod::detail {

struct ChunkRange {
  size_t offset = 0;  // in elements
  size_t count = 0;
};

// Rank `rank`'s chunk of `count` elements split over `ranks`: the first
// count % ranks chunks hold one element more.
ChunkRange chunk_range(size_t count, int ranks, int rank) noexcept;

// out[i] = inputs[0][i] op inputs[1][i] op ... for i < count, combining left to
// right, f16/bf16 in f32 rounded once, written to every one of `outputs`.
// The outputs may be inputs: each block of elements is written only after
// every input's elements there were read.
void reduce_in_rank_order(DType dtype, ReduceOp op, std::span<const void* const> inputs,
                          std::span<void* const> outputs, size_t count);

}  // namespace svod::detail
