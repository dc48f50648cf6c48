// Tune files (`svod tune TUNE.json`, docs/TUNE_FORMAT.md): which op of a plan file to tune, and
// the parameters to try, each with its candidate values.
//
//   {
//     "svod_tune": 1,
//     "plan": "plan.json",              // relative to the tune file's folder
//     "op": 0,                          // index into the plan's ops, or an op id
//     "parameters": { "TILE": [1, 2, 4, 8], "ORDER": ["ijk", "ikj"] },
//     "beam": 4,                        // optional, beam width (default 4)
//     "min_gain": 0.02,                 // optional, see BeamSearchConfig (default 0.02)
//     "max_rounds": 0,                  // optional, 0: until no gain (default)
//     "vars": { "N": 256 },             // optional, plan variable values
//     "check": { "rtol": 1e-4, "atol": 1e-5 },   // optional, defaults as plan expects
//     "timeout_ms": 10000,              // optional, per candidate check and timing
//     "benchmark": { "warmup_runs": 1, "min_runs": 3, "max_runs": 50, "min_time_ms": 20 }
//   }
//
// The op must run a program. Every parameter reaches the kernel as a define
// (replacing a define of the same name in the plan). A parameter may also
// appear in the program's launch sizes, flops and bytes: there it must be a
// plan variable (the plan file needs it declared to parse) with integer
// values within the variable's bounds, and the tuner substitutes each
// candidate's value (candidate_spec); the op's scalar expressions see that
// value too. A parameter must occur in the
// program's source or those expressions, must not name one of its scalars,
// and needs at least one value, without repeats. The first value of each
// parameter is the start of the search and the reference every other
// candidate's output is checked against.
//
// Errors are svod::Error(Validation) (Io for unreadable files) whose message
// starts with the tune file's name and the JSON path at fault, like plan
// files: `tune.json: parameters.TILE: expected a non-empty array of values`.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/planfile/plan_file.h"
#include "svod/tune/beam_search.h"
#include "svod/tune/benchmark.h"

namespace svod {

inline constexpr int kTuneFileVersion = 1;

struct TuneValue {
  std::string text;                // as passed to the kernel's define
  std::optional<int64_t> integer;  // set when the value is a JSON integer
};

struct TuneParameter {
  std::string name;
  std::vector<TuneValue> values;
};

struct TuneFile {
  std::string source_name;              // the tune file's name in messages
  std::filesystem::path path;           // the tune file (absolute)
  PlanFile plan;
  size_t op = 0;                        // index into plan.ops; a run op
  std::vector<TuneParameter> parameters;
  BeamSearchConfig search;
  std::map<std::string, int64_t> vars;  // plan variable values, bounds checked
  std::optional<double> rtol;           // unset: the plan file's defaults
  std::optional<double> atol;
  std::chrono::milliseconds timeout{10000};
  BenchmarkConfig benchmark;            // best_known and timeout are set per candidate

  const PlanFileProgram& program() const;  // the program the op runs
  std::string describe(const TunePoint& point) const;  // "TILE=4 ORDER=ikj"
};

TuneFile parse_tune_file(const std::filesystem::path& path);

// The op's program specialised to `point`: the parameters as defines, and in
// its launch sizes, flops and bytes every parameter and plan variable that
// is not one of its scalars replaced by its value, so the program launches
// directly (Program::launch) without a plan to bind variables.
ProgramSpec candidate_spec(const TuneFile& file, const TunePoint& point);

// The values of the plan's variables: defaults, overridden by `vars`.
std::map<std::string, int64_t, std::less<>> plan_variable_values(const TuneFile& file);

}  // namespace svod
