#include "tests/plan/plan_test_support.h"

#include <mutex>

#include "tests/support/test_support.h"

namespace svod::test {

void register_access_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto [name, access] : {std::pair{"test_read", Access::Read}, std::pair{"test_write", Access::Write},
                                std::pair{"test_readwrite", Access::ReadWrite}}) {
      const Access a = access;
      register_custom_function(
          name, CustomFunctionDef{[](std::span<const Buffer>, const Attrs&, const VariableValues&) {},
                                  [a](std::span<const Buffer> buffers, const Attrs&) {
                                    return std::vector<Access>(buffers.size(), a);
                                  }});
    }
  });
}

namespace {

std::shared_ptr<const Program> compile(ProgramSpec spec) { return cpu_device()->compile(spec); }

}  // namespace

std::shared_ptr<const Program> add_const_kernel() {
  static auto program = compile(c_kernel(
      "add_const",
      "void add_const(const float* in, float* out, int n, int k) { for (int i = 0; i < n; ++i) out[i] = in[i] + k; }",
      {BufferParam{"in", Access::Read, DType::F32}, BufferParam{"out", Access::Write, DType::F32}},
      {ScalarParam{"n"}, ScalarParam{"k"}}));
  return program;
}

std::shared_ptr<const Program> touch_kernel() {
  static auto program = compile(
      c_kernel("touch", "void touch(int* c) { c[0] += 1; }", {BufferParam{"c", Access::ReadWrite, DType::I32}}));
  return program;
}

std::shared_ptr<const Program> put_kernel() {
  static auto program = [] {
    auto spec = c_kernel("put", "void put(long long* out, int core_id) { out[core_id] = core_id + 1; }",
                         {BufferParam{"out", Access::Write, DType::I64}}, {ScalarParam{"core_id"}});
    spec.global_size[0] = Expr::parse("N");
    return compile(spec);
  }();
  return program;
}

std::shared_ptr<const Program> put_n_kernel() {
  static auto program = [] {
    auto spec = c_kernel("put_n", "void put_n(long long* out, int n, int core_id) { out[core_id] = core_id + 1; }",
                         {BufferParam{"out", Access::Write, DType::I64}}, {ScalarParam{"n"}, ScalarParam{"core_id"}});
    spec.global_size[0] = Expr::parse("n");
    return compile(spec);
  }();
  return program;
}

std::shared_ptr<const Program> set_kernel() {
  static auto program = compile(c_kernel(
      "set", "void set(float* out, int n, int v) { for (int i = 0; i < n; ++i) out[i] = v; }",
      {BufferParam{"out", Access::Write, DType::F32}},
      {ScalarParam{"n", ScalarType::I32, 0, 10}, ScalarParam{"v"}}));
  return program;
}

}  // namespace svod::test
