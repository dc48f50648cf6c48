// Exports the MLP example (examples/mlp/plan.json) as a package whose input
// is named: load the plan, name its input x with its shape, and pack it as
// it is loaded (its compiled objects, its weights). examples/deploy/deploy.c
// runs the package with the C API alone.
//
//   export_mlp examples/mlp/plan.json mlp.svodpkg
#include <fmt/format.h>

#include <cstdio>

#include "svod/base/error.h"
#include "svod/package/package.h"

int main(int argc, char** argv) {
  using namespace svod;
  if (argc != 3) {
    std::fprintf(stderr, "usage: export_mlp PLAN.json OUT.svodpkg\n");
    return 2;
  }
  try {
    LoadedPlan mlp = load_plan(parse_plan_file(argv[1]));
    SaveOptions save;
    save.inputs.push_back(PlanPort{"x", std::string("x"), DType::F32, {int64_t{64}, int64_t{256}}});
    save.outputs = std::vector<PlanPort>{PlanPort{"probs", std::string("probs"), DType::F32, {int64_t{64}, int64_t{10}}}};
    PackOptions options;
    options.exporter = "examples/deploy/export_mlp";
    options.plan_name = argv[1];
    write_package(argv[2], pack_plan(mlp.plan, save, options));
    fmt::print("wrote {}\n", argv[2]);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "export_mlp: %s\n", e.what());
    return 1;
  }
}
