#include "tests/support/test_support.h"

#include <cstdlib>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/registry/registry.h"

namespace svod::test {

ScopedEnv::ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
  if (const char* old = std::getenv(name)) saved_ = old;
  if (value)
    ::setenv(name, value->c_str(), 1);
  else
    ::unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (saved_)
    ::setenv(name_.c_str(), saved_->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

ProgramSpec c_kernel(std::string entry, std::string source, std::vector<BufferParam> buffers,
                     std::vector<ScalarParam> scalars) {
  ProgramSpec spec;
  spec.entry = std::move(entry);
  spec.source = std::move(source);
  spec.buffers = std::move(buffers);
  spec.scalars = std::move(scalars);
  return spec;
}

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(size_t depth) {
  std::string text;
  for (size_t i = 1; i < depth; ++i) text += "{\"a\":";
  return text + "{}" + std::string(depth - 1, '}');
}

bool cuda_device_present() {
  try {
    open_device("CUDA:0");
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string opencl_all_reduce_plan(std::string_view device) {
  return R"J({
    "svod_plan": 1,
    "device": ")J" + std::string(device) + R"J(",
    "buffers": {
      "d": { "dtype": "f32", "count": 64 },
      "h": { "dtype": "f32", "count": 64, "device": "CPU" }
    },
    "programs": {
      "set": { "language": "opencl", "entry": "set",
               "source": "__kernel void set(__global float* g, int v) { g[get_global_id(0)] = v; }",
               "buffers": [ { "name": "g", "access": "write" } ], "scalars": [ { "name": "v", "type": "i32" } ],
               "global_size": [4], "local_size": [16] }
    },
    "ops": [
      { "run": "set", "buffers": ["d"], "scalars": { "v": "rank + 1" } },
      { "collective": { "kind": "all_reduce", "buffers": ["d"], "op": "sum" } },
      { "copy": { "dst": "h", "src": "d" } }
    ]
  })J";
}

void expect_a_good_cpu_launch() {
  auto cpu = cpu_device();
  ProgramSpec spec = c_kernel("good", "void good(float* o, int core_id) { o[core_id] = 2.0f * core_id; }",
                              {{"o", Access::Write, DType::F32}}, {{"core_id", ScalarType::I32, 0, 7}});
  spec.global_size[0] = Expr::constant(8);
  auto program = cpu->compile(spec);
  Buffer o[] = {cpu->allocate(DType::F32, 8)};
  program->launch(o, {}, nullptr);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(o[0].span<float>()[i], 2.0f * i);
}

std::string one_kernel_plan(std::string_view entry, std::string_view json_source) {
  const std::string name(entry);
  return R"J({
  "svod_plan": 1,
  "buffers": { "y": { "dtype": "f32", "count": 4 } },
  "programs": {
    ")J" + name + R"J(": { "language": "c", "entry": ")J" + name + R"J(", "source": ")J" + std::string(json_source) + R"J(",
              "buffers": [ { "name": "y", "access": "write" } ] }
  },
  "ops": [ { "run": ")J" + name + R"J(", "buffers": ["y"] } ]
})J";
}

}  // namespace svod::test
