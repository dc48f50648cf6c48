// Cache keys for compiled kernels.
//
// Two keys exist because the two caches hold different things. The object
// cache stores compiled bytes, which depend only on what reaches the compiler
// (source, language, entry, defines, recipe) and on the compiler's full
// identity. The
// kernel cache stores loaded Programs, and a Program carries its whole spec
// (parameter declarations, launch sizes, name), so its key covers every field
// of the spec: two specs that share a source but declare different parameters
// get different Programs while still sharing one object on disk.
#pragma once

#include <cstdint>

#include "svod/base/hash.h"
#include "svod/compile/compiler.h"
#include "svod/program/program_spec.h"

namespace svod {

// Hash of what the compiler sees: source, language, entry, defines and
// recipe.
Hash128 source_hash(const ProgramSpec& spec);

// Hash of every field of the spec. It allocates nothing unless the fields
// other than the source exceed 1 KiB, so it can sit on the kernel cache's
// hit path.
Hash128 spec_hash(const ProgramSpec& spec);

// Key of a compiled object on disk: source_hash plus every field of the
// compiler identity (path, version, target triple, CPU, features, flags, ABI)
// and the entry format's schema.
Hash128 object_key(const ProgramSpec& spec, const CompilerIdentity& identity);
// The same from the identity's hash (as ObjectCache::identity_hash gives it).
Hash128 object_key(const ProgramSpec& spec, const Hash128& identity_hash);

// Key of a loaded Program in the kernel cache: spec_hash within one scope.
// A scope stands for one device with one compiler (see new_cache_scope), so
// the in-memory lookup never needs the compiler's identity resolved.
Hash128 kernel_key(uint64_t scope, const ProgramSpec& spec);

}  // namespace svod
