// The parameters of a C kernel read from its source, for the callers that are
// not told them (Python's Device.compile without buffers=/scalars=, `svod
// compile`) and to check declared ones against the source.
//
// The in-process compiler is not asked: with opaque pointers LLVM IR says
// `ptr` for every pointer (no pointee type, no const), clang's AST is only
// there during a full front-end run (milliseconds, headers included) while a
// cached compile must cost microseconds, and the clang-process and dlopen
// compilers have neither. Instead this reads the entry's definition from the
// text, with clear bounds:
//   - comments, string and character literals and preprocessor lines are
//     skipped; the definition is `ENTRY ( … ) {` outside any braces (a
//     declaration ending in `;` is not used); a name given in `defines`
//     stands for its value (one level, as -DNAME=VALUE would);
//   - a parameter is a pointer (`T*`, `T x[]`, `T x[restrict N]`) to one of
//     C's arithmetic types, the <stdint.h> integers, size_t and friends,
//     _Float16/__fp16, __bf16 or void, or an integer of 32 or 64 bits; const,
//     volatile, restrict and __attribute__((…)) are understood;
//   - anything else (typedefs svod does not know, macros, function pointers,
//     structs, variadic functions, `#if` alternatives that differ) leaves the
//     signature not understood, with the reason: nothing is guessed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "svod/base/dtype.h"
#include "svod/program/program_spec.h"

namespace svod {

struct CParameter {
  std::string name;      // "arg2" for an unnamed one
  std::string type;      // as written, normalised ("const float*")
  bool pointer = false;  // a pointer (or array) parameter, whatever it points to
  bool read_only = false;            // a pointer to const
  std::optional<DType> dtype;        // the pointee's (pointers) or the integer's element type
  std::optional<ScalarType> scalar;  // an integer parameter of 32 or 64 bits
  // Why svod cannot take this parameter as a buffer or scalar (empty: it can).
  std::string problem;
};

struct CSignature {
  bool found = false;       // the entry's definition was found
  bool understood = false;  // found, and every parameter's kind (pointer or not) is known
  std::string problem;      // why not found or not understood
  std::vector<CParameter> parameters;

  // "add(float* o, const float* a, int n)".
  std::string text(std::string_view entry) const;
};

// The signature of `entry` in C `source`.
CSignature parse_c_signature(std::string_view source, std::string_view entry,
                             const std::vector<std::pair<std::string, std::string>>& defines);

// What a kernel with an understood signature takes: every pointer a buffer
// (read-only when it points to const, else read and written; its pointee's
// dtype when svod has one), every integer a scalar, in order.
struct CParameters {
  std::vector<BufferParam> buffers;
  std::vector<ScalarParam> scalars;
};
// The parameters of `sig`; nullopt with `problem` saying why when it is not
// understood, a parameter is neither a buffer nor a scalar, or a pointer
// follows an integer (svod passes every buffer before every scalar).
std::optional<CParameters> c_parameters(const CSignature& sig, std::string& problem);

}  // namespace svod
