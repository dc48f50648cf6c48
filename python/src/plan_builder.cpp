// svod.PlanBuilder, and what it and captures build with: the builder's
// slots, ops, views and variables, the plan it builds, and launch sizes given
// as integers or expression strings.
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

namespace {

struct OpRefs {
  std::vector<size_t> indices;
  std::vector<std::string> ids;
};
// after=: op indices and ids; `what` names the method.
OpRefs op_refs(py::handle after, std::string_view what) {
  OpRefs refs;
  if (after.is_none()) return refs;
  const std::string arg = fmt::format("{}: after", what);
  const auto items = sequence_argument(after, arg, "a sequence of op indices and ids");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", arg, i);
    if (PyUnicode_Check(items[i].ptr())) refs.ids.push_back(string_argument(items[i], item));
    else if (!PyBool_Check(items[i].ptr()) && PyIndex_Check(items[i].ptr()))
      refs.indices.push_back(size_argument(items[i], item));
    else throw type_error(item, "an op index or id", items[i]);
  }
  return refs;
}

OpOptions op_options(py::handle id, py::handle after, std::string_view what) {
  OpRefs refs = op_refs(after, what);
  return OpOptions{.id = string_argument(id, fmt::format("{}: id", what)),
                   .after_ids = std::move(refs.ids),
                   .after = std::move(refs.indices),
                   .label = {}};
}

std::vector<size_t> shape_of(py::handle obj, const Buffer& buffer) {
  if (const PyBuffer* b = as_py_buffer(obj.ptr())) return b->shape;
  if (PyArray_Check(obj.ptr())) {
    auto* a = reinterpret_cast<PyArrayObject*>(obj.ptr());
    return {PyArray_DIMS(a), PyArray_DIMS(a) + PyArray_NDIM(a)};
  }
  return {buffer.count()};
}

AttrValue attr_of(py::handle v, const std::string& key) {
  const std::string what = fmt::format("custom: attrs[\"{}\"]", key);
  if (PyBool_Check(v.ptr())) return int64_t{v.ptr() == Py_True};
  if (PyLong_Check(v.ptr())) return integer_value(v.ptr(), [&] { return what; });
  if (PyFloat_Check(v.ptr())) return PyFloat_AsDouble(v.ptr());
  if (PyUnicode_Check(v.ptr())) return string_argument(v, what);
  throw type_error(what, "an int, float or str", v);
}

}  // namespace

// svod.PlanBuilder.
void bind_plan_builder(py::module_& m) {
  py::class_<PyPlanBuilder>(m, "PlanBuilder",
                            "Builds a Plan op by op, like ExecutionPlanBuilder in C++. Buffers are indices\n"
                            "returned by add_buffer/add_view; ops are indices returned by run/copy/custom.")
      .def(py::init<>())
      .def(
          "add_buffer",
          [](PyPlanBuilder& b, py::handle buffer, py::handle name_object) {
            const std::string name = string_argument(name_object, "PlanBuilder.add_buffer: name");
            Buffer buf = buffer_argument(buffer, fmt::format("PlanBuilder.add_buffer(\"{}\")", name), false);
            return b.add(buf, shape_of(buffer, buf), name);
          },
          py::arg("buffer"), py::arg("name") = "",
          "Adds a slot holding a svod.Buffer, numpy array (no copy) or DLPack tensor; returns its index.")
      .def(
          "add_view",
          [](PyPlanBuilder& b, py::handle base, py::handle byte_offset, py::handle bytes, py::handle dtype,
             py::handle name) {
            return b.add_view(size_argument(base, "PlanBuilder.add_view: base"),
                              size_argument(byte_offset, "PlanBuilder.add_view: byte_offset"),
                              size_argument(bytes, "PlanBuilder.add_view: bytes"), dtype_from_object(dtype),
                              string_argument(name, "PlanBuilder.add_view: name"));
          },
          py::arg("base"), py::arg("byte_offset"), py::arg("bytes"), py::arg("dtype"), py::arg("name") = "",
          "Adds a slot that is `bytes` bytes of slot `base` at `byte_offset`, typed `dtype`.")
      .def(
          "add_variable",
          [](PyPlanBuilder& b, py::handle name, py::handle value, py::handle min, py::handle max) {
            auto integer = [](py::handle v, const char* what) {
              return integer_value(v.ptr(), [&] { return fmt::format("PlanBuilder.add_variable: {}", what); });
            };
            b.add_variable(string_argument(name, "PlanBuilder.add_variable: name"), integer(value, "value"),
                           integer(min, "min"), integer(max, "max"));
          },
          py::arg("name"), py::arg("value"), py::arg("min") = INT64_MIN, py::arg("max") = INT64_MAX)
      .def(
          "run",
          [](PyPlanBuilder& b, py::handle program, py::handle buffers, py::handle scalars_object, py::handle id,
             py::handle after, py::handle fixed_vars, py::handle global_size, py::handle local_size) {
            KernelOp k;
            k.program = program_from_object(program, "PlanBuilder.run: program");
            k.buffers = size_list(buffers, "PlanBuilder.run: buffers");
            const auto scalars = sequence_argument(scalars_object, "PlanBuilder.run: scalars",
                                                   "a sequence of integers and expression strings");
            for (size_t i = 0; i < scalars.size(); ++i)
              k.scalars.push_back(expr_of(scalars[i], fmt::format("run: scalars[{}]", i)));
            k.fixed_vars = vars_of(fixed_vars, "PlanBuilder.run: fixed_vars");
            if (!global_size.is_none()) k.global = size_exprs(global_size, "run: global_size");
            if (!local_size.is_none()) k.local = size_exprs(local_size, "run: local_size");
            return b.add_op(std::move(k), op_options(id, after, "PlanBuilder.run"));
          },
          py::arg("program"), py::arg("buffers"), py::arg("scalars") = py::tuple(), py::kw_only(), py::arg("id") = "",
          py::arg("after") = py::none(), py::arg("fixed_vars") = py::dict(), py::arg("global_size") = py::none(),
          py::arg("local_size") = py::none(),
          "Adds a kernel launch; scalars are integers or expressions over plan variables (\"n * 2\").\n"
          "global_size=/local_size= replace the program's launch sizes (an int, expression or a tuple of\n"
          "up to three). after= lists op indices or ids that must finish first.")
      .def(
          "copy",
          [](PyPlanBuilder& b, py::handle dst, py::handle src, py::handle id, py::handle after) {
            return b.add_op(
                CopyOp{size_argument(dst, "PlanBuilder.copy: dst"), size_argument(src, "PlanBuilder.copy: src")},
                op_options(id, after, "PlanBuilder.copy"));
          },
          py::arg("dst"), py::arg("src"), py::kw_only(), py::arg("id") = "", py::arg("after") = py::none())
      .def(
          "custom",
          [](PyPlanBuilder& b, py::handle name, py::handle buffers, py::handle attrs, py::handle id,
             py::handle after) {
            CustomOp f{.name = string_argument(name, "PlanBuilder.custom: name"),
                                     .buffers = size_list(buffers, "PlanBuilder.custom: buffers"),
                                     .attrs = {},
                                     .def = {}};
            for (const auto& [key, value] : mapping_items(attrs, "PlanBuilder.custom: attrs"))
              f.attrs[key] = attr_of(value, key);
            return b.add_op(std::move(f), op_options(id, after, "PlanBuilder.custom"));
          },
          py::arg("name"), py::arg("buffers"), py::arg("attrs") = py::dict(), py::kw_only(), py::arg("id") = "",
          py::arg("after") = py::none(), "Adds a call of a registered host function (\"fill\", \"all_reduce\", ...).")
      .def(
          "add_output",
          [](PyPlanBuilder& b, py::handle slot_object) {
            const size_t slot = size_argument(slot_object, "PlanBuilder.add_output: slot");
            b.builder.add_output(slot);
            b.outputs.push_back(slot);
          },
          py::arg("slot"))
      .def(
          "build",
          [](PyPlanBuilder& b) {
            // A second build() used to return an empty plan without a word.
            if (b.names.empty() && b.ops == 0)
              throw make_error(ErrorKind::Validation,
                               "PlanBuilder.build(): the builder holds no buffers and no ops (build() empties it: "
                               "the plan an earlier build() returned holds what was added)");
            return b.build("PlanBuilder");
          },
          "Checks everything and returns the Plan (ValidationError naming the op at fault); the\n"
          "builder is empty afterwards, and building an empty one is a ValidationError.");
}

}  // namespace svod::python
