#include "svod/sandbox/confined_compile.h"

#include <elf.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "svod/base/error.h"
#include "svod/base/subprocess.h"
#include "svod/compile/clang_compiler.h"
#include "svod/sandbox/compile_protocol.h"
#include "svod/sandbox/sandbox.h"

namespace svod {
namespace {

using namespace sandbox;

constexpr std::chrono::milliseconds kQueryTimeout{30'000};
constexpr std::string_view kRule = "the sandbox's compiler reads only the toolchain's files";

// The clang-process compiler whose command lines run confined: this
// machine's CPU, the default options.
const ClangCompiler& clang_compiler() {
  static const ClangCompiler compiler;
  return compiler;
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return std::string(text);
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  for (size_t from = 0; from < text.size();) {
    const size_t end = std::min(text.find('\n', from), text.size());
    lines.emplace_back(text.substr(from, end - from));
    from = end + 1;
  }
  return lines;
}

[[noreturn]] void toolchain_unknown(const std::string& clang, std::string_view what) {
  throw make_error(ErrorKind::Unsupported, "confined compiles are unavailable: cannot find {} of {}", what, clang);
}

// The program interpreter (the dynamic loader) an ELF executable names;
// nullopt for a static one.
std::optional<std::string> elf_interpreter(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  Elf64_Ehdr header{};
  if (!file.read(reinterpret_cast<char*>(&header), sizeof header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_phentsize != sizeof(Elf64_Phdr))
    toolchain_unknown(path, "the program headers (not a 64-bit ELF executable)");
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    file.seekg(static_cast<std::streamoff>(header.e_phoff + i * sizeof segment));
    if (!file.read(reinterpret_cast<char*>(&segment), sizeof segment)) toolchain_unknown(path, "the program headers");
    if (segment.p_type != PT_INTERP) continue;
    std::string name(segment.p_filesz, '\0');
    file.seekg(static_cast<std::streamoff>(segment.p_offset));
    if (segment.p_filesz > 4096 || !file.read(name.data(), static_cast<std::streamsize>(name.size())))
      toolchain_unknown(path, "the program interpreter");
    return std::string(name.c_str());
  }
  return std::nullopt;
}

// The shared libraries `binary` loads, as its dynamic loader finds them
// (`ld.so --list`: "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)").
std::vector<std::string> shared_libraries(const std::string& interpreter, const std::string& binary) {
  const ProcessResult r = run_process({interpreter, "--list", binary}, "", kQueryTimeout);
  if (!r.ok()) toolchain_unknown(binary, fmt::format("the shared libraries ({} --list failed)", interpreter));
  std::vector<std::string> libraries;
  for (const std::string& line : lines_of(r.out)) {
    const size_t arrow = line.find("=> ");
    const size_t start = arrow != std::string::npos ? arrow + 3 : line.find('/');
    if (start == std::string::npos || start >= line.size() || line[start] != '/') continue;  // the vDSO
    libraries.push_back(line.substr(start, line.find(" (", start) - start));
  }
  return libraries;
}

// The folders clang searches for C headers, from `clang -E -v`.
std::vector<std::string> header_folders(const std::string& clang) {
  const ProcessResult r = run_process({clang, "-E", "-v", "-x", "c", "-", "-o", "-"}, "", kQueryTimeout);
  if (!r.ok()) toolchain_unknown(clang, "the header search list (clang -E -v failed)");
  std::vector<std::string> folders;
  bool inside = false;
  for (const std::string& line : lines_of(r.err)) {
    if (line.starts_with("#include ") && line.ends_with("search starts here:")) {
      inside = true;
    } else if (line.starts_with("End of search list.")) {
      inside = false;
    } else if (inside && line.starts_with(" /")) {
      folders.push_back(trimmed(line));
    }
  }
  if (folders.empty()) toolchain_unknown(clang, "the header search list");
  return folders;
}

// Everything the confined clang may read: its binary, its loader and
// libraries (and the loader's cache of where libraries are), its resource
// folder and its header folders; folders inside another one left out.
// `library_path` gets the libraries' folders, ':'-separated.
std::vector<std::string> find_toolchain(const std::string& clang, std::string& library_path) {
  std::vector<std::string> paths = {clang};
  if (const auto interpreter = elf_interpreter(clang)) {
    paths.push_back(*interpreter);
    std::vector<std::string> folders;
    for (const std::string& library : shared_libraries(*interpreter, clang)) {
      paths.push_back(library);
      const std::string folder = std::filesystem::path(library).lexically_normal().parent_path().string();
      if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
    }
    library_path = fmt::format("{}", fmt::join(folders, ":"));
    paths.emplace_back("/etc/ld.so.cache");
  }
  const ProcessResult resource = run_process({clang, "-print-resource-dir"}, "", kQueryTimeout);
  if (!resource.ok() || trimmed(resource.out).empty()) toolchain_unknown(clang, "the resource folder");
  paths.push_back(trimmed(resource.out));
  for (std::string& folder : header_folders(clang)) paths.push_back(std::move(folder));

  for (std::string& path : paths) path = std::filesystem::path(path).lexically_normal().string();
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  std::vector<std::string> kept;
  for (const std::string& path : paths) {
    const bool inside_another = std::any_of(kept.begin(), kept.end(), [&](const std::string& folder) {
      return path.starts_with(folder + "/") && std::filesystem::is_directory(folder);
    });
    if (!inside_another) kept.push_back(path);
  }
  return kept;
}

struct Toolchain {
  std::string helper;
  std::string clang;  // the binary itself, not a link to it
  std::vector<std::string> reads;
  // The folders of clang's libraries, for its loader: without /proc it
  // cannot resolve $ORIGIN in clang's run path.
  std::string library_path;
  // Each read as the helper binds it: the file behind every link, and the
  // name clang uses.
  std::vector<std::pair<std::string, std::string>> binds;
};

// Found once per process.
const Toolchain& toolchain() {
  static std::mutex mutex;
  static std::optional<Toolchain> found;
  std::lock_guard lock(mutex);
  if (!found) {
    Toolchain t;
    t.helper = sandbox_helper_path();
    std::error_code error;
    t.clang = std::filesystem::canonical(clang_compiler().clang_path(), error).string();
    if (error) toolchain_unknown(clang_compiler().clang_path(), "the binary behind the link");
    t.reads = find_toolchain(t.clang, t.library_path);
    for (const std::string& path : t.reads) {
      const std::filesystem::path source = std::filesystem::canonical(path, error);
      if (!error) t.binds.emplace_back(source.string(), path);
    }
    found = std::move(t);
  }
  return *found;
}

// The files a failed compile's diagnostics say were not found, with where:
// "kernels/k.c:1:10: fatal error: '/etc/passwd' file not found".
std::vector<std::pair<std::string, std::string>> missing_files(const std::string& diagnostics) {
  std::vector<std::pair<std::string, std::string>> missing;
  for (const std::string& line : lines_of(diagnostics)) {
    const size_t end = line.rfind("' file not found");
    const size_t error = line.find("error: '");
    if (end == std::string::npos || error == std::string::npos || error + 8 > end) continue;
    missing.emplace_back(line.substr(0, line.rfind(':', error)), line.substr(error + 8, end - error - 8));
  }
  return missing;
}

}  // namespace

Artifact compile_confined(const ProgramSpec& spec, const ConfinedCompileOptions& options) {
  spec.validate();
  if (spec.language != Language::C && spec.language != Language::LlvmIr)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the sandbox compiles C and LLVM IR, not {}",
                     spec.display_name(), to_string(spec.language));
  const Toolchain& tools = toolchain();
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(options.wall_limit).count();
  std::vector<std::string> argv = {tools.helper,
                                   std::string(kCompileMode),
                                   std::string(kCpuSecondsOption),
                                   std::to_string(std::max<int64_t>(seconds, 1)),
                                   std::string(kMemoryOption),
                                   std::to_string(options.memory_limit),
                                   std::string(kLibraryPathOption),
                                   tools.library_path};
  for (const auto& [source, path] : tools.binds) argv.insert(argv.end(), {std::string(kBindOption), source, path});
  argv.emplace_back(kEndOfOptions);
  std::vector<std::string> command = clang_compiler().command(spec);
  command.front() = tools.clang;
  argv.insert(argv.end(), command.begin(), command.end());

  const ProcessResult r = run_process(argv, ClangCompiler::input(spec), options.wall_limit);
  const std::string name = spec.display_name();
  auto violation = [&](const std::string& what, std::string_view rule) {
    return make_error(ErrorKind::SandboxViolation, "program \"{}\": {} (rule: {})", name, what, rule);
  };
  if (r.timed_out)
    throw violation(fmt::format("the sandbox's compiler ran past its wall-clock limit of {:g} s and was killed",
                                std::chrono::duration<double>(options.wall_limit).count()),
                    "wall-clock limit");
  if (r.term_signal == SIGXCPU || r.term_signal == SIGKILL)
    throw violation(fmt::format("the sandbox's compiler was ended by {} past its CPU-time limit of {} s",
                                r.term_signal == SIGXCPU ? "SIGXCPU" : "SIGKILL", std::max<int64_t>(seconds, 1)),
                    "CPU-time limit");
  if (r.term_signal != 0)
    throw make_error(ErrorKind::Compile, "clang crashed (signal {}) compiling \"{}\" in the sandbox:\n{}",
                     r.term_signal, name, r.err);
  if (r.exit_code == kExitCompileSetupFailed && r.err.find(kSetupPrefix) != std::string::npos) {
    const std::string why = trimmed(r.err.substr(r.err.rfind(kSetupPrefix) + kSetupPrefix.size()));
    throw make_error(ErrorKind::Unsupported,
                     "confined compiles are unavailable here, so \"{}\" was not compiled: {}", name, why);
  }
  if (r.exit_code != 0) {
    // A file clang could not open was outside what the sandbox lets it read
    // (or nowhere at all): named, never read, so nothing of it is shown.
    const auto missing = missing_files(r.err);
    if (!missing.empty()) {
      std::vector<std::string> named;
      for (const auto& [where, file] : missing)
        named.push_back(fmt::format("{}: #include \"{}\": the file is outside what the sandbox's compiler may read "
                                    "(or does not exist)",
                                    where, file));
      throw violation(fmt::format("{}", fmt::join(named, "; ")), kRule);
    }
    throw make_error(ErrorKind::Compile, "clang failed compiling \"{}\" ({}) in the sandbox:\n{}", name,
                     to_string(spec.language), r.err);
  }
  Artifact artifact;
  artifact.kind = ArtifactKind::ElfObject;
  artifact.diagnostics = r.err;
  const auto* bytes = reinterpret_cast<const std::byte*>(r.out.data());
  artifact.bytes.assign(bytes, bytes + r.out.size());
  return artifact;
}

std::shared_ptr<const Program> load_confined(Device& device, const ProgramSpec& spec,
                                             const ConfinedCompileOptions& options) {
  if (!device.memory_is_host())
    throw make_error(ErrorKind::Unsupported,
                     "program \"{}\" is for {}: the sandbox compiles and runs CPU kernels only", spec.display_name(),
                     device.name());
  return load_program(device, spec, compile_confined(spec, options), clang_compiler().identity());
}

std::vector<std::string> probe_confined_compile() {
  ProgramSpec spec;
  spec.name = "svod_confined_probe";
  spec.entry = "svod_confined_probe";
  spec.language = Language::C;
  spec.source = "void svod_confined_probe(float* out) { out[0] = 1.0f; }\n";
  spec.buffers = {BufferParam{"out", Access::Write, DType::F32, std::nullopt}};
  compile_confined(spec);
  return toolchain().reads;
}

}  // namespace svod
