// C through libclang-cpp: the driver once (for the cc1 line, parsed once into
// an invocation), then one CompilerInstance per compile with the source as a
// memory buffer, stopping at unoptimised IR.
#include <clang/AST/ASTConsumer.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/ModuleBuilder.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/llvm/llvm_compiler.h"

namespace svod::detail {
namespace {

std::vector<const char*> pointers(const std::vector<std::string>& args) {
  std::vector<const char*> out;
  out.reserve(args.size());
  for (const auto& a : args) out.push_back(a.c_str());
  return out;
}

// Parses the source and generates its IR, nothing more. Clang's own
// EmitLLVMOnlyAction would then hand the module to its backend, which with
// -disable-llvm-passes only builds a target machine and an empty pipeline
// per compile; svod's EmitPipeline does that work, once.
class EmitIrAction final : public clang::ASTFrontendAction {
 public:
  explicit EmitIrAction(llvm::LLVMContext& context) : context_(context) {}

  // Null when generation failed.
  std::unique_ptr<llvm::Module> take_module() { return std::move(module_); }

 private:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& instance,
                                                        llvm::StringRef file) override {
    std::unique_ptr<clang::CodeGenerator> generator(clang::CreateLLVMCodeGen(
        instance.getDiagnostics(), file, &instance.getVirtualFileSystem(), instance.getHeaderSearchOpts(),
        instance.getPreprocessorOpts(), instance.getCodeGenOpts(), context_));
    generator_ = generator.get();
    return generator;
  }

  // The consumer, and the module it owns, end with the source file.
  void EndSourceFileAction() override {
    if (generator_ != nullptr && !getCompilerInstance().getDiagnostics().hasErrorOccurred())
      module_.reset(generator_->ReleaseModule());
    generator_ = nullptr;
  }

  llvm::LLVMContext& context_;
  clang::CodeGenerator* generator_ = nullptr;
  std::unique_ptr<llvm::Module> module_;
};

// Why RegularFilesOnly refused a file: the value is its S_IFMT type.
class NotRegularCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "svod.not_regular_file"; }
  std::string message(int type) const override {
    return fmt::format("is {}, not a regular file", file_type_name(static_cast<mode_t>(type)));
  }
};

// Clang opens an #include'd file with a blocking open() and reads it to the
// end: a FIFO would hang the compile (and the thread of svod that runs it), a
// character device might never end. This file system opens only regular files
// (and folders, which clang handles itself); anything else is an error that
// clang reports as "cannot open file 'x': is a FIFO, not a regular file". The
// check is by name, before the open (clang's file system has no descriptor
// to hand over). The clang process (ClangCompiler) has its timeout instead.
class RegularFilesOnly final : public llvm::vfs::ProxyFileSystem {
 public:
  using ProxyFileSystem::ProxyFileSystem;

  llvm::ErrorOr<std::unique_ptr<llvm::vfs::File>> openFileForRead(const llvm::Twine& path) override {
    using llvm::sys::fs::file_type;
    const llvm::ErrorOr<llvm::vfs::Status> status = getUnderlyingFS().status(path);
    if (!status) return status.getError();
    mode_t type = 0;
    switch (status->getType()) {
      case file_type::regular_file:
      case file_type::directory_file: return ProxyFileSystem::openFileForRead(path);
      case file_type::fifo_file: type = S_IFIFO; break;
      case file_type::character_file: type = S_IFCHR; break;
      case file_type::block_file: type = S_IFBLK; break;
      case file_type::socket_file: type = S_IFSOCK; break;
      default: type = S_IFMT; break;  // named "an unknown kind of file"
    }
    static const NotRegularCategory category;
    return std::error_code(static_cast<int>(type), category);
  }
};

}  // namespace

ClangFrontend::ClangFrontend() {
  initialise_native_target();
  std::string text;
  llvm::raw_string_ostream os(text);
  auto options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::DiagnosticsEngine diags(llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), options,
                                 new clang::TextDiagnosticPrinter(os, options.get()), /*ShouldOwnClient=*/true);
  clang::driver::Driver driver(SVOD_CLANG_DRIVER_PATH, llvm::sys::getDefaultTargetTriple(), diags);
  driver.setCheckInputsExist(false);
  // Exactly what the clang process runs (ClangCompiler::command), so both
  // backends build the same code; colours off because diagnostics end up in
  // error messages, not on a terminal.
  std::vector<std::string> args = {SVOD_CLANG_DRIVER_PATH, "-c", "-x", "c", "-fno-color-diagnostics"};
  const auto& flags = ClangCompiler::object_flags();
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-", "-o", "-"});
  std::unique_ptr<clang::driver::Compilation> compilation(driver.BuildCompilation(pointers(args)));
  os.flush();
  if (!compilation || diags.hasErrorOccurred() || compilation->getJobs().size() != 1)
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver cannot build a compile job:\n{}", text);
  const auto* job = llvm::dyn_cast<clang::driver::Command>(&*compilation->getJobs().begin());
  if (job == nullptr || job->getArguments().empty() || std::strcmp(job->getArguments()[0], "-cc1") != 0)
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver did not produce a cc1 job");

  std::vector<std::string> cc1_args;
  for (const char* arg : llvm::ArrayRef<const char*>(job->getArguments()).drop_front()) {
    // -disable-free lets a one-shot clang process skip freeing the AST and
    // module; in a long-lived process that would leak every compile.
    if (std::strcmp(arg, "-disable-free") != 0) cc1_args.emplace_back(arg);
  }
  for (size_t i = 0; i + 1 < cc1_args.size(); ++i) {
    if (cc1_args[i] == "-triple") target_.triple = cc1_args[i + 1];
    if (cc1_args[i] == "-target-cpu") target_.cpu = cc1_args[i + 1];
    if (cc1_args[i] == "-target-feature") target_.features.push_back(cc1_args[i + 1]);
  }
  if (target_.triple.empty() || target_.cpu.empty())
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver resolved no target triple or CPU");

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  const bool parsed = clang::CompilerInvocation::CreateFromArgs(*invocation, pointers(cc1_args), diags,
                                                                SVOD_CLANG_DRIVER_PATH);
  os.flush();
  if (!parsed) throw make_error(ErrorKind::Internal, "clang rejected svod's own cc1 command line:\n{}", text);
  // Clang hands over the IR as its code generator made it, with the function
  // attributes of -O2; svod's own pipeline optimises it (EmitPipeline).
  invocation->getCodeGenOpts().DisableLLVMPasses = true;
  invocation->getFrontendOpts().Inputs.clear();
  invocation->getFrontendOpts().OutputFile.clear();
  invocation_ = std::move(invocation);
}

ClangFrontend::~ClangFrontend() = default;

std::string ClangFrontend::version() { return clang::getClangFullVersion(); }

std::unique_ptr<llvm::Module> ClangFrontend::emit_ir(const ProgramSpec& spec, llvm::LLVMContext& context) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto invocation = std::make_shared<clang::CompilerInvocation>(*invocation_);
  for (const auto& [name, value] : spec.defines) invocation->getPreprocessorOpts().addMacroDef(name + "=" + value);
  // The file name only labels diagnostics ("add.c:3:5: error: ...").
  const std::string file_name = spec.display_name() + ".c";
  invocation->getFrontendOpts().Inputs.emplace_back(llvm::MemoryBufferRef(spec.source, file_name),
                                                    clang::InputKind(clang::Language::C));

  clang::TextDiagnosticPrinter printer(os, &invocation->getDiagnosticOpts());
  clang::CompilerInstance instance;
  instance.setInvocation(std::move(invocation));
  instance.createDiagnostics(&printer, /*ShouldOwnClient=*/false);
  // "1 error generated." goes to the verbose stream, stderr unless redirected.
  instance.setVerboseOutputStream(os);
  instance.createFileManager(llvm::makeIntrusiveRefCnt<RegularFilesOnly>(
      clang::createVFSFromCompilerInvocation(instance.getInvocation(), instance.getDiagnostics())));
  EmitIrAction action(context);
  const bool ok = instance.ExecuteAction(action);
  os.flush();
  std::unique_ptr<llvm::Module> module = ok ? action.take_module() : nullptr;
  if (!ok || !module || instance.getDiagnostics().hasErrorOccurred())
    throw make_error(ErrorKind::Compile, "clang (in-process) failed to compile \"{}\" (c):\n{}", spec.display_name(),
                     text);
  return module;
}

}  // namespace svod::detail
