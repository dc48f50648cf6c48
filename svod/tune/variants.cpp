#include "svod/tune/variants.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "svod/base/cpu_features.h"
#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/cache_key.h"
#include "svod/cache/object_cache.h"
#include "svod/device/compile_many.h"
#include "svod/device/host_device.h"
#include "svod/tune/benchmark.h"

namespace svod {
namespace {

using Clock = std::chrono::steady_clock;

// Bumped whenever what a stored choice means changes (the candidates'
// rules, the key), so that older choices stop matching.
constexpr uint64_t kChoiceSchema = 1;

std::atomic<uint64_t> measurements{0};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The element type parameter `p` is read and written as: its declared one,
// else its buffer's.
DType element_type(const ProgramSpec& spec, size_t p, const Buffer& buffer) {
  return spec.buffers[p].dtype.value_or(buffer.dtype());
}

// Copies of a launch's storages, each whole and once however many of the
// launch's buffers are views of it, so that the copies alias as the
// originals do and keep their offsets (and so their alignment). `working`
// is what kernels run on; `pristine` holds the inputs every check starts
// from.
class LaunchCopy {
 public:
  explicit LaunchCopy(const KernelArgs& args) {
    args_.scalars = args.scalars;
    args_.dims = args.dims;
    std::vector<std::pair<uint64_t, std::shared_ptr<Storage>>> made;
    for (const Buffer& b : args.buffers) {
      auto it = std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first == b.storage_id(); });
      if (it == made.end()) {
        Storage& original = b.storage();
        Buffer working = original.device().allocate(DType::U8, original.bytes());
        Buffer pristine = original.device().allocate(DType::U8, original.bytes());
        copy_buffer(pristine, Buffer(b.storage_ptr(), DType::U8));
        working_.push_back(working);
        pristine_.push_back(pristine);
        made.emplace_back(b.storage_id(), working.storage_ptr());
        it = made.end() - 1;
      }
      args_.buffers.emplace_back(it->second, b.dtype(), b.byte_offset(), b.bytes());
    }
  }

  const KernelArgs& args() const noexcept { return args_; }

  // The working copies back to the pristine inputs.
  void reset() {
    for (size_t i = 0; i < working_.size(); ++i) copy_buffer(working_[i], pristine_[i]);
  }

  // Uniform random values in [-1, 1] in the pristine copy of every float
  // buffer the program reads. Integer buffers keep their values: they may
  // hold indices.
  void randomise(const ProgramSpec& spec, uint64_t seed) {
    std::mt19937_64 random(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (size_t p = 0; p < args_.buffers.size(); ++p) {
      const Buffer& b = args_.buffers[p];
      const DType type = element_type(spec, p, b);
      if (!reads(spec.buffers[p].access) || !is_float(type)) continue;
      const size_t at = storage_index(b);
      const Buffer target = Buffer(pristine_[at].storage_ptr(), DType::U8, b.byte_offset(), b.bytes());
      Buffer host = host_device().allocate(DType::U8, b.bytes());
      copy_buffer(host, target);
      auto* bytes = static_cast<std::byte*>(host.data());
      for (size_t e = 0; e + size_of(type) <= b.bytes(); e += size_of(type))
        store_from_double(type, bytes + e, uniform(random));
      copy_buffer(target, host);
    }
  }

  // The bytes of the buffers the program writes, from the working copies.
  std::vector<std::vector<std::byte>> outputs(const ProgramSpec& spec) const {
    std::vector<std::vector<std::byte>> out(args_.buffers.size());
    for (size_t p = 0; p < args_.buffers.size(); ++p) {
      if (!writes(spec.buffers[p].access)) continue;
      const Buffer& b = args_.buffers[p];
      Buffer host = host_device().allocate(DType::U8, b.bytes());
      copy_buffer(host, b.view_bytes(0, b.bytes(), DType::U8));
      const auto* bytes = static_cast<const std::byte*>(host.data());
      out[p].assign(bytes, bytes + b.bytes());
    }
    return out;
  }

 private:
  size_t storage_index(const Buffer& view) const {
    for (size_t i = 0; i < working_.size(); ++i)
      if (working_[i].storage_id() == view.storage_id()) return i;
    throw make_error(ErrorKind::Internal, "variants: a buffer of the launch has no copy");
  }

  KernelArgs args_;
  std::vector<Buffer> working_;
  std::vector<Buffer> pristine_;
};

// Whether `got` stays within `tolerance` of `want` in every element (NaN and
// infinities exactly); empty when it does, else the first element that does
// not, said in words.
std::string compare_outputs(const ProgramSpec& spec, const KernelArgs& args,
                            const std::vector<std::vector<std::byte>>& want,
                            const std::vector<std::vector<std::byte>>& got, const VariantTolerance& tolerance) {
  for (size_t p = 0; p < want.size(); ++p) {
    if (want[p].size() != got[p].size())
      throw make_error(ErrorKind::Internal, "variants: outputs of different sizes");
    if (want[p] == got[p]) continue;
    const DType type = element_type(spec, p, args.buffers[p]);
    const size_t size = size_of(type);
    for (size_t at = 0; at + size <= want[p].size(); at += size) {
      if (std::memcmp(want[p].data() + at, got[p].data() + at, size) == 0) continue;
      const double a = load_as_double(type, want[p].data() + at);
      const double b = load_as_double(type, got[p].data() + at);
      // Other types than floats must be equal: reassociation leaves integers as they are.
      bool within = false;
      if (is_float(type)) {
        if (std::isnan(a) || std::isnan(b)) within = std::isnan(a) && std::isnan(b);
        else if (std::isinf(a) || std::isinf(b)) within = a == b;
        else within = std::fabs(b - a) <= tolerance.atol + tolerance.rtol * std::fabs(a);
      }
      if (!within)
        return fmt::format("\"{}\"[{}] is {} where the default gives {} (atol {}, rtol {})", spec.buffers[p].name,
                           at / size, b, a, tolerance.atol, tolerance.rtol);
    }
  }
  return {};
}

// A launch's scalar or size in the choice's key: non-positive values as
// they are, others rounded up to a power of two.
uint64_t bucket(int64_t value) {
  if (value <= 0) return static_cast<uint64_t>(value);
  return uint64_t{1} << 63 | std::bit_width(static_cast<uint64_t>(value - 1));
}

uint64_t bits_of(double value) { return std::bit_cast<uint64_t>(value); }

Hash128 choice_key(const ProgramSpec& base, const Hash128& identity, const KernelArgs& args,
                   const VariantOptions& options, const std::vector<const CpuRecipe*>& candidates) {
  Hasher h;
  h.str("variant choice").u64(kChoiceSchema);
  const Hash128 spec = spec_hash(base);
  h.u64(spec.low).u64(spec.high).u64(identity.low).u64(identity.high);
  h.str(host_cpu_signature()).u64(static_cast<uint64_t>(thread_count()));
  h.u64(options.tolerance.has_value());
  if (options.tolerance) h.u64(bits_of(options.tolerance->atol)).u64(bits_of(options.tolerance->rtol));
  h.u64(bits_of(options.margin));
  h.u64(candidates.size());
  for (const CpuRecipe* recipe : candidates) h.str(recipe->name);
  h.u64(args.scalars.size());
  for (int64_t value : args.scalars) h.u64(bucket(value));
  h.u64(args.dims.has_value());
  if (args.dims)
    for (size_t d = 0; d < 3; ++d) h.u64(bucket(args.dims->global[d])).u64(bucket(args.dims->local[d]));
  return h.finish();
}

// One program to choose for, with what it needs on the way.
struct Job {
  std::shared_ptr<const Program> program;  // as given
  KernelArgs args;
  ProgramSpec base;                              // its spec with the default recipe
  std::string_view default_name;                 // the compiler's default recipe's
  std::vector<const CpuRecipe*> candidates;      // besides the default
  std::optional<Hash128> key;                    // none: the choice is not cached
  std::vector<CompileResult> compiled;           // the default, then each candidate
  VariantChoice choice;
  bool done = false;
  Clock::time_point start;
};

ProgramSpec with_recipe(const ProgramSpec& spec, std::string_view recipe) {
  ProgramSpec out = spec;
  out.recipe = recipe;
  return out;
}

// The program of `recipe` for the job (the given one when it names it).
std::shared_ptr<const Program> program_of(Job& job, std::string_view recipe) {
  if (job.program->spec().recipe == recipe) return job.program;
  return job.program->device().compile(with_recipe(job.base, recipe));
}

// The job's choice from the cache, when it is there and names one of its
// recipes; a stored choice that does not is removed with a warning.
bool from_cache(Job& job) {
  if (!job.key) return false;
  const std::shared_ptr<ObjectCache> objects = object_cache();
  std::optional<Artifact> stored = objects->get(*job.key);
  if (!stored) return false;
  const std::string name(reinterpret_cast<const char*>(stored->bytes.data()), stored->bytes.size());
  bool found = false;
  if (stored->kind == kVariantChoiceKind) {
    found = name == job.default_name;
    for (const CpuRecipe* recipe : job.candidates) found = found || recipe->name == name;
  }
  if (!found) {
    log_warning("object cache: the stored variant choice of \"{}\" ({} bytes of \"{}\") names no recipe it could "
                "have chosen; choosing again",
                job.base.display_name(), stored->bytes.size(), stored->kind.name());
    objects->remove(*job.key);
    return false;
  }
  job.choice.recipe = name == job.default_name ? std::string() : name;
  job.choice.program = program_of(job, job.choice.recipe);
  job.choice.cached = true;
  return true;
}

void store(const Job& job) {
  if (!job.key) return;
  Artifact artifact;
  artifact.kind = kVariantChoiceKind;
  const std::string_view name = job.choice.recipe.empty() ? job.default_name : job.choice.recipe;
  const auto* bytes = reinterpret_cast<const std::byte*>(name.data());
  artifact.bytes.assign(bytes, bytes + name.size());
  object_cache()->put(*job.key, artifact);
}

// Checks, times and picks among the job's compiled programs.
void measure(Job& job, const VariantOptions& options) {
  measurements.fetch_add(1, std::memory_order_relaxed);
  const ProgramSpec& spec = job.base;
  const auto& base = std::get<std::shared_ptr<const Program>>(job.compiled[0]);
  std::vector<std::shared_ptr<const Program>> live;  // parallel to job.choice.trials; null: rejected
  for (size_t c = 0; c < job.candidates.size(); ++c) {
    VariantTrial trial;
    trial.recipe = job.candidates[c]->name;
    if (const auto* error = std::get_if<Error>(&job.compiled[c + 1])) {
      trial.rejected = fmt::format("it does not compile: {}", error->what());
      live.push_back(nullptr);
    } else {
      live.push_back(std::get<std::shared_ptr<const Program>>(job.compiled[c + 1]));
    }
    job.choice.trials.push_back(std::move(trial));
  }

  // Outputs against the default's: on the launch's own inputs, then on
  // random ones for inexact candidates. A launch of the default that fails
  // on random inputs (they may be out of its domain) checks nothing.
  LaunchCopy copy(job.args);
  const int random_inputs = options.tolerance ? std::max(0, options.random_inputs) : 0;
  for (int input = 0; input <= random_inputs; ++input) {
    if (input > 0) copy.randomise(spec, static_cast<uint64_t>(input));
    copy.reset();
    if (input == 0) {
      base->launch(copy.args().view());
    } else {
      try {
        base->launch(copy.args().view());
      } catch (const Error&) {
        continue;
      }
    }
    const auto want = copy.outputs(spec);
    for (size_t c = 0; c < live.size(); ++c) {
      if (!live[c] || (input > 0 && job.candidates[c]->exact())) continue;
      VariantTrial& trial = job.choice.trials[c];
      copy.reset();
      try {
        live[c]->launch(copy.args().view());
      } catch (const Error& e) {
        trial.rejected = fmt::format("it fails where the default runs: {}", e.what());
        live[c] = nullptr;
        continue;
      }
      const VariantTolerance tolerance =
          job.candidates[c]->exact() ? VariantTolerance{} : options.tolerance.value_or(VariantTolerance{});
      const std::string differs = compare_outputs(spec, copy.args(), want, copy.outputs(spec), tolerance);
      if (!differs.empty()) {
        trial.rejected = fmt::format("{} inputs: {}", input == 0 ? "on the launch's" : "on random", differs);
        live[c] = nullptr;
      }
    }
  }

  // Timing, in rounds: each round every program is timed for round_time in
  // turn, starting one further along each round, so that the machine's drift
  // falls on all alike.
  std::vector<const Program*> timed = {base.get()};
  std::vector<size_t> trial_of = {SIZE_MAX};
  for (size_t c = 0; c < live.size(); ++c)
    if (live[c]) {
      timed.push_back(live[c].get());
      trial_of.push_back(c);
    }
  if (timed.size() == 1) return;
  // A warm-up run in the first round only, and a run at least per round: a
  // kernel that runs for seconds costs a few runs per candidate, not dozens.
  copy.reset();
  BenchmarkConfig config;
  config.min_runs = 1;
  config.max_runs = 1'000'000;
  config.min_total = options.round_time;
  std::vector<std::vector<double>> medians(timed.size());
  const int rounds = std::max(1, options.rounds);
  for (int round = 0; round < rounds; ++round) {
    config.warmup_runs = round == 0 ? 1 : 0;
    for (size_t turn = 0; turn < timed.size(); ++turn) {
      const size_t t = (turn + static_cast<size_t>(round)) % timed.size();
      medians[t].push_back(benchmark_kernel(*timed[t], copy.args(), config).stats.median);
    }
  }
  job.choice.default_ns = candidate_time(medians[0]);
  double best = job.choice.default_ns * (1.0 - options.margin);
  for (size_t t = 1; t < timed.size(); ++t) {
    VariantTrial& trial = job.choice.trials[trial_of[t]];
    trial.median_ns = candidate_time(medians[t]);
    for (int round = 0; round < rounds; ++round)
      if (medians[t][static_cast<size_t>(round)] < medians[0][static_cast<size_t>(round)]) ++trial.rounds_won;
    if (trial.median_ns <= best && 2 * trial.rounds_won > rounds) {
      best = trial.median_ns;
      job.choice.recipe = trial.recipe;
      job.choice.program = live[trial_of[t]];
    }
  }
}

void log_choice(const Job& job) {
  if (debug_level() < 1) return;
  const VariantChoice& c = job.choice;
  const std::string recipe = c.recipe.empty() ? std::string(job.default_name) : c.recipe;
  if (c.cached) {
    log_debug("variants of {}: {} (from the cache)", job.base.display_name(), recipe);
    return;
  }
  std::string trials;
  for (const VariantTrial& t : c.trials)
    trials += t.rejected.empty() ? fmt::format("; {} {:.0f} ns, won {} rounds", t.recipe, t.median_ns, t.rounds_won)
                                 : fmt::format("; {} rejected: {}", t.recipe, t.rejected);
  log_debug("variants of {}: {} in {:.2f} s (default {:.0f} ns{})", job.base.display_name(), recipe, c.seconds,
            c.default_ns, trials);
}

// Prepares a job: its base spec, candidates and key; true when its choice
// is made already (no candidates, or the cache).
Job make_job(const std::shared_ptr<const Program>& program, KernelArgs args, const VariantOptions& options) {
  if (!program) throw make_error(ErrorKind::Validation, "choose_variant: no program");
  if (!(options.margin >= 0 && options.margin < 1))
    throw make_error(ErrorKind::Validation, "variants: the margin {} is not in [0, 1)", options.margin);
  if (options.tolerance && !(options.tolerance->atol >= 0 && options.tolerance->rtol >= 0))
    throw make_error(ErrorKind::Validation, "variants: the tolerance (atol {}, rtol {}) must not be negative",
                     options.tolerance->atol, options.tolerance->rtol);
  Job job;
  job.start = Clock::now();
  job.program = program;
  job.args = std::move(args);
  job.base = with_recipe(program->spec(), "");
  job.choice.program = program;
  job.choice.recipe = program->spec().recipe;
  Device& device = program->device();
  const std::span<const CpuRecipe> recipes = device.compiler().recipes();
  if (!recipes.empty()) job.default_name = recipes.front().name;
  for (size_t r = 1; r < recipes.size(); ++r)
    if (recipes[r].exact() || options.tolerance) job.candidates.push_back(&recipes[r]);
  if (job.candidates.empty()) {
    job.done = true;
    return job;
  }
  const std::shared_ptr<ObjectCache> objects = object_cache();
  if (options.use_cache && objects && objects->enabled())
    job.key = choice_key(job.base, objects->identity_hash(device.compiler()), job.args, options, job.candidates);
  job.choice.recipe.clear();
  job.choice.program = nullptr;
  if (from_cache(job)) job.done = true;
  return job;
}

void finish(Job& job) {
  if (!job.choice.program) job.choice.program = std::get<std::shared_ptr<const Program>>(job.compiled[0]);
  job.choice.seconds = seconds_since(job.start);
  log_choice(job);
}

// Compiles every open job's default and candidates, device by device, in
// one batch each, then measures and stores each.
void run_jobs(std::vector<Job*>& jobs, const VariantOptions& options) {
  std::map<Device*, std::vector<Job*>> by_device;
  for (Job* job : jobs)
    if (!job->done) by_device[&job->program->device()].push_back(job);
  for (auto& [device, of_device] : by_device) {
    std::vector<ProgramSpec> specs;
    for (Job* job : of_device) {
      specs.push_back(job->base);
      for (const CpuRecipe* recipe : job->candidates) specs.push_back(with_recipe(job->base, recipe->name));
    }
    std::vector<CompileResult> results = compile_many(*device, specs);
    size_t at = 0;
    for (Job* job : of_device) {
      job->compiled.assign(std::make_move_iterator(results.begin() + static_cast<std::ptrdiff_t>(at)),
                           std::make_move_iterator(results.begin() +
                                                   static_cast<std::ptrdiff_t>(at + 1 + job->candidates.size())));
      at += 1 + job->candidates.size();
      if (const auto* error = std::get_if<Error>(&job->compiled[0])) throw *error;
    }
  }
  for (Job* job : jobs) {
    if (job->done) {
      job->choice.seconds = seconds_since(job->start);
      log_choice(*job);
      continue;
    }
    measure(*job, options);
    finish(*job);
    store(*job);
  }
}

}  // namespace

VariantTolerance parse_variant_tolerance(std::string_view text, std::string_view what) {
  auto number = [&](std::string_view part) {
    const std::string copy(part);
    char* end = nullptr;
    const double value = std::strtod(copy.c_str(), &end);
    if (copy.empty() || end != copy.c_str() + copy.size() || !(value >= 0))
      throw make_error(ErrorKind::Validation, "{}: expected ATOL,RTOL, two numbers of at least 0 (1e-5,1e-4)",
                       what);
    return value;
  };
  const size_t comma = text.find(',');
  if (comma == std::string_view::npos) number("");
  return VariantTolerance{number(text.substr(0, comma)), number(text.substr(comma + 1))};
}

std::optional<VariantTolerance> variant_tolerance_from_env() {
  const auto text = env_string(EnvVar::VariantsTolerance);
  if (!text) return std::nullopt;
  return parse_variant_tolerance(*text, fmt::format("SVOD_VARIANTS_TOLERANCE=\"{}\"", *text));
}

double VariantChoice::speedup() const {
  for (const VariantTrial& t : trials)
    if (t.recipe == recipe && t.median_ns > 0) return default_ns / t.median_ns;
  return 1.0;
}

VariantChoice choose_variant(const std::shared_ptr<const Program>& program, const KernelArgs& args,
                             const VariantOptions& options) {
  Job job = make_job(program, args, options);
  std::vector<Job*> jobs = {&job};
  run_jobs(jobs, options);
  return std::move(job.choice);
}

std::vector<VariantChoice> choose_variants(ExecutionPlan& plan, const VariantOptions& options) {
  std::vector<size_t> ops;
  std::vector<Job> jobs;
  for (size_t i = 0; i < plan.op_count(); ++i) {
    const auto* kernel = std::get_if<KernelOp>(&plan.op(i));
    if (kernel == nullptr) continue;
    ops.push_back(i);
    jobs.push_back(make_job(kernel->program, plan.kernel_args(i), options));
  }
  // Ops that launch one program alike (the same key) share one measurement.
  std::vector<Job*> open;
  std::vector<size_t> same_as(jobs.size(), SIZE_MAX);
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t k = 0; k < j && same_as[j] == SIZE_MAX && !jobs[j].done; ++k)
      if (jobs[j].key && jobs[k].key == jobs[j].key && &jobs[k].program->device() == &jobs[j].program->device())
        same_as[j] = same_as[k] == SIZE_MAX ? k : same_as[k];
    if (same_as[j] == SIZE_MAX) open.push_back(&jobs[j]);
  }
  run_jobs(open, options);
  std::vector<VariantChoice> choices;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (same_as[j] != SIZE_MAX) {
      const VariantChoice& first = jobs[same_as[j]].choice;
      jobs[j].choice.recipe = first.recipe;
      jobs[j].choice.program = program_of(jobs[j], first.recipe);
      jobs[j].choice.cached = first.cached;
    }
    if (jobs[j].choice.program != jobs[j].program) plan.replace_program(ops[j], jobs[j].choice.program);
    choices.push_back(std::move(jobs[j].choice));
  }
  return choices;
}

uint64_t variant_measurements() noexcept { return measurements.load(std::memory_order_relaxed); }

}  // namespace svod
