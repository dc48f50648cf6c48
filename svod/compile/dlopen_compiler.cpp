#include "svod/compile/dlopen_compiler.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/base/subprocess.h"
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
    : clang_(ClangCompiler::Options{.clang = options.clang, .timeout = options.timeout}), options_(std::move(options)) {}

const std::vector<std::string>& DlopenCompiler::library_flags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> f = {"-shared"};
    for (const auto& flag : ClangCompiler::object_flags())
      if (flag != "-fvisibility=hidden") f.push_back(flag);
    f.push_back("-lm");
    return f;
  }();
  return flags;
}

const CompilerIdentity& DlopenCompiler::identity() const {
  std::call_once(identity_once_, [this] {
    CompilerIdentity id = clang_.identity();
    id.backend = "dlopen";
    id.flags = library_flags();
    identity_ = std::move(id);
  });
  return identity_;
}

Artifact DlopenCompiler::compile(const ProgramSpec& spec) const {
  spec.validate();
  if (spec.language != Language::C && spec.language != Language::LlvmIr)
    throw make_error(ErrorKind::Unsupported, "program \"{}\": the dlopen backend compiles C and LLVM IR, not {}",
                     spec.display_name(), to_string(spec.language));
  const auto start = std::chrono::steady_clock::now();
  detail::PrivateFolder folder("a shared library build");
  const std::filesystem::path library = folder.path() / "kernel.so";
  std::vector<std::string> argv = {clang_.clang_path(), "-x", spec.language == Language::LlvmIr ? "ir" : "c"};
  const auto& flags = library_flags();
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const auto& [name, value] : spec.defines) argv.push_back("-D" + name + "=" + value);
  argv.insert(argv.end(), {"-", "-o", library.string()});
  ProcessResult r = run_process(argv, spec.source, options_.timeout);
  if (r.timed_out)
    throw make_error(ErrorKind::Timeout, "clang did not finish building \"{}\" within {} ms and was killed",
                     spec.display_name(), options_.timeout.count());
  if (!r.ok())
    throw make_error(ErrorKind::Compile, "clang failed to build a shared library from \"{}\" ({}):\n{}",
                     spec.display_name(), to_string(spec.language), r.err);
  Artifact a;
  a.kind = ArtifactKind::SharedLibrary;
  a.bytes = read_file(library);
  if (a.bytes.empty()) throw make_error(ErrorKind::Compile, "clang wrote an empty library for \"{}\"", spec.display_name());
  if (debug_level() >= 1) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    logger().info("compile {} backend=dlopen {:.1f} ms, {} bytes", spec.display_name(), ms, a.bytes.size());
  }
  if (debug_level() >= 3) logger().info("source of {}:\n{}", spec.display_name(), spec.source);
  return a;
}

}  // namespace svod
