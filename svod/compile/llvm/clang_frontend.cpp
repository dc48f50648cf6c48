// C through libclang-cpp: the driver once (for the cc1 line, parsed once into
// an invocation), then one CompilerInstance per compile with the source as a
// memory buffer, stopping at unoptimised IR. A source's preamble (its leading
// #include and #define lines: `#include <math.h>` costs more to parse than a
// small kernel) is precompiled once it is seen again, or at once when the
// object cache can keep it for later processes, and compiles that begin with
// it read the precompiled form (class Preambles).
#include <clang/AST/ASTConsumer.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/SourceManager.h>
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
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/hash.h"
#include "svod/base/log.h"
#include "svod/compile/artifact_store.h"
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
// EmitLLVMOnlyAction would then hand the module to its code generator, which with
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

// A precompiled preamble as svod keeps it: the PCH's bytes and the headers
// it was made from, each with the size and modification time it had then.
struct PreambleHeader {
  std::string path;
  int64_t size = 0;
  int64_t mtime = 0;
};

class ReadyPreamble {
 public:
  ReadyPreamble(std::string pch, std::vector<PreambleHeader> headers)
      : pch_(std::move(pch)), headers_(std::move(headers)) {}

  // False once a header it was made from changed: the bytes are stale.
  bool headers_unchanged() const {
    for (const PreambleHeader& header : headers_) {
      struct stat st {};
      if (::stat(header.path.c_str(), &st) != 0 || st.st_size != header.size || st.st_mtime != header.mtime)
        return false;
    }
    return true;
  }

  // Makes the compile of `invocation` read the preamble from these bytes and
  // the rest of `source` (mapped in under the input's name) as clang's own
  // precompiled preambles do; `files` gets the bytes as a file of its own.
  void apply(clang::CompilerInvocation& invocation, llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>& files,
             llvm::MemoryBuffer* source, const clang::PreambleBounds& bounds) const {
    static constexpr const char* kPath = "/svod-precompiled-preamble.pch";
    clang::PreprocessorOptions& options = invocation.getPreprocessorOpts();
    options.addRemappedFile(invocation.getFrontendOpts().Inputs[0].getFile(), source);
    options.PrecompiledPreambleBytes = {bounds.Size, bounds.PreambleEndsAtStartOfLine};
    // The headers were checked against their sizes and times before: clang
    // need not read them again.
    options.DisablePCHOrModuleValidation = clang::DisableValidationForModuleKind::PCH;
    options.UsePredefines = false;  // the preamble holds them
    options.ImplicitPCHInclude = kPath;
    auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    memory->addFile(kPath, 0, llvm::MemoryBuffer::getMemBuffer(pch_, kPath, /*RequiresNullTerminator=*/false));
    auto overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(files);
    overlay->pushOverlay(memory);
    files = overlay;
  }

  // The object cache's form: the header count, each header (path length,
  // path, size, time), then the PCH.
  std::vector<std::byte> serialise() const {
    size_t total = sizeof(uint64_t) + pch_.size();
    for (const PreambleHeader& header : headers_) total += 3 * sizeof(uint64_t) + header.path.size();
    std::vector<std::byte> out(total);
    size_t at = 0;
    const auto put = [&out, &at](const void* data, size_t n) {
      if (n > 0) std::memcpy(out.data() + at, data, n);
      at += n;
    };
    const auto put_u64 = [&put](uint64_t value) { put(&value, sizeof value); };
    put_u64(headers_.size());
    for (const PreambleHeader& header : headers_) {
      put_u64(header.path.size());
      put(header.path.data(), header.path.size());
      put_u64(static_cast<uint64_t>(header.size));
      put_u64(static_cast<uint64_t>(header.mtime));
    }
    put(pch_.data(), pch_.size());
    return out;
  }

  // Null for bytes that are not serialise()'s.
  static std::shared_ptr<const ReadyPreamble> deserialise(std::span<const std::byte> bytes) {
    const char* at = reinterpret_cast<const char*>(bytes.data());
    size_t left = bytes.size();
    const auto take = [&](void* into, size_t n) {
      if (left < n) return false;
      std::memcpy(into, at, n);
      at += n;
      left -= n;
      return true;
    };
    uint64_t count = 0;
    if (!take(&count, sizeof count) || count > left / (3 * sizeof(uint64_t))) return nullptr;
    std::vector<PreambleHeader> headers(count);
    for (PreambleHeader& header : headers) {
      uint64_t length = 0;
      if (!take(&length, sizeof length) || length > left) return nullptr;
      header.path.resize(length);
      uint64_t size = 0, mtime = 0;
      if (!take(header.path.data(), length) || !take(&size, sizeof size) || !take(&mtime, sizeof mtime))
        return nullptr;
      header.size = static_cast<int64_t>(size);
      header.mtime = static_cast<int64_t>(mtime);
    }
    if (left == 0) return nullptr;
    return std::make_shared<const ReadyPreamble>(std::string(at, left), std::move(headers));
  }

 private:
  std::string pch_;
  std::vector<PreambleHeader> headers_;
};

// Precompiled preambles, by preamble text and defines, in memory and in the
// object cache (when it is on) for later processes. A preamble seen once in
// a process is only counted, unless the cache can keep it and it has no
// defines (a plan's or a compiler's kernels, not a tuner's candidates, which
// differ in their defines): precompiling costs a little more than parsing,
// which pays only when it is used again.
class ClangFrontend::Preambles {
 public:
  // `compiler` is everything besides the preamble's text and defines that
  // decides what clang makes of it (its version, target, options).
  explicit Preambles(std::string compiler) : compiler_(std::move(compiler)) {}

  // The precompiled preamble `source` can use; null when there is none (yet).
  // `name` labels SVOD_DEBUG's lines.
  std::shared_ptr<const ReadyPreamble> find(const clang::CompilerInvocation& invocation,
                                            const llvm::MemoryBuffer& source, const clang::PreambleBounds& bounds,
                                            const std::string& key, bool has_defines, std::string_view name) {
    const std::shared_ptr<ArtifactStore> cache = artifact_store();
    int seen = 0;
    {
      std::lock_guard lock(mutex_);
      Entry& entry = entry_for(key);
      if (entry.ready) {
        if (entry.ready->headers_unchanged()) return entry.ready;
        log_debug("preamble of {}: a header it was made from changed", name);
        entry.ready.reset();
        if (cache) cache->remove(cache_key(key));
      }
      if (entry.failed) return nullptr;
      seen = ++entry.seen;
    }
    std::shared_ptr<const ReadyPreamble> ready;
    const Hash128 stored_key = cache_key(key);
    if (seen == 1 && cache) {
      if (std::optional<Artifact> stored = cache->get(stored_key); stored && stored->kind == ArtifactKind::Preamble) {
        ready = ReadyPreamble::deserialise(stored->bytes);
        if (ready && ready->headers_unchanged()) {
          log_debug("preamble of {}: read from the object cache", name);
        } else {
          log_debug("preamble of {}: {} in the object cache, removed", name,
                    ready ? "made from headers that changed since" : "unreadable");
          ready.reset();
          cache->remove(stored_key);
        }
      }
    }
    const bool build = !ready && (seen >= 2 || (cache && !has_defines));
    // Precompiled outside the lock; two threads may both build one, and the
    // last to finish is kept.
    if (build) {
      ready = precompile(invocation, source, bounds);
      if (ready && cache)
        cache->put(stored_key, Artifact{.kind = ArtifactKind::Preamble, .bytes = ready->serialise(), .phases = {},
                                        .diagnostics = {}});
      log_debug("preamble of {}: {}", name,
                !ready ? "cannot be precompiled" : cache ? "precompiled, kept in the object cache" : "precompiled");
    }
    if (!ready && !build) return nullptr;
    std::lock_guard lock(mutex_);
    Entry& entry = entry_for(key);
    entry.ready = ready;
    entry.failed = ready == nullptr;  // its errors are reported by the compiles themselves
    return ready;
  }

  // A compile that read `key`'s preamble failed and succeeded without it:
  // the preamble is not used again.
  void forget(const std::string& key, std::string_view name) {
    log_debug("preamble of {}: the compile failed with it and succeeded without; not used again", name);
    {
      std::lock_guard lock(mutex_);
      Entry& entry = entry_for(key);
      entry.ready.reset();
      entry.failed = true;
    }
    if (const std::shared_ptr<ArtifactStore> cache = artifact_store()) cache->remove(cache_key(key));
  }

 private:
  static constexpr size_t kMaxPreambles = 16;

  struct Entry {
    std::string key;
    int seen = 0;
    bool failed = false;
    std::shared_ptr<const ReadyPreamble> ready;
  };

  // With mutex_ held.
  Entry& entry_for(const std::string& key) {
    for (Entry& e : entries_)
      if (e.key == key) return e;
    if (entries_.size() == kMaxPreambles) entries_.pop_front();
    entries_.push_back(Entry{.key = key, .seen = 0, .failed = false, .ready = nullptr});
    return entries_.back();
  }

  Hash128 cache_key(const std::string& key) const {
    return Hasher().str("svod.clang-preamble.1").str(compiler_).str(key).finish();
  }

  // The headers a precompiled preamble was made from, as clang read them:
  // every file but the source itself (`main`, a buffer under its name). (Not
  // through SourceManager::getFileEntryRefForID: its inline code would bring
  // into this file LLVM's bump allocator, which poisons memory for
  // AddressSanitizer where the uninstrumented LLVM archives do not unpoison.)
  class HeaderRecorder final : public clang::PreambleCallbacks {
   public:
    explicit HeaderRecorder(std::string main) : main_(std::move(main)) {}

    std::vector<PreambleHeader> headers;

    void AfterExecute(clang::CompilerInstance& instance) override {
      const clang::SourceManager& sources = instance.getSourceManager();
      for (auto it = sources.fileinfo_begin(); it != sources.fileinfo_end(); ++it) {
        const clang::FileEntryRef file = it->first;
        if (file.getName() == main_) continue;
        headers.push_back({file.getName().str(), static_cast<int64_t>(file.getSize()),
                           static_cast<int64_t>(file.getModificationTime())});
      }
    }

   private:
    const std::string main_;
  };

  static std::shared_ptr<const ReadyPreamble> precompile(const clang::CompilerInvocation& invocation,
                                                         const llvm::MemoryBuffer& source,
                                                         const clang::PreambleBounds& bounds) {
    std::string ignored;
    llvm::raw_string_ostream os(ignored);
    auto options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
    // Reference-counted: the compiler instance inside holds on to it.
    auto diags = llvm::makeIntrusiveRefCnt<clang::DiagnosticsEngine>(
        llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), options, new clang::TextDiagnosticPrinter(os, options.get()),
        /*ShouldOwnClient=*/true);
    HeaderRecorder recorder(invocation.getFrontendOpts().Inputs[0].getFile().str());
    llvm::ErrorOr<clang::PrecompiledPreamble> built = clang::PrecompiledPreamble::Build(
        invocation, &source, bounds, *diags,
        llvm::makeIntrusiveRefCnt<RegularFilesOnly>(llvm::vfs::getRealFileSystem()),
        std::make_shared<clang::PCHContainerOperations>(), /*StoreInMemory=*/true, /*StoragePath=*/"", recorder);
    if (!built || diags->hasErrorOccurred()) return nullptr;
    // Clang hands an in-memory preamble over as a file of the file system it
    // gives a compile: its bytes are read back from there.
    clang::CompilerInvocation scratch(invocation);
    llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> files = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    const std::unique_ptr<llvm::MemoryBuffer> empty = llvm::MemoryBuffer::getMemBuffer("");
    built->AddImplicitPreamble(scratch, files, empty.get());
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> pch =
        files->getBufferForFile(scratch.getPreprocessorOpts().ImplicitPCHInclude);
    if (!pch) return nullptr;
    return std::make_shared<const ReadyPreamble>((*pch)->getBuffer().str(), std::move(recorder.headers));
  }

  const std::string compiler_;
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

namespace {

// What the driver makes of ClangCompiler's flags for `recipe`: the cc1 line,
// parsed into an invocation with no input or output, and the target it
// resolved. Exactly what the clang process runs (ClangCompiler::command), so
// both compilers build the same code; colours off because diagnostics end up
// in error messages, not on a terminal.
struct RecipeInvocation {
  std::shared_ptr<const clang::CompilerInvocation> invocation;
  std::vector<std::string> cc1_args;
  LlvmTarget target;
};

RecipeInvocation make_invocation(const CpuRecipe& recipe) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::DiagnosticsEngine diags(llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), options,
                                 new clang::TextDiagnosticPrinter(os, options.get()), /*ShouldOwnClient=*/true);
  clang::driver::Driver driver(SVOD_CLANG_DRIVER_PATH, llvm::sys::getDefaultTargetTriple(), diags);
  driver.setCheckInputsExist(false);
  std::vector<std::string> args = {SVOD_CLANG_DRIVER_PATH, "-c", "-x", "c", "-fno-color-diagnostics"};
  const std::vector<std::string> flags = ClangCompiler::object_flags(recipe);
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-", "-o", "-"});
  std::unique_ptr<clang::driver::Compilation> compilation(driver.BuildCompilation(pointers(args)));
  os.flush();
  if (!compilation || diags.hasErrorOccurred() || compilation->getJobs().size() != 1)
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver cannot build a compile job:\n{}", text);
  const auto* job = llvm::dyn_cast<clang::driver::Command>(&*compilation->getJobs().begin());
  if (job == nullptr || job->getArguments().empty() || std::strcmp(job->getArguments()[0], "-cc1") != 0)
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver did not produce a cc1 job");

  RecipeInvocation made;
  for (const char* arg : llvm::ArrayRef<const char*>(job->getArguments()).drop_front()) {
    // -disable-free lets a one-shot clang process skip freeing the AST and
    // module; in a long-lived process that would leak every compile.
    if (std::strcmp(arg, "-disable-free") != 0) made.cc1_args.emplace_back(arg);
  }
  for (size_t i = 0; i + 1 < made.cc1_args.size(); ++i) {
    if (made.cc1_args[i] == "-triple") made.target.triple = made.cc1_args[i + 1];
    if (made.cc1_args[i] == "-target-cpu") made.target.cpu = made.cc1_args[i + 1];
    if (made.cc1_args[i] == "-target-feature") made.target.features.push_back(made.cc1_args[i + 1]);
  }
  if (made.target.triple.empty() || made.target.cpu.empty())
    throw make_error(ErrorKind::DeviceUnavailable, "the in-process clang driver resolved no target triple or CPU");

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  const bool parsed = clang::CompilerInvocation::CreateFromArgs(*invocation, pointers(made.cc1_args), diags,
                                                                SVOD_CLANG_DRIVER_PATH);
  os.flush();
  if (!parsed) throw make_error(ErrorKind::Internal, "clang rejected svod's own cc1 command line:\n{}", text);
  // Clang hands over the IR as its code generator made it, with the function
  // attributes and floating-point flags of the recipe (in ClangCompiler's
  // flags); svod's own pipeline optimises it (EmitPipeline).
  invocation->getCodeGenOpts().DisableLLVMPasses = true;
  invocation->getFrontendOpts().Inputs.clear();
  invocation->getFrontendOpts().OutputFile.clear();
  made.invocation = std::move(invocation);
  return made;
}

}  // namespace

// One recipe's invocation and the preambles precompiled with it (a
// preamble's options must be those of the compiles that read it), made at
// the recipe's first compile.
struct ClangFrontend::Recipe {
  std::once_flag once;
  std::shared_ptr<const clang::CompilerInvocation> invocation;
  std::unique_ptr<Preambles> preambles;
  std::exception_ptr error;

  void set(RecipeInvocation made) {
    invocation = std::move(made.invocation);
    std::string compiler = version();
    for (const std::string& arg : made.cc1_args) compiler += "\n" + arg;
    preambles = std::make_unique<Preambles>(std::move(compiler));
  }
};

ClangFrontend::ClangFrontend() : recipes_(kCpuRecipes.size()) {
  initialise_native_target();
  // The default recipe's invocation at once: it resolves the target, and a
  // driver that cannot build a job fails here rather than at a compile.
  RecipeInvocation made = make_invocation(kCpuRecipes.front());
  target_ = made.target;
  std::call_once(recipes_.front().once, [&] { recipes_.front().set(std::move(made)); });
}

ClangFrontend::Recipe& ClangFrontend::recipe(std::string_view name) const {
  const size_t index = cpu_recipe_index(name);
  Recipe& entry = recipes_.at(index);
  std::call_once(entry.once, [&] {
    try {
      entry.set(make_invocation(kCpuRecipes[index]));
    } catch (...) {
      entry.error = std::current_exception();
    }
  });
  if (entry.error) std::rethrow_exception(entry.error);
  return entry;
}

ClangFrontend::~ClangFrontend() = default;

std::string ClangFrontend::version() { return clang::getClangFullVersion(); }

std::unique_ptr<llvm::Module> ClangFrontend::emit_ir(const ProgramSpec& spec, llvm::LLVMContext& context,
                                                     std::string& diagnostics) const {
  Recipe& recipe = this->recipe(spec.recipe);
  auto invocation = std::make_shared<clang::CompilerInvocation>(*recipe.invocation);
  std::string key;
  for (const auto& [name, value] : spec.defines) {
    invocation->getPreprocessorOpts().addMacroDef(name + "=" + value);
    key += fmt::format("-D{}={}\n", name, value);
  }
  // The file name labels diagnostics ("kernels/add.c:3:5: error: ...": a
  // plan's source_file, else NAME.c); the source is handed over as a buffer
  // in its name. Quoted #includes are looked for beside that name, so a
  // preamble is kept apart for each folder a name has.
  const std::string file_name = spec.diagnostic_file_name();
  if (const std::string folder = std::filesystem::path(file_name).parent_path().string(); !folder.empty())
    key += fmt::format("-folder={}\n", folder);
  const std::unique_ptr<llvm::MemoryBuffer> source =
      llvm::MemoryBuffer::getMemBuffer(spec.source, file_name, /*RequiresNullTerminator=*/false);
  const clang::PreambleBounds bounds =
      clang::ComputePreambleBounds(invocation->getLangOpts(), source->getMemBufferRef(), /*MaxLines=*/0);
  invocation->getFrontendOpts().Inputs.emplace_back(file_name, clang::InputKind(clang::Language::C));
  invocation->getPreprocessorOpts().RetainRemappedFileBuffers = true;
  key += spec.source.substr(0, bounds.Size);
  const std::shared_ptr<const ReadyPreamble> preamble =
      bounds.Size > 0 ? recipe.preambles->find(*invocation, *source, bounds, key, !spec.defines.empty(), spec.display_name())
                      : nullptr;

  std::string text;
  const auto compile = [&](const ReadyPreamble* with) -> std::unique_ptr<llvm::Module> {
    text.clear();
    llvm::raw_string_ostream os(text);
    clang::TextDiagnosticPrinter printer(os, &invocation->getDiagnosticOpts());
    clang::CompilerInstance instance;
    instance.setInvocation(std::make_shared<clang::CompilerInvocation>(*invocation));
    instance.createDiagnostics(&printer, /*ShouldOwnClient=*/false);
    // "1 error generated." goes to the verbose stream, stderr unless redirected.
    instance.setVerboseOutputStream(os);
    llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> files =
        clang::createVFSFromCompilerInvocation(instance.getInvocation(), instance.getDiagnostics());
    // The preamble maps the source in under its name, beside its own bytes.
    if (with != nullptr) with->apply(instance.getInvocation(), files, source.get(), bounds);
    else instance.getPreprocessorOpts().addRemappedFile(file_name, source.get());
    instance.createFileManager(llvm::makeIntrusiveRefCnt<RegularFilesOnly>(std::move(files)));
    EmitIrAction action(context);
    const bool ok = instance.ExecuteAction(action);
    os.flush();
    std::unique_ptr<llvm::Module> module = ok ? action.take_module() : nullptr;
    if (!ok || instance.getDiagnostics().hasErrorOccurred()) module.reset();
    return module;
  };
  std::unique_ptr<llvm::Module> module = compile(preamble.get());
  // A preamble that a compile failed with is tried once without: when that
  // succeeds the preamble was at fault (one an earlier process left), not
  // the source, and it is not used again.
  if (!module && preamble) {
    module = compile(nullptr);
    if (module) recipe.preambles->forget(key, spec.display_name());
  }
  if (!module)
    throw make_error(ErrorKind::Compile, "clang (in-process) failed to compile \"{}\" (c):\n{}", spec.display_name(),
                     text);
  diagnostics = std::move(text);
  return module;
}

}  // namespace svod::detail
