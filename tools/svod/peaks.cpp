// The roofs of `svod bench --plot`: what this CPU can do at best, measured
// by kernels at least as good as any op a user runs, or the op lands above
// the roof (issue 26: a four-chain multiply-add peak sat below the MLP's own
// matmul).
//
// Every kernel is C compiled by svod itself (-march=native, so with the
// vector instructions and FMA contraction a plan's kernels get) and run as
// one core_id slice per thread of the pool; each figure is the best of a few
// runs, since a busy machine only ever makes a run slower.
//
// - Compute: independent chains of acc = acc * m + a in explicit vectors of
//   the widest width the CPU has. An FMA has a latency of about 4 cycles and
//   current cores issue two a cycle, so at least 8 chains must be in flight
//   to keep both units busy; 12 use 12 of the 16 AVX2 registers, 16 where
//   there are 32 (AVX-512, NEON). Fewer chains measure the latency instead.
// - Bandwidth: a sum reading an array (CHAINS sums in flight, for the same
//   reason) and a triad a = b + s * c, each thread streaming its own part.
//   An op's bytes count what it reads and writes once, like these, so the
//   better of the two is the roof: a read-mostly op (a matmul, a reduction)
//   can beat the triad, whose stores also cost a read of the line they
//   write, while in L1 a core can load and store in one cycle, so there the
//   triad moves more. Measured twice: over a few KiB a thread read again and
//   again (the L1 cache), and over memory four times the last-level cache
//   (DRAM; memory_arrays() below: a large L3 of hundreds of MiB holds any
//   fixed size one would pick, and then the "DRAM" roof is a cache's). The
//   read streams all of it, the triad three thirds of it. Where the memory
//   available cannot hold twice the last-level cache, the arrays stay small
//   and the roof is called a cache roof. `svod bench` runs each op many
//   times, so a small op's data stays in cache between runs and beats the
//   DRAM roof; only the L1 roof bounds every op.
//
// The figures are kept in the object cache's folder as machine.json, keyed by
// the CPU model, thread count and method below, so they are measured once per
// machine and again whenever the way of measuring changes.
#include "tools/svod/peaks.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "svod/base/cpu_features.h"
#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/file_write.h"
#include "svod/base/json_depth.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/object_cache.h"
#include "svod/registry/registry.h"

namespace svod::cli {
namespace {

namespace fs = std::filesystem;

// Bumped whenever the kernels or their accounting change, so that peaks
// cached the old way are measured again.
// 3: DRAM arrays sized from the last-level cache (were 64 MiB, inside a large L3).
constexpr int kMethodVersion = 3;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// The compute kernel's vectors on this CPU.
struct VectorShape {
  std::string_view isa;
  int lanes;   // floats per vector
  int chains;  // independent accumulators
};

VectorShape vector_shape() {
  auto has = [](std::string_view name) {
    for (const KnownCpuFeature& f : known_cpu_features())
      if (f.name == name) return f.present;
    return false;
  };
  if (has("avx512f")) return {"AVX-512", 16, 16};
  if (has("avx2") && has("fma")) return {"AVX2+FMA", 8, 12};
  if (host_arch() == "aarch64") return {"NEON", 4, 16};
  return {"SSE", 4, 12};
}

// Best wall time of `runs` launches, in seconds.
double best_seconds(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                    int runs) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    program.launch(buffers, scalars);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Every kernel starts with this: the vector type and the sum of the chains
// (kept live, so the compiler cannot drop the work).
constexpr std::string_view kVectorPrelude = R"(
typedef float vec __attribute__((vector_size(LANES * 4)));
static inline float sum_chains(const vec* acc) {
  vec sum = (vec){};
  for (int k = 0; k < CHAINS; k++) sum += acc[k];
  float s = 0;
  for (int l = 0; l < LANES; l++) s += sum[l];
  return s;
}
)";

// A kernel of `slices` core_id slices; `buffers` and `scalars` are its
// parameters before core_id.
std::shared_ptr<const Program> compile_kernel(Device& cpu, std::string_view entry, std::string_view source,
                                              std::vector<BufferParam> buffers, std::vector<ScalarParam> scalars,
                                              const VectorShape& shape, int64_t slices) {
  ProgramSpec spec;
  spec.name = spec.entry = entry;
  spec.source = std::string(kVectorPrelude) + std::string(source);
  spec.buffers = std::move(buffers);
  spec.scalars = std::move(scalars);
  spec.scalars.push_back({std::string(kCoreIdName), ScalarType::I32});
  spec.defines = {{"LANES", std::to_string(shape.lanes)}, {"CHAINS", std::to_string(shape.chains)}};
  spec.global_size[0] = Expr::constant(slices);
  return cpu.compile(spec);
}

constexpr std::string_view kFlopsSource = R"(
void svod_peak_flops(float* out, long iters, int core_id) {
  const vec m = (vec){} + 0.999999f, a = (vec){} + 0.5f;
  vec acc[CHAINS];
  for (int k = 0; k < CHAINS; k++) acc[k] = (vec){} + (float)(k + core_id);
  for (long i = 0; i < iters; i++)
    for (int k = 0; k < CHAINS; k++) acc[k] = acc[k] * m + a;
  out[core_id] = sum_chains(acc);
}
)";

// n is a multiple of slices * CHAINS * LANES, so every part is whole
// groups of vectors; reps > 1 reads the same part again (from cache).
constexpr std::string_view kReadSource = R"(
void svod_peak_read(float* out, const float* b, long n, long reps, int slices, int core_id) {
  const long part = n / slices / LANES;
  const vec* p = (const vec*)b + part * core_id;
  vec acc[CHAINS];
  for (int k = 0; k < CHAINS; k++) acc[k] = (vec){};
  for (long r = 0; r < reps; r++)
    for (long i = 0; i < part; i += CHAINS)
      for (int k = 0; k < CHAINS; k++) acc[k] += p[i + k];
  out[core_id] = sum_chains(acc);
}
)";

constexpr std::string_view kTriadSource = R"(
void svod_peak_triad(float* restrict a, const float* restrict b, const float* restrict c, long n, long reps,
                     int slices, int core_id) {
  const long begin = n * core_id / slices, end = n * (core_id + 1) / slices;
  for (long r = 0; r < reps; r++)
    for (long i = begin; i < end; i++) a[i] = b[i] + 3.0f * c[i];
}
)";

// Floats per array and thread for the cache roof: three arrays of about
// 2 KiB fit any L1 data cache (32 KiB and up on x86-64, shared by two
// hyperthreads), with room for the stack. Rounded up to whole groups of
// CHAINS vectors, as the read kernel takes them.
int64_t cache_floats(const VectorShape& shape) {
  const int64_t group = int64_t{shape.chains} * shape.lanes;
  return (512 + group - 1) / group * group;
}
// Milliseconds of reading them even at hundreds of GB/s, so that the
// fan-out's cost is lost in the time.
constexpr int64_t kCacheReps = int64_t{1} << 18;
// The last-level cache: its size in bytes (0 when nothing says), its level
// and where that came from.
struct LastLevelCache {
  uint64_t bytes = 0;
  int level = 0;
  std::string source;
};

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// SVOD_LLC_SIZE (for a machine whose system misreports its caches, as
// virtual machines can), else sysfs: the highest level of data or unified
// cache of any CPU, each distinct instance counted once (one L3 per chiplet
// adds up, and every thread of the pool streams), else sysconf.
LastLevelCache last_level_cache() {
  if (const auto requested = env_bytes(EnvVar::LlcSize)) return {*requested, 0, "SVOD_LLC_SIZE"};
  LastLevelCache llc;
  std::set<std::string> seen;  // level and shared_cpu_list of each instance counted
  std::error_code ec;
  for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.size() < 4 || name.rfind("cpu", 0) != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    std::error_code inner;
    for (const auto& index : fs::directory_iterator(cpu.path() / "cache", inner)) {
      if (index.path().filename().string().rfind("index", 0) != 0) continue;
      if (read_line(index.path() / "type") == "Instruction") continue;
      const int level = std::atoi(read_line(index.path() / "level").c_str());
      const uint64_t bytes = parse_byte_size(read_line(index.path() / "size")).value_or(0);
      if (level <= 0 || bytes == 0 || level < llc.level) continue;
      if (level > llc.level) {
        llc = {0, level, "sysfs"};
        seen.clear();
      }
      if (seen.insert(read_line(index.path() / "shared_cpu_list")).second) llc.bytes += bytes;
    }
  }
  if (llc.bytes > 0) return llc;
  for (const auto [name, level] : {std::pair{_SC_LEVEL3_CACHE_SIZE, 3}, {_SC_LEVEL2_CACHE_SIZE, 2}}) {
    const long bytes = ::sysconf(name);
    if (bytes > 0) return {static_cast<uint64_t>(bytes), level, "sysconf"};
  }
  return {};
}

// Bytes this process can take without making the machine swap:
// MemAvailable, lowered to what its cgroup has left; UINT64_MAX when
// nothing says.
uint64_t available_memory() {
  uint64_t available = UINT64_MAX;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      available = std::strtoull(line.c_str() + 13, nullptr, 10) * 1024;
      break;
    }
  }
  const uint64_t limit = parse_byte_size(read_line("/sys/fs/cgroup/memory.max")).value_or(0);
  const uint64_t used = parse_byte_size(read_line("/sys/fs/cgroup/memory.current")).value_or(0);
  if (limit > 0) available = std::min(available, limit > used ? limit - used : 0);
  return available;
}

// The memory of the DRAM roof: one allocation, read whole and split in three
// for the triad.
struct MemoryArrays {
  uint64_t bytes = 0;
  bool beyond_cache = true;  // false: within reach of the last-level cache
  std::string why;           // for the method line
};

// Today's arrays' 3 x 64 MiB when nothing asks for more (no cache that
// large, or none known).
constexpr uint64_t kMinMemoryBytes = uint64_t{192} << 20;
constexpr uint64_t kCacheMultiple = 4;  // the aim: a cache holds almost nothing of it

std::string mib(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b >= (1 << 30) ? fmt::format("{:.4g} GiB", b / (1 << 30)) : fmt::format("{:.4g} MiB", b / (1 << 20));
}

MemoryArrays memory_arrays(const LastLevelCache& llc, uint64_t available) {
  const std::string cache = llc.bytes == 0 ? std::string()
                                           : fmt::format("the {} {} cache ({})", mib(llc.bytes),
                                                         llc.level > 0 ? fmt::format("L{}", llc.level) : "last-level",
                                                         llc.source);
  if (llc.bytes == 0) return {kMinMemoryBytes, true, "the last-level cache's size unknown: DRAM"};
  // Half of what is available at most, so that measuring never swaps; a
  // power of two, so that the method (and the cached peaks' key) stays put
  // while the free memory moves a little.
  uint64_t room = available / 2;
  if (room > 0) room = uint64_t{1} << (63 - __builtin_clzll(room));
  const uint64_t wanted =
      std::max(kMinMemoryBytes, llc.bytes > UINT64_MAX / kCacheMultiple ? UINT64_MAX : kCacheMultiple * llc.bytes);
  if (wanted <= room)
    return {wanted, true, fmt::format("{:.3g}x {}: DRAM", static_cast<double>(wanted) / llc.bytes, cache)};
  if (room / 2 >= llc.bytes)
    return {room, true,
            fmt::format("{:.3g}x {}, bounded by free memory: DRAM", static_cast<double>(room) / llc.bytes, cache)};
  return {std::min(kMinMemoryBytes, room), false,
          fmt::format("free memory cannot hold twice {}: a cache roof, not DRAM", cache)};
}

std::string roof_name(const LastLevelCache& llc) {
  return llc.level > 0 ? fmt::format("L{} cache", llc.level) : "last-level cache";
}

// The way of measuring below, as the captions and machine.json give it.
MachinePeaks peak_methods(const VectorShape& shape, int threads, const MemoryArrays& memory,
                          const LastLevelCache& llc) {
  MachinePeaks peaks;
  peaks.compute_method =
      fmt::format("f32 FMA, {} {} lanes x {} chains, {} threads", shape.isa, shape.lanes, shape.chains, threads);
  peaks.memory_roof = memory.beyond_cache ? "DRAM" : roof_name(llc);
  peaks.memory_method = fmt::format(
      "best of a read and a triad over {:g} KiB a thread read again and again (L1 cache) and over {} ({}), "
      "{} threads",
      static_cast<double>(3 * cache_floats(shape)) * 4 / 1024, mib(memory.bytes), memory.why, threads);
  return peaks;
}

std::string method_key(const MachinePeaks& peaks) {
  return fmt::format("v{}: {}; {}", kMethodVersion, peaks.compute_method, peaks.memory_method);
}

// Bytes a second of both bandwidth kernels through `count` floats (the read
// over all of them, the triad over three thirds), each read (or written)
// `reps` times. `count` is a multiple of 3 * unit, `unit` floats making whole
// groups of CHAINS vectors for every slice.
double best_gbps(const Program& read, const Program& triad, Device& cpu, int64_t count, int64_t reps,
                 int64_t slices, const Buffer& out, int runs) {
  const Buffer all = cpu.allocate(DType::F32, count);
  const int64_t third = count / 3;
  const Buffer a = all.view(0, third), b = all.view(third, third), c = all.view(2 * third, third);
  std::fill_n(a.span<float>().data(), third, 0.0f);
  std::fill_n(b.span<float>().data(), third, 1.0f);
  std::fill_n(c.span<float>().data(), third, 2.0f);
  const int64_t read_scalars[] = {count, reps, slices};
  const int64_t triad_scalars[] = {third, reps, slices};
  const double bytes = 4.0 * static_cast<double>(count) * static_cast<double>(reps);
  const Buffer read_buffers[] = {out, all};
  const Buffer triad_buffers[] = {a, b, c};
  return std::max(bytes / best_seconds(read, read_buffers, read_scalars, runs),
                  bytes / best_seconds(triad, triad_buffers, triad_scalars, runs)) /
         1e9;
}

void measure_peaks(MachinePeaks& peaks, const VectorShape& shape, const MemoryArrays& memory) {
  auto cpu = open_device("CPU");
  const int64_t slices = thread_count();
  const Buffer out = cpu->allocate(DType::F32, static_cast<size_t>(slices));
  {
    auto program = compile_kernel(*cpu, "svod_peak_flops", kFlopsSource, {{"out", Access::Write}},
                                  {{"iters", ScalarType::I64}}, shape, slices);
    // Tens of milliseconds a run: long enough to outlast the fan-out's cost
    // and a timer tick, short enough for ten runs in a fraction of a second.
    constexpr int64_t kIters = int64_t{1} << 23;
    const Buffer buffers[] = {out};
    const int64_t scalars[] = {kIters};
    const double s = best_seconds(*program, buffers, scalars, 10);
    peaks.gflops = 2.0 * static_cast<double>(slices) * kIters * shape.chains * shape.lanes / s / 1e9;
  }
  const std::vector<ScalarParam> sizes = {
      {"n", ScalarType::I64}, {"reps", ScalarType::I64}, {"slices", ScalarType::I32}};
  auto read = compile_kernel(*cpu, "svod_peak_read", kReadSource, {{"out", Access::Write}, {"b"}}, sizes, shape,
                             slices);
  auto triad = compile_kernel(*cpu, "svod_peak_triad", kTriadSource, {{"a", Access::Write}, {"b"}, {"c"}}, sizes,
                              shape, slices);
  // Every slice gets whole groups of CHAINS vectors, in each third too.
  const int64_t unit = 3 * int64_t{shape.chains} * shape.lanes * slices;
  peaks.cache_gbps = best_gbps(*read, *triad, *cpu, 3 * cache_floats(shape) * slices, kCacheReps, slices, out, 5);
  // Fewer runs over more than 1 GiB: each is a tenth of a second or more.
  const int64_t floats = static_cast<int64_t>(memory.bytes / 4) / unit * unit;
  peaks.dram_gbps =
      best_gbps(*read, *triad, *cpu, std::max(floats, unit), 1, slices, out, memory.bytes > (uint64_t{1} << 30) ? 3 : 5);
}

// The peaks machine.json holds for `machine` measured by `method`, if any.
std::optional<MachinePeaks> cached_peaks(const fs::path& file, const std::string& machine, const std::string& method,
                                         const MachinePeaks& methods) {
  // Best effort: anything but a readable regular file (a FIFO is not even
  // waited on) means measuring again, and so does a file nested deeper than
  // the limit (no file of ours, and it would overflow the stack).
  std::string text;
  if (const RegularFile opened = try_open_regular_file(file); opened.fd) {
    try {
      text = read_to_end(opened.fd, file, "machine peaks");
    } catch (const Error&) {
    }
  }
  const auto cached =
      json_too_deep_at(text) ? nlohmann::json() : nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto is = [&](const char* key, const std::string& expected) {
    return cached.contains(key) && cached.at(key).is_string() && cached.at(key).get<std::string>() == expected;
  };
  if (!cached.is_object() || !is("machine", machine) || !is("method", method)) return std::nullopt;
  MachinePeaks peaks = methods;
  for (auto [key, value] : {std::pair{"gflops", &peaks.gflops}, {"cache_gbps", &peaks.cache_gbps},
                            {"dram_gbps", &peaks.dram_gbps}}) {
    if (!cached.contains(key) || !cached.at(key).is_number()) return std::nullopt;
    *value = cached.at(key).get<double>();
    if (!(*value > 0)) return std::nullopt;
  }
  return peaks;
}

}  // namespace

MachinePeaks machine_peaks(bool measure_again) {
  const VectorShape shape = vector_shape();
  const LastLevelCache llc = last_level_cache();
  const MemoryArrays memory = memory_arrays(llc, available_memory());
  MachinePeaks peaks = peak_methods(shape, thread_count(), memory, llc);
  const std::string machine = fmt::format("{} / {} threads", cpu_model(), thread_count());
  const std::string method = method_key(peaks);
  const fs::path folder = ObjectCacheConfig::from_env().directory;
  const fs::path file = folder.empty() ? fs::path() : folder / "machine.json";
  const std::optional<MachinePeaks> cached =
      file.empty() ? std::nullopt : cached_peaks(file, machine, method, peaks);
  if (cached && !measure_again) return *cached;
  measure_peaks(peaks, shape, memory);
  if (cached) {
    peaks.gflops = std::max(peaks.gflops, cached->gflops);
    peaks.cache_gbps = std::max(peaks.cache_gbps, cached->cache_gbps);
    peaks.dram_gbps = std::max(peaks.dram_gbps, cached->dram_gbps);
  }
  if (!file.empty()) {
    // Best effort, like the object cache: peaks that cannot be saved are
    // measured again next time.
    std::error_code ec;
    fs::create_directories(folder, ec);
    try {
      write_file_atomically(file, nlohmann::json{{"machine", machine},
                                                 {"method", method},
                                                 {"gflops", peaks.gflops},
                                                 {"cache_gbps", peaks.cache_gbps},
                                                 {"dram_gbps", peaks.dram_gbps}}
                                      .dump(1));
    } catch (const Error&) {
    }
  }
  return peaks;
}

}  // namespace svod::cli
