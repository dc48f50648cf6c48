// What svod.PlanBuilder (bound in plan.cpp) and captures build with: the
// builder's slots, ops, views and variables, the plan it builds, and launch
// sizes given as integers or expression strings.
#include "plan_objects.h"

namespace svod::python {

size_t PyPlanBuilder::add(const Buffer& buffer, std::vector<size_t> shape, const std::string& name) {
  const size_t slot = builder.add_buffer(buffer, name);
  names.push_back(name);
  shapes.push_back(std::move(shape));
  return slot;
}

size_t PyPlanBuilder::add_op(PlanOp op, OpOptions options) {
  const size_t index = builder.add_op(std::move(op), std::move(options));
  ++ops;
  return index;
}

size_t PyPlanBuilder::add_view(size_t base, size_t byte_offset, size_t bytes, DType dtype, const std::string& name) {
  const size_t slot = builder.add_view(base, byte_offset, bytes, dtype, name);
  names.push_back(name);
  shapes.push_back({bytes / size_of(dtype)});
  return slot;
}

// Checked as it is declared, so that a capture keeps its recorded calls and
// says at once which declaration is wrong (rather than at the build).
void PyPlanBuilder::add_variable(const std::string& name, int64_t value, int64_t min, int64_t max) {
  if (name.empty()) throw make_error(ErrorKind::Validation, "a plan variable needs a name");
  if (name == kRankVariable || name == kWorldSizeVariable)
    throw make_error(ErrorKind::Validation,
                     "plan variable \"{}\" is reserved: plans with a communicator set rank and world_size themselves",
                     name);
  if (std::find(variables.begin(), variables.end(), name) != variables.end())
    throw make_error(ErrorKind::Validation, "plan variable \"{}\" is declared twice", name);
  const Variable variable{name, min, max};
  if (min > max)
    throw make_error(ErrorKind::Validation, "plan variable \"{}\" has empty bounds [{}, {}]", name, min, max);
  variable.check(value);
  builder.add_variable(variable, value);
  variables.push_back(name);
}

PyPlan PyPlanBuilder::build(const std::string& source) {
  PyPlan p;
  p.source = source;
  ExecutionPlan plan = builder.build();
  std::vector<LoadedOutput> outs;
  for (size_t slot : outputs) {
    LoadedOutput o;
    o.name = names[slot].empty() ? fmt::format("buffer{}", slot) : names[slot];
    o.slot = slot;
    o.shape = shapes[slot];
    outs.push_back(std::move(o));
  }
  p.loaded = std::make_shared<LoadedPlan>(LoadedPlan{std::move(plan), std::move(outs), false});
  p.names = std::move(names);
  p.shapes = std::move(shapes);
  p.variables = std::move(variables);
  *this = PyPlanBuilder();
  return p;
}

Expr expr_of(py::handle v, const std::string& what) {
  if (PyUnicode_Check(v.ptr())) return Expr::parse(string_argument(v, what));
  if (!PyBool_Check(v.ptr()) && PyIndex_Check(v.ptr()))  // int, numpy integers, anything with __index__
    return Expr::constant(integer_value(v.ptr(), [&] { return what; }));
  throw type_error(what, "an integer or an expression string", v);
}

std::array<Expr, 3> size_exprs(py::handle v, const std::string& what) {
  std::array<Expr, 3> out = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
  if (!PyTuple_Check(v.ptr()) && !PyList_Check(v.ptr())) {
    out[0] = expr_of(v, what);
    return out;
  }
  const auto items = py::reinterpret_borrow<py::sequence>(v);
  if (items.size() < 1 || items.size() > 3)
    throw make_error(ErrorKind::Validation, "{}: expected 1 to 3 dimensions, got {}", what, items.size());
  for (size_t d = 0; d < items.size(); ++d) out[d] = expr_of(items[d], fmt::format("{}[{}]", what, d));
  return out;
}

}  // namespace svod::python
