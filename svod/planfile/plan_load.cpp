// PlanFile → buffers, programs and an ExecutionPlan; output checks.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/ranges.h>

#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/cache_key.h"
#include "svod/device/compile_many.h"
#include "svod/device/host_device.h"
#include "svod/registry/registry.h"
#include "svod/planfile/buffer_init.h"
#include "svod/planfile/compile_progress.h"
#include "svod/planfile/plan_file.h"

namespace svod {

namespace {

namespace fs = std::filesystem;
using detail::CompileProgress;

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
// errors name the field that asked for the device. A name such as
// "CL:local" is resolved for this rank's local rank (resolve_device_name):
// the plan keeps the name as written, so every rank loads the same plan.
class Devices {
 public:
  Devices(const PlanFile& file, int local_rank, std::string cpu_compiler)
      : file_(file), local_rank_(local_rank), cpu_compiler_(std::move(cpu_compiler)) {}
  Device& get(const std::string& name, const std::string& path) {
    const std::string& wanted = name.empty() ? file_.device : name;
    const std::string& field = name.empty() ? std::string("device") : path;
    if (auto it = open_.find(wanted); it != open_.end()) return *it->second;
    auto device = at(file_, field, [&] {
      const std::string resolved = resolve_device_name(wanted, local_rank_);
      if (resolved == wanted) return open_device(wanted, cpu_compiler_);
      try {
        return open_device(resolved, cpu_compiler_);
      } catch (const Error& e) {
        throw make_error(e.kind(), "device \"{}\" is {} on local rank {}: {}", wanted, resolved, local_rank_, e.what());
      }
    });
    return *open_.emplace(wanted, std::move(device)).first->second;
  }

 private:
  const PlanFile& file_;
  int local_rank_;
  std::string cpu_compiler_;
  std::map<std::string, std::shared_ptr<Device>, std::less<>> open_;
};

// Expected values from a file (`what`, an .npy or a package's section) are as
// many as the output's elements, or fewer with "prefix".
void check_expected_count(const PlanFileExpect& e, const PlanFileBuffer& buf, size_t n, const std::string& what) {
  if (n > buf.count || (!e.prefix && n != buf.count)) {
    throw make_error(ErrorKind::Validation, "{} holds {} elements, \"{}\" has {}{}", what, n, buf.name, buf.count,
                     e.prefix ? "" : " (add \"prefix\": true to check only the first ones)");
  }
}

std::vector<double> expected_values(const PlanFile& file, const PlanFileOutput& out, const PlanFileBuffer& buf) {
  const PlanFileExpect& e = *out.expect;
  if (!e.npy) return e.values;
  return at(file, fmt::format("outputs.{}.expect.npy", out.buffer), [&] {
    const NpyArray array = read_npy(*e.npy);
    const size_t n = array.count();
    check_expected_count(e, buf, n, e.npy->string());
    std::vector<double> values(n);
    const size_t size = size_of(array.dtype);
    for (size_t i = 0; i < n; ++i) values[i] = load_as_double(array.dtype, array.data.data() + i * size);
    return values;
  });
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

// One load_plan() call, whose steps run in the order declared here:
// variables, buffers, programs, ops, outputs, then build(). Each step keeps
// what later ones need: buffer slots, the buffers made, compiled programs.
class PlanLoader {
 public:
  PlanLoader(const PlanFile& file, const LoadOptions& options)
      : file_(file),
        options_(options),
        devices_(file, options.communicator ? options.communicator->local_rank() : 0, options.cpu_compiler) {}

  // The plan's variables at the file's values or options.vars' (each
  // override checked), then rank and world_size; with a communicator, the
  // check that every rank loads the same plan.
  void add_variables() {
    for (const auto& [name, value] : options_.vars) {
      if (name == kRankVariable || name == kWorldSizeVariable) {
        throw make_error(ErrorKind::Validation,
                         "{}: variables: \"{}\" is read-only: it is set by the launcher (svod run --ranks, mpirun)",
                         file_.source_name, name);
      }
      const bool known = std::any_of(file_.variables.begin(), file_.variables.end(),
                                     [&](const PlanFileVariable& v) { return v.variable.name == name; });
      if (!known) {
        std::string names;
        for (const auto& v : file_.variables) names += (names.empty() ? "" : ", ") + v.variable.name;
        throw make_error(ErrorKind::Validation, "{}: variables: no variable named \"{}\" to set (the plan has: {})",
                         file_.source_name, name, names.empty() ? "none" : names);
      }
    }
    read_input_shapes();
    for (const auto& v : file_.variables) {
      auto it = options_.vars.find(v.variable.name);
      int64_t value = it == options_.vars.end() ? v.value : it->second;
      if (const auto given = input_vars_.find(v.variable.name); given != input_vars_.end()) {
        if (it != options_.vars.end() && it->second != given->second.first)
          throw make_error(ErrorKind::Validation, "{}: variables.{}: set to {}, and the shape of input \"{}\" makes it {}",
                           file_.source_name, v.variable.name, it->second, given->second.second, given->second.first);
        value = given->second.first;
      }
      at(file_, "variables." + v.variable.name, [&] { v.variable.check(value); });
      builder_.add_variable(v.variable, value);
      values_[v.variable.name] = value;
    }
    const int rank = options_.communicator ? options_.communicator->rank() : 0;
    const int world_size = options_.communicator ? options_.communicator->size() : 1;
    builder_.add_variable(Variable{std::string(kRankVariable), rank, rank, true}, rank);
    builder_.add_variable(Variable{std::string(kWorldSizeVariable), world_size, world_size, true}, world_size);
    if (options_.communicator) {
      builder_.set_communicator(options_.communicator);
      if (world_size > 1) check_same_plan(file_, options_.vars, *options_.communicator);
    }
  }

  // Base buffers on their devices, created and initialised (or brought by
  // options.npy_buffer), then the views of them.
  void add_buffers() {
    check_inputs();
    for (const auto& b : file_.buffers) {
      if (b.view_of) continue;
      const std::string path = "buffers." + b.name;
      Device& device = devices_.get(b.device, path + ".device");
      Buffer buffer;
      if (const auto input = options_.inputs.find(b.name); input != options_.inputs.end()) {
        PlanFileBuffer given = b;
        given.init = BufferInit{.kind = BufferInit::Kind::Npy, .npy = input->second};
        given.count = count_now(b);  // the first elements, when a dimension is variable
        buffer = at(file_, "inputs." + b.name, [&] {
          Buffer made = device.allocate(b.dtype, b.count);
          initialise_buffer(given, made);
          return made;
        });
      } else if (options_.npy_buffer && b.init.kind == BufferInit::Kind::Npy) {
        buffer = at(file_, path + ".init.npy", [&] { return options_.npy_buffer(b, device); });
      } else {
        buffer = at(file_, path, [&] { return device.allocate(b.dtype, b.count); });
        at(file_, b.init.kind == BufferInit::Kind::Npy ? path + ".init.npy" : path, [&] { initialise_buffer(b, buffer); });
      }
      made_[b.name] = buffer;
      slots_[b.name] = builder_.add_buffer(std::move(buffer), b.name);
    }
    for (const auto& b : file_.buffers) {
      if (!b.view_of) continue;
      slots_[b.name] = at(file_, "buffers." + b.name, [&] {
        made_[b.name] = made_.at(*b.view_of).view_bytes(b.byte_offset, b.bytes(), b.dtype);
        return builder_.add_view(slots_.at(*b.view_of), b.byte_offset, b.bytes(), b.dtype, b.name);
      });
    }
  }

  // An input (options.inputs) of a buffer with variable dimensions sets
  // those variables from its .npy file's shape, whose other dimensions must
  // be the buffer's; two inputs must agree on a variable they share.
  void read_input_shapes() {
    for (const auto& [name, npy] : options_.inputs) {
      const PlanFileBuffer* b = file_.find_buffer(name);
      if (b == nullptr || b->dim_variables.empty()) continue;  // check_inputs names an unknown one
      const std::vector<size_t> shape = at(file_, "inputs." + name, [&] { return read_npy(npy).shape; });
      std::vector<std::string> declared;
      for (size_t d = 0; d < b->shape.size(); ++d)
        declared.push_back(b->dim_variables[d].empty() ? std::to_string(b->shape[d]) : b->dim_variables[d]);
      if (shape.size() != b->shape.size())
        throw make_error(ErrorKind::Validation, "{}: inputs.{}: {} has shape [{}], the input [{}]", file_.source_name,
                         name, npy.string(), fmt::join(shape, ", "), fmt::join(declared, ", "));
      for (size_t d = 0; d < shape.size(); ++d) {
        const std::string& variable = b->dim_variables[d];
        if (variable.empty()) {
          if (shape[d] != b->shape[d])
            throw make_error(ErrorKind::Validation, "{}: inputs.{}: {} has shape [{}], the input [{}]",
                             file_.source_name, name, npy.string(), fmt::join(shape, ", "), fmt::join(declared, ", "));
          continue;
        }
        const auto value = static_cast<int64_t>(shape[d]);
        const auto [it, fresh] = input_vars_.try_emplace(variable, value, name);
        if (!fresh && it->second.first != value)
          throw make_error(ErrorKind::Validation, "{}: inputs \"{}\" and \"{}\" make variable \"{}\" {} and {}",
                           file_.source_name, it->second.second, name, variable, it->second.first, value);
      }
    }
  }

  // The elements of `b` at the variables' values (its count when no
  // dimension is variable).
  size_t count_now(const PlanFileBuffer& b) const {
    size_t n = 1;
    for (const size_t d : shape_now(b)) n *= d;
    return n;
  }
  std::vector<size_t> shape_now(const PlanFileBuffer& b) const {
    std::vector<size_t> shape = b.shape;
    for (size_t d = 0; d < b.dim_variables.size(); ++d)
      if (!b.dim_variables[d].empty()) shape[d] = static_cast<size_t>(values_.at(b.dim_variables[d]));
    return shape;
  }

  // options.inputs name base buffers of the plan.
  void check_inputs() const {
    for (const auto& [name, npy] : options_.inputs) {
      const PlanFileBuffer* b = file_.find_buffer(name);
      if (b == nullptr) {
        std::vector<std::string> names;
        for (const auto& buffer : file_.buffers)
          if (!buffer.view_of) names.push_back(buffer.name);
        throw make_error(ErrorKind::Validation, "{}: inputs.{}: the plan has no buffer named \"{}\" (its buffers: {})",
                         file_.source_name, name, name, fmt::join(names, ", "));
      }
      if (b->view_of) {
        throw make_error(ErrorKind::Validation, "{}: inputs.{}: a view of \"{}\": give the values of that buffer",
                         file_.source_name, name, *b->view_of);
      }
    }
  }

  // Compiling is the slow part, so the programs of each device compile in
  // parallel (compile_many), and the devices' batches in parallel too; errors
  // are reported for the first failing program in file order, so the message
  // does not depend on scheduling.
  void compile_programs() {
    const std::vector<Device*> program_devices = open_program_devices();
    CompileProgress progress(file_.programs.size(), options_.progress_after);
    std::vector<std::optional<CompileResult>> compiled(file_.programs.size());
    if (options_.build_program) {
      build_each(program_devices, progress, compiled);
    } else {
      compile_per_device(program_devices, progress, compiled);
    }
    progress.finish();
    programs_.resize(file_.programs.size());
    for (size_t i = 0; i < compiled.size(); ++i) {
      if (const Error* error = std::get_if<Error>(&*compiled[i])) {
        at(file_, "programs." + file_.programs[i].name, [&] { throw *error; });
      }
      programs_[i] = std::get<std::shared_ptr<const Program>>(*compiled[i]);
    }
  }

  // The ops, in file order.
  void add_ops() {
    for (size_t i = 0; i < file_.ops.size(); ++i) {
      const PlanFileOp& op = file_.ops[i];
      OpOptions opts;
      opts.id = op.id;
      for (const auto& ref : op.after) {
        if (const auto* id = std::get_if<std::string>(&ref)) opts.after_ids.push_back(*id);
        else opts.after.push_back(std::get<size_t>(ref));
      }
      const std::string path = fmt::format("ops[{}]", i);
      PlanOp plan_op = to_plan_op(op, path);
      at(file_, path, [&] { builder_.add_op(std::move(plan_op), std::move(opts)); });
    }
  }

  // The outputs (CPU buffers) with their expected values.
  void add_outputs() {
    for (const auto& out : file_.outputs) {
      const PlanFileBuffer& buf = *file_.find_buffer(out.buffer);
      LoadedOutput loaded;
      loaded.name = out.buffer;
      loaded.slot = slots_.at(out.buffer);
      if (!made_.at(out.buffer).is_host()) {
        throw make_error(ErrorKind::Validation,
                         "{}: outputs.{}: the buffer is in {} memory; copy it into a CPU buffer with a copy op and "
                         "name that buffer here",
                         file_.source_name, out.buffer, made_.at(out.buffer).device().name());
      }
      loaded.shape = shape_now(buf);
      loaded.expect = out.expect;
      if (out.expect && out.expect->npy && options_.npy_expected) {
        loaded.expected = at(file_, fmt::format("outputs.{}.expect.npy", out.buffer), [&] {
          std::vector<double> values = options_.npy_expected(out);
          check_expected_count(*out.expect, buf, values.size(), "the expected values");
          return values;
        });
      } else if (out.expect) {
        loaded.expected = expected_values(file_, out, buf);
      }
      builder_.add_output(loaded.slot);
      outputs_.push_back(std::move(loaded));
    }
  }

  // Builds the plan from everything added; the loader is spent after.
  LoadedPlan build() {
    ExecutionPlan plan = at(file_, "ops", [&] { return builder_.build(); });
    const bool uses_devices = plan.uses_devices();
    return LoadedPlan{std::move(plan), std::move(outputs_), uses_devices};
  }

 private:
  // Each program's device, checked to accept the program's language.
  std::vector<Device*> open_program_devices() {
    std::vector<Device*> program_devices;
    for (const auto& p : file_.programs) {
      const std::string path = "programs." + p.name;
      Device& device = devices_.get(p.device, path + ".device");
      if (!device.accepts(p.spec.language)) {
        const std::string runs = device.language_names();
        throw make_error(ErrorKind::Unsupported, "{}: {}.language: {} programs cannot run on the {} device (it runs {})",
                         file_.source_name, path, to_string(p.spec.language), device.name(),
                         runs.empty() ? "none" : runs);
      }
      program_devices.push_back(&device);
    }
    return program_devices;
  }

  // The caller brings its programs (a package's objects): each is built alone.
  void build_each(const std::vector<Device*>& program_devices, CompileProgress& progress,
                  std::vector<std::optional<CompileResult>>& compiled) const {
    parallel_for(file_.programs.size(), [&](size_t i) {
      progress.started(file_.programs[i].name);
      try {
        compiled[i] = options_.build_program(file_.programs[i], *program_devices[i]);
      } catch (const Error& e) {
        compiled[i] = e;
      }
      progress.done(file_.programs[i].name);
    });
  }

  // One compile_many batch per device, the batches in parallel.
  void compile_per_device(const std::vector<Device*>& program_devices, CompileProgress& progress,
                          std::vector<std::optional<CompileResult>>& compiled) const {
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
      for (const size_t i : batches[b]) specs.push_back(file_.programs[i].spec);
      std::vector<CompileResult> results = compile_many(
          *batch_devices[b], specs,
          [&](size_t position) { progress.done(file_.programs[batches[b][position]].name); },
          [&](size_t position) { progress.started(file_.programs[batches[b][position]].name); });
      for (size_t k = 0; k < results.size(); ++k) compiled[batches[b][k]] = std::move(results[k]);
    });
  }

  // `op` over the plan's buffer slots and programs; `path` is its JSON path.
  PlanOp to_plan_op(const PlanFileOp& op, const std::string& path) const {
    std::vector<size_t> op_slots;
    for (const auto& name : op.buffers) op_slots.push_back(slots_.at(name));
    switch (op.kind) {
      case PlanFileOp::Kind::Run: {
        size_t index = 0;
        while (file_.programs[index].name != op.target) ++index;
        KernelOp kernel;
        kernel.program = programs_[index];
        kernel.buffers = std::move(op_slots);
        kernel.scalars = op.scalars;
        kernel.global = op.global_size;
        kernel.local = op.local_size;
        return kernel;
      }
      case PlanFileOp::Kind::Copy: return CopyOp{op_slots[0], op_slots[1]};
      case PlanFileOp::Kind::Collective: {
        CollectiveOp c;
        c.kind = op.collective;
        c.op = op.reduce;
        c.root = op.root;
        if (op.collective == CollectiveKind::AllGather || op.collective == CollectiveKind::ReduceScatter) {
          c.src = op_slots[0];
          c.dst = op_slots[1];
        } else {
          c.buffers = std::move(op_slots);
        }
        return c;
      }
      case PlanFileOp::Kind::Custom: {
        // Validating here as well as in build() puts the op's JSON path on the message.
        at(file_, path, [&] {
          auto def = find_custom_function(op.target);
          std::vector<Buffer> args;
          for (const auto& name : op.buffers) args.push_back(made_.at(name));
          def->validate(args, op.attrs);
        });
        CustomOp call;
        call.name = op.target;
        call.buffers = std::move(op_slots);
        call.attrs = op.attrs;
        return call;
      }
    }
    return {};
  }

  const PlanFile& file_;
  const LoadOptions& options_;
  Devices devices_;
  ExecutionPlanBuilder builder_;
  std::map<std::string, size_t, std::less<>> slots_;
  std::map<std::string, Buffer, std::less<>> made_;  // for validating custom ops before the plan exists
  std::vector<std::shared_ptr<const Program>> programs_;  // per file.programs
  std::vector<LoadedOutput> outputs_;
  std::map<std::string, int64_t> values_;  // each plan variable's value
  // The variables inputs' shapes set: value and the input that set it.
  std::map<std::string, std::pair<int64_t, std::string>> input_vars_;
};

}  // namespace

LoadedPlan load_plan(const PlanFile& file, const LoadOptions& options) {
  PlanLoader loader(file, options);
  loader.add_variables();
  loader.add_buffers();
  loader.compile_programs();
  loader.add_ops();
  loader.add_outputs();
  return loader.build();
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
    h.u64(b.dim_variables.size());
    for (const auto& v : b.dim_variables) h.str(v);
    h.str(b.device).str(b.view_of.value_or("")).u64(b.view_of ? 1 : 0).u64(b.byte_offset);
    h.u64(b.role ? uint64_t(*b.role) + 1 : 0);
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
    for (const auto* sizes : {&op.global_size, &op.local_size}) {
      h.u64(sizes->has_value() ? 1 : 0);
      if (*sizes)
        for (const Expr& e : **sizes) h.str(e.text());
    }
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
  // A shape with variable dimensions covers the buffer's first elements.
  size_t count = 1;
  for (const size_t d : output.shape) count *= d;
  data = data.first(std::min(data.size(), count * size_of(dtype)));
  if (dtype != DType::BF16) {
    write_npy(path, dtype, output.shape, data);
    return;
  }
  std::vector<float> widened(data.size() / 2);
  for (size_t i = 0; i < widened.size(); ++i) widened[i] = static_cast<float>(load_as_double(DType::BF16, data.data() + 2 * i));
  write_npy(path, DType::F32, output.shape, std::as_bytes(std::span(widened)));
}

}  // namespace svod
