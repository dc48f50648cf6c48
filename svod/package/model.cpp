#include "svod/package/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "svod/base/error.h"
#include "svod/sandbox/sandbox.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::string shape_text(std::span<const size_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// A buffer's shape as the plan declares it: "[batch, 3]".
std::string declared_shape(const PlanFileBuffer& b) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < b.shape.size(); ++d)
    dims.push_back(b.dim_variables.empty() || b.dim_variables[d].empty() ? std::to_string(b.shape[d])
                                                                         : b.dim_variables[d]);
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

}  // namespace

size_t ModelPort::count() const noexcept {
  size_t n = 1;
  for (const size_t d : shape) n *= d;
  return n;
}

Model Model::load(const fs::path& path, const ModelLoadOptions& options) {
  if (is_package_file(path))
    return Model(load_package(path, PackageLoadOptions{.vars = options.vars, .communicator = {}, .inputs = {},
                                                       .cpu_compiler = options.cpu_compiler,
                                                       .on_cpu_mismatch = options.on_cpu_mismatch}));
  PlanFile file = parse_plan_file(fs::is_directory(path) ? path / "plan.json" : path);
  LoadOptions load;
  load.vars = options.vars;
  load.cpu_compiler = options.cpu_compiler;
  LoadedPlan loaded = load_plan(file, load);
  return Model(std::move(file), std::move(loaded));
}

Model::Model(LoadedPackage package) : Model(std::move(package.file), std::move(package.loaded)) {
  manifest_ = std::move(package.manifest);
}

Model::Model(PlanFile file, LoadedPlan loaded) : file_(std::move(file)), loaded_(std::move(loaded)) {
  auto slot_of = [&](const std::string& name) {
    const std::optional<size_t> slot = loaded_.plan.find_buffer(name);
    if (!slot) throw make_error(ErrorKind::Internal, "the loaded plan lacks buffer \"{}\" of its file", name);
    return *slot;
  };
  for (size_t i = 0; i < file_.buffers.size(); ++i) {
    const PlanFileBuffer& b = file_.buffers[i];
    if (b.role == BufferRole::Input) inputs_.push_back(Port{b.name, i, slot_of(b.name)});
  }
  for (const PlanFileOutput& out : file_.outputs) {
    const PlanFileBuffer* b = file_.find_buffer(out.buffer);
    outputs_.push_back(Port{out.buffer, static_cast<size_t>(b - file_.buffers.data()), slot_of(out.buffer)});
  }
  bound_.resize(inputs_.size());
}

const PlanFileVariable* Model::find_variable(std::string_view name) const {
  for (const PlanFileVariable& v : file_.variables)
    if (v.variable.name == name) return &v;
  return nullptr;
}

std::map<std::string, int64_t> Model::variables() const {
  std::map<std::string, int64_t> values;
  for (const PlanVariable& v : loaded_.plan.variables()) values[v.variable.name] = v.value;
  for (const auto& [name, value] : pending_) values[name] = value;
  return values;
}

ModelPort Model::describe(const Port& port) const {
  const PlanFileBuffer& b = file_.buffers[port.buffer];
  ModelPort out{port.name, b.dtype, b.shape, b.dim_variables, port.slot};
  if (!b.dim_variables.empty()) {
    const auto values = variables();
    for (size_t d = 0; d < b.dim_variables.size(); ++d)
      if (!b.dim_variables[d].empty()) out.shape[d] = static_cast<size_t>(values.at(b.dim_variables[d]));
  }
  return out;
}

std::vector<ModelPort> Model::inputs() const {
  std::vector<ModelPort> out;
  for (const Port& p : inputs_) out.push_back(describe(p));
  return out;
}

std::vector<ModelPort> Model::outputs() const {
  std::vector<ModelPort> out;
  for (const Port& p : outputs_) out.push_back(describe(p));
  return out;
}

const Model::Port& Model::find(const std::vector<Port>& ports, std::string_view name, std::string_view what) const {
  for (const Port& p : ports)
    if (p.name == name) return p;
  std::vector<std::string> names;
  for (const Port& p : ports) names.push_back("\"" + p.name + "\"");
  throw make_error(ErrorKind::Validation, "no {} named \"{}\" (the {}s: {})", what, name, what,
                   names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
}

ModelPort Model::input(std::string_view name) const { return describe(find(inputs_, name, "input")); }
ModelPort Model::output(std::string_view name) const { return describe(find(outputs_, name, "output")); }

std::map<std::string, int64_t> Model::shape_variables(const Port& port, DType dtype,
                                                      std::span<const size_t> shape) const {
  const PlanFileBuffer& b = file_.buffers[port.buffer];
  const std::string expected = declared_shape(b);
  if (dtype != b.dtype)
    throw make_error(ErrorKind::Validation, "input \"{}\": {} data for an input of {}", port.name, to_string(dtype),
                     to_string(b.dtype));
  if (shape.size() != b.shape.size())
    throw make_error(ErrorKind::Validation, "input \"{}\": a shape of {} dimensions {} for an input of shape {}",
                     port.name, shape.size(), shape_text(shape), expected);
  std::map<std::string, int64_t> set;
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::string& variable = b.dim_variables.empty() ? std::string() : b.dim_variables[d];
    if (variable.empty()) {
      if (shape[d] != b.shape[d])
        throw make_error(ErrorKind::Validation, "input \"{}\": shape {}: dimension {} is {}, the input's is {} ({})",
                         port.name, shape_text(shape), d, shape[d], b.shape[d], expected);
      continue;
    }
    const PlanFileVariable* v = find_variable(variable);
    const auto value = static_cast<int64_t>(shape[d]);
    if (shape[d] > static_cast<size_t>(INT64_MAX) || value < v->variable.min || value > v->variable.max)
      throw make_error(ErrorKind::Validation,
                       "input \"{}\": shape {}: dimension {} is variable \"{}\", which lies in [{}, {}], not {}",
                       port.name, shape_text(shape), d, variable, v->variable.min, v->variable.max, shape[d]);
    if (const auto it = set.find(variable); it != set.end() && it->second != value)
      throw make_error(ErrorKind::Validation, "input \"{}\": shape {} gives variable \"{}\" two values, {} and {}",
                       port.name, shape_text(shape), variable, it->second, value);
    set[variable] = value;
  }
  return set;
}

void Model::set_input(std::string_view name, DType dtype, std::span<const size_t> shape,
                      std::span<const std::byte> data) {
  const Port& port = find(inputs_, name, "input");
  auto set = shape_variables(port, dtype, shape);
  size_t count = 1;
  for (const size_t d : shape) count *= d;
  if (data.size() != count * size_of(dtype))
    throw make_error(ErrorKind::Validation, "input \"{}\": {} bytes of data for shape {} of {} ({} bytes)", port.name,
                     data.size(), shape_text(shape), to_string(dtype), count * size_of(dtype));
  const Buffer& buffer = loaded_.plan.buffer(port.slot);
  if (buffer.is_host()) {
    if (!data.empty()) std::memcpy(buffer.data(), data.data(), data.size());
  } else if (!data.empty()) {
    // The data's elements into the first elements of the device buffer.
    Buffer staging = buffer.device().allocate_host(buffer.dtype(), buffer.count());
    std::memcpy(staging.data(), data.data(), data.size());
    buffer.device().copy(buffer, staging);
  }
  for (const auto& [variable, value] : set) pending_[variable] = value;
  bound_[static_cast<size_t>(&port - inputs_.data())] = std::move(set);
}

void Model::bind_input(std::string_view name, Buffer buffer, std::span<const size_t> shape) {
  const Port& port = find(inputs_, name, "input");
  auto set = shape_variables(port, buffer.dtype(), shape);
  loaded_.plan.rebind(port.slot, std::move(buffer));
  for (const auto& [variable, value] : set) pending_[variable] = value;
  bound_[static_cast<size_t>(&port - inputs_.data())] = std::move(set);
}

void Model::bind_output(std::string_view name, Buffer buffer) {
  const Port& port = find(outputs_, name, "output");
  if (loaded_.plan.view(port.slot))
    throw make_error(ErrorKind::Unsupported, "output \"{}\" is part of buffer \"{}\" and cannot be bound on its own",
                     port.name, *file_.buffers[port.buffer].view_of);
  loaded_.plan.rebind(port.slot, std::move(buffer));
}

void Model::set_variable(std::string_view name, int64_t value) {
  const PlanFileVariable* v = find_variable(name);
  if (v == nullptr) {
    std::vector<std::string> names;
    for (const PlanFileVariable& known : file_.variables) names.push_back(known.variable.name);
    throw make_error(ErrorKind::Validation, "the plan has no variable named \"{}\" (it has: {})", name,
                     names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  }
  v->variable.check(value);
  pending_[v->variable.name] = value;
}

void Model::run(SandboxedPlan* sandbox) {
  // Each variable an input's shape set, as the inputs bound last left it.
  std::map<std::string, std::pair<int64_t, std::string>> from_inputs;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!bound_[i])
      throw make_error(ErrorKind::Validation, "input \"{}\" is not bound (bind every input before a run)",
                       inputs_[i].name);
    for (const auto& [variable, value] : *bound_[i]) {
      const auto [it, fresh] = from_inputs.try_emplace(variable, value, inputs_[i].name);
      if (!fresh && it->second.first != value)
        throw make_error(ErrorKind::Validation, "inputs \"{}\" and \"{}\" give variable \"{}\" the values {} and {}",
                         it->second.second, inputs_[i].name, variable, it->second.first, value);
    }
  }
  for (const auto& [variable, value] : from_inputs) {
    const auto it = pending_.find(variable);
    if (it != pending_.end() && it->second != value.first)
      throw make_error(ErrorKind::Validation,
                       "variable \"{}\" was set to {}, and input \"{}\"'s shape makes it {}", variable, it->second,
                       value.second, value.first);
  }
  if (sandbox != nullptr) {
    loaded_.plan.set_variables(pending_);
    pending_.clear();
    sandbox->execute();
    return;
  }
  if (pending_.empty()) {
    loaded_.execute();
    return;
  }
  // Once set, the values stay: later runs take the usual path again.
  loaded_.plan.execute_with_vars(pending_);
  pending_.clear();
}

void Model::read_output(std::string_view name, std::span<std::byte> into) const {
  const ModelPort port = output(name);
  if (into.size() != port.bytes())
    throw make_error(ErrorKind::Validation, "output \"{}\": {} bytes to read into, the output has {} ({} of {})",
                     port.name, into.size(), port.bytes(), shape_text(port.shape), to_string(port.dtype));
  const Buffer& buffer = loaded_.plan.buffer(port.slot);
  if (into.empty()) return;
  if (buffer.is_host()) {
    std::memcpy(into.data(), buffer.data(), into.size());
    return;
  }
  const Buffer staging = buffer.device().allocate_host(buffer.dtype(), buffer.count());
  buffer.device().copy(staging, buffer);
  std::memcpy(into.data(), staging.data(), into.size());
}

std::vector<std::byte> Model::read_output(std::string_view name) const {
  std::vector<std::byte> out(output(name).bytes());
  read_output(name, out);
  return out;
}

}  // namespace svod
