#include "svod/registry/registry.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cpu/kernel_fault.h"
#include "svod/backends/cuda/cuda_device.h"
#if SVOD_HAVE_OPENCL
#include "svod/backends/opencl/opencl_device.h"
#endif

namespace svod {

namespace {

#if !SVOD_HAVE_OPENCL
// A kind this build lacks: listed and named like the others, so that asking
// for one of its devices is "not available" saying why, not a typo.
DeviceKind missing_kind(std::string name, std::string why) {
  DeviceKind kind;
  kind.name = std::move(name);
  kind.enumerate = [name = kind.name, why = std::move(why)]() -> std::vector<DeviceInfo> {
    throw make_error(ErrorKind::DeviceUnavailable, "{} devices are not available in this build ({})", name, why);
  };
  kind.create = [](size_t) -> std::shared_ptr<Device> { return nullptr; };  // enumerate() refuses first
  return kind;
}
#endif

// The kinds every registry starts with, the one list of them; a new backend
// adds its line here.
std::vector<DeviceKind> builtin_kinds() {
  std::vector<DeviceKind> kinds;
  kinds.push_back(cpu_device_kind());
  kinds.push_back(cuda_device_kind());
#if SVOD_HAVE_OPENCL
  kinds.push_back(opencl_device_kind());
#else
  kinds.push_back(missing_kind("CL", "built without the OpenCL headers"));
#endif
  return kinds;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_local_suffix(std::string_view suffix) { return lower(suffix) == "local"; }

struct ParsedSpec {
  std::string kind;
  size_t index = 0;
};

}  // namespace

// One device string's once-cell. `mutex` is held while the device is built,
// so racers for the same device wait for the builder instead of building
// twice; nothing else is locked meanwhile.
struct DeviceCell {
  std::mutex mutex;
  std::shared_ptr<Device> device;
};

struct DeviceRegistry::State {
  mutable std::shared_mutex mutex;  // guards kinds and cells (the maps, not the cells' contents)
  std::map<std::string, std::shared_ptr<const DeviceKind>, std::less<>> kinds;
  std::vector<std::string> order;  // kind names in registration order
  std::map<std::string, std::shared_ptr<DeviceCell>, std::less<>> cells;

  // The kinds in registration order, taken under the lock.
  std::vector<std::shared_ptr<const DeviceKind>> snapshot() const {
    std::shared_lock lock(mutex);
    std::vector<std::shared_ptr<const DeviceKind>> out;
    for (const auto& name : order) out.push_back(kinds.at(name));
    return out;
  }

  std::string kind_list() const {
    std::string out;
    for (const auto& name : order) out += (out.empty() ? "" : ", ") + name;
    return out;
  }

  // Splits "KIND[:INDEX]"; the kind must be registered. Caller holds mutex.
  // "KIND:local" sets *local (index 0) where `local` is given, else is refused.
  std::pair<ParsedSpec, std::shared_ptr<const DeviceKind>> parse(std::string_view spec, bool* local = nullptr) const {
    const size_t colon = spec.find(':');
    ParsedSpec parsed;
    parsed.kind = upper(spec.substr(0, colon));
    if (colon != std::string_view::npos && is_local_suffix(spec.substr(colon + 1))) {
      if (local == nullptr)
        throw make_error(ErrorKind::Validation,
                         "device \"{}\": KIND:local names a device per rank and is resolved when a plan is loaded "
                         "(resolve_device_name with the rank's local rank), not opened by name",
                         spec);
      *local = true;
    } else if (colon != std::string_view::npos) {
      const std::string_view digits = spec.substr(colon + 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed.index);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        throw make_error(ErrorKind::Validation,
                         "device \"{}\": expected KIND, KIND:INDEX or KIND:local, e.g. CL:0 (kinds: {})", spec,
                         kind_list());
    }
    auto it = kinds.find(parsed.kind);
    if (parsed.kind.empty() || it == kinds.end())
      throw make_error(ErrorKind::Validation, "unknown device \"{}\" (device kinds in this build: {})", spec,
                       kind_list());
    return {parsed, it->second};
  }
};

DeviceRegistry::DeviceRegistry() : state_(std::make_unique<State>()) {
  for (auto& kind : builtin_kinds()) register_kind(std::move(kind));
}

DeviceRegistry::~DeviceRegistry() = default;

void DeviceRegistry::register_kind(DeviceKind kind) {
  kind.name = upper(kind.name);
  if (kind.name.empty() || kind.name.find(':') != std::string::npos)
    throw make_error(ErrorKind::Validation, "device kind \"{}\": names are non-empty and have no ':'", kind.name);
  if (!kind.enumerate || !kind.create)
    throw make_error(ErrorKind::Validation, "device kind \"{}\": enumerate and create are required", kind.name);
  if (!kind.compilers.empty() && !kind.create_with_compiler)
    throw make_error(ErrorKind::Validation, "device kind \"{}\": compilers are named but create_with_compiler is missing",
                     kind.name);
  std::unique_lock lock(state_->mutex);
  if (state_->kinds.count(kind.name))
    throw make_error(ErrorKind::Validation, "device kind \"{}\" is already registered", kind.name);
  state_->order.push_back(kind.name);
  std::string name = kind.name;
  state_->kinds.emplace(std::move(name), std::make_shared<const DeviceKind>(std::move(kind)));
}

std::string DeviceRegistry::canonical_name(std::string_view spec) const {
  std::shared_lock lock(state_->mutex);
  const auto [parsed, kind] = state_->parse(spec);
  if (!kind->indexed) return parsed.kind;
  return parsed.kind + ":" + std::to_string(parsed.index);
}

std::string DeviceRegistry::resolve(std::string_view spec, int local_rank) const {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos || !is_local_suffix(spec.substr(colon + 1))) return std::string(spec);
  if (local_rank < 0)
    throw make_error(ErrorKind::Validation, "device \"{}\": local rank {} is negative", spec, local_rank);
  ParsedSpec parsed;
  std::shared_ptr<const DeviceKind> kind;
  bool local = false;
  {
    std::shared_lock lock(state_->mutex);
    std::tie(parsed, kind) = state_->parse(spec, &local);
  }
  if (!kind->indexed) return parsed.kind;
  std::vector<DeviceInfo> present;
  try {
    present = kind->enumerate();
  } catch (const Error& e) {
    throw make_error(e.kind(), "device \"{}\": {}", spec, e.what());
  }
  if (present.empty())
    throw make_error(ErrorKind::DeviceUnavailable, "device \"{}\": this machine has no {} device", spec, kind->name);
  return fmt::format("{}:{}", parsed.kind, static_cast<size_t>(local_rank) % present.size());
}

std::shared_ptr<Device> DeviceRegistry::open(std::string_view spec) { return open(spec, {}); }

std::shared_ptr<Device> DeviceRegistry::open(std::string_view spec, std::string_view compiler) {
  ParsedSpec parsed;
  std::shared_ptr<const DeviceKind> kind;
  std::shared_ptr<DeviceCell> cell;
  {
    std::shared_lock lock(state_->mutex);
    std::tie(parsed, kind) = state_->parse(spec);
  }
  const std::string chosen = compiler.empty() ? std::string() : lower(compiler);
  if (!chosen.empty() && std::find(kind->compilers.begin(), kind->compilers.end(), chosen) == kind->compilers.end()) {
    std::string names;
    for (const auto& c : kind->compilers) names += (names.empty() ? "" : ", ") + c;
    throw make_error(ErrorKind::Validation, "device \"{}\": compiler \"{}\": {}", spec, compiler,
                     names.empty() ? fmt::format("{} devices have no choice of compiler", kind->name)
                                   : fmt::format("{} devices compile with {}", kind->name, names));
  }
  const std::string key =
      parsed.kind + ":" + std::to_string(parsed.index) + (chosen.empty() ? std::string() : "/" + chosen);
  {
    std::unique_lock lock(state_->mutex);
    auto& slot = state_->cells[key];
    if (!slot) slot = std::make_shared<DeviceCell>();
    cell = slot;
  }
  std::lock_guard build(cell->mutex);
  if (cell->device) return cell->device;
  std::vector<DeviceInfo> present;
  try {
    present = kind->enumerate();
  } catch (const Error& e) {
    throw make_error(e.kind(), "device \"{}\": {}", spec, e.what());
  }
  if (parsed.index >= present.size()) {
    if (present.empty())
      throw make_error(ErrorKind::DeviceUnavailable, "device \"{}\": this machine has no {} device", spec, kind->name);
    throw make_error(ErrorKind::DeviceUnavailable, "device \"{}\": this machine has {} {} device{} ({}:0{})", spec,
                     present.size(), kind->name, present.size() == 1 ? "" : "s", kind->name,
                     present.size() == 1 ? std::string() : fmt::format(" to {}:{}", kind->name, present.size() - 1));
  }
  std::shared_ptr<Device> device =
      chosen.empty() ? kind->create(parsed.index) : kind->create_with_compiler(parsed.index, chosen);
  if (!device) throw make_error(ErrorKind::Internal, "device kind {} created no device for \"{}\"", kind->name, spec);
  // A device may run kernels on host threads (PoCL): svod's fault handler
  // names them in the report of a fault there, whichever device came first.
  ensure_fault_reporting();
  cell->device = device;
  return device;
}

std::vector<std::string> DeviceRegistry::kinds() const {
  std::shared_lock lock(state_->mutex);
  return state_->order;
}

std::vector<std::string> DeviceRegistry::toolchains() const {
  const auto kinds = state_->snapshot();
  std::vector<std::string> out;
  for (const auto& kind : kinds)
    if (kind->toolchain) out.push_back(kind->toolchain());
  return out;
}

std::vector<DeviceListing> DeviceRegistry::list_devices() const {
  const auto kinds = state_->snapshot();
  std::vector<DeviceListing> out;
  for (const auto& kind : kinds) {
    try {
      const auto present = kind->enumerate();
      if (present.empty()) out.push_back({kind->name, "no device present", false});
      for (const auto& d : present) out.push_back({d.name, d.description, true});
    } catch (const Error& e) {
      out.push_back({kind->name, e.what(), false});
    }
  }
  return out;
}

DeviceRegistry& device_registry() {
  static DeviceRegistry registry;
  return registry;
}

std::shared_ptr<Device> open_device(std::string_view spec) { return device_registry().open(spec); }

std::shared_ptr<Device> open_device(std::string_view spec, std::string_view cpu_compiler) {
  DeviceRegistry& registry = device_registry();
  const bool cpu = !cpu_compiler.empty() && registry.canonical_name(spec) == "CPU";
  return cpu ? registry.open(spec, cpu_compiler) : registry.open(spec);
}

std::string resolve_device_name(std::string_view spec, int local_rank) {
  return device_registry().resolve(spec, local_rank);
}

}  // namespace svod
