// ExecutionPlan → PlanFile and its data (to_plan_file), and the folder that
// holds them (save_plan).
#include "svod/planfile/plan_save.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

#include "svod/base/error.h"
#include "svod/base/file_write.h"
#include "svod/base/npy.h"
#include "svod/base/visit.h"
#include "svod/custom/custom_function.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

// A buffer's contents in host memory (copied off its device when it has one).
std::vector<std::byte> contents_of(const Buffer& buffer) {
  if (buffer.is_host()) {
    const auto* p = static_cast<const std::byte*>(buffer.data());
    return {p, p + buffer.bytes()};
  }
  const Buffer staging = buffer.device().allocate_host(buffer.dtype(), buffer.count());
  buffer.device().copy(staging, buffer);
  const auto* p = static_cast<const std::byte*>(staging.data());
  return {p, p + staging.bytes()};
}

// A file name made of a buffer's name: what is not a letter, digit, '-',
// '_' or '.' becomes '_' (names may hold anything, "s0[0:+64]:f32").
std::string file_stem(std::string_view name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
  return out;
}

// `name`, else `name_2`, `name_3`, ... whichever `taken` lacks; taken after.
std::string unique_name(std::string name, std::set<std::string>& taken) {
  std::string candidate = name;
  for (size_t k = 2; taken.contains(candidate); ++k) candidate = fmt::format("{}_{}", name, k);
  taken.insert(candidate);
  return candidate;
}

// One buffer of the plan file: a base (the whole of a base slot's bytes)
// or a view of one.
struct Entry {
  std::string name;
  size_t base = 0;  // the base slot
  size_t offset = 0;
  size_t bytes = 0;
  DType dtype = DType::U8;
  std::vector<size_t> shape;
  std::vector<std::string> dims;
  std::optional<BufferRole> role;
};
using EntryKey = std::tuple<size_t, size_t, size_t, DType>;

class Saver {
 public:
  Saver(const ExecutionPlan& plan, const SaveOptions& options, fs::path folder)
      : plan_(plan), options_(options), n_(plan.buffer_count()) {
    saved_.file.source_name = "saved plan";
    saved_.file.folder = std::move(folder);
  }

  SavedPlan run() {
    find_bases();
    add_variables();
    add_ports();
    add_slots();
    assign_roles();
    add_programs_and_ops();
    finish_buffers();
    return std::move(saved_);
  }

 private:
  std::string slot_text(size_t s) const {
    const std::string& name = plan_.buffer_name(s);
    return name.empty() ? fmt::format("buffer {}", s) : fmt::format("buffer {} (\"{}\")", s, name);
  }

  size_t resolve(const BufferRef& ref, const std::string& what) const {
    if (const size_t* slot = std::get_if<size_t>(&ref)) {
      if (*slot >= n_)
        throw make_error(ErrorKind::Validation, "{}: buffer {} is out of range ({} buffers)", what, *slot, n_);
      return *slot;
    }
    const std::string& name = std::get<std::string>(ref);
    if (auto slot = plan_.find_buffer(name)) return *slot;
    throw make_error(ErrorKind::Validation, "{}: the plan has no buffer named \"{}\"", what, name);
  }

  // Each slot's base in the file: the base slot whose bytes hold it. Base
  // slots inside another's bytes (two buffers over one array) become views
  // of it; ones that share only part of their bytes cannot be written.
  void find_bases() {
    places_.resize(n_);
    for (size_t s = 0; s < n_; ++s) places_[s] = place_of(plan_.buffer(s));
    std::vector<size_t> bases;
    for (size_t s = 0; s < n_; ++s)
      if (!plan_.view(s)) bases.push_back(s);
    std::sort(bases.begin(), bases.end(), [&](size_t a, size_t b) {
      const BufferPlace& p = places_[a];
      const BufferPlace& q = places_[b];
      return std::tie(p.space, p.begin, q.end, a) < std::tie(q.space, q.begin, p.end, b);
    });
    container_.assign(n_, 0);
    std::optional<size_t> current;
    for (const size_t b : bases) {
      const BufferPlace& p = places_[b];
      if (current && places_[*current].space == p.space && p.begin < places_[*current].end) {
        if (p.end > places_[*current].end)
          throw make_error(ErrorKind::Unsupported,
                           "{} and {} share part of their memory; a saved plan's buffers are each whole, or a "
                           "view of another",
                           slot_text(*current), slot_text(b));
        container_[b] = *current;
      } else {
        current = b;
        container_[b] = b;
      }
    }
  }

  size_t file_base(size_t s) const { return container_[base_slot(plan_, s)]; }
  size_t offset_in_base(size_t s) const { return places_[s].begin - places_[file_base(s)].begin; }

  void add_variables() {
    for (const PlanVariable& v : plan_.variables()) {
      if (v.variable.read_only) continue;  // rank and world_size: every loaded plan has them
      saved_.file.variables.push_back(PlanFileVariable{v.variable, v.value});
    }
  }

  // A port's dtype and shape (variable dimensions at their max), checked to
  // hold `bytes`.
  void shape_port(const PlanPort& port, size_t slot, size_t bytes, const std::string& what, Entry& entry) const {
    entry.dtype = port.dtype.value_or(plan_.buffer(slot).dtype());
    const size_t size = size_of(entry.dtype);
    if (port.shape.empty()) {
      if (bytes % size != 0)
        throw make_error(ErrorKind::Validation, "{}: {} holds {} bytes, not a whole number of {} elements", what,
                         slot_text(slot), bytes, to_string(entry.dtype));
      entry.shape = {bytes / size};
      return;
    }
    bool variable = false;
    size_t count = 1;
    for (size_t d = 0; d < port.shape.size(); ++d) {
      const std::string at = fmt::format("{}: shape[{}]", what, d);
      size_t dim = 0;
      entry.dims.emplace_back();
      if (const auto* name = std::get_if<std::string>(&port.shape[d])) {
        const auto it = std::find_if(saved_.file.variables.begin(), saved_.file.variables.end(),
                                     [&](const PlanFileVariable& v) { return v.variable.name == *name; });
        if (it == saved_.file.variables.end())
          throw make_error(ErrorKind::Validation, "{}: \"{}\" is no variable of the plan", at, *name);
        if (it->variable.min < 0)
          throw make_error(ErrorKind::Validation, "{}: variable \"{}\" may be {}, and a dimension is never negative",
                           at, *name, it->variable.min);
        dim = static_cast<size_t>(it->variable.max);
        entry.dims.back() = *name;
        variable = true;
      } else {
        const int64_t value = std::get<int64_t>(port.shape[d]);
        if (value < 0) throw make_error(ErrorKind::Validation, "{}: {} is negative", at, value);
        dim = static_cast<size_t>(value);
      }
      entry.shape.push_back(dim);
      if (dim != 0 && count > bytes / dim) count = bytes + 1;  // too large for the buffer in any case
      else count *= dim;
    }
    if (!variable) entry.dims.clear();
    if (count > bytes / size || count * size != bytes)
      throw make_error(ErrorKind::Validation,
                       "{}: a shape of {} {} elements{} is not the {} bytes {} holds", what, count > bytes ? "more than" : fmt::format("{}", count),
                       to_string(entry.dtype), variable ? " (variable dimensions at their max)" : "", bytes,
                       slot_text(slot));
  }

  void take_name(const std::string& name, const std::string& what) {
    if (name.empty()) throw make_error(ErrorKind::Validation, "{}: a name is needed", what);
    if (!names_.insert(name).second) throw make_error(ErrorKind::Validation, "{}: \"{}\" is named twice", what, name);
  }

  // Inputs and outputs first, so that their names and types win: a port of
  // a whole base renames and retypes the base, a port of part of one is a
  // view of its own.
  void add_ports() {
    for (size_t i = 0; i < options_.inputs.size(); ++i) {
      const PlanPort& port = options_.inputs[i];
      const std::string what = fmt::format("inputs[{}] (\"{}\")", i, port.name);
      take_name(port.name, what);
      const size_t slot = resolve(port.buffer, what);
      const size_t base = file_base(slot);
      if (offset_in_base(slot) != 0 || plan_.buffer(slot).bytes() != plan_.buffer(base).bytes())
        throw make_error(ErrorKind::Validation,
                         "{}: {} is bytes [{}, {}) of {}; an input is a whole buffer, which the caller binds", what,
                         slot_text(slot), offset_in_base(slot), offset_in_base(slot) + plan_.buffer(slot).bytes(),
                         slot_text(base));
      add_port_entry(port, slot, base, what);
      inputs_.push_back(base);
    }
    std::vector<PlanPort> outputs;
    if (options_.outputs) {
      outputs = *options_.outputs;
    } else {
      for (const size_t slot : plan_.outputs())
        outputs.push_back(PlanPort{plan_.buffer_name(slot).empty() ? fmt::format("buffer{}", slot) : plan_.buffer_name(slot),
                                   slot, std::nullopt, {}});
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const PlanPort& port = outputs[i];
      const std::string what = fmt::format("outputs[{}] (\"{}\")", i, port.name);
      take_name(port.name, what);
      const size_t slot = resolve(port.buffer, what);
      add_port_entry(port, slot, file_base(slot), what);
      outputs_.push_back(file_base(slot));
      saved_.file.outputs.push_back(PlanFileOutput{port.name, std::nullopt, std::nullopt});
    }
  }

  void add_port_entry(const PlanPort& port, size_t slot, size_t base, const std::string& what) {
    Entry entry{.name = port.name, .base = base, .offset = offset_in_base(slot), .bytes = plan_.buffer(slot).bytes(),
                .dtype = DType::U8, .shape = {}, .dims = {}, .role = std::nullopt};
    shape_port(port, slot, entry.bytes, what, entry);
    const EntryKey key{entry.base, entry.offset, entry.bytes, entry.dtype};
    if (const auto it = by_key_.find(key); it != by_key_.end())
      throw make_error(ErrorKind::Validation, "{}: {} is already the port \"{}\"", what, slot_text(slot),
                       entries_[it->second].name);
    const bool whole = entry.offset == 0 && entry.bytes == plan_.buffer(base).bytes();
    if (whole) {
      if (base_entry_.contains(base))
        throw make_error(ErrorKind::Validation, "{}: {} is already the port \"{}\"", what, slot_text(base),
                         entries_[base_entry_.at(base)].name);
      base_entry_[base] = entries_.size();
    }
    by_key_[key] = entries_.size();
    entries_.push_back(std::move(entry));
  }

  // Every slot of the plan is a buffer of the file: the one with its bytes
  // and dtype when there is one, else a base of its own (a base slot no port
  // named) or a view, named as the plan names it (or buffer<slot>).
  void add_slots() {
    slot_entry_.resize(n_);
    for (const bool bases : {true, false}) {
      for (size_t s = 0; s < n_; ++s) {
        const size_t base = file_base(s);
        if ((s == base) != bases) continue;
        const Buffer& b = plan_.buffer(s);
        const EntryKey key{base, offset_in_base(s), b.bytes(), b.dtype()};
        if (const auto it = by_key_.find(key); it != by_key_.end()) {
          slot_entry_[s] = it->second;
          continue;
        }
        const std::string& own = plan_.buffer_name(s);
        const std::string name = own.empty() || names_.contains(own) ? fmt::format("buffer{}", s) : own;
        Entry entry{.name = unique_name(name, names_), .base = base, .offset = offset_in_base(s), .bytes = b.bytes(),
                    .dtype = b.dtype(), .shape = {b.count()}, .dims = {}, .role = std::nullopt};
        if (s == base && !base_entry_.contains(base)) base_entry_[base] = entries_.size();
        slot_entry_[s] = entries_.size();
        by_key_[key] = entries_.size();
        entries_.push_back(std::move(entry));
      }
    }
  }

  void assign_roles() {
    RoleRequest request{.inputs = inputs_, .outputs = outputs_, .overrides = {}};
    for (const auto& [ref, role] : options_.roles) request.overrides[resolve(ref, "roles")] = role;
    const auto roles = derive_buffer_roles(plan_, request);
    for (const auto& [base, entry] : base_entry_) entries_[entry].role = roles[base];
  }

  const std::string& entry_name(size_t slot) const { return entries_[slot_entry_[slot]].name; }

  std::string program_name(const std::shared_ptr<const Program>& program, size_t op) {
    if (const auto it = program_names_.find(program.get()); it != program_names_.end()) return it->second;
    const ProgramSpec& spec = program->spec();
    if (spec.source.empty())
      throw make_error(ErrorKind::Unsupported, "{}: program \"{}\" has no source, which a saved plan needs",
                       plan_.op_title(op), spec.display_name());
    const std::string name = unique_name(spec.display_name(), program_names_taken_);
    PlanFileProgram p{.name = name, .device = program->device().name(), .spec = spec};
    p.spec.name = name;
    if (p.device == saved_.file.device) p.device.clear();
    saved_.file.programs.push_back(std::move(p));
    saved_.programs[name] = program;
    program_names_[program.get()] = name;
    return name;
  }

  // A kernel's fixed values are folded into its expressions: its scalars,
  // and launch sizes of its own (the program's, when it has none), whose
  // names are the program's scalars before the fixed values.
  PlanFileOp kernel_op(const KernelOp& k, size_t op) {
    PlanFileOp out;
    out.kind = PlanFileOp::Kind::Run;
    out.target = program_name(k.program, op);
    for (const size_t slot : k.buffers) out.buffers.push_back(entry_name(slot));
    const std::map<std::string, int64_t, std::less<>> fixed(k.fixed_vars.begin(), k.fixed_vars.end());
    for (const Expr& e : k.scalars) out.scalars.push_back(fixed.empty() ? e : e.substitute(fixed));
    out.global_size = k.global;
    out.local_size = k.local;
    if (!fixed.empty()) {
      auto sized = fixed;
      for (const ScalarParam& s : k.program->spec().scalars) sized.erase(s.name);
      auto fold = [&](const std::array<Expr, 3>& sizes) {
        std::array<Expr, 3> folded = sizes;
        for (Expr& e : folded) e = e.substitute(sized);
        return folded;
      };
      out.global_size = fold(k.global.value_or(k.program->spec().global_size));
      out.local_size = fold(k.local.value_or(k.program->spec().local_size));
    }
    return out;
  }

  PlanFileOp custom_op(const CustomOp& c, size_t op) const {
    // A function given as a definition (an executor's node) is saved by its
    // name only when that name is registered for that very function.
    if (c.def) {
      std::shared_ptr<const CustomFunctionDef> registered;
      try {
        registered = find_custom_function(c.name);
      } catch (const Error&) {
      }
      if (registered != c.def)
        throw make_error(ErrorKind::Unsupported,
                         "{}: its host function is {}, and a saved plan calls host functions by their registered name",
                         plan_.op_title(op),
                         c.name.empty() ? std::string("not registered") : fmt::format("not the one registered as \"{}\"", c.name));
    }
    PlanFileOp out;
    out.kind = PlanFileOp::Kind::Custom;
    out.target = c.name;
    for (const size_t slot : c.buffers) out.buffers.push_back(entry_name(slot));
    out.attrs = c.attrs;
    return out;
  }

  PlanFileOp collective_op(const CollectiveOp& c) const {
    PlanFileOp out;
    out.kind = PlanFileOp::Kind::Collective;
    out.collective = c.kind;
    out.target = std::string(to_string(c.kind));
    out.reduce = c.op;
    out.root = c.root;
    if (c.kind == CollectiveKind::AllGather || c.kind == CollectiveKind::ReduceScatter) {
      out.buffers = {entry_name(c.src), entry_name(c.dst)};
    } else {
      for (const size_t slot : c.buffers) out.buffers.push_back(entry_name(slot));
    }
    return out;
  }

  // The ops but views (their slots are views of the file), each with its id
  // and declared order; an op after a view op is after what that one was
  // after.
  void add_programs_and_ops() {
    const size_t ops = plan_.op_count();
    std::vector<std::optional<size_t>> index(ops);
    std::map<std::string, size_t> by_id;
    for (size_t i = 0; i < ops; ++i) {
      if (!plan_.op_options(i).id.empty()) by_id[plan_.op_options(i).id] = i;
    }
    // What op i's declared order amounts to, view ops expanded (an op
    // cannot be after a later op, so the recursion ends).
    auto after_of = [&](auto& self, size_t i, std::vector<size_t>& into) -> void {
      const OpOptions& o = plan_.op_options(i);
      std::vector<size_t> refs = o.after;
      for (const auto& id : o.after_ids) refs.push_back(by_id.at(id));
      for (const size_t r : refs) {
        if (std::holds_alternative<ViewOp>(plan_.op(r))) self(self, r, into);
        else if (std::find(into.begin(), into.end(), r) == into.end()) into.push_back(r);
      }
    };
    size_t next = 0;
    for (size_t i = 0; i < ops; ++i) {
      if (std::holds_alternative<ViewOp>(plan_.op(i))) continue;
      index[i] = next++;
      PlanFileOp op = visit_exhaustively(
          plan_.op(i), [&](const KernelOp& k) { return kernel_op(k, i); },
          [&](const CopyOp& c) {
            PlanFileOp out;
            out.kind = PlanFileOp::Kind::Copy;
            out.buffers = {entry_name(c.dst), entry_name(c.src)};
            return out;
          },
          [&](const CustomOp& c) { return custom_op(c, i); }, [&](const ViewOp&) { return PlanFileOp{}; },
          [&](const CollectiveOp& c) { return collective_op(c); });
      op.id = plan_.op_options(i).id;
      std::vector<size_t> after;
      after_of(after_of, i, after);
      for (const size_t r : after) {
        if (!plan_.op_options(r).id.empty()) op.after.emplace_back(plan_.op_options(r).id);
        else op.after.emplace_back(*index[r]);
      }
      saved_.file.ops.push_back(std::move(op));
    }
  }

  // The file's buffers in slot order of their bases, each base followed by
  // its views; constants and state read their data from an .npy file.
  void finish_buffers() {
    std::set<std::string> files;
    std::vector<size_t> order(entries_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto is_view = [&](size_t i) { return base_entry_.at(entries_[i].base) != i; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::pair(entries_[a].base, is_view(a)) < std::pair(entries_[b].base, is_view(b));
    });
    for (const size_t i : order) {
      const Entry& e = entries_[i];
      PlanFileBuffer b;
      b.name = e.name;
      b.dtype = e.dtype;
      b.shape = e.shape;
      b.dim_variables = e.dims;
      b.count = e.bytes / size_of(e.dtype);
      if (base_entry_.at(e.base) != i) {
        b.view_of = entries_[base_entry_.at(e.base)].name;
        b.byte_offset = e.offset;
        saved_.file.buffers.push_back(std::move(b));
        continue;
      }
      const Buffer& buffer = plan_.buffer(e.base);
      if (!buffer.device().memory_is_host()) b.device = buffer.device().name();
      b.role = e.role;
      if (e.role == BufferRole::Constant || e.role == BufferRole::State) {
        b.init.kind = BufferInit::Kind::Npy;
        b.init.npy = saved_.file.folder / (unique_name(file_stem(e.name), files) + ".npy");
        std::vector<std::byte> data = contents_of(buffer);
        saved_.data[e.name] = std::move(data);
      }
      saved_.file.buffers.push_back(std::move(b));
    }
  }

  const ExecutionPlan& plan_;
  const SaveOptions& options_;
  const size_t n_;
  SavedPlan saved_;
  std::vector<BufferPlace> places_;
  std::vector<size_t> container_;                 // per base slot: the base slot whose bytes hold it
  std::vector<Entry> entries_;
  std::map<EntryKey, size_t> by_key_;
  std::map<size_t, size_t> base_entry_;           // base slot -> its base entry
  std::vector<size_t> slot_entry_;                // slot -> the entry it is
  std::set<std::string> names_;
  std::vector<size_t> inputs_, outputs_;          // base slots
  std::map<const Program*, std::string> program_names_;
  std::set<std::string> program_names_taken_;
};

// Writes `data` as the .npy file of `buffer` (bf16 as its bits, which a
// bf16 buffer's npy init reads back).
void write_data(const PlanFileBuffer& buffer, const std::vector<std::byte>& data) {
  const DType dtype = buffer.dtype == DType::BF16 ? DType::U16 : buffer.dtype;
  write_npy(buffer.init.npy, dtype, buffer.shape, data);
}

// A new folder beside `folder` for writing into, removed with whatever it
// holds unless it was renamed into place.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(const fs::path& folder) {
    fs::path parent = folder.parent_path();
    if (parent.empty()) parent = ".";
    std::string pattern = (parent / ("." + folder.filename().string() + ".tmp-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw make_error(ErrorKind::Io, "{}: cannot make a folder beside it to write into: {}", folder.string(),
                       std::strerror(errno));
    path_ = pattern;
  }
  ~TemporaryFolder() {
    if (path_.empty()) return;
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;

  const fs::path& path() const { return path_; }
  // Renames it to `folder`, replacing an earlier save there (exchanged, then
  // removed, so that `folder` always holds one whole save).
  void publish(const fs::path& folder) {
    std::error_code error;
    const auto status = fs::symlink_status(folder, error);
    if (status.type() == fs::file_type::not_found) {
      if (::rename(path_.c_str(), folder.c_str()) != 0)
        throw make_error(ErrorKind::Io, "{}: cannot rename the saved plan into place: {}", folder.string(),
                         std::strerror(errno));
      path_.clear();
      return;
    }
    if (status.type() != fs::file_type::directory || !fs::exists(folder / "plan.json", error))
      throw make_error(ErrorKind::Io, "{}: exists and is no saved plan (no plan.json in a folder); save to a new folder",
                       folder.string());
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, folder.c_str(), RENAME_EXCHANGE) != 0)
      throw make_error(ErrorKind::Io, "{}: cannot replace the saved plan there: {}", folder.string(),
                       std::strerror(errno));
    // path_ now holds the earlier save, which the destructor removes.
  }

 private:
  fs::path path_;
};

}  // namespace

SavedPlan to_plan_file(const ExecutionPlan& plan, const SaveOptions& options, const fs::path& folder) {
  SavedPlan saved = Saver(plan, options, folder).run();
  // What was made is what load_plan reads: parsing it checks every name,
  // expression and size as for any plan file.
  try {
    parse_plan_text(write_plan_text(saved.file), folder, "saved plan");
  } catch (const Error& e) {
    throw make_error(ErrorKind::Unsupported, "the plan cannot be saved as a plan file: {}", e.what());
  }
  return saved;
}

void save_plan(const ExecutionPlan& plan, const fs::path& folder, const SaveOptions& options) {
  const fs::path target = fs::absolute(folder).lexically_normal();
  TemporaryFolder temporary(target.has_filename() ? target : target.parent_path());
  SavedPlan saved = to_plan_file(plan, options, temporary.path());
  for (const PlanFileBuffer& b : saved.file.buffers)
    if (b.init.kind == BufferInit::Kind::Npy) write_data(b, saved.data.at(b.name));
  write_file_atomically(temporary.path() / "plan.json", write_plan_text(saved.file));
  temporary.publish(target.has_filename() ? target : target.parent_path());
}

}  // namespace svod
