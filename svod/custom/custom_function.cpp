#include "svod/custom/custom_function.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "svod/base/error.h"
#include "svod/custom/builtin_functions.h"

namespace svod {
namespace {

struct Registry {
  std::shared_mutex mutex;
  std::map<std::string, std::shared_ptr<const CustomFunctionDef>, std::less<>> functions;
};

void check_def(std::string_view name, const CustomFunctionDef& def) {
  if (name.empty()) throw make_error(ErrorKind::Validation, "a custom function needs a name");
  if (!def.run || !def.validate)
    throw make_error(ErrorKind::Validation, "custom function \"{}\" needs both a run and a validate callback", name);
}

// Built-ins are added when the registry is first used, so they exist no matter
// which static initializers ran first.
Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry;
    for (auto& [name, def] : detail::builtin_custom_functions()) {
      check_def(name, def);
      r->functions.emplace(name, std::make_shared<const CustomFunctionDef>(std::move(def)));
    }
    return r;
  }();
  return *instance;
}

std::string_view type_name(const AttrValue& value) {
  switch (value.index()) {
    case 0: return "integer";
    case 1: return "number";
    default: return "string";
  }
}

const AttrValue& require_attr(std::string_view function, const Attrs& attrs, std::string_view name) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    throw make_error(ErrorKind::Validation, "custom function \"{}\": missing attribute \"{}\"", function, name);
  return it->second;
}

}  // namespace

std::string to_string(const AttrValue& value) {
  if (auto* i = std::get_if<int64_t>(&value)) return fmt::format("{}", *i);
  if (auto* d = std::get_if<double>(&value)) return fmt::format("{}", *d);
  return fmt::format("\"{}\"", std::get<std::string>(value));
}

std::optional<int64_t> VariableValues::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(names.begin(), names.end(), name);
  if (it == names.end() || *it != name) return std::nullopt;
  return values[static_cast<size_t>(it - names.begin())];
}

void register_custom_function(std::string name, CustomFunctionDef def) {
  check_def(name, def);
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (r.functions.contains(name))
    throw make_error(ErrorKind::Validation, "custom function \"{}\" is already registered", name);
  r.functions.emplace(std::move(name), std::make_shared<const CustomFunctionDef>(std::move(def)));
}

bool unregister_custom_function(std::string_view name) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  auto it = r.functions.find(name);
  if (it == r.functions.end()) return false;
  r.functions.erase(it);
  return true;
}

std::shared_ptr<const CustomFunctionDef> find_custom_function(std::string_view name) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.functions.find(name);
  if (it != r.functions.end()) return it->second;
  std::string known;
  for (const auto& [n, def] : r.functions) known += (known.empty() ? "" : ", ") + n;
  throw make_error(ErrorKind::Validation, "unknown custom function \"{}\" (registered: {})", name, known);
}

void run_custom_function(std::string_view name, std::span<const Buffer> buffers, const Attrs& attrs,
                         const VariableValues& vars) {
  auto def = find_custom_function(name);
  auto access = def->validate(buffers, attrs);
  if (access.size() != buffers.size())
    throw make_error(ErrorKind::Internal, "custom function \"{}\": validator returned {} accesses for {} buffers", name,
                     access.size(), buffers.size());
  def->run(buffers, attrs, vars);
}

void check_attr_names(std::string_view function, const Attrs& attrs, std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : attrs) {
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    std::string list;
    for (auto a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", a);
    throw make_error(ErrorKind::Validation, "custom function \"{}\": unknown attribute \"{}\" (accepted: {})", function,
                     name, list.empty() ? "none" : list);
  }
}

const std::string& attr_string(std::string_view function, const Attrs& attrs, std::string_view name) {
  const AttrValue& v = require_attr(function, attrs, name);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw make_error(ErrorKind::Validation, "custom function \"{}\": attribute \"{}\" must be a string, got {} {}",
                   function, name, type_name(v), to_string(v));
}

int64_t attr_int(std::string_view function, const Attrs& attrs, std::string_view name) {
  const AttrValue& v = require_attr(function, attrs, name);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  throw make_error(ErrorKind::Validation, "custom function \"{}\": attribute \"{}\" must be an integer, got {} {}",
                   function, name, type_name(v), to_string(v));
}

double attr_number(std::string_view function, const Attrs& attrs, std::string_view name) {
  const AttrValue& v = require_attr(function, attrs, name);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  throw make_error(ErrorKind::Validation, "custom function \"{}\": attribute \"{}\" must be a number, got {} {}",
                   function, name, type_name(v), to_string(v));
}

}  // namespace svod
