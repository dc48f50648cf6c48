// Building and running an execution plan in C++, without a plan file: the
// same path `svod run` takes for examples/features/plan.json, by hand.
//
// Two kernels and a copy over views of one arena:
//   y = 2 * x        (split over core_id slices, N elements per execution)
//   z = x + y
//   x <- z           (the whole view; ordered after both by the read/write hazards)
// executed for two values of the variable N, then checked on the host.
#include <fmt/format.h>

#include <cstdio>

#include "svod/base/error.h"
#include "svod/registry/registry.h"
#include "svod/plan/execution_plan.h"

int main() {
  using namespace svod;
  try {
    auto cpu = open_device("CPU");
    constexpr size_t kMax = 1024;

    // One arena, three views of it: x, y and z are disjoint, so the plan only
    // orders ops that really touch the same bytes.
    Buffer arena = cpu->allocate(DType::F32, 3 * kMax);
    for (size_t i = 0; i < kMax; ++i) arena.span<float>()[i] = float(i);

    ProgramSpec twice;
    twice.entry = "twice";
    twice.source =
        "void twice(float* restrict y, const float* restrict x, int n, int core_id) {\n"
        "  int begin = core_id * 256, end = begin + 256 < n ? begin + 256 : n;\n"
        "  for (int i = begin; i < end; i++) y[i] = 2.0f * x[i];\n"
        "}\n";
    twice.buffers = {{"y", Access::Write}, {"x", Access::Read}};
    twice.scalars = {{"n", ScalarType::I32}, {"core_id", ScalarType::I32}};
    twice.global_size[0] = Expr::parse("(n + 255) / 256");  // one slice per 256 elements

    ProgramSpec add;
    add.entry = "add";
    add.source =
        "void add(float* restrict z, const float* restrict a, const float* restrict b, int n) {\n"
        "  for (int i = 0; i < n; i++) z[i] = a[i] + b[i];\n"
        "}\n";
    add.buffers = {{"z", Access::Write}, {"a", Access::Read}, {"b", Access::Read}};
    add.scalars = {{"n", ScalarType::I32}};

    ExecutionPlanBuilder builder;
    const size_t arena_slot = builder.add_buffer(arena, "arena");
    const size_t bytes = kMax * sizeof(float);
    const size_t x = builder.add_view(arena_slot, 0, bytes, DType::F32, "x");
    const size_t y = builder.add_view(arena_slot, bytes, bytes, DType::F32, "y");
    const size_t z = builder.add_view(arena_slot, 2 * bytes, bytes, DType::F32, "z");
    builder.add_variable(Variable{"N", 1, int64_t(kMax)}, 512);

    // Kernel scalars are expressions over plan variables, bound when the plan runs.
    builder.add_op(KernelOp{cpu->compile(twice), {y, x}, {Expr::parse("N")}, {}}, {.id = "twice"});
    builder.add_op(KernelOp{cpu->compile(add), {z, x, y}, {Expr::parse("N")}, {}}, {.id = "add"});
    builder.add_op(CopyOp{x, z}, {.id = "write back"});
    builder.add_output(x);
    ExecutionPlan plan = builder.build();

    // Each execution triples the first N elements of x; the copy also clears
    // the rest, since z beyond N was never written.
    plan.execute();
    plan.execute_with_vars({{"N", 4}});

    const float* result = plan.buffer(x).span<float>().data();
    int bad = 0;
    for (size_t i = 0; i < kMax; ++i) {
      const float expected = float(i) * (i < 4 ? 9.0f : i < 512 ? 3.0f : 0.0f);
      if (result[i] != expected && bad++ < 5) fmt::print(stderr, "x[{}] = {}, expected {}\n", i, result[i], expected);
    }
    fmt::print("x[:6] = [{}, {}, {}, {}, {}, {}]  ({})\n", result[0], result[1], result[2], result[3], result[4],
               result[5], bad == 0 ? "ok" : "MISMATCH");
    return bad == 0 ? 0 : 1;
  } catch (const Error& e) {
    fmt::print(stderr, "plan_in_code: error ({}): {}\n", to_string(e.kind()), e.what());
    return 2;
  }
}
