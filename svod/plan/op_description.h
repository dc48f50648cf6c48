// An op of a plan, described once in the words every report uses: error
// messages (plan_state.h), SVOD_OP_TIMEOUT's report, profiles and their
// tables, the reports of `svod run` and `svod bench`, Python's profiles.
// What an op is, what it runs and its title (ExecutionPlan::op_title) are
// read here; outside svod/plan/ nothing switches on PlanOp's alternatives.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/guard/op_name.h"
#include "svod/plan/execution_plan.h"

namespace svod {

// What an op is and what it runs.
struct OpWords {
  OpKind kind;
  std::string name;  // the kernel's display name, the custom function's, the collective's kind, "copy" or "view"
};
OpWords op_words(const PlanOp& op);

// What one op of a plan is, for tables, tracks and rates.
struct OpDescription {
  std::string name;    // OpWords::name
  std::string title;   // ExecutionPlan::op_title: "op 3 (mm) kernel mm", "op 4 copy out <- d_out"
  std::string id;      // the op's id; empty when it has none
  OpKind kind = OpKind::Kernel;
  std::string device;  // "CPU", "CL:0", ...; "host" for custom functions, collectives and views
  std::vector<size_t> buffers;
  std::optional<double> flops;  // per call, from the program's flops expression
  std::optional<double> bytes;  // per call, from the program's bytes expression
};

// Describes op `index` of `plan`, costs evaluated with the plan's current
// variable values (scalars by name, then the op's fixed values, then plan
// variables).
OpDescription describe_op(const ExecutionPlan& plan, size_t index);
std::vector<OpDescription> describe_ops(const ExecutionPlan& plan);

// Describes a call of `program` on its own, outside any plan (Python's
// profile of a program call): a kernel titled "kernel NAME" on the
// program's device, with no buffers or costs.
OpDescription describe_call(const Program& program);

}  // namespace svod
