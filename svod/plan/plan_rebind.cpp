// Changing a built plan: rebind() swaps a buffer slot in place,
// replace_program() a kernel's program for a variant of it, replicate()
// copies the plan with its written storages forked.
#include <algorithm>
#include <bit>

#include "svod/base/error.h"
#include "svod/cache/cache_key.h"
#include "svod/plan/plan_state.h"

namespace svod {

void ExecutionPlan::rebind(size_t index, Buffer replacement) {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  if (index >= s.buffers.size())
    throw make_error(ErrorKind::Validation, "rebind: buffer {} is out of range ({} buffers)", index, s.buffers.size());
  if (s.views[index])
    throw make_error(ErrorKind::Validation, "rebind: {} is a view of buffer {}; rebind its base instead",
                     s.slot_name(index), s.views[index]->base);
  const Buffer& old = s.buffers[index];
  // Host memory serves any device whose buffers are host memory (a caller's
  // array for a CPU buffer).
  auto same_memory = [&] {
    return &replacement.device() == &old.device() ||
           (old.device().memory_is_host() && replacement.device().memory_is_host());
  };
  if (!replacement.valid() || replacement.bytes() != old.bytes() || replacement.dtype() != old.dtype() ||
      !same_memory())
    throw make_error(ErrorKind::Validation,
                     "rebind: {} holds {} bytes of {} on {}; the replacement must match (it is {})", s.slot_name(index),
                     old.bytes(), to_string(old.dtype()), old.device().name(),
                     replacement.valid() ? fmt::format("{} bytes of {} on {}", replacement.bytes(),
                                                       to_string(replacement.dtype()), replacement.device().name())
                                         : std::string("empty"));
  // Byte storage may serve typed kernel parameters (dtype_accepts): the
  // replacement keeps the alignment the build checked, up to the widest
  // element.
  if (old.dtype() == DType::U8) {
    const uint64_t kept = uint64_t{1} << std::countr_zero(old.first_byte() | 8);
    if (replacement.first_byte() % kept != 0)
      throw make_error(ErrorKind::Validation,
                       "rebind: {} is byte storage aligned to {} bytes; the replacement at {:#x} is not",
                       s.slot_name(index), kept, replacement.first_byte());
  }
  // The slot and the views derived from it move together; when no other slot
  // shares memory with the old or the new one (its storage, or host bytes),
  // every overlap stays as it was and the dependency graph still holds.
  std::vector<bool> family(s.buffers.size(), false);
  family[index] = true;
  for (size_t v : s.derive_order) family[v] = family[s.views[v]->base];
  const uint64_t old_id = old.storage_id();
  const uint64_t new_id = replacement.storage_id();
  const detail::ByteRange old_range = detail::range_of(old);
  const detail::ByteRange new_range = detail::range_of(replacement);
  bool same_aliasing = true;
  for (size_t j = 0; j < s.buffers.size() && same_aliasing; ++j) {
    if (family[j]) continue;
    const Buffer& other = s.buffers[j];
    const detail::ByteRange range = detail::range_of(other);
    if (other.storage_id() == old_id || other.storage_id() == new_id || range.overlaps(old_range) ||
        range.overlaps(new_range))
      same_aliasing = false;
  }

  std::vector<Buffer> previous = s.buffers;
  try {
    s.buffers[index] = std::move(replacement);
    for (size_t v : s.derive_order) {
      const auto& rule = *s.views[v];
      if (family[v]) s.buffers[v] = s.buffers[rule.base].view_bytes(rule.byte_offset, rule.bytes, rule.dtype);
    }
    if (s.buffers[index].storage().read_only()) s.check_writes();
    if (!same_aliasing) s.schedule();
  } catch (...) {
    s.buffers = std::move(previous);
    throw;
  }
  s.bind_addresses();
  // Kernels check buffer sizes against their launch; sizes did not change, so
  // only the addresses needed updating.
  // A plan poisoned by a failed run runs again once a buffer is rebound (new
  // inputs, as a tinygrad graph's next call brings): its ops write again every
  // buffer they write, and the caller vouches for any the plan also reads
  // from an earlier run. With peers it stays poisoned: its communicator was
  // aborted.
  if (!(s.comm && s.comm->size() > 1)) s.poisoned.store(false);
}

namespace {

detail::ResolvedKernel& kernel_at(detail::PlanState& s, size_t index, std::string_view doing) {
  if (index >= s.ops.size())
    throw make_error(ErrorKind::Validation, "{}: op {} is out of range: the plan has {} ops", doing, index,
                     s.ops.size());
  auto* kernel = std::get_if<detail::ResolvedKernel>(&s.resolved[index]);
  if (kernel == nullptr) throw make_error(ErrorKind::Validation, "{}: {} is no kernel", doing, s.op_title(index));
  return *kernel;
}

}  // namespace

KernelArgs ExecutionPlan::kernel_args(size_t index) const {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  detail::ResolvedKernel& k = kernel_at(s, index, "kernel_args");
  if (s.dirty) {
    s.prepare(s.var_values);
    s.dirty = false;
  }
  KernelArgs args;
  for (size_t slot : k.slots) args.buffers.push_back(s.buffers[slot]);
  const std::span<const int64_t> scalars = k.caller_scalars();
  args.scalars.assign(scalars.begin(), scalars.end());
  args.dims = k.dims;
  return args;
}

void ExecutionPlan::replace_program(size_t index, std::shared_ptr<const Program> program) {
  detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  detail::ResolvedKernel& k = kernel_at(s, index, "replace_program");
  if (!program) throw make_error(ErrorKind::Validation, "replace_program: {}: no program", s.op_title(index));
  // The same spec but for the recipe: its layout, argument words and sizes
  // resolved at build time hold for it as they are.
  ProgramSpec same = k.program->spec();
  same.recipe = program->spec().recipe;
  if (&program->device() != &k.program->device() || spec_hash(same) != spec_hash(program->spec()))
    throw make_error(ErrorKind::Validation,
                     "replace_program: {}: the replacement \"{}\" on {} is not a variant of its program (the same "
                     "spec on the same device but for the recipe)",
                     s.op_title(index), program->spec().display_name(), program->device().name());
  std::get<KernelOp>(s.ops[index]).program = program;
  k.program = std::move(program);
}

ExecutionPlan ExecutionPlan::replicate() const {
  const detail::PlanState& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.poisoned)
    throw make_error(ErrorKind::PlanPoisoned, "cannot replicate a plan whose last run failed: {}", s.poison_reason);
  if (s.comm)
    throw make_error(ErrorKind::Unsupported,
                     "cannot replicate a plan with collectives: the replica's calls would interleave with the "
                     "original's on the same rank");
  auto copy = std::make_shared<detail::PlanState>();
  copy->buffer_names = s.buffer_names;
  copy->given_views = s.given_views;
  copy->ops = s.ops;
  copy->options = s.options;
  copy->outputs = s.outputs;
  copy->custom_defs = s.custom_defs;
  for (size_t i = 0; i < s.var_defs.size(); ++i) copy->given_variables.emplace_back(s.var_defs[i], s.var_values[i]);

  std::vector<uint64_t> written;
  for (const auto& op_access : s.access)
    for (const auto& [slot, acc] : op_access)
      if (writes(acc)) written.push_back(s.buffers[slot].storage_id());
  std::sort(written.begin(), written.end());
  std::vector<std::pair<uint64_t, std::shared_ptr<Storage>>> forks;
  copy->given_buffers.resize(s.buffers.size());
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    // View slots are derived again from their (possibly forked) bases.
    if (s.views[i]) continue;
    const Buffer& b = s.buffers[i];
    if (!std::binary_search(written.begin(), written.end(), b.storage_id())) {
      copy->given_buffers[i] = b;
      continue;
    }
    auto it = std::find_if(forks.begin(), forks.end(), [&](const auto& f) { return f.first == b.storage_id(); });
    if (it == forks.end()) {
      Storage& old = b.storage();
      Buffer fresh = old.device().allocate(DType::U8, old.bytes());
      old.device().copy(fresh, Buffer(b.storage_ptr(), DType::U8));
      forks.emplace_back(b.storage_id(), fresh.storage_ptr());
      it = forks.end() - 1;
    }
    copy->given_buffers[i] = Buffer(it->second, b.dtype(), b.byte_offset(), b.bytes());
  }
  copy->finalize();
  return ExecutionPlan(std::move(copy));
}

}  // namespace svod
