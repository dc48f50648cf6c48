// LLVM IR parsing, the optimisation and code generation path shared by C and
// LLVM IR, the target machine pool, the Compiler that libsvod_llvm.so hands to
// the runtime, and the plugin's exported factory.
#include "svod/compile/llvm/llvm_compiler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CrashRecoveryContext.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <csignal>
#include <ctime>
#include <functional>
#include <new>
#include <mutex>
#include <type_traits>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/compile/llvm/plugin_api.h"
#include "svod/guard/signal_stack.h"

namespace svod::detail {
namespace {

// Part of the identity: what the in-process path does beyond the C flags,
// which name the recipe's level too. The passes are those clang runs at that
// level, by the same tuning (Parts::tuning), so both compilers build the same
// code.
std::string pipeline_description(const CpuRecipe& recipe) {
  return fmt::format(
      "c:disable-llvm-passes;default<O{0}>+unroll+loop-vectorize+slp-vectorize,codegen<O{0}>,no-builtins,pic,got-calls",
      recipe.opt_level);
}

// The recipe's level as clang maps -O1 to -O3 onto LLVM's pass pipelines and
// code generator levels.
llvm::OptimizationLevel pass_level(const CpuRecipe& recipe) {
  switch (recipe.opt_level) {
    case 1: return llvm::OptimizationLevel::O1;
    case 2: return llvm::OptimizationLevel::O2;
    case 3: return llvm::OptimizationLevel::O3;
  }
  throw make_error(ErrorKind::Validation, "CPU recipe \"{}\": optimisation level {} is not 1, 2 or 3", recipe.name,
                   recipe.opt_level);
}

llvm::CodeGenOptLevel codegen_level(const CpuRecipe& recipe) {
  return recipe.opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive
         : recipe.opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                 : llvm::CodeGenOptLevel::Less;
}

double ms_between(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// CPU time of the calling thread: phases are timed with it so that a busy
// machine does not inflate them.
double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) * 1e3 + double(now.tv_nsec) / 1e6;
}

// Collects error diagnostics from LLVM (which is built without exceptions, so
// nothing may be thrown from inside it); the caller throws afterwards.
void collect_errors(const llvm::DiagnosticInfo* info, void* sink) {
  if (info->getSeverity() != llvm::DS_Error) return;
  std::string& text = *static_cast<std::string*>(sink);
  llvm::raw_string_ostream os(text);
  llvm::DiagnosticPrinterRawOStream printer(os);
  info->print(printer);
  os << '\n';
}

std::unique_ptr<llvm::TargetMachine> host_target_machine(const LlvmTarget& target, const CpuRecipe& recipe) {
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, error);
  if (t == nullptr)
    throw make_error(ErrorKind::DeviceUnavailable, "LLVM has no target for {}: {}", target.triple, error);
  std::string features;
  for (const auto& f : target.features) features += (features.empty() ? "" : ",") + f;
  // As clang sets them from a recipe's floating-point flags: contraction
  // into fused multiply-adds across statements (-ffp-contract=fast) and no
  // signed zeros for the code generator too.
  llvm::TargetOptions options;
  if (recipe.reassociate) {
    options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
    options.NoSignedZerosFPMath = true;
  }
  std::unique_ptr<llvm::TargetMachine> machine(t->createTargetMachine(
      target.triple, target.cpu, features, options, llvm::Reloc::PIC_, std::nullopt, codegen_level(recipe)));
  if (!machine)
    throw make_error(ErrorKind::DeviceUnavailable, "LLVM cannot create a target machine for {} (cpu {})",
                     target.triple, target.cpu);
  return machine;
}

}  // namespace

void initialise_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

EmitPipelinePool::EmitPipelinePool(LlvmTarget target, const CpuRecipe& recipe)
    : target_(std::move(target)), recipe_(recipe) {}

EmitPipelinePool::~EmitPipelinePool() = default;

EmitPipelinePool::Lease::Lease(EmitPipelinePool& pool, std::unique_ptr<EmitPipeline> pipeline)
    : pool_(pool), pipeline_(std::move(pipeline)) {}

EmitPipelinePool::Lease::~Lease() {
  const std::lock_guard lock(pool_.mutex_);
  pool_.idle_.push_back(std::move(pipeline_));
}

EmitPipelinePool::Lease EmitPipelinePool::acquire() {
  {
    const std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<EmitPipeline> pipeline = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(pipeline));
    }
  }
  return Lease(*this, std::make_unique<EmitPipeline>(target_, recipe_));
}

std::unique_ptr<llvm::Module> parse_llvm_ir(const ProgramSpec& spec, llvm::LLVMContext& context) {
  const std::string& who = spec.display_name();
  const std::string file_name = spec.diagnostic_file_name();
  llvm::SMDiagnostic parse_error;
  std::unique_ptr<llvm::Module> module =
      llvm::parseIR(llvm::MemoryBufferRef(spec.source, file_name), parse_error, context);
  if (!module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    parse_error.print("", os, /*ShowColors=*/false);
    throw make_error(ErrorKind::Compile, "LLVM (in-process) cannot parse the IR of \"{}\":\n{}", who, text);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (llvm::verifyModule(*module, &os))
    throw make_error(ErrorKind::Compile, "LLVM (in-process): the IR of \"{}\" is invalid:\n{}", who, text);
  // As the clang process: position-independent code (-fPIC) whose runtime
  // library calls go through the GOT (-fno-plt). Clang's IR says so itself.
  module->setPICLevel(llvm::PICLevel::BigPIC);
  module->setRtLibUseGOT();
  return module;
}

// The widest integer type a program may use. LLVM accepts up to i8388607,
// and legalising one multiply that wide ran for six minutes before it ran
// out of memory; generated kernels use i128 at most (bit-fields, _BitInt).
constexpr unsigned kMaxIntegerBits = 4096;

unsigned widest_integer(const llvm::Type* type) {
  if (const auto* integer = llvm::dyn_cast<llvm::IntegerType>(type)) return integer->getBitWidth();
  unsigned widest = 0;
  for (const llvm::Type* contained : type->subtypes()) widest = std::max(widest, widest_integer(contained));
  return widest;
}

// Refuses a module with an integer type wider than kMaxIntegerBits anywhere
// (globals, signatures, instructions and their operands), before LLVM's
// passes see it.
void check_integer_widths(const llvm::Module& module, const std::string& who) {
  auto check = [&](const llvm::Type* type, std::string_view where) {
    const unsigned bits = widest_integer(type);
    if (bits > kMaxIntegerBits)
      throw make_error(ErrorKind::Compile,
                       "program \"{}\": {} uses a {}-bit integer type; the in-process compiler takes integers of "
                       "at most {} bits",
                       who, where, bits, kMaxIntegerBits);
  };
  for (const llvm::GlobalVariable& global : module.globals()) check(global.getValueType(), "a global variable");
  for (const llvm::Function& function : module) {
    check(function.getFunctionType(), "a function's signature");
    for (const llvm::BasicBlock& block : function)
      for (const llvm::Instruction& instruction : block) {
        check(instruction.getType(), "an instruction");
        for (const llvm::Value* operand : instruction.operands()) check(operand->getType(), "an instruction");
        if (const auto* alloca = llvm::dyn_cast<llvm::AllocaInst>(&instruction))
          check(alloca->getAllocatedType(), "a local variable");
      }
  }
}

struct EmitPipeline::Parts {
  Parts(const LlvmTarget& target, const CpuRecipe& recipe)
      : triple(target.triple),
        level(pass_level(recipe)),
        machine(host_target_machine(target, recipe)),
        builder(machine.get(), tuning()),
        out(object) {
    // -ffreestanding: no library function is assumed to exist or behave as
    // in the C standard (the first registration of an analysis wins).
    functions.registerPass([this] {
      llvm::TargetLibraryInfoImpl library{llvm::Triple(triple)};
      library.disableAllFunctions();
      return llvm::TargetLibraryAnalysis(std::move(library));
    });
    builder.registerModuleAnalyses(modules);
    builder.registerCGSCCAnalyses(sccs);
    builder.registerFunctionAnalyses(functions);
    builder.registerLoopAnalyses(loops);
    builder.crossRegisterProxies(loops, functions, sccs, modules);
    if (machine->addPassesToEmitFile(codegen, out, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw make_error(ErrorKind::Unsupported, "LLVM cannot emit objects for {}", triple);
  }

  static llvm::PipelineTuningOptions tuning() {
    llvm::PipelineTuningOptions options;
    options.LoopUnrolling = true;
    options.LoopInterleaving = true;
    options.LoopVectorization = true;
    options.SLPVectorization = true;
    return options;
  }

  // Analysis results point into the module they were computed for.
  void forget_module() {
    modules.clear();
    sccs.clear();
    functions.clear();
    loops.clear();
  }

  std::string triple;
  llvm::OptimizationLevel level;
  std::unique_ptr<llvm::TargetMachine> machine;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder;
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream out;  // writes straight into `object`
  llvm::legacy::PassManager codegen;
};

EmitPipeline::EmitPipeline(const LlvmTarget& target, const CpuRecipe& recipe)
    : parts_(std::make_unique<Parts>(target, recipe)) {}

EmitPipeline::~EmitPipeline() = default;

std::vector<std::byte> EmitPipeline::run(llvm::Module& module, const std::string& codegen_errors,
                                         const std::string& who, CompilePhases& phases) {
  Parts& p = *parts_;
  const double start = thread_cpu_ms();
  module.setTargetTriple(p.triple);
  module.setDataLayout(p.machine->createDataLayout());
  // The pass pipeline itself is built per module: the inliner's wrapper
  // moves its passes out when it runs, so it cannot run twice.
  p.builder.buildPerModuleDefaultPipeline(p.level).run(module, p.modules);
  p.forget_module();
  const double optimised = thread_cpu_ms();

  p.object.clear();
  p.codegen.run(module);
  if (!codegen_errors.empty())
    throw make_error(ErrorKind::Compile, "LLVM (in-process) failed to compile \"{}\":\n{}", who, codegen_errors);
  phases.optimise_ms += optimised - start;
  phases.codegen_ms += thread_cpu_ms() - optimised;
  const auto* bytes = reinterpret_cast<const std::byte*>(p.object.data());
  return std::vector<std::byte>(bytes, bytes + p.object.size());
}

namespace {

class LlvmCompiler final : public Compiler {
 public:
  explicit LlvmCompiler(std::string plugin_path) {
    for (const CpuRecipe& recipe : kCpuRecipes)
      pipelines_.push_back(std::make_unique<EmitPipelinePool>(frontend_.target(), recipe));
    identity_.name = "llvm";
    identity_.path = std::move(plugin_path);
    identity_.version = "LLVM " LLVM_VERSION_STRING " in-process; " + ClangFrontend::version();
    identity_.target_triple = frontend_.target().triple;
    identity_.target_cpu = frontend_.target().cpu;
    identity_.target_features = frontend_.target().features;
    identity_.flags = ClangCompiler::object_flags();
    identity_.flags.push_back(pipeline_description(kDefaultCpuRecipe));
  }

  const CompilerIdentity& identity() const override { return identity_; }
  std::span<const CpuRecipe> recipes() const override { return kCpuRecipes; }

  // The compile runs on a thread of its own with a large stack (clang's
  // parser and LLVM's passes recurse once per level of nesting: 2,000 unary
  // minus signs overflowed a thread's usual 8 MiB) and an alternate signal
  // stack. A crash inside clang or LLVM (a signal on that thread while it
  // compiles, a stack overflow included) becomes a CompileError naming the
  // program, and the process goes on; what the crashed compile allocated is
  // leaked. Running out of memory is a CompileError too.
  Artifact compile(const ProgramSpec& spec) const override {
    spec.validate();
    if (spec.language != Language::C && spec.language != Language::LlvmIr)
      throw make_error(ErrorKind::Unsupported, "program \"{}\": the llvm compiler compiles C and LLVM IR, not {}",
                       spec.display_name(), to_string(spec.language));
    std::call_once(crash_recovery_once, enable_crash_recovery);
    Artifact artifact;
    std::exception_ptr failure;  // exceptions must not unwind through LLVM's frames
    bool finished = false;
    int ret_code = 0;
    on_compile_thread([&] {
      llvm::CrashRecoveryContext recovery;
      finished = recovery.RunSafely([&] {
        try {
          artifact = compile_unguarded(spec);
        } catch (const std::bad_alloc&) {
          failure = std::make_exception_ptr(make_error(
              ErrorKind::Compile, "program \"{}\": the in-process compiler (LLVM {}) ran out of memory compiling it",
              spec.display_name(), LLVM_VERSION_STRING));
        } catch (...) {
          failure = std::current_exception();
        }
      });
      ret_code = recovery.RetCode;
    });
    if (!finished) {
      const int signal = ret_code > 128 ? ret_code - 128 : ret_code;
      throw make_error(ErrorKind::Compile,
                       "program \"{}\": the in-process compiler (LLVM {}) crashed with signal {} ({}) while compiling "
                       "it{}; the process goes on. The clang process compiler (SVOD_CPU_COMPILER=clang) may "
                       "compile it.",
                       spec.display_name(), LLVM_VERSION_STRING, signal, strsignal(signal),
                       signal == SIGSEGV ? " (a stack overflow when the source nests deeply)" : "");
    }
    if (failure) std::rethrow_exception(failure);
    return artifact;
  }

 private:
  Artifact compile_unguarded(const ProgramSpec& spec) const {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_ms();
    Artifact artifact;
    artifact.kind = ArtifactKind::ElfObject;
    {
      llvm::LLVMContext context;
      std::unique_ptr<llvm::Module> module =
          spec.language == Language::C ? frontend_.emit_ir(spec, context, artifact.diagnostics)
                                       : parse_llvm_ir(spec, context);
      artifact.phases.front_end_ms = thread_cpu_ms() - cpu_start;
      check_integer_widths(*module, spec.display_name());
      // Set after the front end, which installs and removes its own handler.
      std::string codegen_errors;
      context.setDiagnosticHandlerCallBack(collect_errors, &codegen_errors);
      const EmitPipelinePool::Lease pipeline = pipelines_.at(cpu_recipe_index(spec.recipe))->acquire();
      artifact.bytes = pipeline->run(*module, codegen_errors, spec.display_name(), artifact.phases);
    }
    if (debug_level() >= 1) {
      const CompilePhases& p = artifact.phases;
      log_debug("compile {} compiler=llvm {:.1f} ms (front end {:.1f}, optimise {:.1f}, codegen {:.1f}), {} bytes",
                    spec.display_name(), ms_between(start, std::chrono::steady_clock::now()), p.front_end_ms,
                    p.optimise_ms, p.codegen_ms, artifact.bytes.size());
    }
    if (debug_level() >= 3) log_debug("source of {}:\n{}", spec.display_name(), spec.source);
    return artifact;
  }

  // LLVM installs its crash handlers without SA_ONSTACK, so they could not
  // run for a stack overflow; they get it here.
  static void enable_crash_recovery() {
    llvm::CrashRecoveryContext::Enable();
    for (int signal : {SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP}) {
      struct sigaction action {};
      if (sigaction(signal, nullptr, &action) != 0 || action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN)
        continue;
      action.sa_flags |= SA_ONSTACK;
      sigaction(signal, &action, nullptr);
    }
  }

  // Runs `work` on a new thread with a kCompileStackBytes stack and an
  // alternate signal stack, and waits for it. `work` must not throw. The
  // stack is reserved address space: only the pages a compile touches are
  // memory.
  static void on_compile_thread(const std::function<void()>& work) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, kCompileStackBytes);
    pthread_t thread;
    const int rc = pthread_create(
        &thread, &attributes,
        [](void* arg) -> void* {
          ensure_signal_stack();
          (*static_cast<const std::function<void()>*>(arg))();
          return nullptr;
        },
        const_cast<std::function<void()>*>(&work));
    pthread_attr_destroy(&attributes);
    if (rc != 0) {
      ensure_signal_stack();  // no thread to be had: this one, with its own stack
      work();
      return;
    }
    pthread_join(thread, nullptr);
  }

  static constexpr size_t kCompileStackBytes = size_t{512} << 20;
  static inline std::once_flag crash_recovery_once;
  ClangFrontend frontend_;
  // Per recipe of kCpuRecipes, in its order.
  std::vector<std::unique_ptr<EmitPipelinePool>> pipelines_;
  CompilerIdentity identity_;
};

}  // namespace
}  // namespace svod::detail

extern "C" __attribute__((visibility("default"))) svod::Compiler* svod_llvm_create_compiler(uint32_t abi,
                                                                                         std::string* error) {
  static_assert(std::is_same_v<decltype(&svod_llvm_create_compiler), svod::detail::LlvmPluginFactory>);
  if (abi != svod::detail::kLlvmPluginAbi) {
    *error = fmt::format("plugin ABI {} does not match the runtime's {}; rebuild libsvod_llvm.so with the runtime",
                         svod::detail::kLlvmPluginAbi, abi);
    return nullptr;
  }
  try {
    Dl_info self{};
    std::string path = dladdr(reinterpret_cast<void*>(&svod_llvm_create_compiler), &self) != 0 && self.dli_fname
                           ? self.dli_fname
                           : svod::detail::kLlvmPluginFileName;
    return new svod::detail::LlvmCompiler(std::move(path));
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
