// svod's environment variables: the one table of them and the one place they
// are read. Code names a variable by its EnvVar, never by a string, so every
// variable svod reads is in the table below (docs/ENVIRONMENT.md says what
// each does; a test keeps the two lists equal), and no other file calls
// getenv() for one (a test looks).
//
// One rule for every variable:
//   - Leading and trailing whitespace is ignored, and a value that is empty
//     or only whitespace counts as unset.
//   - A switch is on for 1, true, yes or on and off for 0, false, no or off,
//     in any letter case; nothing else.
//   - A malformed value is an Error(Validation) that names the variable,
//     quotes the value and says what was expected:
//       SVOD_CACHE="maybe": expected 1 or 0 (or true/false, yes/no, on/off)
//   - A variable that was renamed is still read under its old name (its
//     alias); both set to different values is an Error(Validation) naming
//     both.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "svod/base/error.h"

namespace svod {

// Every variable svod reads, in the table's order (their names' alphabetical).
enum class EnvVar {
  Beam,
  BeamSkipBelow,
  BlockCacheMb,
  Cache,
  CacheDir,
  CacheMaxBytes,
  Check,
  Clang,
  CommMpiPlugin,
  CommPartBytes,
  CommTimeout,
  Compile,
  CpuCompiler,
  CudaDriver,
  CudaPath,
  Debug,
  GuardPages,
  KernelCacheMax,
  LlcSize,
  LlvmPlugin,
  NcclLibrary,
  OpTimeout,
  Profile,
  Threads,
  TrustedKeys,
  Variants,
  VariantsTolerance,
};

// What a variable's value is; each type has its reader below.
enum class EnvType {
  Text,     // taken as it is: a path, a list, or words its user parses (env_string)
  Switch,   // env_switch
  Integer,  // from min to max (env_int)
  Level,    // an integer from min to max, or a switch: off is 0, on is 1 (env_level)
  Seconds,  // a positive number, fractions allowed, at most max (env_seconds)
  Bytes,    // a size: 512K, 32M, 1G or a byte count (env_bytes)
};

struct EnvVariable {
  EnvVar var;
  std::string_view name;
  EnvType type;
  int64_t min = 0;         // Integer and Level
  int64_t max = 0;         // Integer, Level and Seconds
  std::string_view alias;  // the variable's old name, still read; empty when it has none
};

// The table, in EnvVar order.
std::span<const EnvVariable> env_variables() noexcept;
const EnvVariable& env_variable(EnvVar var) noexcept;

// A variable as it is set: the name it is set under (its own, or its
// alias) and its text, whitespace trimmed.
struct EnvValue {
  std::string_view name;
  std::string text;
};

// The variable's value; nullopt when unset or blank.
std::optional<EnvValue> env_value(EnvVar var);

// The setting as messages quote it: NAME="text".
std::string to_string(const EnvValue& value);

// The Error(Validation) for a malformed value, as the rule above writes it:
// `NAME="text": expected ...`. For the readers here, and for the code that
// parses a Text variable's words itself (the CPU compiler's name), which it
// shares with options.
Error env_error(const EnvValue& value, std::string_view expected);

// The readers. Each throws Error(Internal) when asked for a variable of
// another type, and the Error(Validation) of the rule for a malformed value.
std::optional<std::string> env_string(EnvVar var);           // Text; nullopt when unset
std::optional<bool> env_switch(EnvVar var);                  // nullopt when unset
int64_t env_int(EnvVar var, int64_t fallback);               // `fallback` when unset
int env_level(EnvVar var);                                   // 0 when unset
std::optional<double> env_seconds(EnvVar var);               // nullopt when unset
std::optional<uint64_t> env_bytes(EnvVar var);               // nullopt when unset

// The switch words of the rule, for switches given elsewhere than in the
// environment: true or false, or nullopt for any other text.
std::optional<bool> switch_word(std::string_view text) noexcept;

// "32768K", "508M", "1G", "1GiB" or a byte count, as SVOD_LLC_SIZE and sysfs
// write sizes (K, M, G and T are powers of 1024); nullopt for anything else
// and for sizes past 2^64.
std::optional<uint64_t> parse_byte_size(std::string_view text) noexcept;

// A variable another program defines (HOME, XDG_CACHE_HOME, an MPI
// launcher's), as it is; nullopt when unset or empty. svod's own variables
// are read by their EnvVar: an SVOD_ name here is an Error(Internal).
std::optional<std::string> foreign_env(const char* name);

}  // namespace svod
