// Plan file JSON → PlanFile: program objects, in a plan's "programs" or alone.
#include <cmath>
#include <set>
#include <string>

#include "svod/planfile/json_text.h"
#include "svod/planfile/plan_parser.h"

namespace svod::detail::plan_parse {

PlanFileProgram Parser::parse_program(std::string_view text) {
  root_name_ = "(the program)";
  return program(parse_json(text), "", "");
}

PlanFileProgram parse_program_value(const Json& program, const std::string& key, const fs::path& folder,
                                    std::string_view source_name) {
  return Parser(folder, std::string(source_name)).parse_program(program, key);
}

void Parser::programs(const Json& j) {
  object(j, "programs");
  for (const auto& [key, p] : j.items()) {
    PlanFileProgram prog = program(p, key, child("programs", key));
    // Inline source of a plan file: diagnostics name where in the plan its
    // text is ("plan.json: programs.mm.source:2:16"). A program given alone
    // (the C API, Python's compile) keeps NAME.c.
    if (find(p, "source"))
      prog.spec.source_name = fmt::format("{}: {}", file_.source_name, child(child("programs", key), "source"));
    file_.programs.push_back(std::move(prog));
  }
}

// One program object, at JSON path `path`; `key` is its name (empty for a
// program parsed alone, whose spec then goes by its entry).
PlanFileProgram Parser::program(const Json& p, const std::string& key, const std::string& path) const {
  object(p, path);
  allow(p, path,
        {"language", "device", "source", "source_file", "entry", "buffers", "scalars", "global_size",
         "local_size", "defines", "recipe", "flops", "bytes"});
  no_nul(key, path);
  PlanFileProgram prog;
  prog.name = key;
  ProgramSpec& spec = prog.spec;
  spec.name = key;
  const std::string lang_path = child(path, "language");
  spec.language = parsed(lang_path, str(need(p, path, "language"), lang_path), parse_language);
  if (const Json* d = find(p, "device")) prog.device = name(*d, child(path, "device"));
  const Json* source = find(p, "source");
  const Json* source_file = find(p, "source_file");
  if ((source != nullptr) == (source_file != nullptr)) fail(path, "give either \"source\" or \"source_file\"");
  if (source) {
    spec.source = str(*source, child(path, "source"));
  } else {
    const fs::path file = file_path(*source_file, child(path, "source_file"));
    // Diagnostics name the kernel's own file as the plan gives it (relative
    // to the plan's folder), not the program.
    spec.source_name = source_file->get<std::string>();
    try {
      spec.source = detail::read_format_file(file, "source file");
    } catch (const Error& e) {
      throw make_error(e.kind(), "{}: {}: {}", file_.source_name, child(path, "source_file"), e.what());
    }
  }
  spec.entry = name(need(p, path, "entry"), child(path, "entry"));

  const std::string bufs_path = child(path, "buffers");
  const Json& bufs = need(p, path, "buffers");
  array(bufs, bufs_path);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const std::string at = item(bufs_path, i);
    object(bufs[i], at);
    allow(bufs[i], at, {"name", "access", "dtype", "min_count"});
    BufferParam param;
    param.name = name(need(bufs[i], at, "name"), child(at, "name"));
    if (const Json* a = find(bufs[i], "access")) {
      param.access = parsed(child(at, "access"), str(*a, child(at, "access")), parse_access);
    }
    if (const Json* d = find(bufs[i], "dtype")) {
      param.dtype = parsed(child(at, "dtype"), str(*d, child(at, "dtype")), parse_dtype);
    }
    spec.buffers.push_back(std::move(param));
  }

  std::set<std::string> size_names = variable_names_;
  std::set<std::string> scalar_names;  // the caller's, for min_count
  if (const Json* scalars = find(p, "scalars")) {
    const std::string sc_path = child(path, "scalars");
    array(*scalars, sc_path);
    for (size_t i = 0; i < scalars->size(); ++i) {
      const std::string at = item(sc_path, i);
      const Json& s = (*scalars)[i];
      object(s, at);
      allow(s, at, {"name", "type", "min", "max"});
      ScalarParam param;
      param.name = name(need(s, at, "name"), child(at, "name"));
      param.type = parsed(child(at, "type"), str(need(s, at, "type"), child(at, "type")), parse_scalar_type);
      if (const Json* m = find(s, "min")) param.min = integer(*m, child(at, "min"));
      if (const Json* m = find(s, "max")) param.max = integer(*m, child(at, "max"));
      if (param.name != kCoreIdName) {
        size_names.insert(param.name);
        scalar_names.insert(param.name);
      }
      spec.scalars.push_back(std::move(param));
    }
  }
  // After the scalars, which min_count may name (only they: a launch checks
  // it before anything runs, with no plan variables at hand).
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (const Json* m = find(bufs[i], "min_count")) {
      spec.buffers[i].min_count =
          expr(*m, child(item(bufs_path, i), "min_count"), scalar_names, "the program's scalars except core_id");
    }
  }
  constexpr std::string_view kSizeNames = "plan variables and the program's scalars";
  for (const char* field : {"global_size", "local_size"}) {
    const Json* dims = find(p, field);
    if (!dims) continue;
    const std::string at = child(path, field);
    array(*dims, at);
    if (dims->empty() || dims->size() > 3) fail(at, fmt::format("expected 1 to 3 sizes, got {}", dims->size()));
    auto& target = std::string_view(field) == "global_size" ? spec.global_size : spec.local_size;
    for (size_t i = 0; i < dims->size(); ++i) target[i] = expr((*dims)[i], item(at, i), size_names, kSizeNames);
  }
  if (const Json* defines = find(p, "defines")) {
    const std::string at = child(path, "defines");
    object(*defines, at);
    for (const auto& [macro, value] : defines->items()) {
      std::string text;
      if (value.is_string()) text = value.get<std::string>();
      else if (value.is_boolean()) text = value.get<bool>() ? "1" : "0";
      else if (value.is_number()) text = value.dump();
      else fail(child(at, macro), fmt::format("expected a number or a string, got {}", json_type_name(value)));
      spec.defines.emplace_back(macro, std::move(text));
    }
  }
  if (const Json* r = find(p, "recipe")) spec.recipe = str(*r, child(path, "recipe"));
  if (const Json* f = find(p, "flops")) spec.flops = cost_expr(*f, child(path, "flops"), size_names);
  if (const Json* b = find(p, "bytes")) spec.bytes = cost_expr(*b, child(path, "bytes"), size_names);
  try {
    spec.validate();
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return prog;
}

// flops/bytes may be written as JSON floats such as 1e9; they must still be whole numbers.
Expr Parser::cost_expr(const Json& j, const std::string& path, const std::set<std::string>& names) const {
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!(v >= 0 && v < 9.2e18) || v != std::floor(v)) fail(path, fmt::format("expected a whole number, got {}", v));
    return Expr::constant(static_cast<int64_t>(v));
  }
  return expr(j, path, names, "plan variables and the program's scalars");
}

}  // namespace svod::detail::plan_parse
