// Subcommands of the svod tool; each returns the process exit status.
#pragma once

#include <string>
#include <vector>

namespace svod::cli {

int info();
// `svod info PACKAGE`: what the package holds (inputs, outputs, variables,
// kernels, data by role, the CPU of its objects, who made and signed it).
int info(const std::string& package);
int demo();
int cache_stats();  // `svod cache stats`: the object cache's directory, entries, bytes
int cache_clear();  // `svod cache clear`: removes every entry

// --cpu-compiler: clang, llvm or dlopen, the compiler of a plan's CPU
// devices; --backend, its old name, is still taken. Both empty:
// SVOD_CPU_COMPILER or the default.
struct CpuCompilerOption {
  std::string value;      // --cpu-compiler
  std::string old_value;  // --backend
};

// `svod run PLAN.json …` (format: docs/PLAN_FORMAT.md), or a package made by
// `svod pack` (format: docs/PACKAGE_FORMAT.md; same flags): exit 0 when the plan ran
// and every expectation held, 1 when an expectation failed, 2 when the plan
// could not be loaded or run. With several ranks every rank loads, runs and
// checks the plan; only rank 0 writes files; the status is the worst rank's.
struct RunOptions {
  std::string plan;
  std::vector<std::string> vars;  // NAME=VALUE
  int repeat = 1;
  std::string out_dir;
  // NAME=@FILE.npy: buffer NAME's first values from FILE (relative to the
  // working folder), instead of its init in the plan; a variable dimension
  // of its shape sets the variable (LoadOptions::inputs).
  std::vector<std::string> inputs;
  // Judge the outputs' stored expectations even with --input (which makes
  // other outputs than the ones they expect).
  bool expect = false;
  // NAME=FILE.npy: buffer NAME after the first execution written to FILE.
  std::vector<std::string> outputs;
  std::string profile;  // Chrome trace output
  CpuCompilerOption cpu_compiler;
  bool sequential = false;
  // Local ranks to run the plan on as threads of this process (0: one plain
  // run). Under an MPI launcher the process is one rank of the job instead.
  int ranks = 0;
  bool all_ranks = false;  // print every rank's output, prefixed "[rank k] ", not only rank 0's
  // Seconds the whole run may take (0: no limit); past it the running CPU
  // kernels are stopped and the run fails with 124, or, when what runs cannot
  // be stopped, the running ops are named and the process exits with 124.
  double timeout_s = 0;
  // Checked mode (svod/guard/checked_mode.h): "memory", "nan", "all"; empty: SVOD_CHECK.
  std::string check;
  // Run the plan in a child process and report how it ended (exit 128 + N
  // for signal N, 70 for a kernel that ended the process).
  bool isolate = false;
  // Run the plan's kernels in svod's sandbox (svod/sandbox/sandbox.h): a
  // locked-down helper process; refused, naming what is missing, where the
  // sandbox is unavailable. --timeout is then each execution's wall-clock limit.
  bool sandbox = false;
  // A package's CPU objects this CPU cannot run: "recompile" (from the
  // package's sources) or "refuse" (PackageLoadOptions::on_cpu_mismatch).
  std::string on_cpu_mismatch = "recompile";
};
int run(const RunOptions& options);

// `svod sandbox-info`: whether sandboxed runs work here and with which layers
// of confinement (exit 0), or what is missing (exit 2).
int sandbox_info();

// `svod pack PLAN.json -o MODEL.svodpkg [--sign NAME.key]`, or `svod pack
// --keygen NAME` (docs/SECURITY.md): exit 0 when the package or the key pair
// was written, 2 when the plan, the key or a file could not be read or written.
// A package holds nothing that depends on the rank or the number of ranks, so
// several ranks are only needed for a plan whose collectives' sizes or roots
// fit some numbers of ranks and not one: every rank loads the plan (which
// checks it for that many ranks) and rank 0 writes the package.
struct PackOptions {
  std::string plan;
  std::string out;
  std::vector<std::string> vars;   // NAME=VALUE, the package's defaults
  CpuCompilerOption cpu_compiler;  // as for run
  std::string sign;                // secret key file to sign the package with
  std::string keygen;              // write NAME.key and NAME.pub instead of packing
  int ranks = 0;                   // as for run
  std::string target_cpu;          // build the CPU objects for this CPU (svod::PackOptions::target_cpu)
  bool sources_only = false;       // pack no compiled program (svod::PackOptions::sources_only)
  bool variants = false;           // choose the kernels' variants before packing
  std::string tolerance;           // as for tune --variants
};
int pack(const PackOptions& options);

// `svod bench PLAN.json …`: runs the plan once, then times each op alone and
// prints time, GFLOP/s, GB/s and share per op. Exit 0, or 2 when the plan
// could not be loaded or run. With several ranks every rank times every op;
// only rank 0 writes files; the status is the worst rank's.
struct BenchOptions {
  std::string plan;
  std::vector<std::string> vars;  // NAME=VALUE
  int warmup = 1;
  int runs = 10;        // timed runs at least
  int max_runs = 1000;  // timed runs at most, while min_time_ms is not reached
  int min_time_ms = 10;
  bool flush = false;   // write 16 MiB between runs to evict the caches
  CpuCompilerOption cpu_compiler;
  std::string json;     // every sample, for scripts
  std::string profile;  // Chrome trace of every timed call
  std::string plot;     // roofline SVG
  int ranks = 0;        // as for run
  bool all_ranks = false;
  // Time the plan's execution in svod's sandbox as a whole (its helper runs
  // the plan in one piece, so ops are not timed alone).
  bool sandbox = false;
};
int bench(const BenchOptions& options);

// `svod compile FILE …`: compiles one kernel source (no cache asked) and
// loads it, printing the parameters read from a C entry's signature, the
// object's kind and size, the compile time and the compiler's diagnostics,
// warnings included. Exit 0, or 2 when the source does not compile or load
// (the compiler's message on stderr).
struct CompileOptions {
  std::string source_file;
  std::string entry;     // empty: the file's name without its extension
  std::string language;  // empty: from the extension (.ll llvm, .cl opencl, .cu cuda), else c
  std::string device = "CPU";
  CpuCompilerOption cpu_compiler;    // --cpu-compiler only: a new command has no old name to keep
  std::vector<std::string> defines;  // NAME=VALUE, or NAME for NAME=1
};
int compile(const CompileOptions& options);

// `svod tune TUNE.json …` (svod/tune/tune_file.h): exit 0 when the search
// ran, 2 when the tune file or plan is bad or the start candidate fails.
// With --variants the file is a plan file, whose kernels' variants are
// chosen (tune_variants, variants.cpp).
struct TuneOptions {
  std::string tune_file;
  std::string json;     // write every candidate here
  std::string plot;     // draw the candidates' times by round here (SVG)
  CpuCompilerOption cpu_compiler;  // as for run
  bool variants = false;
  std::string tolerance;           // ATOL,RTOL: inexact recipes within it; empty: exact only
  std::vector<std::string> vars;   // NAME=VALUE, with --variants
  bool sandbox = false;            // svod::TuneOptions::sandbox; refused with --variants
};
int tune(const TuneOptions& options);
// `svod tune --variants PLAN.json`: every kernel's variant chosen
// (svod/tune/variants.h) and a table of the choices; exit 0, or 2 when the
// plan does not load or run.
int tune_variants(const TuneOptions& options);
// `svod tune --worker`: one job of the tuner's worker protocol on stdin.
int tune_worker();

}  // namespace svod::cli
