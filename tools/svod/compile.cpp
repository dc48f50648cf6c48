// `svod compile FILE`: compiles one kernel source and says what came of it,
// without a plan: the parameters read from the entry's C signature
// (svod/program/c_signature.h), the object's kind and size, the compile
// time, and the compiler's diagnostics, warnings included. It always compiles
// (neither the kernel cache nor the object cache is asked, so the warnings
// are there every time, and the object is not stored) and then loads the
// object, so that a missing entry or an undefined symbol is found too.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include "svod/compile/compile_policy.h"
#include "svod/compile/compiler.h"
#include "svod/device/device.h"
#include "svod/planfile/json_text.h"
#include "svod/program/c_signature.h"
#include "svod/registry/registry.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"

namespace svod::cli {
namespace {

// --language, else the one the file's extension names, else C.
Language language_of(const CompileOptions& options) {
  if (!options.language.empty()) return parse_language(options.language);
  const std::string extension = std::filesystem::path(options.source_file).extension().string();
  if (extension == ".ll") return Language::LlvmIr;
  if (extension == ".cl") return parse_language("opencl");
  if (extension == ".cu") return parse_language("cuda");
  return Language::C;
}

// -D NAME=VALUE, or -D NAME for NAME=1 as a C compiler takes it.
std::vector<std::pair<std::string, std::string>> defines_of(const std::vector<std::string>& defines) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& d : defines) {
    const size_t eq = d.find('=');
    if (eq == 0 || d.empty()) throw make_error(ErrorKind::Validation, "-D {}: expected NAME or NAME=VALUE", d);
    if (eq == std::string::npos) out.emplace_back(d, "1");
    else out.emplace_back(d.substr(0, eq), d.substr(eq + 1));
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Each line of `text` indented as failure_text indents a compiler's message.
std::string indented(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    out += fmt::format("  | {}\n", std::string_view(text).substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

void print_parameters(const ProgramSpec& spec, const std::optional<CSignature>& sig, const std::string& problem) {
  if (!sig) {
    fmt::print("parameters: not read (svod reads the signatures of C entries, and this is {})\n",
               to_string(spec.language));
    return;
  }
  if (!problem.empty()) {
    fmt::print("parameters: not read from the source: {}{}\n", sig->found ? sig->text(spec.entry) + ": " : "",
               problem);
    return;
  }
  fmt::print("parameters, read from {}:\n", sig->text(spec.entry));
  for (const BufferParam& b : spec.buffers)
    fmt::print("  {}: buffer{}, {}\n", b.name, b.dtype ? fmt::format(" of {}", to_string(*b.dtype)) : "",
               to_string(b.access));
  for (const ScalarParam& s : spec.scalars)
    fmt::print("  {}: scalar {}{}\n", s.name, to_string(s.type),
               s.name == kCoreIdName ? " (the slice index of a parallel CPU launch)" : "");
  if (spec.buffers.empty() && spec.scalars.empty()) fmt::print("  none\n");
}

}  // namespace

int compile(const CompileOptions& options) {
  try {
    ProgramSpec spec;
    spec.language = language_of(options);
    spec.source = detail::read_format_file(options.source_file, "source file");
    spec.source_name = options.source_file;  // diagnostics name the file as it was given
    spec.entry = options.entry.empty() ? std::filesystem::path(options.source_file).stem().string() : options.entry;
    spec.defines = defines_of(options.defines);
    // The parameters, as Python's compile() reads them when it is not told.
    std::optional<CSignature> sig;
    std::string problem;
    bool parameters_read = false;
    if (spec.language == Language::C) {
      sig = parse_c_signature(spec.source, spec.entry, spec.defines);
      if (std::optional<CParameters> parameters = c_parameters(*sig, problem)) {
        spec.buffers = std::move(parameters->buffers);
        spec.scalars = std::move(parameters->scalars);
        parameters_read = true;
      }
    }
    const std::shared_ptr<Device> device =
        open_device(options.device, cpu_compiler_option(options.cpu_compiler));
    device->check_compilable(spec);
    const Compiler& compiler = device->compiler();
    begin_compile(spec, device->name());
    const auto compile_start = std::chrono::steady_clock::now();
    const Artifact artifact = compiler.compile(spec);
    const double compile_ms = ms_since(compile_start);
    const auto load_start = std::chrono::steady_clock::now();
    std::string not_loaded;
    try {
      device->load(spec, artifact);
    } catch (const Error& e) {
      // A device that checks a kernel's arguments against the spec (OpenCL,
      // CUDA) refuses one whose parameters were not read: no fault of the
      // source, which compiled.
      if (e.kind() != ErrorKind::Validation || parameters_read) throw;
      not_loaded = e.what();
    }
    const double load_ms = ms_since(load_start);

    const CompilePhases& p = artifact.phases;
    const bool phases = p.front_end_ms > 0 || p.optimise_ms > 0 || p.codegen_ms > 0;
    fmt::print("compiled {}: entry {} ({}) for {} with {} in {:.1f} ms{}\n", options.source_file, spec.entry,
               to_string(spec.language), device->name(), compiler.identity().name, compile_ms,
               phases ? fmt::format(" (CPU time: front end {:.1f} ms, optimise {:.1f} ms, code generation {:.1f} ms)",
                                    p.front_end_ms, p.optimise_ms, p.codegen_ms)
                      : "");
    fmt::print("object: {}, {} bytes, {}\n", artifact.kind.name(), artifact.bytes.size(),
               not_loaded.empty() ? fmt::format("loaded in {:.1f} ms", load_ms)
                                  : fmt::format("not loaded without its parameters: {}", not_loaded));
    print_parameters(spec, sig, problem);
    if (artifact.diagnostics.empty()) fmt::print("diagnostics: none\n");
    else fmt::print("diagnostics:\n{}", indented(artifact.diagnostics));
  } catch (const Error& e) {
    return fail("compile", e);
  }
  return 0;
}

}  // namespace svod::cli
