#include "svod/cache/cache_key.h"

#include <cstring>
#include <string>

namespace svod {
namespace {

// Bumped whenever the object entry format or the key derivation changes, so
// entries written by older builds simply stop matching.
constexpr uint64_t kObjectSchema = 1;

// Appends length-prefixed fields to a flat buffer that is hashed once at the
// end: one-shot XXH3 beats the streaming state for a spec's short fields.
// The buffer lives on the stack and spills to a thread-local string only for
// unusually large specs, so the kernel cache's hit path neither allocates nor
// pays std::string's bookkeeping per field.
class KeyWriter {
 public:
  KeyWriter() = default;
  KeyWriter(const KeyWriter&) = delete;
  KeyWriter& operator=(const KeyWriter&) = delete;

  void u64(uint64_t value) { append(&value, sizeof value); }
  void i64(int64_t value) { u64(static_cast<uint64_t>(value)); }
  void str(std::string_view text) {
    u64(text.size());
    append(text.data(), text.size());
  }
  void hash(const Hash128& h) {
    u64(h.low);
    u64(h.high);
  }
  void optional_i64(const std::optional<int64_t>& value) {
    u64(value.has_value());
    if (value) i64(*value);
  }
  void optional_expr(const std::optional<Expr>& expr) {
    u64(expr.has_value());
    if (expr) str(expr->text());
  }
  Hash128 finish() const {
    const char* data = spill_ ? spill_->data() : inline_;
    return hash_bytes(std::span(reinterpret_cast<const std::byte*>(data), size_));
  }

 private:
  static constexpr size_t kInline = 1024;

  [[gnu::always_inline]] void append(const void* bytes, size_t n) {
    if (!spill_ && size_ + n <= kInline) [[likely]] {
      std::memcpy(inline_ + size_, bytes, n);
      size_ += n;
    } else {
      append_spilled(bytes, n);
    }
  }

  [[gnu::noinline, gnu::cold]] void append_spilled(const void* bytes, size_t n) {
    if (!spill_) {
      thread_local std::string spill;
      spill.assign(inline_, size_);
      spill_ = &spill;
    }
    spill_->append(static_cast<const char*>(bytes), n);
    size_ += n;
  }

  char inline_[kInline];
  size_t size_ = 0;
  std::string* spill_ = nullptr;
};

Hash128 hash_text(std::string_view text) {
  return hash_bytes(std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

// Whether the file name compilers give the source (ProgramSpec::source_name)
// can change what they make of it: __FILE__ expands to it, and a quoted
// #include is looked for beside it. Other sources compile alike under any
// name, so the name stays out of their keys.
bool compiles_by_name(std::string_view source) {
  if (source.find("__FILE__") != std::string_view::npos) return true;
  for (size_t at = source.find("include"); at != std::string_view::npos; at = source.find("include", at + 1)) {
    const size_t next = source.find_first_not_of(" \t", at + 7);
    if (next != std::string_view::npos && source[next] == '"') return true;
  }
  return false;
}

// The source is hashed on its own rather than copied into the buffer, so a
// large source is read exactly once.
void write_compiler_input(KeyWriter& w, const ProgramSpec& spec) {
  w.hash(hash_text(spec.source));
  if (compiles_by_name(spec.source)) w.str(spec.diagnostic_file_name());
  w.str(spec.language.name());
  w.str(spec.entry);
  w.u64(spec.defines.size());
  for (const auto& [name, value] : spec.defines) {
    w.str(name);
    w.str(value);
  }
  // Only a recipe that is named: the default's keys stay those of the
  // builds before recipes could be named, so no cache is rebuilt for them.
  if (!spec.recipe.empty()) {
    w.str("recipe");
    w.str(spec.recipe);
  }
}

void write_spec(KeyWriter& w, const ProgramSpec& spec) {
  write_compiler_input(w, spec);
  w.str(spec.name);
  w.u64(spec.buffers.size());
  for (const BufferParam& b : spec.buffers) {
    w.str(b.name);
    w.u64(static_cast<uint64_t>(b.access));
    w.u64(b.dtype.has_value());
    if (b.dtype) w.u64(static_cast<uint64_t>(*b.dtype));
    w.optional_expr(b.min_count);
  }
  w.u64(spec.scalars.size());
  for (const ScalarParam& s : spec.scalars) {
    w.str(s.name);
    w.u64(static_cast<uint64_t>(s.type));
    w.optional_i64(s.min);
    w.optional_i64(s.max);
  }
  for (const Expr& e : spec.global_size) w.str(e.text());
  for (const Expr& e : spec.local_size) w.str(e.text());
  w.optional_expr(spec.flops);
  w.optional_expr(spec.bytes);
}

}  // namespace

Hash128 source_hash(const ProgramSpec& spec) {
  KeyWriter w;
  w.str("source");
  write_compiler_input(w, spec);
  return w.finish();
}

Hash128 spec_hash(const ProgramSpec& spec) {
  KeyWriter w;
  w.str("spec");
  write_spec(w, spec);
  return w.finish();
}

Hash128 object_key(const ProgramSpec& spec, const Hash128& identity_hash) {
  const Hash128 source = source_hash(spec);
  KeyWriter w;
  w.str("object");
  w.u64(kObjectSchema);
  w.hash(source);
  w.hash(identity_hash);
  return w.finish();
}

Hash128 object_key(const ProgramSpec& spec, const CompilerIdentity& identity) {
  return object_key(spec, identity.hash());
}

Hash128 kernel_key(uint64_t scope, const ProgramSpec& spec) {
  KeyWriter w;
  w.str("kernel");
  w.u64(scope);
  write_spec(w, spec);
  return w.finish();
}

}  // namespace svod
