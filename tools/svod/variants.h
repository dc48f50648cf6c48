// What `svod tune --variants` and `svod pack --variants` share: the options
// their flags give and the table of choices they print.
#pragma once

#include <string>
#include <vector>

#include "svod/plan/execution_plan.h"
#include "svod/tune/variants.h"

namespace svod::cli {

// The options --tolerance ATOL,RTOL gives (empty: none, exact recipes only);
// Error(Validation) for anything but two numbers of at least 0.
VariantOptions variant_options(const std::string& tolerance);

// One line per kernel op of `plan` with its choice (choose_variants' order).
std::string variant_table(const ExecutionPlan& plan, const std::vector<VariantChoice>& choices);

}  // namespace svod::cli
