#include "svod/package/package_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/base/hash.h"
#include "svod/package/signature.h"

namespace svod {
namespace {

using Json = nlohmann::json;

// Header, 64 bytes, little-endian:
//   0 magic[8]  8 u32 version  12 u32 section count  16 u64 file size
//   24 table digest[16]  40 reserved[8] (zero)  48 header digest[16] (of bytes 0..48)
constexpr size_t kHeaderSize = 64;
constexpr size_t kHeaderDigested = 48;
// Table entry, 128 bytes: name[96] (NUL-padded)  96 u64 offset  104 u64 size  112 digest[16]
constexpr size_t kEntrySize = 128;
constexpr size_t kNameField = 96;
// Far more than any plan has; bounds the table before it is read.
constexpr uint32_t kMaxSections = 1u << 16;
// The manifest's artifact of a program the package holds no binary of.
constexpr std::string_view kSourceArtifact = "source";

size_t align_up(size_t n) { return (n + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment; }

template <typename T>
void put(std::vector<std::byte>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <typename T>
T get_le(std::span<const std::byte> in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  return value;
}

void put_digest(std::vector<std::byte>& out, size_t at, const Hash128& h) {
  put(out, at, h.low);
  put(out, at + 8, h.high);
}

Hash128 get_digest(std::span<const std::byte> in, size_t at) {
  return Hash128{get_le<uint64_t>(in, at), get_le<uint64_t>(in, at + 8)};
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

void check_name(std::string_view name) {
  if (name.empty() || name.size() > kPackageSectionNameMax || name.find('\0') != std::string_view::npos)
    throw make_error(ErrorKind::Validation, "package section name \"{}\" must have 1 to {} bytes and no NUL", name,
                     kPackageSectionNameMax);
}

}  // namespace

void PackageWriter::add(std::string name, std::vector<std::byte> bytes) {
  check_name(name);
  for (const auto& [existing, data] : sections_)
    if (existing == name) throw make_error(ErrorKind::Validation, "package section \"{}\" added twice", name);
  sections_.emplace_back(std::move(name), std::move(bytes));
}

void PackageWriter::add(std::string name, std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  add(std::move(name), std::vector<std::byte>(p, p + text.size()));
}

std::vector<std::byte> PackageWriter::finish() const {
  const size_t table = kHeaderSize;
  size_t end = table + kEntrySize * sections_.size();
  std::vector<size_t> offsets;
  for (const auto& [name, data] : sections_) {
    offsets.push_back(align_up(end));
    end = offsets.back() + data.size();
  }
  std::vector<std::byte> out(end);
  std::memcpy(out.data(), kPackageMagic, sizeof kPackageMagic);
  put<uint32_t>(out, 8, kPackageFormatVersion);
  put<uint32_t>(out, 12, static_cast<uint32_t>(sections_.size()));
  put<uint64_t>(out, 16, end);
  for (size_t i = 0; i < sections_.size(); ++i) {
    const auto& [name, data] = sections_[i];
    const size_t entry = table + i * kEntrySize;
    std::memcpy(out.data() + entry, name.data(), name.size());
    put<uint64_t>(out, entry + kNameField, offsets[i]);
    put<uint64_t>(out, entry + kNameField + 8, data.size());
    put_digest(out, entry + kNameField + 16, hash_bytes(data));
    if (!data.empty()) std::memcpy(out.data() + offsets[i], data.data(), data.size());
  }
  put_digest(out, 24, hash_bytes(std::span(out).subspan(table, kEntrySize * sections_.size())));
  put_digest(out, kHeaderDigested, hash_bytes(std::span(out).first(kHeaderDigested)));
  return out;
}

PackageReader::PackageReader(std::span<const std::byte> bytes, std::string source)
    : source_(std::move(source)), bytes_(bytes) {
  auto fail = [&](std::string_view part, const std::string& what) {
    return make_error(ErrorKind::Load, "{}: {}: {}", source_, part, what);
  };
  if (bytes.size() < sizeof kPackageMagic || std::memcmp(bytes.data(), kPackageMagic, sizeof kPackageMagic) != 0)
    throw make_error(ErrorKind::Validation,
                     "{}: header: not an svod package (the file does not start with \"SVODPKG\")", source_);
  if (bytes.size() < kHeaderSize)
    throw fail("header", fmt::format("truncated: {} bytes, the header alone has {}", bytes.size(), kHeaderSize));
  if (get_digest(bytes, kHeaderDigested) != hash_bytes(bytes.first(kHeaderDigested)))
    throw fail("header", "digest mismatch (the header is corrupt)");
  const auto version = get_le<uint32_t>(bytes, 8);
  if (version < kOldestPackageFormatVersion || version > kPackageFormatVersion)
    throw fail("header", unread_version(version));
  if (!all_zero(bytes.subspan(40, 8))) throw fail("header", "reserved bytes are not zero");
  // The recorded size ends the package; a signature block may follow it
  // (signature.h checks what is in the block).
  const auto file_size = get_le<uint64_t>(bytes, 16);
  if (file_size >= kHeaderSize && file_size < bytes.size()) {
    const auto after = bytes.subspan(file_size);
    if (after.size() >= sizeof kSignatureMagic &&
        std::memcmp(after.data(), kSignatureMagic, sizeof kSignatureMagic) == 0) {
      if (after.size() != kSignatureBlockSize)
        throw fail("signature block", fmt::format("{} bytes, but a signature block has {} (the file was cut short "
                                                  "or extended)",
                                                  after.size(), kSignatureBlockSize));
      signature_block_ = after;
      bytes = bytes.first(file_size);
    }
  }
  if (file_size != bytes.size())
    throw fail("header", fmt::format("the package holds {} bytes but records {}{}", bytes.size(), file_size,
                                     bytes.size() < file_size ? " (truncated)" : " (trailing bytes)"));
  const auto count = get_le<uint32_t>(bytes, 12);
  if (count > kMaxSections) throw fail("header", fmt::format("{} sections (at most {})", count, kMaxSections));
  const size_t table_bytes = size_t{count} * kEntrySize;
  if (kHeaderSize + table_bytes > bytes.size()) throw fail("section table", "runs past the end of the package");
  const auto table = bytes.subspan(kHeaderSize, table_bytes);
  if (get_digest(bytes, 24) != hash_bytes(table)) throw fail("section table", "digest mismatch (the table is corrupt)");

  size_t end = kHeaderSize + table_bytes;
  std::set<std::string_view> names;
  sections_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const auto entry = table.subspan(size_t{i} * kEntrySize, kEntrySize);
    const auto* raw = reinterpret_cast<const char*>(entry.data());
    const std::string name(raw, strnlen(raw, kNameField));
    const std::string part = fmt::format("section {} (\"{}\")", i, name);
    const bool padded = all_zero(entry.subspan(name.size(), kNameField - name.size()));
    if (name.empty() || name.size() > kPackageSectionNameMax || !padded) throw fail(part, "malformed name");
    const auto offset = get_le<uint64_t>(entry, kNameField);
    const auto size = get_le<uint64_t>(entry, kNameField + 8);
    if (offset != align_up(end) || offset > bytes.size() || size > bytes.size() - offset)
      throw fail(part, fmt::format("offset {} and size {} do not follow the previous section within {} bytes", offset,
                                   size, bytes.size()));
    if (!all_zero(bytes.subspan(end, offset - end))) throw fail(part, "padding before the section is not zero");
    const auto data = bytes.subspan(offset, size);
    if (get_digest(entry, kNameField + 16) != hash_bytes(data))
      throw fail(part, "digest mismatch (the section is corrupt)");
    sections_.push_back(PackageSection{name, offset, data});
    if (!names.insert(sections_.back().name).second) throw fail(part, "a second section of that name");
    end = offset + size;
  }
  if (end != bytes.size()) throw fail("end", fmt::format("{} bytes after the last section", bytes.size() - end));
}

const PackageSection* PackageReader::find(std::string_view name) const noexcept {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

const PackageSection& PackageReader::get(std::string_view name) const {
  if (const PackageSection* s = find(name)) return *s;
  throw make_error(ErrorKind::Load, "{}: section \"{}\" is missing", source_, name);
}

std::string_view PackageReader::text(std::string_view name) const {
  const auto bytes = get(name).bytes;
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string_view artifact_name(const std::optional<ArtifactKind>& artifact) noexcept {
  return artifact ? artifact->name() : kSourceArtifact;
}

std::string unread_version(uint64_t version) {
  if (version > kPackageFormatVersion)
    return fmt::format("package format version {}, written by a newer svod; this svod reads versions {} to {} "
                       "(update svod, or pack the plan with this one)",
                       version, kOldestPackageFormatVersion, kPackageFormatVersion);
  return fmt::format("package format version {}; this svod reads versions {} to {} (repack the plan with this svod)",
                     version, kOldestPackageFormatVersion, kPackageFormatVersion);
}

std::string program_section(std::string_view program) { return "program/" + std::string(program); }
std::string init_section(std::string_view buffer) { return "init/" + std::string(buffer); }
std::string expect_section(std::string_view output) { return "expect/" + std::string(output); }

namespace {

// The compiler's name keeps the field name "backend" it had from the first
// package on, so that every svod version reads every package's manifest
// (docs/PACKAGE_FORMAT.md).
// A port's shape: its fixed sizes, and the names of its variable dimensions.
Json port_json(const PackagePort& port) {
  Json shape = Json::array();
  for (size_t d = 0; d < port.shape.size(); ++d) {
    if (!port.dim_variables.empty() && !port.dim_variables[d].empty()) shape.push_back(port.dim_variables[d]);
    else shape.push_back(port.shape[d]);
  }
  return {{"name", port.name}, {"dtype", to_string(port.dtype)}, {"shape", std::move(shape)}};
}

Json identity_json(const CompilerIdentity& id) {
  return {{"backend", id.name},          {"path", id.path},
          {"version", id.version},       {"target_triple", id.target_triple},
          {"target_cpu", id.target_cpu}, {"target_features", id.target_features},
          {"flags", id.flags},           {"abi_version", id.abi_version}};
}

}  // namespace

std::string write_manifest(const PackageManifest& m) {
  Json j;
  j["format"] = m.format;
  j["svod_version"] = m.svod_version;
  if (m.format >= 2) {
    j["exporter"] = m.exporter;
    for (const auto& [key, ports] : {std::pair("inputs", &m.inputs), std::pair("outputs", &m.outputs)}) {
      Json list = Json::array();
      for (const PackagePort& port : *ports) list.push_back(port_json(port));
      j[key] = std::move(list);
    }
  }
  j["plan"] = m.plan_name;
  j["variables"] = m.variables;
  if (m.cpu) j["cpu"] = identity_json(*m.cpu);
  if (!m.devices.empty()) {
    Json devices = Json::object();
    for (const auto& [device, id] : m.devices) devices[device] = identity_json(id);
    j["devices"] = std::move(devices);
  }
  Json programs = Json::array();
  for (const auto& p : m.programs)
    programs.push_back({{"name", p.name}, {"device", p.device}, {"artifact", artifact_name(p.artifact)}});
  j["programs"] = std::move(programs);
  j["buffers"] = m.buffers;
  j["expected"] = m.expected;
  return j.dump(1);
}

PackageManifest read_manifest(std::string_view json, std::string_view source) {
  auto fail = [&](std::string_view field, std::string_view what) {
    return make_error(ErrorKind::Load, "{}: section \"manifest\": {}: {}", source, field, what);
  };
  // Deeper values would overflow the stack.
  check_json_depth(json, ErrorKind::Load, fmt::format("{}: section \"manifest\"", source));
  Json j;
  try {
    j = Json::parse(json);
  } catch (const Json::exception& e) {
    throw fail("JSON", json_error_words(e.what()));
  }
  // Typed field access: a missing or mistyped field names itself.
  auto field = [&](const Json& object, const char* key, Json::value_t type, std::string_view path) -> const Json& {
    if (!object.is_object()) throw fail(path, "expected an object");
    auto it = object.find(key);
    const std::string where = fmt::format("{}{}{}", path, path.empty() ? "" : ".", key);
    if (it == object.end()) throw fail(where, "missing");
    const bool ok = it->type() == type || (type == Json::value_t::number_integer && it->is_number_unsigned());
    if (!ok) throw fail(where, fmt::format("expected {}", Json(type).type_name()));
    return *it;
  };
  using T = Json::value_t;
  auto strings = [&](const Json& array, std::string_view where) {
    std::vector<std::string> out;
    for (const auto& s : array) {
      if (!s.is_string()) throw fail(where, "expected strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  };
  PackageManifest m;
  const Json& format = field(j, "format", T::number_integer, "");
  if (!format.is_number_unsigned() || format.get<uint64_t>() < kOldestPackageFormatVersion ||
      format.get<uint64_t>() > kPackageFormatVersion)
    throw fail("format", format.is_number_unsigned() ? unread_version(format.get<uint64_t>()) : "out of range");
  m.format = format.get<uint32_t>();
  m.svod_version = field(j, "svod_version", T::string, "").get<std::string>();
  // A variable dimension names a variable of the plan, which the plan's
  // own parser checks; here only its form.
  auto ports = [&](const char* key) {
    std::vector<PackagePort> out;
    const Json& list = field(j, key, T::array, "");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = fmt::format("{}[{}]", key, i);
      PackagePort port;
      port.name = field(list[i], "name", T::string, path).get<std::string>();
      const std::string dtype = field(list[i], "dtype", T::string, path).get<std::string>();
      try {
        port.dtype = parse_dtype(dtype);
      } catch (const Error& e) {
        throw fail(path + ".dtype", e.what());
      }
      const Json& shape = field(list[i], "shape", T::array, path);
      bool variable = false;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d].is_string()) {
          port.shape.push_back(0);
          port.dim_variables.push_back(shape[d].get<std::string>());
          variable = true;
        } else if (shape[d].is_number_unsigned()) {
          port.shape.push_back(shape[d].get<size_t>());
          port.dim_variables.emplace_back();
        } else {
          throw fail(fmt::format("{}.shape[{}]", path, d), "expected a size or a variable's name");
        }
      }
      if (!variable) port.dim_variables.clear();
      out.push_back(std::move(port));
    }
    return out;
  };
  if (m.format >= 2) {
    m.exporter = field(j, "exporter", T::string, "").get<std::string>();
    m.inputs = ports("inputs");
    m.outputs = ports("outputs");
  }
  m.plan_name = field(j, "plan", T::string, "").get<std::string>();
  for (const auto& [name, value] : field(j, "variables", T::object, "").items()) {
    if (!value.is_number_integer()) throw fail("variables." + name, "expected an integer");
    m.variables[name] = value.get<int64_t>();
  }
  auto identity = [&](const Json& c, const std::string& path) {
    CompilerIdentity id;
    id.name = field(c, "backend", T::string, path).get<std::string>();
    id.path = field(c, "path", T::string, path).get<std::string>();
    id.version = field(c, "version", T::string, path).get<std::string>();
    id.target_triple = field(c, "target_triple", T::string, path).get<std::string>();
    id.target_cpu = field(c, "target_cpu", T::string, path).get<std::string>();
    id.target_features = strings(field(c, "target_features", T::array, path), path + ".target_features");
    id.flags = strings(field(c, "flags", T::array, path), path + ".flags");
    const Json& abi = field(c, "abi_version", T::number_integer, path);
    if (!abi.is_number_unsigned() || abi.get<uint64_t>() > UINT32_MAX) throw fail(path + ".abi_version", "out of range");
    id.abi_version = abi.get<uint32_t>();
    return id;
  };
  if (j.contains("cpu")) m.cpu = identity(field(j, "cpu", T::object, ""), "cpu");
  // "opencl" is what packages wrote before CUDA binaries were packed.
  for (const char* key : {"devices", "opencl"}) {
    if (!j.contains(key)) continue;
    for (const auto& [device, id] : field(j, key, T::object, "").items())
      m.devices[device] = identity(id, fmt::format("{}.{}", key, device));
  }
  const Json& programs = field(j, "programs", T::array, "");
  for (size_t i = 0; i < programs.size(); ++i) {
    const std::string path = fmt::format("programs[{}]", i);
    PackageProgram p;
    p.name = field(programs[i], "name", T::string, path).get<std::string>();
    p.device = field(programs[i], "device", T::string, path).get<std::string>();
    const auto artifact = field(programs[i], "artifact", T::string, path).get<std::string>();
    if (artifact != kSourceArtifact) {
      if (!ArtifactKind::well_formed(artifact))
        throw fail(path + ".artifact", fmt::format("\"{}\" is no artifact kind", artifact));
      p.artifact = ArtifactKind(artifact);
      if (is_cpu_artifact(*p.artifact) && !m.cpu)
        throw fail(path + ".artifact", "a CPU object but the manifest records no CPU compiler");
      if (!is_cpu_artifact(*p.artifact) && !m.devices.contains(p.device))
        throw fail(path + ".artifact", fmt::format("\"{}\" for {}, but the manifest records no compiler for that device",
                                                   artifact, p.device));
    }
    m.programs.push_back(std::move(p));
  }
  m.buffers = strings(field(j, "buffers", T::array, ""), "buffers");
  m.expected = strings(field(j, "expected", T::array, ""), "expected");
  return m;
}

}  // namespace svod
