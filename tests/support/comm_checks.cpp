#include "tests/support/comm_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "svod/base/dtype.h"
#include "svod/device/device.h"
#include "svod/registry/registry.h"

namespace svod::test {
namespace {

Buffer host_buffer(DType dtype, size_t count) { return open_device("CPU")->allocate(dtype, count); }

[[noreturn]] void fail(Communicator& comm, const std::string& what) {
  throw std::runtime_error(fmt::format("{} rank {} of {}: {}", comm.transport(), comm.rank(), comm.size(), what));
}

// The value rank `rank` contributes at index i: 1, 2 or 3 (0 or 1 for bool),
// so that sums and products of up to 4 ranks are exact in every type.
double input(DType dtype, int rank, size_t i) {
  if (dtype == DType::Bool) return static_cast<double>((i + static_cast<size_t>(rank)) % 3 == 0);
  return static_cast<double>(1 + (i * 7 + static_cast<size_t>(rank) * 5) % 3);
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum:
      return a + b;
    case ReduceOp::Prod:
      return a * b;
    case ReduceOp::Min:
      return std::min(a, b);
    case ReduceOp::Max:
      return std::max(a, b);
  }
  return a;
}

}  // namespace

int check_all_reduce_exact(Communicator& comm) {
  int checked = 0;
  for (DType dtype : kAllDTypes) {
    // Sizes on both sides of the whole-buffer/chunked threshold, and counts
    // smaller than the number of ranks (empty chunks).
    for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{5003}}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
        Buffer buffer = host_buffer(dtype, count);
        auto* bytes = static_cast<unsigned char*>(buffer.data());
        for (size_t i = 0; i < count; ++i) store_from_double(dtype, bytes + i * size_of(dtype), input(dtype, comm.rank(), i));
        comm.all_reduce(buffer, op);
        for (size_t i = 0; i < count; ++i) {
          double expected = input(dtype, 0, i);
          for (int k = 1; k < comm.size(); ++k) expected = combine(op, expected, input(dtype, k, i));
          if (dtype == DType::Bool) expected = expected != 0 ? 1 : 0;
          const double got = load_as_double(dtype, bytes + i * size_of(dtype));
          if (got != expected)
            fail(comm, fmt::format("all_reduce {} {} x {}: element {} is {}, expected {}", to_string(op),
                                   to_string(dtype), count, i, got, expected));
        }
        ++checked;
      }
    }
  }
  return checked;
}

void check_all_reduce_bitwise(Communicator& comm, size_t count) {
  const int n = comm.size();
  auto rank_inputs = [&](int rank) {
    std::mt19937 random(1234 + rank);
    std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
    std::vector<float> values(count);
    for (float& v : values) v = value(random);
    return values;
  };
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Buffer buffer = host_buffer(dtype, count);
    auto* bytes = static_cast<unsigned char*>(buffer.data());
    const std::vector<float> mine = rank_inputs(comm.rank());
    for (size_t i = 0; i < count; ++i) store_from_double(dtype, bytes + i * size_of(dtype), mine[i]);
    comm.all_reduce(buffer, ReduceOp::Sum);

    // Every rank's result, side by side.
    Buffer all = host_buffer(dtype, count * static_cast<size_t>(n));
    comm.all_gather(buffer, all);
    const size_t row = count * size_of(dtype);
    for (int k = 1; k < n; ++k)
      if (std::memcmp(all.data(), static_cast<unsigned char*>(all.data()) + k * row, row) != 0)
        fail(comm, fmt::format("all_reduce {}: rank {}'s result differs from rank 0's", to_string(dtype), k));

    // The reference: left to right in rank order, in f32 (f16/bf16 inputs
    // first rounded to their type, the sum rounded once at the end).
    std::vector<std::vector<float>> inputs;
    for (int k = 0; k < n; ++k) inputs.push_back(rank_inputs(k));
    std::vector<unsigned char> expected(row);
    for (size_t i = 0; i < count; ++i) {
      std::vector<unsigned char> element(size_of(dtype));
      float sum = 0;
      for (int k = 0; k < n; ++k) {
        store_from_double(dtype, element.data(), inputs[k][i]);
        const float v = static_cast<float>(load_as_double(dtype, element.data()));
        sum = k == 0 ? v : sum + v;
      }
      store_from_double(dtype, expected.data() + i * size_of(dtype), sum);
    }
    if (std::memcmp(expected.data(), bytes, row) != 0)
      fail(comm, fmt::format("all_reduce {} x {}: result is not the rank-order sum", to_string(dtype), count));
  }
}

void check_movement(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  comm.barrier();

  // all_gather: rank k contributes k*100 + i.
  for (size_t count : {size_t{1}, size_t{700}}) {
    Buffer src = host_buffer(DType::I32, count), dst = host_buffer(DType::I32, count * n);
    for (size_t i = 0; i < count; ++i) src.span<int32_t>()[i] = r * 100 + static_cast<int32_t>(i);
    comm.all_gather(src, dst);
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < count; ++i)
        if (dst.span<int32_t>()[k * count + i] != k * 100 + static_cast<int32_t>(i))
          fail(comm, fmt::format("all_gather x {}: element {} of rank {}'s part is wrong", count, i, k));
  }

  // reduce_scatter: rank k's src holds k + j at element j; part p of the sum
  // is sum over k of (k + p*count + i).
  for (size_t count : {size_t{1}, size_t{900}}) {
    Buffer src = host_buffer(DType::F64, count * n), dst = host_buffer(DType::F64, count);
    for (size_t j = 0; j < count * n; ++j) src.span<double>()[j] = r + static_cast<double>(j);
    comm.reduce_scatter(src, dst, ReduceOp::Sum);
    for (size_t i = 0; i < count; ++i) {
      const double expected = n * (n - 1) / 2.0 + n * static_cast<double>(r * count + i);
      if (dst.span<double>()[i] != expected)
        fail(comm, fmt::format("reduce_scatter x {}: element {} is {}, expected {}", count, i, dst.span<double>()[i],
                               expected));
    }
  }

  // broadcast from every root.
  for (int root = 0; root < n; ++root) {
    Buffer buffer = host_buffer(DType::U16, 2000);
    for (size_t i = 0; i < 2000; ++i) buffer.span<uint16_t>()[i] = static_cast<uint16_t>(r == root ? root * 1000 + i : 7);
    comm.broadcast(buffer, root);
    for (size_t i = 0; i < 2000; ++i)
      if (buffer.span<uint16_t>()[i] != static_cast<uint16_t>(root * 1000 + i))
        fail(comm, fmt::format("broadcast from root {}: element {} is wrong", root, i));
  }

  // send/recv around a ring, small (inline) and large messages; even ranks
  // send first so that the ring cannot deadlock on synchronous sends.
  if (n > 1) {
    for (size_t count : {size_t{2}, size_t{10000}}) {
      Buffer out = host_buffer(DType::I64, count), in = host_buffer(DType::I64, count);
      for (size_t i = 0; i < count; ++i) out.span<int64_t>()[i] = r * 1000000 + static_cast<int64_t>(i);
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      if (r % 2 == 0) {
        comm.send(out, next, 5);
        comm.recv(in, prev, 5);
      } else {
        comm.recv(in, prev, 5);
        comm.send(out, next, 5);
      }
      for (size_t i = 0; i < count; ++i)
        if (in.span<int64_t>()[i] != prev * 1000000 + static_cast<int64_t>(i))
          fail(comm, fmt::format("recv x {} from rank {}: element {} is wrong", count, prev, i));
    }
  }
  comm.barrier();
}

namespace {

// `values` in a new buffer of `device` (host memory when null).
Buffer buffer_of(Device* device, const std::vector<int32_t>& values) {
  Buffer host = host_buffer(DType::I32, values.size());
  std::memcpy(host.data(), values.data(), host.bytes());
  if (!device) return host;
  Buffer on = device->allocate(DType::I32, values.size());
  device->copy(on, host);
  return on;
}

std::vector<int32_t> values_of(const Buffer& buffer) {
  Buffer host = host_buffer(DType::I32, buffer.count());
  buffer.device().copy(host, buffer);
  const auto span = host.span<int32_t>();
  return {span.begin(), span.end()};
}

}  // namespace

void check_split_calls(Communicator& comm, Device* device) {
  const int n = comm.size(), r = comm.rank(), last = n - 1;
  if (n < 2) throw std::runtime_error("check_split_calls needs at least 2 ranks");
  // Two and a half parts: split in two, the second part longer.
  const size_t per_part = comm.options().part_bytes / sizeof(int32_t);
  const size_t count = per_part * 5 / 2 + 3;
  auto element = [](int rank, size_t i) { return static_cast<int32_t>(i % 100003) * 3 + rank; };
  auto expect_values = [&](const char* what, const Buffer& buffer, auto&& expected) {
    const std::vector<int32_t> got = values_of(buffer);
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != expected(i))
        fail(comm, fmt::format("{} of {} elements: element {} is {}, expected {}", what, got.size(), i, got[i],
                               expected(i)));
  };
  std::vector<int32_t> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = element(r, i);

  Buffer summed = buffer_of(device, mine);
  comm.all_reduce(summed, ReduceOp::Sum);
  expect_values("all_reduce", summed, [&](size_t i) {
    return static_cast<int32_t>(i % 100003) * 3 * n + n * (n - 1) / 2;
  });

  Buffer broadcast = buffer_of(device, mine);
  comm.broadcast(broadcast, last);
  expect_values("broadcast from the last rank", broadcast, [&](size_t i) { return element(last, i); });

  // Even ranks send to the next, odd ranks receive from the previous.
  if (r % 2 == 0 && r + 1 < n) {
    comm.send(buffer_of(device, mine), r + 1, 9);
  } else if (r % 2 == 1) {
    Buffer in = buffer_of(device, std::vector<int32_t>(count, -1));
    comm.recv(in, r - 1, 9);
    expect_values("recv", in, [&](size_t i) { return element(r - 1, i); });
  }

  Buffer part = buffer_of(device, std::vector<int32_t>(mine.begin(), mine.begin() + 1000));
  Buffer gathered = buffer_of(device, std::vector<int32_t>(1000 * static_cast<size_t>(n), -1));
  comm.all_gather(part, gathered);
  expect_values("all_gather", gathered, [&](size_t i) { return element(static_cast<int>(i / 1000), i % 1000); });

  // The last rank's call is one part longer: every rank fails in the first
  // part, naming the whole calls, and no rank's buffer changed.
  std::vector<int32_t> longer = mine;
  if (r == last) longer.resize(count + per_part, 1);
  Buffer mismatched = buffer_of(device, longer);
  try {
    expect_comm_error([&] { comm.all_reduce(mismatched, ReduceOp::Sum); }, ErrorKind::Validation,
                      fmt::format("all_reduce(i32 x {}, sum), the part of elements 0 to ", count));
  } catch (const std::runtime_error& e) {
    fail(comm, fmt::format("split count mismatch: {}", e.what()));
  }
  expect_values("the mismatched all_reduce's buffer", mismatched, [&](size_t i) { return longer[i]; });
  comm.barrier();  // still usable
}

void check_mismatches(Communicator& comm) {
  const int n = comm.size(), r = comm.rank(), last = n - 1;
  if (n < 2) throw std::runtime_error("check_mismatches needs at least 2 ranks");
  auto expect = [&](const char* what, auto&& fn, std::string_view text) {
    try {
      expect_comm_error(fn, ErrorKind::Validation, text);
    } catch (const std::runtime_error& e) {
      fail(comm, fmt::format("{}: {}", what, e.what()));
    }
  };
  // Element counts differ: small (inline) and large (separate payload).
  for (size_t count : {size_t{8}, size_t{5000}}) {
    Buffer buffer = host_buffer(DType::F32, r == last ? count * 2 : count);
    expect("count mismatch", [&] { comm.all_reduce(buffer, ReduceOp::Sum); }, "ranks disagree");
  }
  {
    Buffer buffer = host_buffer(r == last ? DType::I32 : DType::F32, 64);
    expect("dtype mismatch", [&] { comm.all_reduce(buffer, ReduceOp::Sum); }, "ranks disagree");
  }
  {
    Buffer buffer = host_buffer(DType::F32, 64);
    expect("op mismatch", [&] { comm.all_reduce(buffer, r == last ? ReduceOp::Max : ReduceOp::Sum); }, "ranks disagree");
    expect("root out of range everywhere", [&] { comm.broadcast(buffer, n); }, "root " + std::to_string(n) + " is out of range");
    expect("root out of range on one rank", [&] { comm.broadcast(buffer, r == last ? -1 : 0); },
           r == last ? "root -1 is out of range" : "rank " + std::to_string(last) + " rejected its own arguments");
    expect("broadcast roots differ", [&] { comm.broadcast(buffer, r == last ? 1 : 0); }, "ranks disagree");
  }
  {
    Buffer src = host_buffer(DType::F32, 16);
    Buffer dst = host_buffer(DType::F32, r == 0 ? 16 * n + 1 : 16 * n);
    expect("all_gather destination size on rank 0", [&] { comm.all_gather(src, dst); },
           r == 0 ? "must hold" : "rank 0 rejected its own arguments");
    Buffer part = host_buffer(DType::F64, 16);
    expect("reduce_scatter dtypes", [&] { comm.reduce_scatter(dst, part, ReduceOp::Sum); }, "dtypes differ");
  }
  // Still usable: a good call after all those.
  Buffer ones = host_buffer(DType::I32, 5000);
  for (int32_t& v : ones.span<int32_t>()) v = 1;
  comm.all_reduce(ones, ReduceOp::Sum);
  for (int32_t v : ones.span<int32_t>())
    if (v != n) fail(comm, "all_reduce after the mismatches gave a wrong result");
}

std::vector<std::optional<Error>> local_rank_errors(int ranks, const std::function<void(Communicator&)>& body,
                                                   CommOptions options) {
  std::mutex mutex;
  std::vector<std::optional<Error>> errors(static_cast<size_t>(ranks));
  try {
    run_local_ranks(
        ranks,
        [&](Communicator& comm) {
          try {
            body(comm);
          } catch (const Error& e) {
            const std::lock_guard lock(mutex);
            errors[static_cast<size_t>(comm.rank())] = e;
            throw;
          }
        },
        options);
  } catch (const Error&) {
    // run_local_ranks rethrows the first failure; every rank's is kept above.
  }
  return errors;
}

}  // namespace svod::test
