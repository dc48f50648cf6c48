#include "svod/compile/dlopen_compiler.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "svod/base/error.h"
#include "svod/loader/shared_library.h"

namespace svod {
namespace {

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) throw make_error(ErrorKind::Io, "cannot read {}", path.string());
  const auto* p = reinterpret_cast<const std::byte*>(data.data());
  return std::vector<std::byte>(p, p + data.size());
}

}  // namespace

DlopenCompiler::DlopenCompiler() : DlopenCompiler(Options{}) {}

DlopenCompiler::DlopenCompiler(Options options)
    : clang_(ClangCompiler::Options{.clang = options.clang, .timeout = options.timeout, .extra_flags = {}}),
      options_(std::move(options)) {}

std::vector<std::string> DlopenCompiler::library_flags(const CpuRecipe& recipe) {
  std::vector<std::string> flags = {"-shared"};
  for (std::string& flag : ClangCompiler::object_flags(recipe))
    if (flag != "-fvisibility=hidden") flags.push_back(std::move(flag));
  flags.push_back("-lm");
  return flags;
}

std::optional<Hash128> DlopenCompiler::identity_source() const {
  const std::vector<std::string> flags = library_flags();
  return host_tool_identity_source("dlopen", clang_.clang_path(), {flags});
}

const CompilerIdentity& DlopenCompiler::identity() const {
  std::call_once(identity_once_, [this] {
    CompilerIdentity id = clang_.identity();
    id.name = "dlopen";
    id.flags = library_flags();
    identity_ = std::move(id);
  });
  return identity_;
}

Artifact DlopenCompiler::compile(const ProgramSpec& spec) const {
  spec.validate();
  if (spec.language != Language::C && spec.language != Language::LlvmIr)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the dlopen compiler compiles C and LLVM IR, not {}",
                     spec.display_name(), to_string(spec.language));
  const auto start = std::chrono::steady_clock::now();
  detail::PrivateFolder folder("a shared library build");
  const std::filesystem::path library = folder.path() / "kernel.so";
  std::vector<std::string> argv = {clang_.clang_path(), "-x", spec.language == Language::LlvmIr ? "ir" : "c"};
  const std::vector<std::string> flags = library_flags(find_cpu_recipe(spec.recipe));
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const auto& [name, value] : spec.defines) argv.push_back("-D" + name + "=" + value);
  argv.insert(argv.end(), {"-", "-o", library.string()});
  Artifact a;
  ClangCompiler::run_clang(argv, spec, "building a shared library from", options_.timeout, a.diagnostics);
  a.kind = ArtifactKind::SharedLibrary;
  a.bytes = read_file(library);
  if (a.bytes.empty()) throw make_error(ErrorKind::Compile, "clang wrote an empty library for \"{}\"", spec.display_name());
  ClangCompiler::log_compile(spec, "dlopen", start, a.bytes.size());
  return a;
}

}  // namespace svod
