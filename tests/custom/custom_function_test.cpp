// The custom-function registry and the built-ins: all_reduce numerics for
// every dtype, fill, print.
#include "svod/custom/custom_function.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"

namespace svod {
namespace {

Buffer make(DType dtype, std::initializer_list<double> values) {
  Buffer b = cpu_device()->allocate(dtype, values.size());
  auto* p = static_cast<unsigned char*>(b.data());
  size_t i = 0;
  for (double v : values) store_from_double(dtype, p + size_of(dtype) * i++, v);
  return b;
}

std::vector<double> read(const Buffer& b) {
  std::vector<double> out;
  auto* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < b.count(); ++i) out.push_back(load_as_double(b.dtype(), p + size_of(b.dtype()) * i));
  return out;
}

template <typename T>
Buffer make_raw(DType dtype, std::initializer_list<T> values) {
  Buffer b = cpu_device()->allocate(dtype, values.size());
  std::memcpy(b.data(), values.begin(), values.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> raw(const Buffer& b) {
  auto s = b.span<T>();
  return {s.begin(), s.end()};
}

void reduce(std::string op, std::vector<Buffer> buffers) {
  run_custom_function("all_reduce", buffers, Attrs{{"op", std::move(op)}});
}

template <typename Fn>
void expect_validation(Fn&& fn, std::string_view fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected Error(Validation) with " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation) << e.what();
    EXPECT_NE(std::string_view(e.what()).find(fragment), std::string_view::npos) << e.what();
  }
}

TEST(AllReduce, EveryDtypeEveryOp) {
  for (DType t : kAllDTypes) {
    for (std::string op : {"sum", "prod", "max", "min"}) {
      std::vector<Buffer> bufs{make(t, {1, 5, 0, 7}), make(t, {2, 3, 0, 1}), make(t, {4, 0, 1, 2})};
      std::vector<double> expected;
      if (t == DType::Bool) {
        // Truth values: sum and max are "any", prod and min are "all" (as the collectives').
        expected = op == "min" || op == "prod" ? std::vector<double>{1, 0, 0, 1} : std::vector<double>{1, 1, 1, 1};
      } else if (op == "prod") {
        expected = {8, 0, 0, 14};
      } else if (op == "sum") {
        expected = {7, 8, 1, 10};
      } else if (op == "max") {
        expected = {4, 5, 1, 7};
      } else {
        expected = {1, 0, 0, 1};
      }
      reduce(op, bufs);
      for (size_t k = 0; k < bufs.size(); ++k)
        EXPECT_EQ(read(bufs[k]), expected) << to_string(t) << " " << op << " buffer " << k;
    }
  }
}

TEST(AllReduce, SignedValues) {
  for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    std::vector<Buffer> bufs{make(t, {-5, 3}), make(t, {2, -7})};
    reduce("min", bufs);
    EXPECT_EQ(read(bufs[1]), (std::vector<double>{-5, -7})) << to_string(t);
    bufs = {make(t, {-5, -3}), make(t, {-2, -7})};
    reduce("max", bufs);
    EXPECT_EQ(read(bufs[0]), (std::vector<double>{-2, -3})) << to_string(t);
  }
}

TEST(AllReduce, IntegerSumsWrap) {
  auto i8 = std::vector<Buffer>{make_raw<int8_t>(DType::I8, {100}), make_raw<int8_t>(DType::I8, {100}),
                                make_raw<int8_t>(DType::I8, {100})};
  reduce("sum", i8);
  EXPECT_EQ(raw<int8_t>(i8[2]), std::vector<int8_t>{44});
  auto u8 = std::vector<Buffer>{make_raw<uint8_t>(DType::U8, {200}), make_raw<uint8_t>(DType::U8, {100})};
  reduce("sum", u8);
  EXPECT_EQ(raw<uint8_t>(u8[0]), std::vector<uint8_t>{44});
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  auto i32 = std::vector<Buffer>{make_raw<int32_t>(DType::I32, {kMax32}), make_raw<int32_t>(DType::I32, {1})};
  reduce("sum", i32);
  EXPECT_EQ(raw<int32_t>(i32[0]), std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  auto u64 = std::vector<Buffer>{make_raw<uint64_t>(DType::U64, {~uint64_t{0}}), make_raw<uint64_t>(DType::U64, {2})};
  reduce("sum", u64);
  EXPECT_EQ(raw<uint64_t>(u64[1]), std::vector<uint64_t>{1});
  // Exact beyond 2^53, where going through double would round.
  auto i64 = std::vector<Buffer>{make_raw<int64_t>(DType::I64, {(int64_t{1} << 62) + 1}),
                                 make_raw<int64_t>(DType::I64, {(int64_t{1} << 60) + 2})};
  reduce("sum", i64);
  EXPECT_EQ(raw<int64_t>(i64[0]), std::vector<int64_t>{(int64_t{1} << 62) + (int64_t{1} << 60) + 3});
  auto u32 = std::vector<Buffer>{make_raw<uint32_t>(DType::U32, {4000000000u}), make_raw<uint32_t>(DType::U32, {7})};
  reduce("max", u32);
  EXPECT_EQ(raw<uint32_t>(u32[1]), std::vector<uint32_t>{4000000000u});
}

TEST(AllReduce, HalfPrecisionRoundsOnceToNearestEven) {
  // f16: 1.0 = 0x3C00, one unit in the last place at 1.0 is 2^-10 (0x3C01),
  // 2^-11 = 0x1000 is half of it.
  auto f16 = [](std::initializer_list<uint16_t> v) { return make_raw<uint16_t>(DType::F16, v); };
  std::vector<Buffer> b{f16({0x3C00, 0x3C01}), f16({0x1000, 0x1000})};
  reduce("sum", b);
  // 1 + 2^-11 ties to even 1.0; (1 + 2^-10) + 2^-11 ties to even 1 + 2^-9.
  EXPECT_EQ(raw<uint16_t>(b[0]), (std::vector<uint16_t>{0x3C00, 0x3C02}));
  EXPECT_EQ(raw<uint16_t>(b[1]), (std::vector<uint16_t>{0x3C00, 0x3C02}));
  // Accumulated in float and rounded once: 1 + 2^-11 + 2^-11 = 1 + 2^-10,
  // where rounding after each step would have stayed at 1.0.
  std::vector<Buffer> c{f16({0x3C00}), f16({0x1000}), f16({0x1000})};
  reduce("sum", c);
  EXPECT_EQ(raw<uint16_t>(c[2]), std::vector<uint16_t>{0x3C01});
  // Past the largest finite half (65504) the sum becomes infinity.
  std::vector<Buffer> big{make(DType::F16, {65504}), make(DType::F16, {65504})};
  reduce("sum", big);
  EXPECT_TRUE(std::isinf(read(big[0])[0]));

  // bf16: 1.0 = 0x3F80, ulp 2^-7 (0x3F81), 2^-8 = 0x3B80.
  auto bf16 = [](std::initializer_list<uint16_t> v) { return make_raw<uint16_t>(DType::BF16, v); };
  std::vector<Buffer> d{bf16({0x3F80, 0x3F81}), bf16({0x3B80, 0x3B80})};
  reduce("sum", d);
  EXPECT_EQ(raw<uint16_t>(d[0]), (std::vector<uint16_t>{0x3F80, 0x3F82}));
  std::vector<Buffer> e{bf16({0x3F80}), bf16({0x3B80}), bf16({0x3B80})};
  reduce("sum", e);
  EXPECT_EQ(raw<uint16_t>(e[0]), std::vector<uint16_t>{0x3F81});
}

TEST(AllReduce, NanPropagatesThroughMaxAndMin) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    for (std::string op : {"max", "min"}) {
      std::vector<Buffer> b{make(t, {1, nan}), make(t, {nan, 2})};
      reduce(op, b);
      auto v = read(b[0]);
      EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << to_string(t) << " " << op;
    }
  }
}

TEST(AllReduce, RejectsBadArguments) {
  auto f = [] { return make(DType::F32, {1, 2}); };
  expect_validation([&] { run_custom_function("all_reduce", std::vector<Buffer>{f(), f()}, {}); },
                    "missing attribute \"op\"");
  expect_validation([&] { run_custom_function("all_reduce", std::vector<Buffer>{f()}, {{"op", "sum"}, {"x", 1.0}}); },
                    "unknown attribute \"x\"");
  expect_validation([&] { run_custom_function("all_reduce", std::vector<Buffer>{f()}, {{"op", "mean"}}); },
                    "\"mean\" is not one of");
  expect_validation([&] { run_custom_function("all_reduce", std::vector<Buffer>{}, {{"op", "sum"}}); },
                    "at least one buffer");
  expect_validation(
      [&] { run_custom_function("all_reduce", std::vector<Buffer>{f(), make(DType::F64, {1, 2})}, {{"op", "sum"}}); },
      "buffer 1 holds 2 f64");
  expect_validation(
      [&] { run_custom_function("all_reduce", std::vector<Buffer>{f(), make(DType::F32, {1})}, {{"op", "sum"}}); },
      "buffer 1 holds 1 f32");
  Buffer arena = cpu_device()->allocate(DType::F32, 3);
  expect_validation(
      [&] { run_custom_function("all_reduce", std::vector<Buffer>{arena.view(0, 2), arena.view(1, 2)}, {{"op", "sum"}}); },
      "overlap");
}

TEST(Fill, WritesExactValues) {
  Buffer i64 = cpu_device()->allocate(DType::I64, 3);
  run_custom_function("fill", std::vector<Buffer>{i64}, {{"value", (int64_t{1} << 62) + 1}});
  EXPECT_EQ(raw<int64_t>(i64), std::vector<int64_t>(3, (int64_t{1} << 62) + 1));
}

TEST(Fill, ValuesMustFit) {
  Buffer h = cpu_device()->allocate(DType::F16, 2);
  Buffer f = cpu_device()->allocate(DType::F32, 2);
  Buffer i = cpu_device()->allocate(DType::I32, 2);
  run_custom_function("fill", std::vector<Buffer>{h, f}, {{"value", 0.1}});
  EXPECT_EQ(raw<uint16_t>(h), std::vector<uint16_t>(2, double_to_f16(0.1)));
  EXPECT_EQ(raw<float>(f), std::vector<float>(2, 0.1f));
  run_custom_function("fill", std::vector<Buffer>{i, f}, {{"value", 2.0}});
  EXPECT_EQ(raw<int32_t>(i), std::vector<int32_t>(2, 2));
  run_custom_function("fill", std::vector<Buffer>{i, f}, {{"value", int64_t{-3}}});
  EXPECT_EQ(raw<float>(f), std::vector<float>(2, -3.0f));
  expect_validation([&] { run_custom_function("fill", std::vector<Buffer>{i}, {{"value", 2.5}}); },
                    "not an integer that fits buffer 0 of i32");
  expect_validation(
      [&] { run_custom_function("fill", std::vector<Buffer>{make(DType::U8, {0})}, {{"value", int64_t{300}}}); },
      "300");
  expect_validation(
      [&] { run_custom_function("fill", std::vector<Buffer>{make(DType::U32, {0})}, {{"value", int64_t{-1}}}); },
      "-1");
  expect_validation([&] { run_custom_function("fill", std::vector<Buffer>{i}, {{"value", "one"}}); },
                    "must be a number");
  expect_validation([&] { run_custom_function("fill", std::vector<Buffer>{i}, {}); }, "missing attribute \"value\"");
}

TEST(Print, WritesBuffersToStdout) {
  Buffer f = make(DType::F32, {1.5, 2, 3});
  Buffer b = make(DType::Bool, {1, 0});
  std::vector<std::string> names{"N"};
  std::vector<int64_t> values{7};
  testing::internal::CaptureStdout();
  run_custom_function("print", std::vector<Buffer>{f, b}, {{"label", "dbg"}, {"limit", int64_t{2}}},
                      VariableValues{names, values});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out,
            "dbg: vars N=7\n"
            "dbg: buffer 0 f32[3] = [1.5, 2, ...]\n"
            "dbg: buffer 1 bool[2] = [true, false]\n");
  expect_validation([&] { run_custom_function("print", std::vector<Buffer>{f}, {{"limit", int64_t{-1}}}); },
                    "limit");
}

TEST(Registry, RegisterFindUnregister) {
  CustomFunctionDef def{[](std::span<const Buffer> b, const Attrs&, const VariableValues&) {
                          for (const Buffer& x : b) x.span<float>()[0] += 1;
                        },
                        [](std::span<const Buffer> b, const Attrs& attrs) {
                          check_attr_names("bump", attrs, {});
                          return std::vector<Access>(b.size(), Access::ReadWrite);
                        }};
  register_custom_function("bump", def);
  expect_validation([&] { register_custom_function("bump", def); }, "already registered");
  expect_validation([&] { register_custom_function("no_run", CustomFunctionDef{nullptr, def.validate}); },
                    "needs both");
  Buffer x = make(DType::F32, {1});
  run_custom_function("bump", std::vector<Buffer>{x}, {});
  EXPECT_EQ(read(x), std::vector<double>{2});
  expect_validation([&] { run_custom_function("bump", std::vector<Buffer>{x}, {{"k", int64_t{1}}}); },
                    "unknown attribute \"k\" (accepted: none)");
  EXPECT_TRUE(unregister_custom_function("bump"));
  EXPECT_FALSE(unregister_custom_function("bump"));
  expect_validation([&] { find_custom_function("bump"); }, "unknown custom function \"bump\" (registered: all_reduce");
}

TEST(Attrs, Helpers) {
  Attrs a{{"i", int64_t{3}}, {"d", 0.5}, {"s", "x"}};
  EXPECT_EQ(attr_int("f", a, "i"), 3);
  EXPECT_EQ(attr_number("f", a, "i"), 3.0);
  EXPECT_EQ(attr_number("f", a, "d"), 0.5);
  EXPECT_EQ(attr_string("f", a, "s"), "x");
  expect_validation([&] { attr_int("f", a, "d"); }, "must be an integer, got number 0.5");
  expect_validation([&] { attr_string("f", a, "i"); }, "must be a string, got integer 3");
  EXPECT_EQ(to_string(AttrValue{"x"}), "\"x\"");
}

}  // namespace
}  // namespace svod
