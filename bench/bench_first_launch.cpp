// A process's first parallel (core_id) launch against its second and a warm
// one, each process fresh (issue 36, item 1), and what opening the CPU device
// costs a process that never launches.
//
//     build/release/bench/bench_first_launch [processes=15]
//
// The program runs itself as children, one kind after another in each round:
//   launch  opens the CPU device, compiles (from the object cache, filled by
//           one unrecorded child first) an empty kernel of 16 core_id slices,
//           times its first launch, its second, and the median of 200 more;
//   launch-late   the same, waiting 20 ms between opening and compiling (a
//           program's own work before its first kernel);
//   open    opens the CPU device and returns from main (the library joins the
//           pool's workers at exit, as in a Python process);
//   open, no join   the same after skip_pool_join_at_exit(), as the CLI exits;
//   none    returns from main at once (the process floor).
// Each child's wall time is measured here from spawn to reap, its CPU time
// (user + system, every thread) from wait4. Prints medians; the open kinds
// also give how long cpu_device() took and the process's thread count at the
// end of main. SVOD_CACHE_DIR is used when set, else a temporary folder.
// Not a Google Benchmark: it has its own main (bench/CMakeLists.txt).
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/env.h"
#include "svod/base/thread_pool.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// launch-late: how long the child waits between opening the device and
// compiling, as a program does its own work before its first kernel.
constexpr int kLatePauseMs = 20;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The process's thread count, from /proc/self/status.
int threads_now() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// --- children: print one line of figures on stdout ---

int child_launch(int pause_ms) {
  auto start = Clock::now();
  auto cpu = svod::cpu_device();
  const double open_us = us_since(start);
  if (pause_ms > 0) ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
  svod::ProgramSpec spec;
  spec.entry = "slice";
  spec.source = "void slice(float* restrict a, int core_id) {}";
  spec.buffers = {{"a", svod::Access::Write}};
  spec.scalars = {{"core_id", svod::ScalarType::I32}};
  spec.global_size[0] = svod::Expr::constant(16);
  start = Clock::now();
  auto program = cpu->compile(spec);
  svod::Buffer a = cpu->allocate(svod::DType::F32, 1);
  svod::Buffer buffers[] = {a};
  const double compile_us = us_since(start);
  start = Clock::now();
  program->launch(buffers, {});
  const double first_us = us_since(start);
  start = Clock::now();
  program->launch(buffers, {});
  const double second_us = us_since(start);
  std::vector<double> warm;
  for (int i = 0; i < 200; ++i) {
    start = Clock::now();
    program->launch(buffers, {});
    warm.push_back(us_since(start));
  }
  std::printf("open_us=%.1f compile_us=%.1f first_us=%.1f second_us=%.1f warm_us=%.2f threads=%d\n", open_us,
              compile_us, first_us, second_us, median(warm), threads_now());
  return 0;
}

int child_open(bool skip_join) {
  const auto start = Clock::now();
  auto cpu = svod::cpu_device();
  const double open_us = us_since(start);
  std::printf("open_us=%.1f threads=%d\n", open_us, threads_now());
  std::fflush(stdout);
  if (skip_join) svod::skip_pool_join_at_exit();
  return 0;
}

// --- the parent ---

std::string fmt_pause() { return "compiled " + std::to_string(kLatePauseMs) + " ms after the device opened"; }

// The object cache made for this run, if it made one: removed on every way out.
std::filesystem::path temporary_cache;

// The children's environment: this process's, with SVOD_CACHE_DIR naming the
// temporary cache when this run made one.
std::vector<std::string> child_environment;

struct ChildRun {
  double wall_us = 0, cpu_us = 0;
  std::map<std::string, double> figures;  // what the child printed
};

ChildRun run_child(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {"/proc/self/exe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& s : child_environment) envp.push_back(s.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe(out) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  pid_t pid = 0;
  const auto start = Clock::now();
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data()) != 0) std::abort();
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
  }
  ChildRun r;
  r.wall_us = us_since(start);
  r.cpu_us = 1e6 * (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
             (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_first_launch: child %s failed (status %d)\n", args[1].c_str(), status);
    if (!temporary_cache.empty()) std::filesystem::remove_all(temporary_cache);
    std::exit(1);
  }
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find_first_of(" \n", at), text.size());
    const std::string field = text.substr(at, end - at);
    if (const size_t eq = field.find('='); eq != std::string::npos)
      r.figures[field.substr(0, eq)] = std::atof(field.c_str() + eq + 1);
    at = end + 1;
  }
  return r;
}

int parent(int processes) {
  const bool cache_named = svod::env_string(svod::EnvVar::CacheDir).has_value();
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (cache_named || std::strncmp(*entry, "SVOD_CACHE_DIR=", 15) != 0) child_environment.emplace_back(*entry);
  if (!cache_named) {
    char name[] = "/tmp/svod_first_launch_XXXXXX";
    if (::mkdtemp(name) == nullptr) std::abort();
    temporary_cache = name;
    child_environment.push_back(std::string("SVOD_CACHE_DIR=") + name);
  }
  (void)run_child({"--child", "launch"});  // fills the object cache
  struct Kind {
    const char* label;
    std::vector<std::string> args;
    std::vector<ChildRun> runs;
  };
  std::vector<Kind> kinds = {{"launch", {"--child", "launch"}, {}},
                             {"launch-late", {"--child", "launch-late"}, {}},
                             {"open", {"--child", "open"}, {}},
                             {"open, no join", {"--child", "open-skip-join"}, {}},
                             {"none", {"--child", "none"}, {}}};
  for (int round = 0; round < processes; ++round)
    for (Kind& k : kinds) k.runs.push_back(run_child(k.args));
  auto med = [](const Kind& k, auto&& get) {
    std::vector<double> v;
    for (const ChildRun& r : k.runs) v.push_back(get(r));
    return median(v);
  };
  auto figure = [&](const Kind& k, const char* name) {
    return med(k, [&](const ChildRun& r) {
      auto it = r.figures.find(name);
      return it == r.figures.end() ? 0.0 : it->second;
    });
  };
  const auto threads = svod::env_value(svod::EnvVar::Threads);
  std::printf("%d fresh processes per kind, medians; pool threads: %d (SVOD_THREADS=%s)\n", processes,
              svod::thread_count(), threads ? threads->text.c_str() : "unset");
  for (int i = 0; i < 2; ++i) {
    const Kind& launch = kinds[i];
    std::printf("%s: core_id launch, 16 slices: first %.1f us, second %.1f us, warm %.2f us; "
                "first minus warm %.1f us\n",
                i == 0 ? "compiled right after the device opened"
                       : fmt_pause().c_str(),
                figure(launch, "first_us"), figure(launch, "second_us"), figure(launch, "warm_us"),
                med(launch, [](const ChildRun& r) { return r.figures.at("first_us") - r.figures.at("warm_us"); }));
    std::printf("  before it: cpu_device() %.1f us, compile (cached) %.1f us; threads at the end %.0f\n",
                figure(launch, "open_us"), figure(launch, "compile_us"), figure(launch, "threads"));
  }
  for (const Kind& k : kinds) {
    std::printf("%-14s process %8.1f us wall, %8.1f us CPU", k.label, med(k, [](auto& r) { return r.wall_us; }),
                med(k, [](auto& r) { return r.cpu_us; }));
    if (std::string(k.label).rfind("open", 0) == 0)
      std::printf("; cpu_device() %.1f us, threads at the end of main %.0f", figure(k, "open_us"),
                  figure(k, "threads"));
    std::printf("\n");
  }
  if (!temporary_cache.empty()) std::filesystem::remove_all(temporary_cache);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) {
    const std::string kind = argv[2];
    if (kind == "launch") return child_launch(0);
    if (kind == "launch-late") return child_launch(kLatePauseMs);
    if (kind == "open") return child_open(false);
    if (kind == "open-skip-join") return child_open(true);
    return 0;  // none
  }
  const int processes = argc > 1 ? std::atoi(argv[1]) : 15;
  return parent(processes > 0 ? processes : 15);
}
