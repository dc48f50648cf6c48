// PlanFile → buffers, programs and an ExecutionPlan; output checks.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numbers>
#include <optional>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/cache_key.h"
#include "svod/device/compile_many.h"
#include "svod/device/host_device.h"
#include "svod/registry/registry.h"
#include "svod/executor/plan_execution.h"
#include "svod/planfile/plan_file.h"

namespace svod {

namespace {

namespace fs = std::filesystem;

// The progress line of a long compile on a terminal (LoadOptions::progress_after):
//   compiling programs: 3/11 done, 4 s: layer4, layer5
// A ticker thread shows it once compiling has lasted `after`, so that even one
// long compile is visibly working, and refreshes it as programs start and end
// and every quarter second; a last line with the time taken ends it (a failed
// compile counts as done: its error follows). Without a terminal there is no
// thread and nothing is written.
class CompileProgress {
 public:
  CompileProgress(size_t total, std::chrono::milliseconds after) : total_(total) {
    if (total == 0 || isatty(STDERR_FILENO) == 0) return;
    if (after <= std::chrono::milliseconds(0)) {  // from the start
      shown_ = true;
      show();
    }
    ticker_ = std::thread([this, after] { tick(after); });
  }
  ~CompileProgress() { finish(); }

  // From any thread: a program's compile began, or ended.
  void started(const std::string& name) {
    const std::lock_guard lock(mutex_);
    compiling_.push_back(name);
    if (shown_) show();
  }
  void done(const std::string& name) {
    const std::lock_guard lock(mutex_);
    ++done_;
    if (auto it = std::find(compiling_.begin(), compiling_.end(), name); it != compiling_.end()) compiling_.erase(it);
    if (shown_) show();
  }

  // Stops the ticker and, if the line was shown, writes the summary.
  void finish() {
    {
      const std::lock_guard lock(mutex_);
      finished_ = true;
    }
    wake_.notify_all();
    if (!ticker_.joinable()) return;
    ticker_.join();
    if (shown_) std::fprintf(stderr, "\rcompiling programs: %zu/%zu done in %.1f s\x1b[K\n", done_, total_, seconds());
  }

 private:
  void tick(std::chrono::milliseconds after) {
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, after, [this] { return finished_; })) return;
    shown_ = true;
    do show();
    while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return finished_; }));
  }

  // Under mutex_.
  void show() {
    std::string now;
    for (const std::string& name : compiling_) now += (now.empty() ? ": " : ", ") + name;
    std::fprintf(stderr, "\rcompiling programs: %zu/%zu done, %.0f s%s\x1b[K", done_, total_, seconds(), now.c_str());
    std::fflush(stderr);
  }

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  const size_t total_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  size_t done_ = 0;
  std::vector<std::string> compiling_;
  bool shown_ = false;
  bool finished_ = false;
  std::thread ticker_;  // last: it starts once every other member is ready
};

// Runs `fn`, moving any svod::Error it raises under the plan file and `path`
// while keeping its kind.
template <typename Fn>
auto at(const PlanFile& file, const std::string& path, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw make_error(e.kind(), "{}: {}: {}", file.source_name, path, e.what());
  } catch (const std::bad_alloc&) {
    throw make_error(ErrorKind::Validation, "{}: {}: out of memory", file.source_name, path);
  }
}

// The plan's devices, opened through the registry once per loaded plan;
// errors name the field that asked for the device.
class Devices {
 public:
  explicit Devices(const PlanFile& file) : file_(file) {}
  Device& get(const std::string& name, const std::string& path) {
    const std::string& wanted = name.empty() ? file_.device : name;
    const std::string& field = name.empty() ? std::string("device") : path;
    if (auto it = open_.find(wanted); it != open_.end()) return *it->second;
    auto device = at(file_, field, [&] { return open_device(wanted); });
    return *open_.emplace(wanted, std::move(device)).first->second;
  }

 private:
  const PlanFile& file_;
  std::map<std::string, std::shared_ptr<Device>, std::less<>> open_;
};

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and every seed, zero
// included, gives a full-period, well-mixed stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  uint64_t state_;
};

void initialise_host(const PlanFile& file, const PlanFileBuffer& desc, const Buffer& buffer) {
  const BufferInit& init = desc.init;
  const size_t size = size_of(desc.dtype);
  auto* out = static_cast<std::byte*>(buffer.data());
  auto each = [&](auto&& value_of) {
    for (size_t i = 0; i < desc.count; ++i) store_from_double(desc.dtype, out + i * size, value_of(i));
  };
  switch (init.kind) {
    case BufferInit::Kind::Zeros: return;  // device memory starts zeroed
    case BufferInit::Kind::Fill: each([&](size_t) { return init.a; }); return;
    case BufferInit::Kind::Arange: each([&](size_t i) { return init.a + init.b * double(i); }); return;
    case BufferInit::Kind::Uniform: {
      SplitMix64 rng(init.seed);
      each([&](size_t) { return init.a + (init.b - init.a) * rng.unit(); });
      return;
    }
    case BufferInit::Kind::Normal: {
      SplitMix64 rng(init.seed);
      each([&](size_t) {
        const double u0 = rng.unit();
        const double u1 = rng.unit();
        return init.a + init.b * std::sqrt(-2.0 * std::log(1.0 - u0)) * std::cos(2.0 * std::numbers::pi * u1);
      });
      return;
    }
    case BufferInit::Kind::Npy: {
      at(file, fmt::format("buffers.{}.init.npy", desc.name), [&] {
        const NpyArray array = read_npy(init.npy);
        const bool bf16_bits = desc.dtype == DType::BF16 && array.dtype == DType::U16;
        const bool bf16_floats = desc.dtype == DType::BF16 && array.dtype == DType::F32;
        if (array.dtype != desc.dtype && !bf16_bits && !bf16_floats) {
          throw make_error(ErrorKind::Validation, "{} holds {} values, the buffer is {}{}", init.npy.string(),
                           to_string(array.dtype), to_string(desc.dtype),
                           desc.dtype == DType::BF16 ? " (bf16 buffers take u16 bit patterns or f32)" : "");
        }
        if (array.count() != desc.count) {
          throw make_error(ErrorKind::Validation, "{} holds {} elements, the buffer has {}", init.npy.string(),
                           array.count(), desc.count);
        }
        if (bf16_floats) {
          each([&](size_t i) { return double(reinterpret_cast<const float*>(array.data.data())[i]); });
        } else {
          std::memcpy(out, array.data.data(), array.data.size());
        }
      });
      return;
    }
  }
}

// Device memory is filled through a host staging buffer.
void initialise(const PlanFile& file, const PlanFileBuffer& desc, const Buffer& buffer) {
  if (desc.init.kind == BufferInit::Kind::Zeros) return;  // every device's memory starts zeroed
  if (buffer.is_host()) {
    initialise_host(file, desc, buffer);
    return;
  }
  const Buffer staging = buffer.device().allocate_host(desc.dtype, desc.count);
  initialise_host(file, desc, staging);
  at(file, "buffers." + desc.name, [&] { buffer.device().copy(buffer, staging); });
}

std::vector<double> expected_values(const PlanFile& file, const PlanFileOutput& out, const PlanFileBuffer& buf) {
  const PlanFileExpect& e = *out.expect;
  if (!e.npy) return e.values;
  return at(file, fmt::format("outputs.{}.expect.npy", out.buffer), [&] {
    const NpyArray array = read_npy(*e.npy);
    const size_t n = array.count();
    if (n > buf.count || (!e.prefix && n != buf.count)) {
      throw make_error(ErrorKind::Validation, "{} holds {} elements, \"{}\" has {}{}", e.npy->string(), n, buf.name,
                       buf.count, e.prefix ? "" : " (add \"prefix\": true to check only the first ones)");
    }
    std::vector<double> values(n);
    const size_t size = size_of(array.dtype);
    for (size_t i = 0; i < n; ++i) values[i] = load_as_double(array.dtype, array.data.data() + i * size);
    return values;
  });
}

std::string op_label(const PlanFileOp& op, size_t index) {
  std::string label = fmt::format("ops[{}]", index);
  if (!op.id.empty()) label += fmt::format(" ({})", op.id);
  switch (op.kind) {
    case PlanFileOp::Kind::Run: return label + " run " + op.target;
    case PlanFileOp::Kind::Copy: return label + fmt::format(" copy {} <- {}", op.buffers[0], op.buffers[1]);
    case PlanFileOp::Kind::Custom: return label + " custom " + op.target;
    case PlanFileOp::Kind::Collective: return label + " collective " + op.target;
  }
  return label;
}

// Checks with the other ranks that they load the same plan: every rank
// gathers every rank's digest, so all find the same ranks differing and
// fail together.
void check_same_plan(const PlanFile& file, const std::map<std::string, int64_t>& vars, Communicator& comm) {
  const Hash128 mine = plan_digest(file, vars);
  const Buffer own = host_device().allocate(DType::U64, 2);
  const Buffer all = host_device().allocate(DType::U64, 2 * static_cast<size_t>(comm.size()));
  static_cast<uint64_t*>(own.data())[0] = mine.low;
  static_cast<uint64_t*>(own.data())[1] = mine.high;
  at(file, "(comparing the plan across ranks)", [&] { comm.all_gather(own, all); });
  const auto* digests = static_cast<const uint64_t*>(all.data());
  std::string differ;
  for (int r = 1; r < comm.size(); ++r) {
    if (digests[2 * r] != digests[0] || digests[2 * r + 1] != digests[1])
      differ += fmt::format("{}{}", differ.empty() ? "" : ", ", r);
  }
  if (!differ.empty()) {
    throw make_error(ErrorKind::Validation,
                     "{}: the ranks load different plans or variable values: rank{} {} differ{} from rank 0 (this is "
                     "rank {} of {})",
                     file.source_name, differ.find(',') == std::string::npos ? "" : "s", differ,
                     differ.find(',') == std::string::npos ? "s" : "", comm.rank(), comm.size());
  }
}

}  // namespace

LoadedPlan load_plan(const PlanFile& file, const LoadOptions& options) {
  Devices devices(file);
  ExecutionPlanBuilder builder;

  for (const auto& [name, value] : options.vars) {
    if (name == kRankVariable || name == kWorldSizeVariable) {
      throw make_error(ErrorKind::Validation,
                       "{}: variables: \"{}\" is read-only: it is set by the launcher (svod run --ranks, mpirun)",
                       file.source_name, name);
    }
    const bool known = std::any_of(file.variables.begin(), file.variables.end(),
                                   [&](const PlanFileVariable& v) { return v.variable.name == name; });
    if (!known) {
      std::string names;
      for (const auto& v : file.variables) names += (names.empty() ? "" : ", ") + v.variable.name;
      throw make_error(ErrorKind::Validation, "{}: variables: no variable named \"{}\" to set (the plan has: {})",
                       file.source_name, name, names.empty() ? "none" : names);
    }
  }
  for (const auto& v : file.variables) {
    auto it = options.vars.find(v.variable.name);
    const int64_t value = it == options.vars.end() ? v.value : it->second;
    at(file, "variables." + v.variable.name, [&] { v.variable.check(value); });
    builder.add_variable(v.variable, value);
  }
  const int rank = options.communicator ? options.communicator->rank() : 0;
  const int world_size = options.communicator ? options.communicator->size() : 1;
  builder.add_variable(Variable{std::string(kRankVariable), rank, rank, true}, rank);
  builder.add_variable(Variable{std::string(kWorldSizeVariable), world_size, world_size, true}, world_size);
  if (options.communicator) {
    builder.set_communicator(options.communicator);
    if (world_size > 1) check_same_plan(file, options.vars, *options.communicator);
  }

  std::map<std::string, size_t, std::less<>> slots;
  std::map<std::string, Buffer, std::less<>> made;  // for validating custom ops before the plan exists
  for (const auto& b : file.buffers) {
    if (b.view_of) continue;
    const std::string path = "buffers." + b.name;
    Device& device = devices.get(b.device, path + ".device");
    Buffer buffer;
    if (options.npy_buffer && b.init.kind == BufferInit::Kind::Npy) {
      buffer = at(file, path + ".init.npy", [&] { return options.npy_buffer(b, device); });
    } else {
      buffer = at(file, path, [&] { return device.allocate(b.dtype, b.count); });
      initialise(file, b, buffer);
    }
    made[b.name] = buffer;
    slots[b.name] = builder.add_buffer(std::move(buffer), b.name);
  }
  for (const auto& b : file.buffers) {
    if (!b.view_of) continue;
    const size_t size = size_of(b.dtype);
    made[b.name] = made.at(*b.view_of).view_bytes(b.offset * size, b.count * size, b.dtype);
    slots[b.name] = at(file, "buffers." + b.name, [&] {
      return builder.add_view(slots.at(*b.view_of), b.offset * size, b.count * size, b.dtype, b.name);
    });
  }

  // Compiling is the slow part, so the programs of each device compile in
  // parallel (compile_many), and the devices' batches in parallel too; errors
  // are reported for the first failing program in file order, so the message
  // does not depend on scheduling.
  std::vector<Device*> program_devices;
  for (const auto& p : file.programs) {
    const std::string path = "programs." + p.name;
    Device& device = devices.get(p.device, path + ".device");
    if (!device.accepts(p.spec.language)) {
      throw make_error(ErrorKind::Unsupported, "{}: {}.language: {} programs cannot run on the {} device",
                       file.source_name, path, to_string(p.spec.language), device.name());
    }
    program_devices.push_back(&device);
  }
  CompileProgress progress(file.programs.size(), options.progress_after);
  std::vector<std::optional<CompileResult>> compiled(file.programs.size());
  if (options.build_program) {
    // The caller brings its programs (a package's objects): each is built alone.
    parallel_for(file.programs.size(), [&](size_t i) {
      progress.started(file.programs[i].name);
      try {
        compiled[i] = options.build_program(file.programs[i], *program_devices[i]);
      } catch (const Error& e) {
        compiled[i] = e;
      }
      progress.done(file.programs[i].name);
    });
  } else {
    std::vector<Device*> batch_devices;
    std::vector<std::vector<size_t>> batches;  // program indices per device
    for (size_t i = 0; i < program_devices.size(); ++i) {
      const auto it = std::find(batch_devices.begin(), batch_devices.end(), program_devices[i]);
      if (it == batch_devices.end()) {
        batch_devices.push_back(program_devices[i]);
        batches.push_back({i});
      } else {
        batches[static_cast<size_t>(it - batch_devices.begin())].push_back(i);
      }
    }
    parallel_for(batches.size(), [&](size_t b) {
      std::vector<ProgramSpec> specs;
      for (const size_t i : batches[b]) specs.push_back(file.programs[i].spec);
      std::vector<CompileResult> results = compile_many(
          *batch_devices[b], specs,
          [&](size_t position) { progress.done(file.programs[batches[b][position]].name); },
          [&](size_t position) { progress.started(file.programs[batches[b][position]].name); });
      for (size_t k = 0; k < results.size(); ++k) compiled[batches[b][k]] = std::move(results[k]);
    });
  }
  progress.finish();
  std::vector<std::shared_ptr<const Program>> programs(file.programs.size());
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (const Error* error = std::get_if<Error>(&*compiled[i])) {
      at(file, "programs." + file.programs[i].name, [&] { throw *error; });
    }
    programs[i] = std::get<std::shared_ptr<const Program>>(*compiled[i]);
  }

  std::vector<std::string> labels;
  for (size_t i = 0; i < file.ops.size(); ++i) {
    const PlanFileOp& op = file.ops[i];
    OpOptions opts;
    opts.id = op.id;
    for (const auto& ref : op.after) {
      if (const auto* id = std::get_if<std::string>(&ref)) opts.after_ids.push_back(*id);
      else opts.after.push_back(std::get<size_t>(ref));
    }
    std::vector<size_t> op_slots;
    for (const auto& name : op.buffers) op_slots.push_back(slots.at(name));
    const std::string path = fmt::format("ops[{}]", i);
    PreparedOp prepared;
    switch (op.kind) {
      case PlanFileOp::Kind::Run: {
        size_t index = 0;
        while (file.programs[index].name != op.target) ++index;
        PreparedKernel kernel;
        kernel.program = programs[index];
        kernel.buffers = std::move(op_slots);
        kernel.scalars = op.scalars;
        prepared = std::move(kernel);
        break;
      }
      case PlanFileOp::Kind::Copy: prepared = PreparedCopy{op_slots[0], op_slots[1]}; break;
      case PlanFileOp::Kind::Collective: {
        PreparedCollective c;
        c.kind = op.collective;
        c.op = op.reduce;
        c.root = op.root;
        using CollectiveKind = PreparedCollective::Kind;
        if (op.collective == CollectiveKind::AllGather || op.collective == CollectiveKind::ReduceScatter) {
          c.src = op_slots[0];
          c.dst = op_slots[1];
        } else {
          c.buffers = std::move(op_slots);
        }
        // build() checks the root and the sizes against world_size; its
        // errors then name the op by its place in the file.
        if (opts.id.empty()) opts.label = path;
        prepared = std::move(c);
        break;
      }
      case PlanFileOp::Kind::Custom: {
        // Validating here as well as in build() puts the op's JSON path on the message.
        at(file, path, [&] {
          auto def = find_custom_function(op.target);
          std::vector<Buffer> args;
          for (const auto& name : op.buffers) args.push_back(made.at(name));
          def->validate(args, op.attrs);
        });
        PreparedCustomFunction call;
        call.name = op.target;
        call.buffers = std::move(op_slots);
        call.attrs = op.attrs;
        prepared = std::move(call);
        break;
      }
    }
    at(file, path, [&] { builder.add_op(std::move(prepared), std::move(opts)); });
    labels.push_back(op_label(op, i));
  }

  std::vector<LoadedOutput> outputs;
  for (const auto& out : file.outputs) {
    const PlanFileBuffer& buf = *file.find_buffer(out.buffer);
    LoadedOutput loaded;
    loaded.name = out.buffer;
    loaded.slot = slots.at(out.buffer);
    if (!made.at(out.buffer).is_host()) {
      throw make_error(ErrorKind::Validation,
                       "{}: outputs.{}: the buffer is in {} memory; copy it into a CPU buffer with a copy op and name "
                       "that buffer here",
                       file.source_name, out.buffer, made.at(out.buffer).device().name());
    }
    loaded.shape = buf.shape;
    loaded.expect = out.expect;
    if (out.expect && out.expect->npy && options.npy_expected) {
      loaded.expected =
          at(file, fmt::format("outputs.{}.expect.npy", out.buffer), [&] { return options.npy_expected(out); });
    } else if (out.expect) {
      loaded.expected = expected_values(file, out, buf);
    }
    builder.add_output(loaded.slot);
    outputs.push_back(std::move(loaded));
  }

  ExecutionPlan plan = at(file, "ops", [&] { return builder.build(); });
  const bool uses_devices = plan_uses_devices(plan);
  return LoadedPlan{std::move(plan), std::move(labels), std::move(outputs), uses_devices};
}

void LoadedPlan::execute(const ExecuteOptions& options) { plan.execute(options); }

Hash128 plan_digest(const PlanFile& file, const std::map<std::string, int64_t>& vars) {
  Hasher h;
  auto path = [&](const fs::path& p) { h.str(p.lexically_relative(file.folder).generic_string()); };
  auto f64 = [&](double v) { h.u64(std::bit_cast<uint64_t>(v)); };
  h.str("svod plan digest 1").str(file.device);
  h.u64(file.variables.size());
  for (const auto& v : file.variables) {
    auto it = vars.find(v.variable.name);
    h.str(v.variable.name).u64(uint64_t(v.variable.min)).u64(uint64_t(v.variable.max));
    h.u64(uint64_t(it == vars.end() ? v.value : it->second));
  }
  h.u64(file.buffers.size());
  for (const auto& b : file.buffers) {
    h.str(b.name).str(to_string(b.dtype)).u64(b.count).u64(b.shape.size());
    for (size_t d : b.shape) h.u64(d);
    h.str(b.device).str(b.view_of.value_or("")).u64(b.view_of ? 1 : 0).u64(b.offset);
    h.u64(uint64_t(b.init.kind)).u64(b.init.seed);
    f64(b.init.a);
    f64(b.init.b);
    if (b.init.kind == BufferInit::Kind::Npy) path(b.init.npy);
  }
  h.u64(file.programs.size());
  for (const auto& p : file.programs) {
    const Hash128 spec = spec_hash(p.spec);
    h.str(p.name).str(p.device).u64(spec.low).u64(spec.high);
  }
  h.u64(file.ops.size());
  for (const auto& op : file.ops) {
    h.u64(uint64_t(op.kind)).str(op.target).str(op.id).u64(op.buffers.size());
    for (const auto& b : op.buffers) h.str(b);
    h.u64(op.scalars.size());
    for (const auto& e : op.scalars) h.str(e.text());
    h.u64(op.attrs.size());
    for (const auto& [key, value] : op.attrs) h.str(key).str(to_string(value));
    h.u64(op.after.size());
    for (const auto& ref : op.after) {
      if (const auto* id = std::get_if<std::string>(&ref)) h.u64(0).str(*id);
      else h.u64(1).u64(std::get<size_t>(ref));
    }
    h.u64(uint64_t(op.collective)).u64(uint64_t(op.reduce)).u64(uint64_t(op.root));
  }
  h.u64(file.outputs.size());
  for (const auto& out : file.outputs) {
    h.str(out.buffer).str(out.npy ? out.npy->generic_string() : "").u64(out.npy ? 1 : 0);
    h.u64(out.expect ? 1 : 0);
    if (!out.expect) continue;
    const PlanFileExpect& e = *out.expect;
    h.u64(e.npy ? 1 : 0).u64(e.prefix ? 1 : 0).u64(e.values.size());
    if (e.npy) path(*e.npy);
    for (double v : e.values) f64(v);
    h.u64(e.rtol ? 1 : 0).u64(e.atol ? 1 : 0);
    f64(e.rtol.value_or(0));
    f64(e.atol.value_or(0));
  }
  return h.finish();
}

OutputCheck check_output(const LoadedOutput& output, DType dtype, std::span<const std::byte> data) {
  OutputCheck check;
  check.name = output.name;
  if (!output.expect) return check;
  const bool exact = !is_float(dtype);
  const double rtol = output.expect->rtol.value_or(exact ? 0.0 : 1e-5);
  const double atol = output.expect->atol.value_or(exact ? 0.0 : 1e-6);
  const size_t size = size_of(dtype);
  const size_t n = std::min(output.expected.size(), data.size() / size);
  check.compared = n;
  for (size_t i = 0; i < n; ++i) {
    const double got = load_as_double(dtype, data.data() + i * size);
    const double want = output.expected[i];
    const bool same = got == want || (std::isnan(got) && std::isnan(want));
    const double error = std::fabs(got - want);
    if (!same && std::isfinite(error)) check.max_abs_error = std::max(check.max_abs_error, error);
    if (same || error <= atol + rtol * std::fabs(want)) continue;
    ++check.mismatches;
    if (check.first.size() < kReportedMismatches) check.first.push_back({i, got, want});
  }
  return check;
}

void write_output_npy(const std::filesystem::path& path, const LoadedOutput& output, DType dtype,
                      std::span<const std::byte> data) {
  if (dtype != DType::BF16) {
    write_npy(path, dtype, output.shape, data);
    return;
  }
  std::vector<float> widened(data.size() / 2);
  for (size_t i = 0; i < widened.size(); ++i) widened[i] = static_cast<float>(load_as_double(DType::BF16, data.data() + 2 * i));
  write_npy(path, DType::F32, output.shape, std::as_bytes(std::span(widened)));
}

}  // namespace svod
