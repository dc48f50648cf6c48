// Plan file JSON → PlanFile: the ops (run, copy, custom, collective) and
// their order.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_parser.h"
#include "svod/program/launch_layout.h"

namespace svod::detail::plan_parse {

std::string Parser::buffer_ref(const Json& j, const std::string& path) const {
  std::string n = name(j, path);
  if (!file_.find_buffer(n)) fail(path, fmt::format("no buffer named \"{}\"", n));
  return n;
}

std::vector<std::string> Parser::buffer_list(const Json& j, const std::string& path) const {
  array(j, path);
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(buffer_ref(j[i], item(path, i)));
  return out;
}

void Parser::ops(const Json& j) {
  array(j, "ops");
  std::map<std::string, size_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = item("ops", i);
    object(j[i], path);
    if (const Json* id = find(j[i], "id")) {
      const std::string text = name(*id, child(path, "id"));
      if (auto [it, fresh] = ids.emplace(text, i); !fresh) {
        fail(child(path, "id"), fmt::format("id \"{}\" is already used by ops[{}]", text, it->second));
      }
    }
  }
  for (size_t i = 0; i < j.size(); ++i) file_.ops.push_back(op(j[i], item("ops", i), i, j.size(), ids));
}

PlanFileOp Parser::op(const Json& j, const std::string& path, size_t index, size_t op_count,
                      const std::map<std::string, size_t>& ids) const {
  PlanFileOp op;
  const int kinds = (find(j, "run") ? 1 : 0) + (find(j, "copy") ? 1 : 0) + (find(j, "custom") ? 1 : 0) +
                    (find(j, "collective") ? 1 : 0);
  if (kinds != 1) fail(path, "an op has exactly one of \"run\", \"copy\", \"custom\" or \"collective\"");
  if (const Json* id = find(j, "id")) op.id = id->get<std::string>();
  if (const Json* after = find(j, "after")) {
    const std::string at = child(path, "after");
    array(*after, at);
    for (size_t k = 0; k < after->size(); ++k) {
      const Json& ref = (*after)[k];
      const std::string ref_path = item(at, k);
      if (ref.is_string()) {
        auto it = ids.find(ref.get<std::string>());
        if (it == ids.end()) fail(ref_path, fmt::format("no op with id \"{}\"", ref.get<std::string>()));
        if (it->second == index) fail(ref_path, "an op cannot run after itself");
        op.after.emplace_back(ref.get<std::string>());
      } else {
        const uint64_t other = unsigned_integer(ref, ref_path);
        if (other >= op_count) fail(ref_path, fmt::format("no op with index {} (the plan has {})", other, op_count));
        if (other == index) fail(ref_path, "an op cannot run after itself");
        op.after.emplace_back(static_cast<size_t>(other));
      }
    }
  }
  if (const Json* run = find(j, "run")) {
    allow(j, path, {"run", "buffers", "scalars", "global_size", "local_size", "id", "after"});
    op.kind = PlanFileOp::Kind::Run;
    op.target = name(*run, child(path, "run"));
    const PlanFileProgram* prog = file_.find_program(op.target);
    if (!prog) fail(child(path, "run"), fmt::format("no program named \"{}\"", op.target));
    const ProgramSpec& spec = prog->spec;
    const std::string bufs_path = child(path, "buffers");
    op.buffers = buffer_list(need(j, path, "buffers"), bufs_path);
    if (op.buffers.size() != spec.buffers.size()) {
      fail(bufs_path, fmt::format("program \"{}\" takes {} buffers, got {}", op.target, spec.buffers.size(),
                                  op.buffers.size()));
    }
    for (size_t k = 0; k < op.buffers.size(); ++k) {
      // As a launch checks it (dtype_accepts): the dtype, or u8 bytes aligned
      // for it (from the base's start: bases are aligned for every dtype).
      const PlanFileBuffer& have = *file_.find_buffer(op.buffers[k]);
      if (spec.buffers[k].dtype && !dtype_accepts(*spec.buffers[k].dtype, have.dtype, have.byte_offset)) {
        fail(item(bufs_path, k), fmt::format("buffer \"{}\" is {}, parameter \"{}\" of \"{}\" takes {}",
                                             op.buffers[k], to_string(have.dtype), spec.buffers[k].name, op.target,
                                             to_string(*spec.buffers[k].dtype)));
      }
    }
    const std::string sc_path = child(path, "scalars");
    const Json* scalars = find(j, "scalars");
    if (scalars) {
      object(*scalars, sc_path);
      for (const auto& [key, value] : scalars->items()) {
        const bool declared = std::any_of(spec.scalars.begin(), spec.scalars.end(),
                                          [&](const ScalarParam& s) { return s.name == key; });
        if (!declared) fail(child(sc_path, key), fmt::format("program \"{}\" has no scalar named \"{}\"", op.target, key));
        if (key == kCoreIdName) fail(child(sc_path, key), "core_id is set by the runtime for each parallel slice");
      }
    }
    for (const auto& s : spec.scalars) {
      if (s.name == kCoreIdName) continue;
      const Json* value = scalars ? find(*scalars, s.name) : nullptr;
      if (!value) fail(sc_path, fmt::format("missing scalar \"{}\" of program \"{}\"", s.name, op.target));
      op.scalars.push_back(expr(*value, child(sc_path, s.name), variable_names_, "plan variables"));
    }
    // As the program's own launch sizes, over the same names.
    std::set<std::string> size_names = variable_names_;
    for (const auto& s : spec.scalars)
      if (s.name != kCoreIdName) size_names.insert(s.name);
    for (const char* field : {"global_size", "local_size"}) {
      const Json* dims = find(j, field);
      if (!dims) continue;
      const std::string at = child(path, field);
      array(*dims, at);
      if (dims->empty() || dims->size() > 3) fail(at, fmt::format("expected 1 to 3 sizes, got {}", dims->size()));
      std::array<Expr, 3> sizes = {Expr::constant(1), Expr::constant(1), Expr::constant(1)};
      for (size_t i = 0; i < dims->size(); ++i)
        sizes[i] = expr((*dims)[i], item(at, i), size_names, "plan variables and the program's scalars");
      (std::string_view(field) == "global_size" ? op.global_size : op.local_size) = sizes;
    }
  } else if (const Json* copy = find(j, "copy")) {
    allow(j, path, {"copy", "id", "after"});
    op.kind = PlanFileOp::Kind::Copy;
    const std::string at = child(path, "copy");
    object(*copy, at);
    allow(*copy, at, {"dst", "src"});
    op.buffers = {buffer_ref(need(*copy, at, "dst"), child(at, "dst")),
                  buffer_ref(need(*copy, at, "src"), child(at, "src"))};
    const auto* dst = file_.find_buffer(op.buffers[0]);
    const auto* src = file_.find_buffer(op.buffers[1]);
    if (dst->bytes() != src->bytes()) {
      fail(at, fmt::format("dst \"{}\" has {} bytes, src \"{}\" has {}", dst->name, dst->bytes(), src->name,
                           src->bytes()));
    }
  } else if (const Json* collective = find(j, "collective")) {
    allow(j, path, {"collective", "id", "after"});
    collective_op(*collective, child(path, "collective"), op);
  } else {
    allow(j, path, {"custom", "buffers", "attrs", "id", "after"});
    op.kind = PlanFileOp::Kind::Custom;
    op.target = name(*find(j, "custom"), child(path, "custom"));
    if (const Json* bufs = find(j, "buffers")) op.buffers = buffer_list(*bufs, child(path, "buffers"));
    if (const Json* attrs = find(j, "attrs")) {
      const std::string at = child(path, "attrs");
      object(*attrs, at);
      for (const auto& [key, value] : attrs->items()) {
        if (value.is_number_integer()) op.attrs.emplace(key, integer(value, child(at, key)));
        else if (value.is_number_float()) op.attrs.emplace(key, value.get<double>());
        else if (value.is_string()) op.attrs.emplace(key, value.get<std::string>());
        else fail(child(at, key), fmt::format("expected a number or a string, got {}", json_type_name(value)));
      }
    }
  }
  return op;
}

// {"kind": ..., "buffers": [...]} or {"kind": ..., "src": ..., "dst": ...},
// with "op" for reductions and "root" for broadcast. Sizes that depend on
// the number of ranks are checked when the plan is loaded.
void Parser::collective_op(const Json& j, const std::string& path, PlanFileOp& op) const {
  using Kind = CollectiveKind;
  object(j, path);
  const std::string kind_path = child(path, "kind");
  const std::string kind = str(need(j, path, "kind"), kind_path);
  op.kind = PlanFileOp::Kind::Collective;
  op.target = kind;
  if (kind == "all_reduce" || kind == "broadcast") {
    const bool reduce = kind == "all_reduce";
    op.collective = reduce ? Kind::AllReduce : Kind::Broadcast;
    if (reduce) allow(j, path, {"kind", "buffers", "op"});
    else allow(j, path, {"kind", "buffers", "root"});
    op.buffers = buffer_list(need(j, path, "buffers"), child(path, "buffers"));
    if (op.buffers.empty()) fail(child(path, "buffers"), "expected at least one buffer");
    for (size_t k = 0; k < op.buffers.size(); ++k)
      for (size_t m = 0; m < k; ++m)
        if (op.buffers[m] == op.buffers[k])
          fail(item(child(path, "buffers"), k), fmt::format("buffer \"{}\" is listed twice", op.buffers[k]));
  } else if (kind == "all_gather" || kind == "reduce_scatter") {
    const bool gather = kind == "all_gather";
    op.collective = gather ? Kind::AllGather : Kind::ReduceScatter;
    if (gather) allow(j, path, {"kind", "src", "dst"});
    else allow(j, path, {"kind", "src", "dst", "op"});
    op.buffers = {buffer_ref(need(j, path, "src"), child(path, "src")),
                  buffer_ref(need(j, path, "dst"), child(path, "dst"))};
    const PlanFileBuffer* src = file_.find_buffer(op.buffers[0]);
    const PlanFileBuffer* dst = file_.find_buffer(op.buffers[1]);
    if (src->dtype != dst->dtype) {
      fail(path, fmt::format("src \"{}\" is {} but dst \"{}\" is {}; the dtypes must match", src->name,
                             to_string(src->dtype), dst->name, to_string(dst->dtype)));
    }
    if (src->name == dst->name) fail(path, "src and dst must be different buffers");
  } else {
    fail(kind_path,
         fmt::format("unknown collective \"{}\" (expected all_reduce, broadcast, all_gather or reduce_scatter)", kind));
  }
  if (op.collective == Kind::AllReduce || op.collective == Kind::ReduceScatter) {
    const std::string op_path = child(path, "op");
    op.reduce = parsed(op_path, str(need(j, path, "op"), op_path), parse_reduce_op);
  }
  if (op.collective == Kind::Broadcast) {
    const std::string root_path = child(path, "root");
    const Json& root = need(j, path, "root");
    const uint64_t value = unsigned_integer(root, root_path);
    if (value > uint64_t(INT32_MAX)) fail(root_path, fmt::format("{} is too large", value));
    op.root = static_cast<int>(value);
  }
}

}  // namespace svod::detail::plan_parse
