// The svod command line in svod's own words: what the argument parser (CLI11)
// refuses is said as svod says every other error, with the command it
// concerns, plain ranges ("--repeat must be at least 1") and, for a word
// that is not a command or a flag, the nearest one that is.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace svod::cli {

// The choice nearest to `word` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours), when it is near enough to be what
// was meant: at most a third of the word's length, at least one, away.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& choices);

// Validators whose failures read as plain sentences after the option's name:
// "--repeat must be a whole number of at least 1; got 0". at_least and between check whole
// numbers that fit an int; positive_seconds a number of seconds a deadline
// can wait for: positive, finite and at most 1e9 (about 31 years; more would
// overflow the clock's nanoseconds), as SVOD_OP_TIMEOUT.
CLI::Validator at_least(long long minimum);
CLI::Validator between(long long minimum, long long maximum);
CLI::Validator positive_seconds();

// Parses `argv` with `app`; nullopt when the command is to run, else the exit
// status after printing what was asked for (help, version: status 0) or what
// is wrong (status 2). Answered before the parser: `svod` alone and
// `svod help [COMMAND]` print the help; a first word that is no command is
// named with the nearest command. After it: unknown flags are named with the
// nearest flag of that command, every other refusal in svod's words.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace svod::cli
