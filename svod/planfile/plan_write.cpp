// PlanFile → plan file JSON: the writer of what plan_parse*.cpp read, field
// for field, so that parse_plan_text(write_plan_text(f)) is f again.
#include <nlohmann/json.hpp>

#include "svod/planfile/plan_file.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// An expression as the parser takes it: an integer, or its text (a constant
// written as arithmetic, "2*64", keeps it).
Json expr_json(const Expr& e) {
  if (e.is_constant() && e.text() == std::to_string(e.constant_value())) return e.constant_value();
  return e.text();
}

Json sizes_json(const std::array<Expr, 3>& sizes) {
  Json out = Json::array();
  for (const Expr& e : sizes) out.push_back(expr_json(e));
  return out;
}

bool all_ones(const std::array<Expr, 3>& sizes) {
  for (const Expr& e : sizes)
    if (!e.is_constant() || e.constant_value() != 1) return false;
  return true;
}

// A file the plan names: relative to the plan's folder when it lies inside
// it, else as it is (absolute).
std::string file_name(const fs::path& path, const fs::path& folder) {
  const fs::path relative = path.lexically_relative(folder);
  if (relative.empty() || *relative.begin() == "..") return path.generic_string();
  return relative.generic_string();
}

Json shape_json(const PlanFileBuffer& b) {
  Json shape = Json::array();
  for (size_t d = 0; d < b.shape.size(); ++d) {
    if (!b.dim_variables.empty() && !b.dim_variables[d].empty()) shape.push_back(b.dim_variables[d]);
    else shape.push_back(b.shape[d]);
  }
  return shape;
}

Json init_json(const BufferInit& init, const fs::path& folder) {
  switch (init.kind) {
    case BufferInit::Kind::Zeros: return "zeros";
    case BufferInit::Kind::Fill: return {{"fill", init.a}};
    case BufferInit::Kind::Arange: return {{"arange", {{"start", init.a}, {"step", init.b}}}};
    case BufferInit::Kind::Uniform: return {{"uniform", {{"low", init.a}, {"high", init.b}, {"seed", init.seed}}}};
    case BufferInit::Kind::Normal: return {{"normal", {{"mean", init.a}, {"std", init.b}, {"seed", init.seed}}}};
    case BufferInit::Kind::Npy: return {{"npy", file_name(init.npy, folder)}};
  }
  return "zeros";
}

Json buffer_json(const PlanFile& file, const PlanFileBuffer& b) {
  Json out = Json::object();
  if (b.view_of) {
    const PlanFileBuffer& base = *file.find_buffer(*b.view_of);
    out["view"] = *b.view_of;
    // In the base's elements where they land on one, as people write it.
    if (b.byte_offset % size_of(base.dtype) == 0) out["offset"] = b.byte_offset / size_of(base.dtype);
    else out["byte_offset"] = b.byte_offset;
    if (b.dtype != base.dtype) out["dtype"] = to_string(b.dtype);
  } else {
    out["dtype"] = to_string(b.dtype);
  }
  if (b.shape.size() == 1 && b.dim_variables.empty()) out["count"] = b.count;
  else out["shape"] = shape_json(b);
  if (!b.view_of) {
    if (!b.device.empty()) out["device"] = b.device;
    if (b.init.kind != BufferInit::Kind::Zeros) out["init"] = init_json(b.init, file.folder);
    if (b.role) out["role"] = to_string(*b.role);
  }
  return out;
}

Json program_json(const PlanFileProgram& p) {
  const ProgramSpec& spec = p.spec;
  Json out = Json::object();
  out["language"] = to_string(spec.language);
  if (!p.device.empty()) out["device"] = p.device;
  out["source"] = spec.source;
  out["entry"] = spec.entry;
  Json buffers = Json::array();
  for (const BufferParam& b : spec.buffers) {
    Json param = {{"name", b.name}};
    if (b.access != Access::Read) param["access"] = to_string(b.access);
    if (b.dtype) param["dtype"] = to_string(*b.dtype);
    if (b.min_count) param["min_count"] = expr_json(*b.min_count);
    buffers.push_back(std::move(param));
  }
  out["buffers"] = std::move(buffers);
  if (!spec.scalars.empty()) {
    Json scalars = Json::array();
    for (const ScalarParam& s : spec.scalars) {
      Json param = {{"name", s.name}, {"type", to_string(s.type)}};
      if (s.min) param["min"] = *s.min;
      if (s.max) param["max"] = *s.max;
      scalars.push_back(std::move(param));
    }
    out["scalars"] = std::move(scalars);
  }
  if (!all_ones(spec.global_size)) out["global_size"] = sizes_json(spec.global_size);
  if (!all_ones(spec.local_size)) out["local_size"] = sizes_json(spec.local_size);
  if (!spec.defines.empty()) {
    Json defines = Json::object();
    for (const auto& [name, value] : spec.defines) defines[name] = value;
    out["defines"] = std::move(defines);
  }
  if (!spec.recipe.empty()) out["recipe"] = spec.recipe;
  if (spec.flops) out["flops"] = expr_json(*spec.flops);
  if (spec.bytes) out["bytes"] = expr_json(*spec.bytes);
  return out;
}

Json op_json(const PlanFile& file, const PlanFileOp& op) {
  Json out = Json::object();
  switch (op.kind) {
    case PlanFileOp::Kind::Run: {
      out["run"] = op.target;
      out["buffers"] = op.buffers;
      Json scalars = Json::object();
      size_t k = 0;
      for (const ScalarParam& s : file.find_program(op.target)->spec.scalars)
        if (s.name != kCoreIdName) scalars[s.name] = expr_json(op.scalars.at(k++));
      if (!scalars.empty()) out["scalars"] = std::move(scalars);
      if (op.global_size) out["global_size"] = sizes_json(*op.global_size);
      if (op.local_size) out["local_size"] = sizes_json(*op.local_size);
      break;
    }
    case PlanFileOp::Kind::Copy: out["copy"] = {{"dst", op.buffers.at(0)}, {"src", op.buffers.at(1)}}; break;
    case PlanFileOp::Kind::Custom: {
      out["custom"] = op.target;
      if (!op.buffers.empty()) out["buffers"] = op.buffers;
      if (!op.attrs.empty()) {
        Json attrs = Json::object();
        for (const auto& [key, value] : op.attrs)
          std::visit([&, &key = key](const auto& v) { attrs[key] = v; }, value);
        out["attrs"] = std::move(attrs);
      }
      break;
    }
    case PlanFileOp::Kind::Collective: {
      Json c = {{"kind", to_string(op.collective)}};
      if (op.collective == CollectiveKind::AllGather || op.collective == CollectiveKind::ReduceScatter) {
        c["src"] = op.buffers.at(0);
        c["dst"] = op.buffers.at(1);
      } else {
        c["buffers"] = op.buffers;
      }
      if (op.collective == CollectiveKind::AllReduce || op.collective == CollectiveKind::ReduceScatter)
        c["op"] = to_string(op.reduce);
      if (op.collective == CollectiveKind::Broadcast) c["root"] = op.root;
      out["collective"] = std::move(c);
      break;
    }
  }
  if (!op.id.empty()) out["id"] = op.id;
  if (!op.after.empty()) {
    Json after = Json::array();
    for (const OpRef& ref : op.after)
      std::visit([&](const auto& r) { after.push_back(r); }, ref);
    out["after"] = std::move(after);
  }
  return out;
}

Json output_json(const PlanFile& file, const PlanFileOutput& o) {
  Json out = Json::object();
  if (o.npy) out["npy"] = o.npy->generic_string();
  if (o.expect) {
    const PlanFileExpect& e = *o.expect;
    Json expect = Json::object();
    if (e.npy) expect["npy"] = file_name(*e.npy, file.folder);
    else expect["values"] = e.values;
    if (e.prefix) expect["prefix"] = true;
    if (e.rtol) expect["rtol"] = *e.rtol;
    if (e.atol) expect["atol"] = *e.atol;
    out["expect"] = std::move(expect);
  }
  return out;
}

}  // namespace

std::string write_plan_text(const PlanFile& file) {
  Json root = Json::object();
  root["svod_plan"] = kPlanFileVersion;
  root["device"] = file.device;
  if (!file.variables.empty()) {
    Json variables = Json::object();
    for (const auto& v : file.variables)
      variables[v.variable.name] = {{"min", v.variable.min}, {"max", v.variable.max}, {"value", v.value}};
    root["variables"] = std::move(variables);
  }
  Json buffers = Json::object();
  for (const auto& b : file.buffers) buffers[b.name] = buffer_json(file, b);
  root["buffers"] = std::move(buffers);
  if (!file.programs.empty()) {
    Json programs = Json::object();
    for (const auto& p : file.programs) programs[p.name] = program_json(p);
    root["programs"] = std::move(programs);
  }
  Json ops = Json::array();
  for (const auto& op : file.ops) ops.push_back(op_json(file, op));
  root["ops"] = std::move(ops);
  if (!file.outputs.empty()) {
    Json outputs = Json::object();
    for (const auto& o : file.outputs) outputs[o.buffer] = output_json(file, o);
    root["outputs"] = std::move(outputs);
  }
  return root.dump(1) + "\n";
}

}  // namespace svod
