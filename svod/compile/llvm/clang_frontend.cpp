// C through libclang-cpp: the driver once (for the cc1 line, parsed once into
// an invocation), then one CompilerInstance per compile with the source as a
// memory buffer, stopping at unoptimised IR. A source's preamble (its leading
// #include and #define lines: `#include <math.h>` costs more to parse than a
// small kernel) is precompiled in memory once two compiles have begun with
// it, and later compiles that begin with it read the precompiled form.
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
#include <clang/Frontend/PrecompiledPreamble.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <clang/Serialization/PCHContainerOperations.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
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

// Precompiled preambles, by preamble text and defines. A preamble seen once
// is only counted: precompiling costs a little more than parsing, which pays
// only when it is used again (tuning, a compiler's many kernels).
class ClangFrontend::Preambles {
 public:
  // The precompiled preamble `source` can use, precompiling it now when this
  // is the second compile to begin with it; null when there is none (yet).
  std::shared_ptr<const clang::PrecompiledPreamble> find(const clang::CompilerInvocation& invocation,
                                                         const llvm::MemoryBuffer& source,
                                                         const clang::PreambleBounds& bounds,
                                                         const std::string& key) {
    Entry* entry = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (Entry& e : entries_)
        if (e.key == key) entry = &e;
      if (entry == nullptr) {
        if (entries_.size() == kMaxPreambles) entries_.pop_front();
        entries_.push_back(Entry{.key = key, .seen = 0, .failed = false, .built = nullptr});
        entry = &entries_.back();
      }
      if (entry->built) {
        // The headers it read may have changed since: then precompile again.
        if (entry->built->CanReuse(invocation, source.getMemBufferRef(), bounds, *llvm::vfs::getRealFileSystem()))
          return entry->built;
        entry->built.reset();
      }
      if (entry->failed || ++entry->seen < 2) return nullptr;
    }
    // Precompiled outside the lock; two threads may both build one, and the
    // last to finish is kept.
    std::shared_ptr<const clang::PrecompiledPreamble> built = build(invocation, source, bounds);
    std::lock_guard lock(mutex_);
    for (Entry& e : entries_) {
      if (e.key != key) continue;
      e.built = built;
      e.failed = built == nullptr;  // its errors are reported by the compiles themselves
    }
    return built;
  }

 private:
  static constexpr size_t kMaxPreambles = 16;

  struct Entry {
    std::string key;
    int seen = 0;
    bool failed = false;
    std::shared_ptr<const clang::PrecompiledPreamble> built;
  };

  static std::shared_ptr<const clang::PrecompiledPreamble> build(const clang::CompilerInvocation& invocation,
                                                                 const llvm::MemoryBuffer& source,
                                                                 const clang::PreambleBounds& bounds) {
    std::string ignored;
    llvm::raw_string_ostream os(ignored);
    auto options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
    // Reference-counted: the compiler instance inside holds on to it.
    auto diags = llvm::makeIntrusiveRefCnt<clang::DiagnosticsEngine>(
        llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), options, new clang::TextDiagnosticPrinter(os, options.get()),
        /*ShouldOwnClient=*/true);
    clang::PreambleCallbacks callbacks;
    llvm::ErrorOr<clang::PrecompiledPreamble> built = clang::PrecompiledPreamble::Build(
        invocation, &source, bounds, *diags,
        llvm::makeIntrusiveRefCnt<RegularFilesOnly>(llvm::vfs::getRealFileSystem()),
        std::make_shared<clang::PCHContainerOperations>(), /*StoreInMemory=*/true, /*StoragePath=*/"", callbacks);
    if (!built || diags->hasErrorOccurred()) return nullptr;
    return std::make_shared<const clang::PrecompiledPreamble>(std::move(*built));
  }

  std::mutex mutex_;
  std::deque<Entry> entries_;
};

ClangFrontend::ClangFrontend() : preambles_(std::make_unique<Preambles>()) {
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
  std::string key;
  for (const auto& [name, value] : spec.defines) {
    invocation->getPreprocessorOpts().addMacroDef(name + "=" + value);
    key += fmt::format("-D{}={}\n", name, value);
  }
  // The file name only labels diagnostics ("add.c:3:5: error: ..."); the
  // source is handed over as a buffer in its name.
  const std::string file_name = spec.display_name() + ".c";
  const std::unique_ptr<llvm::MemoryBuffer> source =
      llvm::MemoryBuffer::getMemBuffer(spec.source, file_name, /*RequiresNullTerminator=*/false);
  const clang::PreambleBounds bounds =
      clang::ComputePreambleBounds(invocation->getLangOpts(), source->getMemBufferRef(), /*MaxLines=*/0);
  invocation->getFrontendOpts().Inputs.emplace_back(file_name, clang::InputKind(clang::Language::C));
  invocation->getPreprocessorOpts().RetainRemappedFileBuffers = true;
  std::shared_ptr<const clang::PrecompiledPreamble> preamble;
  if (bounds.Size > 0)
    preamble = preambles_->find(*invocation, *source, bounds, key + spec.source.substr(0, bounds.Size));

  clang::TextDiagnosticPrinter printer(os, &invocation->getDiagnosticOpts());
  clang::CompilerInstance instance;
  instance.setInvocation(std::move(invocation));
  instance.createDiagnostics(&printer, /*ShouldOwnClient=*/false);
  // "1 error generated." goes to the verbose stream, stderr unless redirected.
  instance.setVerboseOutputStream(os);
  llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> files =
      clang::createVFSFromCompilerInvocation(instance.getInvocation(), instance.getDiagnostics());
  // The preamble maps the source in under its name, beside its own bytes.
  if (preamble) preamble->AddImplicitPreamble(instance.getInvocation(), files, source.get());
  else instance.getPreprocessorOpts().addRemappedFile(file_name, source.get());
  instance.createFileManager(llvm::makeIntrusiveRefCnt<RegularFilesOnly>(std::move(files)));
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
