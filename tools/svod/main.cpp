// The svod command-line tool: its parser and dispatch (the launcher that
// calls this is tools/svod/launcher.c).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/capi/svod.h"
#include "svod/comm/communicator.h"
#include "tools/svod/commands.h"
#include "tools/svod/entry.h"
#include "tools/svod/exit_status.h"
#include "tools/svod/usage.h"

int svod_command_main(int argc, char** argv) {
  // Every command is done with the thread pool when it returns here (a
  // command's parallel work, local ranks included, is joined before it
  // returns), so exit need not wait for the pool's idle workers to leave
  // their arena: they end with the process. Exit still runs every destructor
  // and atexit handler (files, MPI_Finalize, profilers, coverage).
  svod::skip_pool_join_at_exit();
  CLI::App app{"svod: compile, load, run and time ML kernels"};
  // The usage lines say `svod` however it was started, as the launcher's
  // answer to --help made at build time does.
  app.name("svod");
  app.require_subcommand(1);
  // Compile-time facts only: --version opens no library.
  app.set_version_flag("--version,-V", fmt::format("svod {} (C API {}.{}, in-process compiler LLVM {})", SVOD_VERSION,
                                                SVOD_API_VERSION_MAJOR, SVOD_API_VERSION_MINOR, SVOD_LLVM_VERSION));

  auto* info = app.add_subcommand("info", "print the version, toolchain, devices and thread count; or what a package "
                                           "holds");
  std::string info_package;
  info->add_option("package", info_package,
                   "a package (.svodpkg): its inputs, outputs, variables, kernels, data, CPU, maker and signer");
  auto* demo = app.add_subcommand("demo", "compile, load and run a few kernels, printing results and timings");

  // Options the plan commands share.
  auto add_cpu_compiler = [](CLI::App* command, svod::cli::CpuCompilerOption& option) {
    command->add_option("--cpu-compiler", option.value,
                        "the CPU compiler: clang, llvm or dlopen (default: SVOD_CPU_COMPILER, else llvm when its "
                        "library loads, else clang)");
    command->add_option("--backend", option.old_value, "the old name of --cpu-compiler");
  };
  auto add_plan = [&](CLI::App* command, std::string& plan, std::vector<std::string>& vars,
                      svod::cli::CpuCompilerOption& cpu_compiler) {
    command->add_option("plan", plan, "the plan file (JSON, see docs/PLAN_FORMAT.md)")->required();
    command->add_option("--var", vars, "set a plan variable: NAME=VALUE (repeatable)")
        ->type_size(1)
        ->allow_extra_args(false);
    add_cpu_compiler(command, cpu_compiler);
  };
  // --ranks N; `each` says what the ranks do.
  auto add_ranks = [](CLI::App* command, int& ranks, std::string_view verb, std::string_view each) {
    return command
        ->add_option("--ranks", ranks,
                     fmt::format("{} on N local ranks (threads of this process) with a \"local\" communicator; under "
                                 "mpirun each process is one rank instead and --ranks is refused. {} At most {}",
                                 verb, each, svod::kMaxLocalRanks))
        ->check(svod::cli::between(1, svod::kMaxLocalRanks));
  };

  svod::cli::RunOptions run_options;
  auto* run = app.add_subcommand("run", "run a plan file or package: print and check its outputs, time its runs and ops (a plan "
                               "with device ops times each op only under --profile or SVOD_PROFILE, which wait for "
                               "each)");
  add_plan(run, run_options.plan, run_options.vars, run_options.cpu_compiler);
  run->add_option("--repeat", run_options.repeat, "how many times to execute the plan (default 1)")
      ->check(svod::cli::at_least(1));
  run->add_option("--out", run_options.out_dir, "write every output as DIR/<name>.npy (or its npy file name)");
  run->add_option("--input", run_options.inputs,
                  "NAME=@FILE.npy: start buffer NAME with the values of FILE instead of its init in the plan; "
                  "a variable dimension of an input's shape takes FILE's size (repeatable)")
      ->type_size(1)
      ->allow_extra_args(false);
  run->add_flag("--expect", run_options.expect,
                "judge the outputs' stored expectations even with --input (without it they are not judged then)");
  run->add_option("--output", run_options.outputs,
                  "NAME=FILE.npy: write buffer NAME as it is after the first execution to FILE (repeatable)")
      ->type_size(1)
      ->allow_extra_args(false);
  run->add_option("--profile", run_options.profile, "write a Chrome trace (chrome://tracing, Perfetto) of the ops");
  run->add_flag("--sequential", run_options.sequential, "run the ops one at a time in dependency order");
  add_ranks(run, run_options.ranks, "run the plan",
            "Every rank checks the outputs; only rank 0 prints them and writes --out, npy outputs and --profile.");
  run->add_flag("--all-ranks", run_options.all_ranks, "print every rank's output, each line prefixed \"[rank K] \"");
  run->add_option("--timeout", run_options.timeout_s,
                  "seconds the whole run may take; past them the CPU kernels still running are stopped and the run "
                  "fails with status 124 (what cannot be stopped within a second, such as a kernel in a system "
                  "call, is named and svod exits with 124)")
      ->check(svod::cli::positive_seconds());
  run->add_option("--check", run_options.check,
                  "checked mode (as SVOD_CHECK): memory (the default when no value is given: guard pages around "
                  "every buffer, so a kernel's first access past either end faults naming the buffer and element), "
                  "nan (ops one at a time; the first op whose outputs hold NaN or Inf fails, naming it) or all")
      ->expected(0, 1);
  run->add_flag("--isolate", run_options.isolate,
                "run the plan in a child process and report how it ended and in which op: a signal (exit 128 + N), "
                "an exit the process could not catch, such as a kernel's own exit_group system call (70, never a "
                "silent 0), a timeout (124)");
  run->add_flag("--sandbox", run_options.sandbox,
                "run the plan's CPU kernels in svod's sandbox: a helper process with no files, no network, no other "
                "processes and bounded memory, which sees only the plan's buffers (docs/SECURITY.md). Precompiled "
                "CPU kernels, copies and views only; refused, naming what is missing, where the sandbox is "
                "unavailable. --timeout is each execution's wall-clock limit (default 60 s)");
  run->add_option("--on-cpu-mismatch", run_options.on_cpu_mismatch,
                  "what a package whose CPU objects this CPU cannot run (they need features it lacks) does: "
                  "recompile (the default: its programs are compiled from the package's sources, which needs clang) "
                  "or refuse (fail naming the features this CPU lacks, compiling nothing)");

  svod::cli::PackOptions pack_options;
  auto* pack = app.add_subcommand("pack", "compile a plan file once and write it as one package (.svodpkg)");
  add_plan(pack, pack_options.plan, pack_options.vars, pack_options.cpu_compiler);
  // --keygen packs nothing, so pack() asks for the plan and -o instead of the parser.
  auto* pack_plan_arg = pack->get_option("plan")->required(false);
  auto* pack_out = pack->add_option("-o,--out", pack_options.out, "the package file to write (required)");
  auto* pack_sign = pack->add_option("--sign", pack_options.sign,
                                     "sign the package with this secret key file (NAME.key; docs/SECURITY.md)");
  auto* pack_ranks = add_ranks(pack, pack_options.ranks, "load the plan while packing",
                              "For a plan whose collectives' sizes or roots fit N ranks and not one. Rank 0 writes the "
                              "package, which holds nothing rank-specific.");
  auto* pack_target = pack->add_option(
      "--target-cpu", pack_options.target_cpu,
      "build the CPU objects for this CPU instead of this machine's (-march=native): a family such as x86-64-v3 or "
      "x86-64-v2, or a CPU as clang's -march names it (znver4, sapphirerapids); a machine lacking its features "
      "recompiles from the packaged sources or refuses (svod run --on-cpu-mismatch)");
  auto* pack_sources = pack->add_flag(
      "--sources-only", pack_options.sources_only,
      "pack no compiled program, only sources: the package compiles when it loads (through the object cache), "
      "on any CPU");
  pack_target->excludes(pack_sources);
  pack->add_option("--keygen", pack_options.keygen,
                   "write a new signing key pair, NAME.key (secret, mode 0600) and NAME.pub, instead of packing")
      ->excludes(pack_plan_arg)
      ->excludes(pack_out)
      ->excludes(pack_sign)
      ->excludes(pack_ranks)
      ->excludes(pack_target)
      ->excludes(pack_sources);
  auto* pack_variants = pack->add_flag(
      "--variants", pack_options.variants,
      "pack each kernel as the variant (recipe) measured fastest for it here, exact recipes only unless "
      "--tolerance is given; the choices are cached (docs/TUNE_FORMAT.md, \"Variants\")");
  pack->add_option("--tolerance", pack_options.tolerance,
                   "ATOL,RTOL: with --variants, inexact recipes too, kept only where every output element stays "
                   "within ATOL + RTOL * |exact| (NaN and infinities exactly)")
      ->needs(pack_variants);

  svod::cli::BenchOptions bench_options;
  auto* bench = app.add_subcommand("bench", "time every op of a plan file alone: time, GFLOP/s, GB/s, share");
  add_plan(bench, bench_options.plan, bench_options.vars, bench_options.cpu_compiler);
  bench->add_option("--warmup", bench_options.warmup, "untimed runs per op first (default 1)")->check(svod::cli::at_least(0));
  bench->add_option("--runs", bench_options.runs, "timed runs per op at least (default 10)")->check(svod::cli::at_least(1));
  bench->add_option("--max-runs", bench_options.max_runs, "timed runs per op at most (default 1000)")->check(svod::cli::at_least(1));
  bench->add_option("--min-time-ms", bench_options.min_time_ms, "keep timing an op until its runs add up to this (default 10)")
      ->check(svod::cli::at_least(0));
  bench->add_flag("--flush", bench_options.flush, "write 16 MiB between timed runs to evict the caches");
  bench->add_option("--json", bench_options.json, "write every op's samples and statistics as JSON");
  bench->add_option("--profile", bench_options.profile, "write a Chrome trace (chrome://tracing, Perfetto) of every call");
  bench->add_option("--plot", bench_options.plot, "draw a roofline of this CPU with every op (SVG)");
  add_ranks(bench, bench_options.ranks, "time the plan",
            "Every rank times every op, collectives exactly --warmup + --runs times on every rank; only rank 0 "
            "prints its table and writes --json, --profile and --plot.");
  bench->add_flag("--all-ranks", bench_options.all_ranks, "print every rank's table, each line prefixed \"[rank K] \"");
  bench->add_flag("--sandbox", bench_options.sandbox,
                  "time the plan's executions in svod's sandbox, as `svod run --sandbox` runs it: the plan as a whole "
                  "(the sandbox's helper runs it in one piece), one round trip to the helper per run; not with --plot, "
                  "--profile or --ranks");

  svod::cli::CompileOptions compile_options;
  auto* compile = app.add_subcommand("compile", "compile one kernel source and print its diagnostics (warnings too), "
                                                "the parameters read from its signature, its object's size and the "
                                                "compile time");
  compile->add_option("file", compile_options.source_file, "the kernel's source file")->required();
  compile->add_option("--entry", compile_options.entry, "the entry function (default: the file's name without its "
                                                        "extension)");
  compile->add_option("--language", compile_options.language,
                      "c, llvm, opencl or cuda (default: from the file's extension: .ll llvm, .cl opencl, .cu cuda, "
                      "else c)");
  compile->add_option("--device", compile_options.device, "the device to compile for and load on (default CPU)");
  compile->add_option("--cpu-compiler", compile_options.cpu_compiler.value,
                      "the CPU compiler: clang, llvm or dlopen (default: SVOD_CPU_COMPILER, else llvm when its "
                      "library loads, else clang)");
  compile->add_option("-D,--define", compile_options.defines, "NAME=VALUE, or NAME for NAME=1: a macro (repeatable)")
      ->type_size(1)
      ->allow_extra_args(false);

  svod::cli::TuneOptions tune_options;
  auto* tune = app.add_subcommand("tune", "beam-search the parameters of one op of a plan file (a tune file)");
  tune->add_option("tune_file", tune_options.tune_file, "the tune file (JSON), or with --variants a plan file")
      ->required();
  auto* tune_variants =
      tune->add_flag("--variants", tune_options.variants,
                     "choose every kernel's variant of a plan file instead: each recipe of the compiler compiled, "
                     "checked against the default and timed on copies of its buffers, the default kept unless one "
                     "is 5% faster in most rounds; the choices are cached (docs/TUNE_FORMAT.md, \"Variants\")");
  tune->add_option("--tolerance", tune_options.tolerance,
                   "ATOL,RTOL: with --variants, inexact recipes too, kept only where every output element stays "
                   "within ATOL + RTOL * |exact| (NaN and infinities exactly)")
      ->needs(tune_variants);
  tune->add_option("--var", tune_options.vars, "NAME=VALUE: with --variants, a plan variable's value (repeatable)")
      ->needs(tune_variants);
  tune->add_option("--json", tune_options.json, "write every candidate with its status and times as JSON");
  tune->add_option("--plot", tune_options.plot, "draw every candidate's time by round, best path highlighted (SVG)");
  add_cpu_compiler(tune, tune_options.cpu_compiler);
  tune->add_flag("--sandbox", tune_options.sandbox,
                 "run every kernel of the search in svod's sandbox, its sources compiled confined, each candidate "
                 "in a helper of its own (times include a round trip to it); refused with --variants and where "
                 "the sandbox cannot be had (docs/SECURITY.md)");

  auto* sandbox_info = app.add_subcommand("sandbox-info", "whether `svod run --sandbox` works here, and with which "
                                                         "layers of confinement (docs/SECURITY.md)");

  auto* cache = app.add_subcommand("cache", "inspect or empty the on-disk object cache");
  cache->require_subcommand(1);
  auto* cache_stats = cache->add_subcommand("stats", "print the cache directory, entry count and size");
  auto* cache_clear = cache->add_subcommand("clear", "remove every cached object");

  // After the commands, which would inherit it.
  app.footer("Run `svod help COMMAND` (or `svod COMMAND --help`) for a command's options.");

  // The tuner starts its workers as `svod tune --worker` (svod/tune/tuner.h):
  // a fixed command line of svod's own, answered before the parser, which
  // asks every user's `svod tune` for its tune file.
  if (argc == 3 && std::string_view(argv[1]) == "tune" && std::string_view(argv[2]) == "--worker")
    return svod::cli::tune_worker();
  if (const auto status = svod::cli::parse_command_line(app, argc, argv)) return *status;
  try {
    if (info->parsed()) return svod::cli::info(info_package);
    if (demo->parsed()) return svod::cli::demo();
    if (sandbox_info->parsed()) return svod::cli::sandbox_info();
    if (cache_stats->parsed()) return svod::cli::cache_stats();
    if (cache_clear->parsed()) return svod::cli::cache_clear();
    if (run->parsed()) {
      if (run->count("--check") > 0 && run_options.check.empty()) run_options.check = "memory";
      return svod::cli::run(run_options);
    }
    if (pack->parsed()) return svod::cli::pack(pack_options);
    if (bench->parsed()) return svod::cli::bench(bench_options);
    if (compile->parsed()) return svod::cli::compile(compile_options);
    if (tune->parsed()) return tune_options.variants ? svod::cli::tune_variants(tune_options) : svod::cli::tune(tune_options);
  } catch (const svod::Error& e) {
    fmt::print(stderr, "svod: error ({}): {}\n", svod::to_string(e.kind()), e.what());
    return svod::cli::kExitFailed;
  }
  return 0;
}
