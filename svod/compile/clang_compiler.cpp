#include "svod/compile/clang_compiler.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/base/subprocess.h"
#include "svod/compile/cpu_recipe.h"

namespace svod {
namespace {

constexpr std::chrono::milliseconds kProbeTimeout{30'000};

// Arguments of clang's cc1 line in `clang -###` output: quoted, space separated.
std::vector<std::string> quoted_args(const std::string& line) {
  std::vector<std::string> args;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '"') continue;
    std::string arg;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      arg += line[i];
    }
    args.push_back(std::move(arg));
  }
  return args;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The features of a CPU named to -march, which clang's driver leaves to
// LLVM: the "target-features" its code generator gives a function compiled
// with `flags` ("+avx2", "+fma", ...).
std::vector<std::string> named_cpu_features(const std::string& clang, const std::string& target_cpu,
                                            const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {clang, "-S", "-emit-llvm", "-x", "c"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-", "-o", "-"});
  const ProcessResult r = run_process(argv, "void svod_probe(void) {}\n", kProbeTimeout);
  if (!r.ok()) {
    // "error: unknown target CPU 'x'" and the note that lists the known ones.
    std::string said = r.err;
    while (!said.empty() && said.back() == '\n') said.pop_back();
    if (said.find("unknown target CPU") != std::string::npos)
      throw make_error(ErrorKind::Validation, "target CPU \"{}\": {} does not know it:\n{}", target_cpu, clang, said);
    throw make_error(ErrorKind::DeviceUnavailable, "cannot query {} for the features of CPU \"{}\": {}", clang,
                     target_cpu, first_line(said));
  }
  constexpr std::string_view kKey = "\"target-features\"=\"";
  const size_t at = r.out.find(kKey);
  if (at == std::string::npos) return {};  // a CPU with no features beyond its architecture's
  const size_t start = at + kKey.size();
  const std::string list = r.out.substr(start, r.out.find('"', start) - start);
  std::vector<std::string> features;
  for (size_t from = 0; from <= list.size();) {
    const size_t comma = std::min(list.find(',', from), list.size());
    if (comma > from) features.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return features;
}

}  // namespace

ClangCompiler::ClangCompiler() : ClangCompiler(Options{}) {}

ClangCompiler::ClangCompiler(Options options) : options_(std::move(options)) {
  if (options_.clang) {
    auto found = find_executable(*options_.clang);
    if (!found)
      throw make_error(ErrorKind::DeviceUnavailable, "clang \"{}\" was not found or is not executable", *options_.clang);
    clang_ = *found;
  } else {
    clang_ = find_clang();
  }
}

std::vector<std::string> ClangCompiler::object_flags(const CpuRecipe& recipe, std::string_view target_cpu) {
  std::vector<std::string> flags = recipe.clang_flags();
  flags.insert(flags.end(), {
      "-march=" + std::string(target_cpu), "-ffreestanding", "-fno-math-errno", "-fno-stack-protector", "-fPIC",
      "-fno-plt", "-fvisibility=hidden", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-fno-ident",
      // No address-significance table: the loader ignores it, and the
      // in-process compiler writes none.
      "-fno-addrsig",
  });
  return flags;
}

std::string ClangCompiler::find_clang() {
  if (auto requested = env_string(EnvVar::Clang)) {
    if (auto found = find_executable(*requested)) return *found;
    throw make_error(ErrorKind::DeviceUnavailable, "SVOD_CLANG=\"{}\" is not an executable", *requested);
  }
  for (const char* name : {"clang-19", "clang"})
    if (auto found = find_executable(name)) return *found;
  throw make_error(ErrorKind::DeviceUnavailable,
                   "no clang found (tried SVOD_CLANG, clang-19, clang on PATH); install one with "
                   "`apt-get install clang-19` or point SVOD_CLANG at a clang binary");
}

// What clang reads on stdin. C source starts with a line directive naming
// the spec's file (`#line 1 "kernels/mm.c"`), so that diagnostics (and
// __FILE__) say "kernels/mm.c:3:5" as the in-process compiler does, not
// "<stdin>:3:5"; the source's own line 1 stays line 1. LLVM IR has no such
// directive and is passed as it is.
std::string ClangCompiler::input(const ProgramSpec& spec) {
  if (spec.language != Language::C) return spec.source;
  std::string input = "#line 1 \"";
  for (const char c : spec.diagnostic_file_name()) {
    if (c == '"' || c == '\\') input += '\\';
    input += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;  // a directive is one line
  }
  input += "\"\n";
  input += spec.source;
  return input;
}

std::vector<std::string> ClangCompiler::command(const ProgramSpec& spec) const {
  std::vector<std::string> argv = {clang_, "-c", "-x", spec.language == Language::LlvmIr ? "ir" : "c"};
  const std::vector<std::string> flags = object_flags(find_cpu_recipe(spec.recipe), options_.target_cpu);
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  for (const auto& [name, value] : spec.defines) argv.push_back("-D" + name + "=" + value);
  // The object's file symbol names the source as the in-process compiler's
  // does, not "-" for stdin, so that both compilers make the same bytes.
  if (spec.language == Language::C)
    argv.insert(argv.end(), {"-Xclang", "-main-file-name", "-Xclang", spec.diagnostic_file_name()});
  argv.insert(argv.end(), {"-", "-o", "-"});
  return argv;
}

const CompilerIdentity& ClangCompiler::identity() const {
  std::call_once(identity_once_, [this] {
    CompilerIdentity id;
    id.name = "clang";
    id.path = clang_;
    id.flags = object_flags(kDefaultCpuRecipe, options_.target_cpu);
    id.flags.insert(id.flags.end(), options_.extra_flags.begin(), options_.extra_flags.end());
    std::vector<std::string> argv = {clang_, "-###", "-c", "-x", "c"};
    argv.insert(argv.end(), id.flags.begin(), id.flags.end());
    argv.insert(argv.end(), {"-", "-o", "-"});
    ProcessResult r = run_process(argv, "", kProbeTimeout);
    if (!r.ok())
      throw make_error(ErrorKind::DeviceUnavailable, "cannot query {} for its target: {}", clang_, first_line(r.err));
    id.version = first_line(r.err);
    size_t cc1 = r.err.find("\"-cc1\"");
    if (cc1 == std::string::npos)
      throw make_error(ErrorKind::DeviceUnavailable, "{} -### printed no cc1 command line", clang_);
    size_t line_start = r.err.rfind('\n', cc1) + 1;
    std::vector<std::string> args = quoted_args(first_line(r.err.substr(line_start)));
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "-triple") id.target_triple = args[i + 1];
      if (args[i] == "-target-cpu") id.target_cpu = args[i + 1];
      if (args[i] == "-target-feature") id.target_features.push_back(args[i + 1]);
    }
    if (options_.target_cpu != "native") id.target_features = named_cpu_features(clang_, options_.target_cpu, id.flags);
    identity_ = std::move(id);
  });
  return identity_;
}

std::optional<Hash128> ClangCompiler::identity_source() const {
  // The default recipe's flags and the extra ones apart, as identities were
  // hashed before recipes and target CPUs were options (so warm caches stay warm).
  return host_tool_identity_source("clang", clang_,
                                   {object_flags(kDefaultCpuRecipe, options_.target_cpu), options_.extra_flags});
}

std::string ClangCompiler::run_clang(const std::vector<std::string>& argv, const ProgramSpec& spec,
                                     std::string_view doing, std::chrono::milliseconds timeout,
                                     std::string& diagnostics) {
  ProcessResult r = run_process(argv, input(spec), timeout);
  if (r.timed_out)
    throw make_error(ErrorKind::Timeout, "clang did not finish {} \"{}\" within {} ms and was killed", doing,
                     spec.display_name(), timeout.count());
  if (r.term_signal != 0)
    throw make_error(ErrorKind::Compile, "clang crashed (signal {}) {} \"{}\":\n{}", r.term_signal, doing,
                     spec.display_name(), r.err);
  if (r.exit_code != 0)
    throw make_error(ErrorKind::Compile, "clang failed {} \"{}\" ({}):\n{}", doing, spec.display_name(),
                     to_string(spec.language), r.err);
  diagnostics = std::move(r.err);
  return std::move(r.out);
}

void ClangCompiler::log_compile(const ProgramSpec& spec, std::string_view compiler,
                                std::chrono::steady_clock::time_point start, size_t bytes) {
  if (debug_level() >= 1) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    log_debug("compile {} compiler={} {:.1f} ms, {} bytes", spec.display_name(), compiler, ms, bytes);
  }
  if (debug_level() >= 3) log_debug("source of {}:\n{}", spec.display_name(), spec.source);
}

Artifact ClangCompiler::compile(const ProgramSpec& spec) const {
  spec.validate();
  if (spec.language != Language::C && spec.language != Language::LlvmIr)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the clang compiler compiles C and LLVM IR, not {}",
                     spec.display_name(), to_string(spec.language));
  const auto start = std::chrono::steady_clock::now();
  Artifact a;
  const std::string object = run_clang(command(spec), spec, "compiling", options_.timeout, a.diagnostics);
  log_compile(spec, "clang", start, object.size());
  a.kind = ArtifactKind::ElfObject;
  const auto* p = reinterpret_cast<const std::byte*>(object.data());
  a.bytes.assign(p, p + object.size());
  return a;
}

}  // namespace svod
